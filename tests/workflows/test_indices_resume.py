"""A ``sensitivity indices`` run killed mid-way resumes from the command line (issue 59).

In a folder made by ``sensitivity init`` whose model is the user's own ``mymodel.py`` (3 inputs, a 7-day linear
series), the one-pass Sobol' run is SIGKILLed once some groups of base rows are kept; the same command then evaluates
only the missing groups (counted by the rows the model appends to a file at each call), exits 0, and gives the bytes of
an uninterrupted run, whose first-order indices are the linear model's closed form. An edited model file reuses none of
the kept groups.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
from scipy import integrate, stats

from tests.helpers import CLI
from tests.helpers.study_config import init_study

COEF = np.array([[1.0, 2.0, 0.5], [0.5, 1.0, 2.0], [2.0, 0.0, 1.0], [1.0, 1.0, 1.0],
                 [0.0, 3.0, 1.0], [1.5, 0.5, 0.0], [1.0, 2.0, 3.0]])
MODEL = f'''\
import os
import time

import tensorflow as tf

COEF = tf.constant({COEF.tolist()}, dtype=tf.float64)


def _called(rows):
    with open(os.environ["CALLS"], "a") as f:
        f.write(f"{{int(rows)}}\\n")
    time.sleep(float(os.environ["DELAY"]))
    return rows


def response(x):
    """A 7-day linear series of x [B, 3]: y[:, t] = COEF[t] . x; each call's rows appended to $CALLS."""
    tf.py_function(_called, [tf.shape(x)[0]], tf.int32)
    return tf.linalg.matmul(tf.cast(x, tf.float64), COEF, transpose_b=True)
'''
N, BLOCK, GROUP = 16384, 256, 1024
GROUPS, ROWS = N // GROUP, N * (3 + 2)  # the design: N (d + 2) points
COMMAND = ["indices", "experiment=study", "model.source=mymodel:response", "methods=[sobol]", f"sobol.n={N}",
           f"sobol.block={BLOCK}", f"sobol.checkpoint_rows={GROUP}", "plots=false", "progress=false"]


@pytest.fixture
def study(tmp_path) -> Path:
    folder = init_study(tmp_path / "study")
    (folder / "mymodel.py").write_text(MODEL)
    model = folder / "conf" / "model" / "study.yaml"
    model.write_text(model.read_text().replace(
        'output: {name: y, units: "1", long_name: model response}',
        'output: {name: y, units: "1", dims: [{name: day, values: {start: 1, stop: 8}, units: day}]}'))
    return folder


def start(study: Path, calls: str, delay: float, extra: list[str]) -> subprocess.Popen:
    env = {**os.environ, "CALLS": str(study / calls), "DELAY": str(delay), "TF_ENABLE_ONEDNN_OPTS": "0"}
    return subprocess.Popen(CLI + COMMAND + extra, cwd=study, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def finish(study: Path, calls: str, extra: list[str] = ()) -> tuple[str, int]:
    """Run the command to its end: its log and the model rows it evaluated."""
    run = start(study, calls, 0.0, list(extra))
    out = run.communicate(timeout=600)[0]
    assert run.returncode == 0, out[-3000:]
    return out, rows(study / calls)


def killed(study: Path, calls: str, extra: list[str] = ()) -> int:
    """Start the command (each model call slowed), SIGKILL it once two groups are kept; the groups kept."""
    run = start(study, calls, 0.05, list(extra))
    kept = lambda: len(list(study.glob("outputs/**/indices.parts/sobol/rows-*.json")))  # noqa: E731
    while kept() < 2 and run.poll() is None:
        time.sleep(0.02)
    run.send_signal(signal.SIGKILL)
    run.communicate(timeout=60)
    assert run.returncode == -signal.SIGKILL
    assert 2 <= kept() < GROUPS
    return kept()


def rows(calls: Path) -> int:
    return sum(int(line) for line in calls.read_text().split()) if calls.is_file() else 0


def variances() -> np.ndarray:
    """The template space's input variances: U(0, 1), N(1, 0.2) on [0.5, inf), Gumbel(2, 0.5) on [0, 6]."""
    b = stats.truncnorm((0.5 - 1.0) / 0.2, np.inf, loc=1.0, scale=0.2).var()
    g = stats.gumbel_r(loc=2.0, scale=0.5)
    mass = g.cdf(6.0) - g.cdf(0.0)
    m1, m2 = (integrate.quad(lambda x, k=k: x**k * g.pdf(x) / mass, 0.0, 6.0, epsabs=1e-13)[0] for k in (1, 2))
    return np.array([1.0 / 12.0, b, m2 - m1**2])


@pytest.mark.slow
def test_a_killed_indices_run_resumes_from_the_cli_to_the_uninterrupted_indices(study):
    out, whole = finish(study, "reference.txt", ["hydra.run.dir=outputs/reference"])
    probe = whole - ROWS  # what loading the model evaluates besides the design
    kept = killed(study, "killed.txt")
    out, resumed = finish(study, "resumed.txt")
    assert resumed == probe + (GROUPS - kept) * GROUP * 5  # only the missing groups
    assert f"{kept} of {GROUPS} groups of {GROUP} read from an earlier run's kept statistics" in out
    [run_dir] = [p for p in (study / "outputs" / "indices").iterdir() if p.name.startswith("experiment-study")]
    assert not (run_dir / "indices.parts").exists()  # published: the kept groups are gone
    with xr.open_dataset(run_dir / "indices.nc") as ds, \
            xr.open_dataset(study / "outputs" / "reference" / "indices.nc") as ref:
        for name in ("sobol_S1", "sobol_ST", "sobol_S1_interval", "sobol_ST_interval", "sobol_variance"):
            np.testing.assert_array_equal(ds[name].values, ref[name].values, err_msg=name)
        share = COEF**2 * variances()
        truth = (share / share.sum(axis=1, keepdims=True)).T  # [parameter, day] of a linear model: S1 = ST
        s1, interval = ds["sobol_S1"].transpose("parameter", "day").values, ds["sobol_S1_interval"]
        lo, hi = (interval.isel(bound=b).transpose("parameter", "day").values for b in (0, 1))
        slack = 2.0 * (hi - lo)  # the 95 % interval widened: no false alarm over the 21 values
        assert np.all((truth >= lo - slack) & (truth <= hi + slack)), (s1, truth)
        np.testing.assert_allclose(s1, truth, atol=0.01)


@pytest.mark.slow
def test_an_edited_model_reuses_none_of_the_kept_groups(study):
    extra = ["hydra.run.dir=outputs/edited"]
    kept = killed(study, "killed.txt", extra)
    model = study / "mymodel.py"
    model.write_text(model.read_text().replace("[1.0, 2.0, 0.5]", "[1.0, 2.0, 0.75]"))
    out, edited = finish(study, "edited.txt", extra)
    assert ROWS <= edited < ROWS + BLOCK  # every group evaluated again (and the model's load, a few rows)
    assert f"0 of {GROUPS} groups" in out and "kept by a run of other inputs or settings" in out and kept >= 2
