"""A regular install works: the wheel carries conf/ and data/, and the CLI runs in an empty folder.

The wheel is built from a copy of this checkout's files (``pip wheel --no-deps --no-build-isolation``) and installed
into a fresh venv whose only link to this one is a ``.pth`` line naming its site-packages, so the
dependencies (TensorFlow) are reused while ``sensitivity`` and ``workflows`` come from the wheel.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.helpers import ROOT
from tests.helpers.flood import FLOOD_MODEL, FLOOD_SPACE, flood_sobol_indices

pytestmark = pytest.mark.slow


def _run(args, **kwargs) -> subprocess.CompletedProcess:
    out = subprocess.run(args, capture_output=True, text=True, **kwargs)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The ``bin/`` folder of a fresh venv with the wheel of this checkout installed."""
    root = tmp_path_factory.mktemp("wheel")
    source = root / "source"  # the files git sees (tracked, or untracked and not ignored): no stale build/ in it
    listed = _run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT).stdout.splitlines()
    for name in listed:
        if (ROOT / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(root / "dist"),
          str(source)])
    wheel, = (root / "dist").glob("sensitivity-*.whl")
    venv = root / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    (Path(purelib) / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)])
    return venv / "bin"


def test_the_wheel_runs_the_default_study_in_an_empty_folder(installed, tmp_path):
    where = _run([str(installed / "python"), "-c", "import workflows.plumbing.registry as r; print(r.CONF_DIR)"],
                 cwd=tmp_path).stdout.strip()
    assert Path(where).is_relative_to(installed.parent), where  # the packaged configs, not this checkout's
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    _run([str(installed / "sensitivity"), "run", "progress=false", "plots=false"], cwd=tmp_path, env=env)
    for stage, name in (("sweep", "sweep.nc"), ("calibrate", "calibration.nc"), ("propagate", "propagation.nc"),
                        ("indices", "indices.nc")):
        assert (tmp_path / "outputs" / "run" / "seir" / stage / name).is_file(), stage
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outputs"]


def test_a_flood_study_set_up_as_the_readme_says_matches_the_exact_indices(installed, tmp_path):
    """`sensitivity init`, edit the space, the model config and model.py, run `indices` from the folder."""
    from sensitivity import select

    _run([str(installed / "sensitivity"), "init", "flood"], cwd=tmp_path)
    study = tmp_path / "flood"
    (study / "conf" / "space" / "study.yaml").write_text(FLOOD_SPACE)
    (study / "conf" / "model" / "study.yaml").write_text(
        "source: model:height\nkwargs: {width: 300.0, length: 5000.0}\noutput: {name: H, units: m}\n")
    (study / "model.py").write_text(FLOOD_MODEL)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    _run([str(installed / "sensitivity"), "indices", "experiment=study", "methods=[sobol,dgsm]", "sobol.n=8192",
          "jacobian=float64", "progress=false", "plots=false"], cwd=study, env=env)
    path = study / "outputs" / "indices" / "latest" / "indices.nc"
    ds = select(path, output="H")
    for name, (s1, st) in flood_sobol_indices().items():
        p = select(ds, parameter=name)
        assert float(p.sobol_S1) == pytest.approx(s1, abs=0.005), name
        assert float(p.sobol_ST) == pytest.approx(st, abs=0.005), name
        assert float(p.dgsm_sobol_total_bound) >= st  # truncated Gumbel, one-sided normal, uniforms: all bounded
