"""The simulator runner (sensitivity.simulators.runner): batches across spawned workers give the serial run's values,
a run stopped mid-way resumes running only the batches not on disk, a bad simulator is one line and publishes
nothing."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from sensitivity.errors import ConfigError, ModelError
from sensitivity.simulators.runner import RunnerSettings, run_simulator
from sensitivity.surrogates.simulator import SimulatorSettings, simulator_from

HERE = "tests.simulators.test_runner"
POINTS = np.random.default_rng(0).uniform(-1, 1, (23, 3))


def field(x: np.ndarray, counter: str = "", stop_after: int = -1) -> np.ndarray:
    """A ``[N, 2, 3]`` output; each call appends a line to ``counter``; past ``stop_after`` calls (while the file
    ``<counter>.stop`` exists) the process ends as a killed simulator would."""
    if counter:
        calls = Path(counter).read_text().count("\n") if Path(counter).exists() else 0
        if 0 <= stop_after <= calls and Path(counter + ".stop").exists():
            os._exit(9)
        with open(counter, "a") as f:
            f.write(f"{len(x)}\n")
    return np.stack([np.sin(x), x**2], axis=1)


def nan_at_five(x: np.ndarray) -> np.ndarray:
    y = np.sin(x)
    y[np.isclose(x[:, 0], POINTS[5, 0])] = np.nan
    return y


def expected(x: np.ndarray) -> np.ndarray:
    return np.stack([np.sin(x), x**2], axis=1)


def test_parallel_batches_equal_the_serial_run(tmp_path):
    sim = simulator_from(f"{HERE}:field", what="`multifidelity.simulator`")
    serial = run_simulator(sim, POINTS, tmp_path / "serial.nc", RunnerSettings(batch_size=23)).values
    parallel = run_simulator(sim, POINTS, tmp_path / "parallel.nc", RunnerSettings(batch_size=4, workers=2)).values
    np.testing.assert_array_equal(serial, expected(POINTS))
    np.testing.assert_array_equal(parallel, serial)
    assert parallel.shape == (23, 2, 3)
    assert not (tmp_path / "parallel.nc.parts").exists()


def test_given_an_output_spec_the_runs_file_is_labelled_by_it(tmp_path):
    import xarray as xr

    from sensitivity.outputs.spec import OutputDim, OutputSpec

    spec = OutputSpec("state", ("m", "m2"), (OutputDim("kind", ("sine", "square")), OutputDim("t", (1.0, 2.0, 3.0), "s")))
    sim = simulator_from(f"{HERE}:field", output_shape=(2, 3))
    runs = run_simulator(sim, POINTS, tmp_path / "runs.nc", RunnerSettings(batch_size=10), output=spec)
    np.testing.assert_array_equal(runs.values, expected(POINTS))
    with xr.open_dataset(tmp_path / "runs.nc") as ds:
        assert ds["y"].dims == ("sample", "kind", "t") and ds["kind_name"].values.tolist() == ["sine", "square"]
        assert ds["kind_units"].values.tolist() == ["m", "m2"] and ds["t"].attrs["units"] == "s"
        np.testing.assert_array_equal(ds["y"].values, expected(POINTS))
    with pytest.raises(ConfigError, match=r"`output` has the shape \[3, 2\]"):
        run_simulator(sim, POINTS, tmp_path / "other.nc", output=OutputSpec(
            "state", "m", (OutputDim("t", (1.0, 2.0, 3.0), "s"), OutputDim("kind", ("sine", "square")))))


def test_a_run_killed_mid_way_runs_only_the_missing_batches(tmp_path):
    counter = tmp_path / "calls.txt"
    Path(f"{counter}.stop").touch()
    kwargs = {"counter": str(counter), "stop_after": 3}
    # a time limit runs the simulator in a worker process: the batch after the third kills it, as SIGKILL would
    sim = simulator_from(f"{HERE}:field", kwargs, settings=SimulatorSettings(timeout=60.0))
    with pytest.raises(ModelError, match="worker process ended"):
        run_simulator(sim, POINTS, tmp_path / "runs.nc", RunnerSettings(batch_size=5))
    sim.close()
    assert counter.read_text().split() == ["5", "5", "5"]
    assert not (tmp_path / "runs.nc").exists()  # nothing assembled
    Path(f"{counter}.stop").unlink()
    sim = simulator_from(f"{HERE}:field", kwargs)
    runs = run_simulator(sim, POINTS, tmp_path / "runs.nc", RunnerSettings(batch_size=5, workers=2))
    values = runs.values
    assert sorted(map(int, counter.read_text().split())) == [3, 5, 5, 5, 5]  # batches 4 and 5 only, once each
    np.testing.assert_array_equal(values, expected(POINTS))
    again = run_simulator(sim, POINTS, tmp_path / "runs.nc", RunnerSettings(batch_size=5, workers=2))
    assert len(counter.read_text().split()) == 5  # all on disk: no call
    np.testing.assert_array_equal(again.values, values)
    assert again.seconds == runs.seconds > 0  # the recorded time of the runs, every batch's summed


def test_a_nan_is_the_checked_one_line_error_and_nothing_is_assembled(tmp_path):
    sim = simulator_from(f"{HERE}:nan_at_five", what="`multifidelity.simulator`")
    with pytest.raises(ModelError) as err:
        run_simulator(sim, POINTS, tmp_path / "runs.nc", RunnerSettings(batch_size=4, workers=2))
    assert "\n" not in str(err.value) and "nan" in str(err.value) and "multifidelity.simulator" in str(err.value)
    assert not (tmp_path / "runs.nc").exists()


@pytest.mark.parametrize("field_name, value", [("batch_size", 0), ("workers", 1.5)])
def test_bad_settings_name_the_field(field_name, value, tmp_path):
    sim = simulator_from(f"{HERE}:field")
    with pytest.raises(ConfigError, match=f"`{field_name}` must be an integer >= 1, got {value}"):
        run_simulator(sim, POINTS, tmp_path / "runs.nc", RunnerSettings(**{field_name: value}))
