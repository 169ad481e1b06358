"""Events about functionals of the outputs (:mod:`sensitivity.outputs.functionals`): a linear series of normal inputs,
whose sum, mean, weighted sum and value on a day are normal with a closed-form Pf, and whose max over the days is
the last day's (its offset dominates by many standard deviations)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
import tensorflow as tf
from scipy import stats

from sensitivity.analyses.reliability import ReliabilitySettings, plan, reliability
from sensitivity.analyses.reliability.summary import summary
from sensitivity.datasets.summary import Fact
from sensitivity.analyses.reliability.form import FormSettings
from sensitivity.analyses.reliability.sampling import ImportanceSettings
from sensitivity.errors import ConfigError
from sensitivity.inputs.space import ParameterSpace
from sensitivity.outputs.spec import OutputSpec

DAYS = [1.0, 2.0, 3.0]
SLOPES = np.array([[1.0, -0.5, 0.2], [0.5, 1.0, -1.0], [2.0, 0.3, 0.7]])  # [day, parameter]
OFFSETS = np.array([0.0, 20.0, 40.0])  # the last day is the largest by > 10 standard deviations
MU = np.array([0.5, -1.0, 2.0])
SD = np.array([1.0, 0.5, 0.8])
WEIGHTS = np.array([0.2, -1.0, 0.5])
SPACE = ParameterSpace.from_records([{"name": f"x{i}", "units": "m", "distribution": {"kind": "norm", "loc": m,
                                                                                     "scale": s}}
                                     for i, (m, s) in enumerate(zip(MU, SD))])
OUTPUT = {"name": "level", "units": "m", "dims": [{"name": "day", "values": DAYS, "units": "day"}]}
FUNCTIONALS = ({"name": "total", "kind": "sum", "over": ["day"]},
               {"name": "average", "kind": "mean", "over": ["day"]},
               {"name": "weighted", "kind": "weighted_sum", "over": ["day"], "weights": WEIGHTS.tolist()},
               {"name": "on_day_2", "at": {"day": 2.0}},
               {"name": "peak", "kind": "max", "over": ["day"]})
#: Each functional as ``a . x + b``: its slopes and offset.
LINEAR = {"total": (SLOPES.sum(0), OFFSETS.sum()), "average": (SLOPES.mean(0), OFFSETS.mean()),
          "weighted": (WEIGHTS @ SLOPES, WEIGHTS @ OFFSETS), "on_day_2": (SLOPES[1], OFFSETS[1]),
          "peak": (SLOPES[2], OFFSETS[2])}


def series(x):
    return x @ tf.constant(SLOPES.T, dtype=x.dtype) + tf.constant(OFFSETS, dtype=x.dtype)


def exact(name: str, thresholds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``beta`` and ``P(f > T)`` of a normal ``f = a . x + b``."""
    a, b = LINEAR[name]
    beta = (thresholds - a @ MU - b) / np.sqrt(np.sum((a * SD) ** 2))
    return beta, stats.norm.sf(beta)


def thresholds_of(name: str) -> np.ndarray:
    """Thresholds at beta 1.5, 2.5 and 3.5 of the functional."""
    a, b = LINEAR[name]
    return a @ MU + b + np.array([1.5, 2.5, 3.5]) * np.sqrt(np.sum((a * SD) ** 2))


def _engine():
    from sensitivity.engine.jacobian import compile_jacobian
    from sensitivity.surrogates.load import load_surrogate

    surrogate = load_surrogate(series, input_names=SPACE.names, input_units=SPACE.units, output=OUTPUT,
                               dtype="float64")
    return compile_jacobian(surrogate, jit_compile=False)


@pytest.mark.parametrize("name", list(LINEAR))
def test_each_functional_of_a_linear_series_gives_beta_and_pf_exact(name):
    """FORM's beta and Pf are the closed form's, importance sampling's interval covers it; the dataset's events are
    on a labeled dim ``functional``."""
    functional = next(f for f in FUNCTIONALS if f["name"] == name)
    thresholds = thresholds_of(name)
    settings = ReliabilitySettings(thresholds=thresholds.tolist(), functionals=(functional,),
                                   form=FormSettings(tolerance=1e-9),
                                   methods=("form", "importance_sampling"),
                                   importance=ImportanceSettings(n_samples=4_000, level=0.999))
    ds = reliability(_engine(), SPACE, settings, seed=2)
    beta, pf = exact(name, thresholds)
    assert ds["pf"].dims == ("reliability_method", "threshold", "functional")
    ds = ds.isel(functional=0)
    np.testing.assert_allclose(ds["form_beta"].values, beta, rtol=1e-8)
    np.testing.assert_allclose(ds["pf"].isel(reliability_method=0).values, pf, rtol=1e-7)
    low, high = ds["pf_interval"].isel(reliability_method=1).values.T
    assert np.all((low <= pf) & (pf <= high))
    assert ds["functional_name"].item() == name and ds["threshold"].attrs["units"] == "m"
    assert ds.attrs["output_selection"] == f"functionals {name}" and ds.attrs["failure"] == "functional > threshold"
    assert summary(ds).facts[0] == Fact("failure", "functional > threshold; 3 thresholds, 1 functionals")


def test_several_functionals_and_thresholds_in_one_call_each_exact():
    """One FORM run of 3 functionals x 3 thresholds: each event's beta is its closed form (where it is within 20:
    the functionals' scales differ, so some events are near certain)."""
    thresholds = np.array([21.0, 43.0, 61.0])
    names = ["total", "average", "peak"]
    settings = ReliabilitySettings(thresholds=thresholds.tolist(), functionals=FUNCTIONALS[:2] + FUNCTIONALS[4:],
                                   form=FormSettings(tolerance=1e-9), methods=("form",))
    ds = reliability(_engine(), SPACE, settings, seed=0)
    assert list(ds["functional_name"].values) == names
    beta = np.stack([exact(name, thresholds)[0] for name in names], axis=1)  # [threshold, functional]
    moderate = np.abs(beta) < 20
    assert moderate.sum() >= 6
    np.testing.assert_allclose(ds["form_beta"].values[moderate], beta[moderate], rtol=1e-6)
    np.testing.assert_allclose(ds["pf"].isel(reliability_method=0).values[moderate], stats.norm.sf(beta[moderate]),
                               rtol=1e-6)


@dataclass
class _Surrogate:
    output: OutputSpec


@dataclass
class ShiftedMembers:
    """An ensemble's engine of the series shifted by ``b_k`` on every day (float64 numpy)."""

    offsets: np.ndarray

    def __post_init__(self) -> None:
        self.members = len(self.offsets)
        self.surrogate = _Surrogate(OutputSpec.from_dict(OUTPUT))

    def values(self, x: np.ndarray) -> np.ndarray:
        return (x @ SLOPES.T + OFFSETS)[None] + self.offsets[:, None, None]

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.values(x), np.broadcast_to(SLOPES, (self.members, len(x), *SLOPES.shape)).copy()


def test_every_members_pf_of_a_functional_is_its_closed_form():
    """Member k's total is the series' total plus ``3 b_k``: FORM and importance sampling give each member's Pf."""
    offsets = np.array([0.3, -0.2, 0.5])
    thresholds = thresholds_of("total")
    settings = ReliabilitySettings(thresholds=thresholds.tolist(), functionals=FUNCTIONALS[:1],
                                   form=FormSettings(tolerance=1e-9), methods=("form", "importance_sampling"))
    ds = reliability(ShiftedMembers(offsets), SPACE, settings, seed=4).isel(functional=0)
    member = exact("total", thresholds[None, :] - 3.0 * offsets[:, None])[1]  # [member, threshold]
    np.testing.assert_allclose(ds["pf_member"].isel(reliability_method=0).values, member, rtol=1e-7)
    np.testing.assert_allclose(ds["pf_member"].isel(reliability_method=1).values, member, rtol=0.15)
    np.testing.assert_allclose(ds["pf"].isel(reliability_method=0).values,
                               exact("total", thresholds - 3.0 * offsets.mean())[1], rtol=1e-7)


@pytest.mark.parametrize("kwargs, message", [
    (dict(functionals=({"name": "weekly", "kind": "sum", "over": ["week"]},)),
     "forecast 'weekly': 'week' is not an output dim; the dims are \\['day'\\]"),
    (dict(functionals=({"name": "late", "at": {"day": 9.0}},)), "`at` day=9.0 is not a coordinate of dim 'day'"),
])
def test_a_functional_the_outputs_do_not_have_fails_in_one_line_in_the_plan(kwargs, message):
    """The plan checks the functionals against the declared outputs: no model is needed."""
    with pytest.raises(ConfigError, match=message) as err:
        plan(SPACE, OutputSpec.from_dict(OUTPUT), ReliabilitySettings(thresholds=[1.0], methods=("form",), **kwargs))
    assert "\n" not in str(err.value)


def test_functionals_of_several_units_are_refused_under_one_threshold_list():
    spec = OutputSpec.from_dict({"name": "y", "units": ["m", "s"], "dims": [{"name": "quantity",
                                                                             "values": ["h", "t"]}]})
    settings = ReliabilitySettings(thresholds=[1.0], methods=("form",), functionals=(
        {"name": "h", "at": {"quantity": "h"}}, {"name": "t", "at": {"quantity": "t"}}))
    with pytest.raises(ConfigError, match="`functionals` have several units \\['m', 's'\\]"):
        plan(SPACE, spec, settings)


@pytest.mark.parametrize("kwargs, message", [
    (dict(functionals=FUNCTIONALS[:1], output={"day": 1.0}), "`output` and `functionals` are exclusive"),
    (dict(functionals=FUNCTIONALS[:1], methods=("form", "sorm")), "'sorm' takes the outputs' own Hessians"),
    (dict(functionals=({"name": "total", "kind": "median", "over": ["day"]},)), "`kind` must be one of"),
])
def test_bad_functional_settings_fail_in_one_line(kwargs, message):
    with pytest.raises(ConfigError, match=message) as err:
        ReliabilitySettings(thresholds=[1.0], **kwargs)
    assert "\n" not in str(err.value)
