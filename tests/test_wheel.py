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


FLOOD_SPACE = """\
parameters:
  - {name: Q, units: m3 s-1, distribution: {kind: gumbel_r, loc: 1013, scale: 558, truncate: [500, 3000]}}
  - {name: Ks, units: "1", distribution: {kind: norm, loc: 30, scale: 8, truncate: [15, null]}}
  - {name: Zv, units: m, low: 49, high: 51}
  - {name: Zm, units: m, low: 54, high: 56}
"""
FLOOD_MODEL = """\
import tensorflow as tf


def height(x, width=300.0, length=5000.0):
    q, ks, zv, zm = tf.unstack(x, axis=1)
    return (q / (ks * width * tf.sqrt((zm - zv) / length))) ** 0.6
"""


def flood_sobol_indices() -> dict[str, tuple[float, float]]:
    """``{name: (S1, ST)}`` of H = c Q^0.6 Ks^-0.6 (Zm - Zv)^-0.3 by 1-D quadrature (scipy only).

    Q and Ks enter as independent factors, so with ``m_i = E[g_i]``, ``s_i = E[g_i^2]``:
    ``V = c^2 (s_Q s_K s_Z - (m_Q m_K m_Z)^2)``, ``V_Q = c^2 (s_Q - m_Q^2) m_K^2 m_Z^2``,
    ``V_TQ = c^2 (s_Q - m_Q^2) s_K s_Z``; for Zv (Zm alike) ``V_Zv = c^2 m_Q^2 m_K^2 Var(h(Zv))`` and
    ``V_TZv = c^2 s_Q s_K (s_Z - E[k(Zm)^2])`` with the conditional means ``h``, ``k`` in closed form.
    """
    import math

    from scipy import integrate, stats

    def moments(pdf, lo, hi, g):
        mass = integrate.quad(pdf, lo, hi, limit=200)[0]
        return (integrate.quad(lambda x: g(x) * pdf(x), lo, hi, limit=200)[0] / mass,
                integrate.quad(lambda x: g(x) ** 2 * pdf(x), lo, hi, limit=200)[0] / mass)

    c2 = (math.sqrt(5000.0) / 300.0) ** 1.2
    mq, sq = moments(lambda x: stats.gumbel_r.pdf(x, 1013.0, 558.0), 500.0, 3000.0, lambda x: x**0.6)
    mk, sk = moments(lambda x: stats.norm.pdf(x, 30.0, 8.0), 15.0, math.inf, lambda x: x**-0.6)
    h = lambda zv: ((56.0 - zv) ** 0.7 - (54.0 - zv) ** 0.7) / 1.4  # noqa: E731  E[(Zm - zv)^-0.3]
    k = lambda zm: ((zm - 49.0) ** 0.7 - (zm - 51.0) ** 0.7) / 1.4  # noqa: E731  E[(zm - Zv)^-0.3]
    mz = integrate.quad(h, 49.0, 51.0)[0] / 2.0
    sz = integrate.dblquad(lambda zm, zv: (zm - zv) ** -0.6, 49.0, 51.0, 54.0, 56.0)[0] / 4.0
    eh2 = integrate.quad(lambda zv: h(zv) ** 2, 49.0, 51.0)[0] / 2.0
    ek2 = integrate.quad(lambda zm: k(zm) ** 2, 54.0, 56.0)[0] / 2.0
    v = c2 * (sq * sk * sz - (mq * mk * mz) ** 2)
    return {"Q": (c2 * (sq - mq**2) * mk**2 * mz**2 / v, c2 * (sq - mq**2) * sk * sz / v),
            "Ks": (c2 * (sk - mk**2) * mq**2 * mz**2 / v, c2 * (sk - mk**2) * sq * sz / v),
            "Zv": (c2 * mq**2 * mk**2 * (eh2 - mz**2) / v, c2 * sq * sk * (sz - ek2) / v),
            "Zm": (c2 * mq**2 * mk**2 * (ek2 - mz**2) / v, c2 * sq * sk * (sz - eh2) / v)}


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
    path, = (study / "outputs" / "indices").glob("*/indices.nc")
    ds = select(path, output="H")
    for name, (s1, st) in flood_sobol_indices().items():
        p = select(ds, parameter=name)
        assert float(p.sobol_S1) == pytest.approx(s1, abs=0.005), name
        assert float(p.sobol_ST) == pytest.approx(st, abs=0.005), name
        assert float(p.dgsm_sobol_total_bound) >= st  # truncated Gumbel, one-sided normal, uniforms: all bounded
