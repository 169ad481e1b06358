"""A convolutional surrogate of a simulator with field inputs: trained, saved as an ordinary .keras, read by the
engine's dense path, and its Jacobian against the analytic derivative."""
from __future__ import annotations

import numpy as np
import pytest

import sensitivity
from sensitivity import training
from sensitivity.errors import ConfigError
from sensitivity.inputs.space import ParameterSpace
from sensitivity.outputs.spec import OutputSpec
from sensitivity.settings import ConvTrunk, TrainingPlan, TrainSettings
from sensitivity.sweep.designs import make_grid


def smoothing(shape: tuple[int, ...]) -> np.ndarray:
    """``[cells, cells]``: a 3-point (1-D) or 3 x 3 (2-D) moving average with zero padding, row by row."""
    rows = [np.convolve(np.eye(shape[-1])[i], [1 / 3] * 3, mode="same") for i in range(shape[-1])]
    line = np.array(rows)
    return line if len(shape) == 1 else np.kron(np.array([np.convolve(np.eye(shape[0])[i], [1 / 3] * 3, "same")
                                                          for i in range(shape[0])]), line)


def field_study(shape: tuple[int, ...]):
    """``y = w . (K u) + a (v . (K u))``: a weighted sum of the smoothed field ``u`` (``K`` the moving average) whose
    weights the scalar input ``a`` shifts; its exact Jacobian ``[N, 1, cells + 1]``."""
    cells = int(np.prod(shape))
    kernel = smoothing(shape)
    w, v = np.linspace(1.0, -1.0, cells), np.cos(np.linspace(0, np.pi, cells))
    names = [f"u_{i}" for i in range(cells)] + ["a"]
    space = ParameterSpace.from_records([{"name": n, "units": "1", "low": 0.0, "high": 1.0} for n in names])

    def simulate(x):
        smooth = x[:, :cells] @ kernel.T
        return (smooth @ w + x[:, cells] * (smooth @ v))[:, None]

    def jacobian(x):
        field = (w[None] + x[:, cells, None] * v[None]) @ kernel
        return np.concatenate([field, (x[:, :cells] @ kernel.T @ v)[:, None]], axis=1)[:, None, :]
    return space, simulate, jacobian


@pytest.mark.slow
@pytest.mark.parametrize("shape", [(16,), (4, 4)])
def test_a_conv_surrogate_of_a_field_is_fast_path_and_its_jacobian_is_the_analytic_one(tmp_path, shape):
    from sensitivity.engine.layers import layer_steps

    space, simulate, exact = field_study(shape)
    x = make_grid(space, "sobol", n=1024, seed=0).points()
    network = TrainSettings(hidden=(64,), epochs=400, conv=ConvTrunk("u", shape, filters=(8, 8)))
    trained = training.train_surrogate(
        x, simulate(x), tmp_path, space=space, output=OutputSpec.from_dict({"name": "y", "units": "1"}),
        network=network, plan=TrainingPlan(members=1, derivative_points=0), seed=0)
    assert trained.path.name == "surrogate.keras"
    model = sensitivity.load_surrogate(trained.path)  # an ordinary .keras: nothing else needed
    layers = [type(s).__name__ for s in layer_steps(model.fn, "float32")]
    assert "LinearStep" in layers  # the convolutions, read as steps: no autodiff
    engine = sensitivity.compile_jacobian(model, "reverse", path="dense")
    check = make_grid(space, "random", n=256, seed=7).points()
    values, jacobian = engine(check)
    assert training.value_errors(simulate(check), values).r2[0] > 0.99
    errors = training.derivative_errors(jacobian, exact(check), np.ones((len(check), len(space)))).per_point
    assert np.median(errors) < 0.1  # relative Frobenius error per point, unit-cube coordinates


def test_the_field_layout_puts_each_input_where_the_trunk_reads_it():
    from sensitivity.training.conv import field_layout

    names = ["b", "u_0", "u_1", "u_2", "c"]
    layout = field_layout(names, ConvTrunk("u", (3,)))  # cells x (field, b, c)
    x = np.array([10.0, 1.0, 2.0, 3.0, 20.0])
    np.testing.assert_array_equal((x @ layout).reshape(3, 3), [[1, 10, 20], [2, 10, 20], [3, 10, 20]])
    with pytest.raises(ConfigError, match=r"input_fields.u: shape \[4\] needs 4 parameters named u_\*"):
        field_layout(names, ConvTrunk("u", (4,)))
    with pytest.raises(ConfigError, match=r"`kernel_size` must be a positive integer, got 0"):
        ConvTrunk("u", (3,), kernel_size=0)
