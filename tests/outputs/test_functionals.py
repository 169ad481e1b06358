"""Forecast functionals: values by hand, exact Jacobians against float64 central differences, one-line errors."""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.errors import ConfigError
from sensitivity.outputs.functionals import Functional, resolve
from sensitivity.outputs.spec import OutputDim, OutputSpec

SPEC = OutputSpec(name="cases", units="1/day", dims=(OutputDim("species", ("prey", "predator")),
                                                     OutputDim("day", (1, 2, 3, 4, 5), units="day")))
DAYS = np.arange(1.0, 6.0)


def model(x: np.ndarray) -> np.ndarray:
    """[K, 3] -> [K, 2, 5]: two smooth curves over five days with a unique peak."""
    a, b, c = x[:, 0, None], x[:, 1, None], x[:, 2, None]
    prey = a * np.exp(-((DAYS - 3.0 * b) ** 2)) + c * DAYS
    predator = np.sin(a * DAYS) * b + c**2
    return np.stack([prey, predator], axis=1)


def model_jacobian(x: np.ndarray) -> np.ndarray:
    """[K, 2, 5, 3]: the closed-form Jacobian of :func:`model`."""
    a, b, c = x[:, 0, None], x[:, 1, None], x[:, 2, None]
    bump = np.exp(-((DAYS - 3.0 * b) ** 2))
    prey = np.stack([bump, a * bump * 6.0 * (DAYS - 3.0 * b), np.broadcast_to(DAYS, bump.shape)], axis=-1)
    predator = np.stack([np.cos(a * DAYS) * DAYS * b, np.sin(a * DAYS), np.broadcast_to(2 * c, bump.shape)], axis=-1)
    return np.stack([prey, predator], axis=1)


FORECASTS = (
    Functional("on_day_4", "value", at={"species": "prey", "day": 4}),
    Functional("total_prey", "sum", at={"species": "prey"}, over=("day",)),
    Functional("mean_all", "mean", over=("species", "day")),
    Functional("peak_prey", "max", at={"species": "predator"}, over=("day",)),
    Functional("weighted", "weighted_sum", at={"day": 2}, over=("species",), weights=(2.0, -0.5)),
)
X = np.array([[1.3, 0.9, 0.4], [0.7, 1.2, -0.3], [2.1, 0.5, 0.8]])


def test_values_match_the_definitions() -> None:
    y = model(X)
    out, _ = resolve(FORECASTS, SPEC).apply(y)
    np.testing.assert_allclose(out[:, 0], y[:, 0, 3], rtol=0, atol=0)
    np.testing.assert_allclose(out[:, 1], y[:, 0].sum(axis=1), rtol=1e-13)
    np.testing.assert_allclose(out[:, 2], y.reshape(3, -1).mean(axis=1), rtol=1e-13)
    np.testing.assert_allclose(out[:, 3], y[:, 1].max(axis=1), rtol=0, atol=0)
    np.testing.assert_allclose(out[:, 4], 2.0 * y[:, 0, 1] - 0.5 * y[:, 1, 1], rtol=1e-13)


def test_jacobians_match_central_differences() -> None:
    resolved = resolve(FORECASTS, SPEC)
    _, jac = resolved.apply(model(X), model_jacobian(X))
    assert jac.shape == (3, 5, 3)
    h = 1e-6
    for i in range(3):
        step = np.zeros(3)
        step[i] = h
        up, _ = resolved.apply(model(X + step))
        down, _ = resolved.apply(model(X - step))
        np.testing.assert_allclose(jac[..., i], (up - down) / (2 * h), rtol=1e-7, atol=1e-8)


def test_flat_inputs_and_names_units() -> None:
    resolved = resolve(FORECASTS, SPEC)
    a, ja = resolved.apply(model(X), model_jacobian(X))
    b, jb = resolved.apply(model(X).reshape(3, -1), model_jacobian(X).reshape(3, 10, 3))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ja, jb)
    assert resolved.names == tuple(f.name for f in FORECASTS)
    assert resolved.units == ("1/day",) * 5
    assert resolved.long_names[1] == "sum of cases over day at species=prey"


def test_per_label_units_and_a_mixed_reduction() -> None:
    spec = OutputSpec(name="y", units=("m", "s"), dims=(OutputDim("output", ("h", "t")),))
    assert resolve([Functional("h", at={"output": "t"})], spec).units == ("s",)
    with pytest.raises(ConfigError, match="different units"):
        resolve([Functional("both", "sum", over=("output",))], spec)
    assert resolve([Functional("both", "sum", over=("output",), units="1")], spec).units == ("1",)


@pytest.mark.parametrize("functional, message", [
    (Functional("f", "sum", over=("days",)), r"'days' is not an output dim; the dims are \['species', 'day'\]"),
    (Functional("f", at={"species": "prey", "day": 6}), r"`at` day=6 is not a coordinate of dim 'day'"),
    (Functional("f", at={"species": "wolf", "day": 1}), r"`at` species='wolf' is not a coordinate"),
    (Functional("f", at={"species": "prey"}), r"dim\(s\) \['day'\] are neither fixed"),
    (Functional("f", "weighted_sum", at={"species": "prey"}, over=("day",), weights=(1.0,)), "must hold 5 entries"),
])
def test_a_bad_functional_is_a_one_line_error(functional: Functional, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as err:
        resolve([functional], SPEC)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("data, message", [
    ({"name": "f", "kind": "median", "over": "day"}, "`kind` must be one of"),
    ({"name": "f", "kind": "sum"}, "needs `over`"),
    ({"name": "f", "over": "day"}, "reduces no dim"),
    ({"name": "f", "kind": "sum", "over": "day", "weights": [1.0]}, "only then"),
    ({"name": "f", "at": {"day": 1}, "over": ["day"], "kind": "sum"}, "fixed or reduced once"),
    ({"name": "f", "colour": 1}, r"unknown key\(s\) \['colour'\]"),
    ({"name": "2f"}, "must be an identifier"),
])
def test_bad_settings_are_one_line_errors(data: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Functional.from_dict(data)


def test_duplicate_names_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"\['f'\] more than once"):
        resolve([Functional("f", at={"species": "prey", "day": 1})] * 2, SPEC)
