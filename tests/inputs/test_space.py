"""ParameterSpace validation: every bad field gets a one-line error naming it and its value."""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.errors import ConfigError
from sensitivity.inputs.space import ParameterSpace


def rec(**kw):
    base = dict(name="beta", units="day-1", low=0.1, high=1.0)
    base.update(kw)
    return base


@pytest.mark.parametrize(
    "record, message",
    [
        (rec(low=3.0, high=1.0), "bounds must be low < high, got (3.0, 1.0)"),
        (rec(low=float("inf")), "`low` must be a finite number, got inf"),
        (rec(nominal=5.0), "`nominal` must lie in [0.1, 1.0], got 5.0"),
        (rec(units="people"), "`units` must be a UDUNITS-2 units string"),
        (rec(scale="log", low=-1.0), "scale 'log' needs low > 0, got low=-1.0"),
        (rec(name="1beta"), "parameter name must be an identifier, got '1beta'"),
        (rec(distribution={"kind": "weibull"}), "parameter 'beta': distribution `kind` must name a continuous scipy"),
        (rec(distribution={"kind": "beta", "a": 2.0}), "distribution 'beta' needs `b` (it takes a, b, loc, scale)"),
        (rec(distribution={"kind": "gumbel_r", "shape": 2.0}), "`shape` is not a parameter of 'gumbel_r'"),
        (rec(distribution={"kind": "gamma", "a": -1.0}), "'gamma' rejects its parameters (a=-1.0)"),
        (rec(distribution={"kind": "norm", "scale": 0.0}), "distribution `scale` must be > 0, got 0.0"),
        (rec(distribution={"kind": "norm", "truncate": [2.0, 1.0]}), "`truncate` [2.0, 1.0] leaves no probability"),
        (rec(distribution={"kind": "norm", "truncate": ["a", None]}), "`truncate` lower bound must be a finite"),
        (dict(name="beta", units="1", distribution={"kind": "triangular", "mode": 0.5}), "`low` is required for"),
        (rec(distribution={"kind": "normal", "mean": 0.5}), "takes parameters ['mean', 'std'], got ['mean']"),
        (rec(distribution={"kind": "normal", "mean": 0.5, "std": -1}), "`std` must be > 0, got -1"),
        (rec(colour="red"), "unexpected keyword argument 'colour'"),
    ],
)
def test_bad_parameter_is_named(record, message):
    with pytest.raises(ConfigError) as err:
        ParameterSpace.from_records([record])
    assert message in str(err.value)
    assert "beta" in str(err.value) or "1beta" in str(err.value)
    assert "\n" not in str(err.value)


def test_duplicate_names_and_bad_correlation():
    with pytest.raises(ConfigError, match="unique, got 'beta' twice"):
        ParameterSpace.from_records([rec(), rec()])
    with pytest.raises(ConfigError, match="positive definite"):
        ParameterSpace.from_records([rec(), rec(name="gamma")], correlation=[[1, 1.5], [1.5, 1]])


def test_nominal_defaults_and_distributions():
    space = ParameterSpace.from_records([
        rec(), rec(name="i0", units="1", low=1e-6, high=1e-2, scale="log"),
        rec(name="t", units="day", low=0, high=10, distribution={"kind": "triangular", "mode": 2.0}),
    ])
    np.testing.assert_allclose(space.nominal, [0.55, 1e-4, 5.0])
    # triangular(0, 2, 10) has mean (0 + 2 + 10) / 3
    assert space.parameters[2].frozen_distribution().mean() == pytest.approx(4.0)
    assert space.parameters[0].frozen_distribution().ppf(0.5) == pytest.approx(0.55)
    with pytest.raises(ConfigError, match=r"'beta' = 2.0 at point 0 \(data row 1\) is outside its bounds \[0.1, 1.0\]"):
        space.check_points(np.array([[2.0, 1e-3, 1.0]]))


@pytest.mark.parametrize("correlation, message", [
    ([[1.0, 0.5], [0.4, 1.0]], r"^space: `correlation` must be symmetric, got max \|C - C\^T\| = 0.1$"),
    ([[2.0, 0.5], [0.5, 1.0]], r"^space: `correlation` must have a unit diagonal, got \[2.0, 1.0\]$"),
    ([[1.0, 0.5, 0.0], [0.5, 1.0, 0.0]], r"^space: `correlation` must have shape \[2, 2\], got \[2, 3\]$"),
])
def test_a_bad_correlation_is_named_in_one_line(correlation, message):
    with pytest.raises(ConfigError, match=message):
        ParameterSpace.from_records([rec(), rec(name="gamma")], correlation=correlation)


def test_records_are_the_inverse_of_from_records():
    """Every kind of marginal, a truncation open on one side, a log scale and a correlation survive the round trip
    through plain config values (YAML-safe: no numpy scalars, tuples or distribution objects)."""
    import yaml

    space = ParameterSpace.from_records([
        {"name": "Q", "units": "m3 s-1", "distribution": {"kind": "gumbel_r", "loc": 1013, "scale": 558,
                                                          "truncate": [500, 3000]}},
        {"name": "Ks", "units": "1", "distribution": {"kind": "norm", "loc": 30, "scale": 8, "truncate": [15, None]}},
        {"name": "E", "units": "Pa", "scale": "log", "distribution": {"kind": "lognormal", "median": 2e11,
                                                                       "sigma_log": 0.05}},
        {"name": "Zv", "units": "m", "low": 49, "high": 51, "long_name": "valley level"},
    ], correlation=[[1, 0.3, 0, 0], [0.3, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]])
    node = yaml.safe_load(yaml.safe_dump(space.records()))
    again = ParameterSpace.from_records(node["parameters"], node["correlation"])
    assert again.parameters == space.parameters
    np.testing.assert_array_equal(again.correlation, space.correlation)
