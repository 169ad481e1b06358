"""Every ``next:`` line a workflow prints in a user's study folder runs as printed (issue 56).

The folder is made by ``sensitivity init``; its model moves to ``mymodel.py`` (four named outputs), so a next command
that dropped the ``model.source=`` of the first one would load the missing ``model.py`` and fail.
"""
from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from tests.helpers import CLI
from tests.helpers.study_config import init_study

MODEL = '''\
import numpy as np
import tensorflow as tf


def response(x):
    """Four outputs of x [B, 3]."""
    a, b, c = tf.unstack(x, axis=1)
    return tf.stack([a + b**2 * c, a * b, b + c, a - 0.5 * c], axis=1)


def simulate(x):
    """The same in numpy, the simulator train runs."""
    a, b, c = x.T
    return np.stack([a + b**2 * c, a * b, b + c, a - 0.5 * c], axis=1)
'''
NAMES = ["y1", "y2", "y3", "y4"]
TRUTH = np.array([0.5, 1.0, 2.0])
STUDY = ["experiment=study", "model.source=mymodel:response"]
QUIET = ["plots=false", "progress=false"]


@pytest.fixture
def study(tmp_path) -> Path:
    folder = init_study(tmp_path / "study")
    (folder / "mymodel.py").write_text(MODEL)
    (folder / "model.py").unlink()
    model = folder / "conf" / "model" / "study.yaml"
    model.write_text(model.read_text().replace('output: {name: y, units: "1", long_name: model response}',
                                               f'output: {{name: y, units: "1", names: [{", ".join(NAMES)}]}}'))
    a, b, c = TRUTH
    clean = np.array([a + b**2 * c, a * b, b + c, a - 0.5 * c])
    xr.Dataset({"observed": ("output", clean + 0.01 * np.array([1.0, -1.0, 0.5, -0.5])),
                "sigma": ("output", np.full(4, 0.05))},
               coords={"output_name": ("output", NAMES)}).to_netcdf(folder / "obs.nc")
    return folder


def run(study: Path, args: list[str]) -> str:
    """``sensitivity <args>`` in the study folder: exit 0, and the ``next:`` command it printed (None: none)."""
    done = subprocess.run(CLI + args, capture_output=True, text=True, cwd=study)
    assert done.returncode == 0, (args, done.stderr[-3000:])
    found = re.findall(r"next: sensitivity (.+)", done.stdout + done.stderr)
    return shlex.split(found[-1]) if found else None


def follow(study: Path, first: list[str], expected: list[str]) -> None:
    """Run ``first``, then each ``next:`` command exactly as printed; the workflows run are ``expected``."""
    ran, step = [], first
    while step is not None and len(ran) < len(expected):
        ran.append(step[0])
        keys = {o.partition("=")[0] for o in step}  # a multirun records `mymodel\\:response`, as Hydra reads it
        assert ran[-1] == first[0] or {o.partition("=")[0] for o in STUDY} <= keys, step  # the study went on
        step = run(study, step)
    assert ran == expected


@pytest.mark.slow
def test_calibrate_posterior_propagate_print_next_lines_that_run_as_printed(study):
    follow(study, ["calibrate", *STUDY, "observations.path=obs.nc", *QUIET],
           ["calibrate", "posterior", "propagate", "indices"])


@pytest.mark.slow
def test_the_next_line_of_a_sweep_and_of_its_merged_shards_runs_as_printed(study):
    follow(study, ["sweep", *STUDY, "grid.n=64", *QUIET], ["sweep", "indices"])
    shards = ["sweep", "-m", *STUDY, "grid.n=64", "grid.num_shards=2", "grid.shard=0,1", *QUIET]
    run(study, shards)
    follow(study, ["merge", "multirun/sweep"], ["merge", "indices"])


@pytest.mark.slow
def test_the_next_line_of_train_runs_as_printed(study):
    tiny = ["training.simulator=mymodel:simulate", "training.runs=64", "training.epochs=20", "training.hidden=[8]",
            "training.members=2", "training.derivative_points=4"]
    follow(study, ["train", *STUDY, *tiny, *QUIET], ["train", "sweep"])


@pytest.mark.slow
def test_the_next_line_of_simulate_runs_as_printed(study):
    follow(study, ["simulate", *STUDY, "simulate.simulator=mymodel:simulate", "grid.n=64", *QUIET],
           ["simulate", "train"])
