"""A program that is not Python as the simulator of every workflow that runs one (issue 57): from a folder made by
``sensitivity init``, with the shipped legacy program (POSIX sh + awk, examples/legacy_program) named by
``simulator.program``, `simulate`, `train`, `verify` and `multifidelity` run it locally and on a Dask
``LocalCluster`` of worker processes, and their values equal the closed form the program computes (Euler-Bernoulli
cantilever) and a direct run of the program, parsed here independently; a killed CLI reruns only the batches that
were not finished; a failing program is one line and a kept folder; bad keys of the section are one line.
A Dask worker killed mid-run is tests/simulators/test_executors.py's."""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from sensitivity.errors import ConfigError
from tests.helpers import CLI, ROOT
from tests.helpers.study_config import compose_in_study, init_study

NAMES = ["E", "I", "L", "P"]
#: The legacy example's outputs: the tip slope, then the deflection at 11 stations.
LABELS = ["tip_slope", *(f"w{k}" for k in range(11))]
SPACE = """\
parameters:
  - {name: E, units: Pa, long_name: Young's modulus, low: 7.0e10, high: 2.1e11}
  - {name: I, units: m4, long_name: second moment of area, low: 1.0e-6, high: 1.0e-4}
  - {name: L, units: m, long_name: length, low: 1.0, high: 3.0}
  - {name: P, units: N, long_name: tip load, low: 100.0, high: 5000.0}
"""
MODEL = f"""\
source: beam_model:beam
kwargs: {{}}
output: {{name: y, units: "1", long_name: tip slope and deflection, names: [{', '.join(LABELS)}]}}
"""
SURROGATE = '''\
"""The beam's closed form in TensorFlow: the surrogate the program's runs are compared with."""
import tensorflow as tf


def beam(x):
    E, I, L, P = tf.unstack(x, axis=1)
    s = tf.range(11, dtype=x.dtype)[None, :] / 10 * L[:, None]  # the stations in x's precision
    w = P[:, None] * s**2 * (3 * L[:, None] - s) / (6 * (E * I)[:, None])
    return tf.concat([(P * L**2 / (2 * E * I))[:, None], w], axis=1)
'''
EXPERIMENT = """\
# @package _global_
defaults:
  - override /model: beam
  - override /space: beam
simulator:
  program: legacy/beam.yaml
"""


def closed_form(x: np.ndarray) -> np.ndarray:
    """Euler-Bernoulli cantilever under a tip load: P L^2 / (2 E I), then w(x_k) = P x^2 (3 L - x) / (6 E I) at
    x_k = k L / 10."""
    E, I, L, P = x.T
    s = np.linspace(0.0, 1.0, 11)[None, :] * L[:, None]
    return np.column_stack([P * L**2 / (2 * E * I), P[:, None] * s**2 * (3 * L[:, None] - s) / (6 * (E * I)[:, None])])


def run_by_hand(x: np.ndarray, folder: Path) -> np.ndarray:
    """The program run directly, its deck written and its report parsed here (not by the library)."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for E, I, L, P in x:
        deck = "".join(f"{key:<10}{value:20.12E}\n" for key, value in
                       [("YOUNGS", E), ("INERTIA", I), ("LENGTH", L), ("LOAD", P)]) + f"{'STATIONS':<10}{10:20d}\n"
        (folder / "deck.in").write_text(deck)
        subprocess.run(["sh", str(ROOT / "examples" / "legacy_program" / "beam.sh"), "deck.in", "report.out"],
                       cwd=folder, check=True)
        report = (folder / "report.out").read_text()
        slope = float(re.search(r"TIP SLOPE \(RAD\)\s*=\s*(\S+)", report).group(1))
        table = report.split("DEFLECTION ALONG THE BEAM")[1].splitlines()[2:13]
        rows.append([slope, *(float(line[28:48]) for line in table)])
    return np.array(rows)


@pytest.fixture
def study(tmp_path, monkeypatch) -> Path:
    """A folder made by ``sensitivity init``, the legacy program copied in (``legacy/``), the beam's space, its
    closed form as the model and ``experiment=beam`` naming the program; the working directory, importable."""
    folder = init_study(tmp_path / "study")
    shutil.copytree(ROOT / "examples" / "legacy_program", folder / "legacy")
    (folder / "conf" / "space" / "beam.yaml").write_text(SPACE)
    (folder / "conf" / "model" / "beam.yaml").write_text(MODEL)
    (folder / "conf" / "experiment" / "beam.yaml").write_text(EXPERIMENT)
    (folder / "beam_model.py").write_text(SURROGATE)
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    return folder


def run_in(study: Path, name: str, run_dir: str, overrides: list[str]) -> Path:
    """``sensitivity <name> experiment=beam ...`` in this process, as the CLI composes it in the study folder."""
    from workflows.plumbing.runner import run_workflow

    cfg = compose_in_study(study, name, ["experiment=beam", f"output_dir={study / 'outputs' / run_dir}",
                                         "progress=false", *overrides])
    return run_workflow(name, cfg)


def compose(study: Path, name: str, overrides: list[str]):
    from omegaconf import OmegaConf

    cfg = compose_in_study(study, name, ["experiment=beam", f"output_dir={study / 'out'}", *overrides])
    cfg = OmegaConf.masked_copy(cfg, list(cfg.keys()))
    return cfg


DASK = ["simulator.executor.kind=dask", "simulator.executor.n_workers=2"]


@pytest.mark.slow
@pytest.mark.parametrize("executor", [[], DASK], ids=["local", "dask"])
def test_every_workflow_runs_the_program_where_the_executor_says(study, executor):
    small = ["simulator.batch_size=4", *executor]
    path = run_in(study, "simulate", "simulate", ["grid.n=16", *small])
    with xr.open_dataset(path) as ds:
        x, y = ds["x"].values, ds["y"].transpose("sample", "output").values
        assert list(ds["parameter_name"].values) == NAMES and list(ds["output_name"].values) == LABELS
        assert ds["x"].attrs["long_name"] and "jacobian" not in ds and ds.attrs["simulator"] == "program 'sh beam.sh'"
    assert x.shape == (16, 4)
    np.testing.assert_allclose(y, closed_form(x), rtol=1e-10)
    np.testing.assert_allclose(y[:3], run_by_hand(x[:3], study / "by_hand"), rtol=0, atol=0)

    model = run_in(study, "train", "train", ["training.runs=24", "training.members=1", "training.epochs=3",
                                             "training.hidden=[8]", "training.patience=2",
                                             "training.derivative_points=2", *small])
    with xr.open_dataset(model.parent / "training.nc") as ds:
        np.testing.assert_allclose(ds["y"].values.reshape(-1, 12), closed_form(ds["x"].values), rtol=1e-10)
        assert ds.attrs["simulator_program"] == "program 'sh beam.sh'" and ds.sizes["sample"] == 24

    propagation = run_in(study, "propagate", "propagate", ["propagation.methods=[monte_carlo]",
                                                          "propagation.n_samples=256", "jacobian=float64",
                                                          "plots=false"])
    checked = run_in(study, "verify", "verify", [f"verify.propagation={propagation}", "verify.propagation_runs=12",
                                                 "jacobian=float64", *small])
    with xr.open_dataset(checked) as ds:
        # the surrogate is the closed form: the simulator's anchored moments are the surrogate's where every run
        # of the program equals it (to the 13 digits its report prints)
        std = ds["propagation_std_simulator"].values
        np.testing.assert_allclose(ds["propagation_std_error"].values, 0.0, atol=1e-10 * std.max())
        assert int(ds["propagation_runs"]) == 12 and ds.attrs["simulator"] == "program 'sh beam.sh'"

    result = run_in(study, "multifidelity", "multifidelity", ["multifidelity.budget=80", "multifidelity.pilot=18",
                                                             "multifidelity.n_resamples=50",
                                                             "multifidelity.surrogate_rows=64",
                                                             "jacobian=float64", "plots=false", *small])
    runs = sorted(result.parent.glob("simulator_*.nc"))
    assert runs
    for file in runs:
        with xr.open_dataset(file) as ds:
            np.testing.assert_allclose(ds["y"].values, closed_form(ds["x"].values), rtol=1e-10)


@pytest.mark.slow
def test_train_takes_a_simulate_dataset_as_its_data(study):
    data = run_in(study, "simulate", "simulate", ["grid.n=32"])
    model = run_in(study, "train", "train", [f"training.data={data}", "training.members=1", "training.epochs=3",
                                             "training.hidden=[8]", "training.patience=2"])
    with xr.open_dataset(model.parent / "training.nc") as ds, xr.open_dataset(data) as simulated:
        order = np.argsort(ds["x"].values[:, 0])
        np.testing.assert_array_equal(ds["x"].values[order], simulated["x"].values[np.argsort(simulated["x"].values[:, 0])])
        np.testing.assert_allclose(ds["y"].values.reshape(-1, 12), closed_form(ds["x"].values), rtol=1e-10)


def test_shards_cover_the_grid_with_its_global_sample_index(study):
    """Two shards of a 12-point grid hold its points 0-5 and 6-11 under their global ``sample`` index, each run once,
    with the values of the closed form at the whole grid's points (a one-shard run)."""
    whole = run_in(study, "simulate", "whole", ["grid.n=12", "grid.kind=halton"])
    shards = [run_in(study, "simulate", f"shard{k}", ["grid.n=12", "grid.kind=halton", f"grid.shard={k}",
                                                      "grid.num_shards=2"]) for k in (0, 1)]
    with xr.open_dataset(whole) as ds, xr.open_dataset(shards[0]) as a, xr.open_dataset(shards[1]) as b:
        assert list(a["sample"].values) == list(range(6)) and list(b["sample"].values) == list(range(6, 12))
        joined = xr.concat([a, b], dim="sample")
        np.testing.assert_array_equal(joined["x"].values, ds["x"].values)
        np.testing.assert_allclose(joined["y"].values, closed_form(ds["x"].values), rtol=1e-10)
        assert a.attrs["shard"] == "0 of 2" and b.attrs["sample_range"] == "6 12"


def _parts(run_dir: Path) -> int:
    return len(list(run_dir.glob("simulate.parts/*.nc.parts/part-*.nc")))


@pytest.mark.slow
def test_a_killed_cli_reruns_only_the_runs_not_finished(study):
    """The program sleeps 0.2 s a run; the CLI is killed after three recorded batches; the rerun starts exactly
    the runs of the batches not on disk (the program's run counter) and publishes the values of the closed form."""
    (study / "legacy" / "slow.sh").write_text("sleep 0.2\nexec sh beam.sh \"$@\"\n")
    settings = (study / "legacy" / "beam.yaml").read_text().replace("command: [sh, beam.sh]", "command: [sh, slow.sh]")
    (study / "legacy" / "slow.yaml").write_text(settings.replace("files: [beam.sh]", "files: [beam.sh, slow.sh]"))
    run_dir = study / "outputs" / "killed"
    command = CLI + ["simulate", "experiment=beam", "simulator.program=legacy/slow.yaml", "grid.n=40",
                     "simulator.batch_size=4", "progress=false", f"hydra.run.dir={run_dir}"]
    process = subprocess.Popen(command, cwd=study, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    deadline = time.monotonic() + 300
    while _parts(run_dir) < 3 and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    done = _parts(run_dir)
    assert 3 <= done < 10 and not (run_dir / "simulate.nc").exists()
    counter = run_dir / "program_runs" / ".runs_started"
    started = int(counter.read_text())
    rerun = subprocess.run(command, cwd=study, capture_output=True, text=True)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert int(counter.read_text()) - started == 40 - 4 * done  # only the batches not on disk ran again
    with xr.open_dataset(run_dir / "simulate.nc") as ds:
        np.testing.assert_allclose(ds["y"].transpose("sample", "output").values, closed_form(ds["x"].values),
                                   rtol=1e-10)
    assert not (run_dir / "simulate.parts").exists()


@pytest.mark.slow
def test_a_failing_program_is_one_line_and_a_kept_folder(study):
    settings = (study / "legacy" / "beam.yaml").read_text()
    (study / "legacy" / "broken.yaml").write_text(settings.replace("command: [sh, beam.sh]",
                                                                   "command: [sh, beam.sh, no_such_deck.in]"))
    run_dir = study / "outputs" / "broken"
    done = subprocess.run(CLI + ["simulate", "experiment=beam", "simulator.program=legacy/broken.yaml", "grid.n=8",
                                 "progress=false", f"hydra.run.dir={run_dir}"], cwd=study, capture_output=True,
                          text=True)
    assert done.returncode != 0
    lines = [line for line in (done.stdout + done.stderr).splitlines() if "its folder is kept" in line]
    assert len(lines) == 1, (done.stdout + done.stderr)[-3000:]
    assert "exited with status 2" in lines[0] and "cannot read the input deck" in lines[0]
    folder = Path(re.search(r"its folder is kept: (\S+)", lines[0]).group(1))
    assert folder.is_dir() and folder.is_relative_to(run_dir / "program_runs")
    assert (folder / "exit_status.txt").read_text().strip() == "2" and (folder / "beam.in").is_file()
    assert not (run_dir / "simulate.nc").exists()


@pytest.mark.parametrize("override, message", [
    (["simulator.executor.kind=mpi"], r"^`simulator.executor.kind` must be one of local, dask, slurm"),
    (["simulator.workers=0"], r"^`simulator.workers` must be an integer >= 1, got 0$"),
    (["simulator.program={comand: [sh]}"], r"^`simulator.program`: 'comand' is not a setting of a program simulator"),
    (["simulator.program=legacy/none.yaml"], r"^`simulator.program`: .*none.yaml cannot be read as YAML"),
    (["space.parameters=[{name: I, units: m4, low: 1.0e-6, high: 1.0e-4}, {name: E, units: Pa, low: 7.0e10, "
      "high: 2.1e11}, {name: L, units: m, low: 1.0, high: 3.0}, {name: P, units: N, low: 100.0, high: 5000.0}]"],
     r"^`simulator.program.parameters` \['E', 'I', 'L', 'P'\] must be the space's parameters in its order, \['I', 'E'"),
    (["+simulate.simulator_kwargs.a=1"], r"^`simulate.simulator_kwargs` is set but the simulator is `simulator.program`"),
])
def test_bad_keys_of_the_simulator_section_are_one_line(study, override, message):
    from workflows import simulate

    with pytest.raises(ConfigError, match=message):
        simulate.run(compose(study, "simulate", override))


def test_without_a_simulator_simulate_names_both_ways_to_give_one(study):
    from workflows import simulate

    with pytest.raises(ConfigError, match=r"`simulate.simulator` \('package.module:function'\) or "
                                          r"`simulator.program` is required"):
        simulate.run(compose(study, "simulate", ["simulator.program=null"]))
