"""A user's simulator is untrusted input (sensitivity.surrogates.simulator): each way it can misbehave is a one-line
ModelError naming it, the point and what came back, in this process and in a worker with a time limit."""
from __future__ import annotations

import sys
import time

import numpy as np
import pytest

from sensitivity.errors import ConfigError, ModelError
from sensitivity.surrogates.simulator import SimulatorSettings, simulator_from

HERE = "tests.surrogates.test_simulator"
POINTS = np.array([[0.5, 1.0], [2.0, 3.0], [4.0, 5.0]])


def good(x: np.ndarray, gain: float = 1.0) -> np.ndarray:
    return gain * np.stack([x.sum(axis=1), x[:, 0] * x[:, 1]], axis=1)


def returns_nan(x: np.ndarray) -> np.ndarray:
    y = good(x)
    y[1, 1] = np.nan
    return y


def returns_inf(x: np.ndarray) -> np.ndarray:
    y = good(x)
    y[2, 0] = np.inf
    return y


def raises(x: np.ndarray) -> np.ndarray:
    raise RuntimeError("solver diverged\nat step 3")


def exits(x: np.ndarray) -> np.ndarray:
    sys.exit(0)


def wrong_shape(x: np.ndarray) -> np.ndarray:
    return np.zeros((len(x), 3))


def wrong_count(x: np.ndarray) -> np.ndarray:
    return np.zeros((len(x) - 1, 2))


def a_string(x: np.ndarray) -> str:
    return "done"


def sleeps(x: np.ndarray) -> np.ndarray:
    time.sleep(60)
    return good(x)


BAD = [
    ("returns_nan", r"returned nan \(output 1\) at point 1 of 3, x = \[2, 3\]"),
    ("returns_inf", r"returned inf \(output 0\) at point 2 of 3, x = \[4, 5\]"),
    ("raises", r"raised RuntimeError: solver diverged on a batch of 3 points \(the first x = \[0.5, 1\]\)$"),
    ("exits", r"raised SystemExit \(sys.exit\(0\)\) on a batch of 3 points"),
    ("wrong_shape", r"returned shape \[3, 3\] for 3 points; expected \[3, 2\]"),
    ("wrong_count", r"returned shape \[2, 2\] for 3 points; expected \[3, 2\]"),
    ("a_string", r"returned 'done' \(str, dtype <U4\) on a batch of 3 points .*expected real numbers"),
]


@pytest.mark.parametrize("name, message", BAD)
def test_a_misbehaving_simulator_is_a_one_line_error_naming_it_and_the_point(name, message):
    simulate = simulator_from(f"{HERE}:{name}", what="`verify.simulator`", output_shape=(2,))
    with pytest.raises(ModelError, match=rf"^simulator {HERE}:{name} \(`verify.simulator`\) {message}") as err:
        simulate(POINTS)
    assert "\n" not in str(err.value)


@pytest.mark.slow
def test_in_a_worker_each_misbehaviour_is_the_same_one_line_error_and_a_run_past_the_timeout_is_stopped():
    for name, message in BAD:
        simulate = simulator_from(f"{HERE}:{name}", what="`verify.simulator`", output_shape=(2,),
                                  settings=SimulatorSettings(timeout=30.0))
        with pytest.raises(ModelError, match=rf"^simulator {HERE}:{name} \(`verify.simulator`\) {message}"):
            simulate(POINTS)
        simulate.close()
    simulate = simulator_from(f"{HERE}:good", {"gain": 2.0}, settings=SimulatorSettings(timeout=30.0))
    np.testing.assert_array_equal(simulate(POINTS), good(POINTS, 2.0))  # a well-behaved one answers, twice
    np.testing.assert_array_equal(simulate(POINTS[:1]), good(POINTS[:1], 2.0))
    simulate.close()


def test_a_call_past_the_timeout_is_stopped_with_a_one_line_error():
    slow = simulator_from(f"{HERE}:sleeps", what="`training.simulator`", settings=SimulatorSettings(timeout=0.5))
    start = time.monotonic()
    with pytest.raises(ModelError, match=rf"^simulator {HERE}:sleeps \(`training.simulator`\) did not return within "
                                         r"`simulator.timeout` = 0.5 s at x = \[0.5, 1\]; its worker was stopped$"):
        slow(POINTS[:1])
    assert time.monotonic() - start < 55  # not the 60 s the simulator sleeps: it was abandoned
    # called again (a Dask retry of the batch, issue 58): a fresh worker, judged by the same limit, not the stopped
    # worker's exit code -9
    with pytest.raises(ModelError, match=r"did not return within `simulator.timeout` = 0.5 s at x = \[0.5, 1\]; its "
                                         r"worker was stopped$"):
        slow(POINTS[:1])
    slow.close()


def test_kwargs_are_checked_against_the_signature_before_any_run():
    with pytest.raises(ConfigError, match=r"`training.simulator_kwargs`: 'scale' is not a parameter of "
                                          rf"{HERE}:good\(x: 'np.ndarray', gain: 'float' = 1.0\)"):
        simulator_from(f"{HERE}:good", {"scale": 1.0})
    np.testing.assert_array_equal(simulator_from(good, {"gain": 3.0})(POINTS), good(POINTS, 3.0))
    with pytest.raises(ConfigError, match="`timeout` must be a number of seconds > 0"):
        SimulatorSettings(timeout=0)
    with pytest.raises(ConfigError, match="must be importable"):
        simulator_from(lambda x: x, settings=SimulatorSettings(timeout=1.0))


def hard_exit(x: np.ndarray) -> np.ndarray:
    import os

    os._exit(3)


def test_a_simulator_that_kills_its_worker_is_a_one_line_error_with_the_exit_code():
    simulate = simulator_from(f"{HERE}:hard_exit", settings=SimulatorSettings(timeout=30.0))
    with pytest.raises(ModelError, match=rf"^simulator {HERE}:hard_exit \(`training.simulator`\): its worker process "
                                         r"ended \(exit code 3\) on a batch of 3 points"):
        simulate(POINTS)
