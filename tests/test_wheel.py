"""A regular install works: the wheel carries conf/ and data/, and the CLI runs in an empty folder.

The wheel is built from this checkout (``pip wheel --no-deps --no-build-isolation``) and installed
into a fresh venv whose only link to this one is a ``.pth`` line naming its site-packages, so the
dependencies (TensorFlow) are reused while ``sensitivity`` and ``workflows`` come from the wheel.
"""
from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.helpers import ROOT

pytestmark = pytest.mark.slow


def _run(args, **kwargs) -> subprocess.CompletedProcess:
    out = subprocess.run(args, capture_output=True, text=True, **kwargs)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The ``bin/`` folder of a fresh venv with the wheel of this checkout installed."""
    root = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(root / "dist"),
          str(ROOT)])
    wheel, = (root / "dist").glob("sensitivity-*.whl")
    venv = root / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)])
    python = venv / "bin" / "python"
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    (Path(purelib) / "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)])
    return venv / "bin"


def test_the_wheel_runs_the_default_study_in_an_empty_folder(installed, tmp_path):
    where = _run([str(installed / "python"), "-c", "import workflows.registry as r; print(r.CONF_DIR)"],
                 cwd=tmp_path).stdout.strip()
    assert Path(where).is_relative_to(installed.parent), where  # the packaged configs, not this checkout's
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    _run([str(installed / "sensitivity"), "run", "progress=false", "plots=false"], cwd=tmp_path, env=env)
    for stage, name in (("sweep", "sweep.nc"), ("calibrate", "calibration.nc"), ("propagate", "propagation.nc"),
                        ("indices", "indices.nc")):
        assert (tmp_path / "outputs" / "run" / stage / name).is_file(), stage
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outputs"]
