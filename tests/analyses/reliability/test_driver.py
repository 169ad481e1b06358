"""The verb on compiled float64 function surrogates: closed forms for FORM, SORM and importance sampling, the
Hessian pulled back through lognormal marginals, series outputs picked by label, the dataset and its summary."""
from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf
from scipy import stats

from sensitivity.analyses.reliability import ReliabilitySettings, plan, reliability, select_outputs
from sensitivity.analyses.reliability.summary import summary
from sensitivity.datasets.summary import Fact
from sensitivity.analyses.reliability.form import FormSettings
from sensitivity.errors import ConfigError
from sensitivity.inputs.space import ParameterSpace
from sensitivity.outputs.spec import OutputSpec
from tests.helpers.reliability import engine, space_of

DAYS = [0.0, 1.0, 2.0, 3.0]


_engine, _space = engine, space_of


def margin_and_ratio(x):
    """``[R - S, R / S]`` on a labeled dim ``quantity``."""
    return tf.stack([x[:, 0] - x[:, 1], x[:, 0] / x[:, 1]], axis=1)


QUANTITY = {"name": "y", "units": "1", "dims": [{"name": "quantity", "values": ["margin", "ratio"]}]}


def test_linear_margin_of_normals_is_exact_in_form_sorm_and_importance_sampling():
    """R ~ N(5, 1), S ~ N(2, 0.5): P(R - S < T) = Phi((T - 3) / sqrt(1.25)), for five thresholds in one call."""
    space = _space([{"kind": "norm", "loc": 5.0, "scale": 1.0},
                    {"kind": "norm", "loc": 2.0, "scale": 0.5}])
    engine = _engine(margin_and_ratio, space, QUANTITY)
    thresholds = [-1.0, 0.0, 0.5, 1.0, 2.0]
    settings = ReliabilitySettings(thresholds=thresholds, direction="below", output={"quantity": "margin"},
                                   form=FormSettings(tolerance=1e-8))
    ds = reliability(engine, space, settings, seed=1)
    exact = stats.norm.cdf((np.array(thresholds) - 3.0) / np.sqrt(1.25))
    ds = ds.isel(output=0)  # one picked output: a flat axis of one, labeled y[quantity=margin]
    pf = ds["pf"].sel(reliability_method=[0, 1, 2, 3]).values  # form, three SORMs: curvatures 0
    np.testing.assert_allclose(pf, np.broadcast_to(exact, pf.shape), rtol=1e-7)
    np.testing.assert_allclose(ds["curvature"].values, 0.0, atol=1e-7)
    low, high = ds["pf_interval"].isel(reliability_method=4).values.T
    assert np.all((low <= exact) & (exact <= high))
    assert (ds["disagrees"].values[:4] == 0).all() and (ds["disagrees"].values[4] == -1).all()
    alpha2 = np.array([1.0, 0.25]) / 1.25  # importance factors sigma_i^2 / sum sigma^2
    np.testing.assert_allclose(ds["importance"].isel(design_point=0).values, np.broadcast_to(alpha2, (5, 2)),
                               rtol=1e-7)
    np.testing.assert_allclose(ds["dbeta_dthreshold"].isel(design_point=0).values, -1.0 / np.sqrt(1.25), rtol=1e-7)
    assert ds["output_name"].item() == "y[quantity=margin]" and ds.attrs["output_selection"] == "quantity=margin"
    assert Fact("verdict", "form disagrees with importance_sampling on 0 of 5 events") in summary(ds).facts


def test_sensitivities_to_the_distribution_parameters_and_the_threshold_in_the_dataset():
    """R ~ N(5, 1) [kN], S ~ N(2, 0.5) [kN], failure R - S < T: beta = (3 - T) / s, s^2 = 1.25, so d beta / d
    loc_R = 1 / s, d beta / d scale_R = -beta / s^2, d beta / d loc_S = -1 / s, d beta / d scale_S = -0.5 beta / s^2,
    d pf / d theta = -phi(beta) d beta / d theta and d pf / d T = phi(beta) / s."""
    space = ParameterSpace.from_records([{"name": n, "units": "kN", "distribution": d} for n, d in
                                         (("R", {"kind": "norm", "loc": 5.0, "scale": 1.0}),
                                          ("S", {"kind": "norm", "loc": 2.0, "scale": 0.5}))])
    engine = _engine(margin_and_ratio, space, {**QUANTITY, "units": "kN"})
    thresholds = np.array([0.0, 1.0])
    settings = ReliabilitySettings(thresholds=list(thresholds), direction="below", output={"quantity": "margin"},
                                   methods=("form",), form=FormSettings(tolerance=1e-8))
    ds = reliability(engine, space, settings, seed=1).isel(output=0)
    s = np.sqrt(1.25)
    beta = (3.0 - thresholds) / s
    exact = np.stack([np.full(2, 1 / s), -beta / s**2, np.full(2, -1 / s), -0.5 * beta / s**2], axis=1)
    assert list(ds["distribution_parameter_name"].values) == ["R.loc", "R.scale", "S.loc", "S.scale"]
    np.testing.assert_allclose(ds["dbeta_ddistribution"].isel(design_point=0).values, exact, rtol=1e-6)
    np.testing.assert_allclose(ds["dpf_ddistribution"].values, -stats.norm.pdf(beta)[:, None] * exact, rtol=1e-6)
    np.testing.assert_allclose(ds["dpf_dthreshold"].values, stats.norm.pdf(beta) / s, rtol=1e-6)
    assert ds["dbeta_ddistribution"].attrs["units"] == "kN-1" and ds["dpf_dthreshold"].attrs["units"] == "(kN)-1"


def test_lognormal_ratio_is_a_plane_in_u_so_the_pulled_back_hessian_gives_zero_curvature():
    """R, S lognormal: {R / S < T} = {ln R - ln S < ln T}, a hyperplane in u: beta exact, and the curvatures of
    the SORM Hessian (nonzero in x, nonzero x'') must cancel to 0."""
    space = _space([{"kind": "lognorm", "s": 0.2, "scale": 5.0},
                    {"kind": "lognorm", "s": 0.3, "scale": 2.0}])
    engine = _engine(margin_and_ratio, space, QUANTITY)
    thresholds = [1.0, 1.5]
    ds = reliability(engine, space, ReliabilitySettings(thresholds=thresholds, direction="below",
                                                        output={"quantity": ["ratio"]}, methods=("form", "sorm"),
                                                        form=FormSettings(tolerance=1e-9)))
    beta = (np.log(2.5) - np.log(thresholds)) / np.hypot(0.2, 0.3)
    np.testing.assert_allclose(ds["form_beta"].values[:, 0], beta, rtol=1e-7)
    np.testing.assert_allclose(ds["curvature"].values, 0.0, atol=1e-6)
    np.testing.assert_allclose(ds["pf"].values[1:], np.broadcast_to(stats.norm.sf(beta)[:, None], (3, 2, 1)),
                               rtol=1e-6)
    assert ds["pf"].dims == ("reliability_method", "threshold", "quantity")


def paraboloid(x):
    return (x[:, 2] - 0.5 * (0.3 * x[:, 0] ** 2 + 0.1 * x[:, 1] ** 2))[:, None]


def test_paraboloid_sorm_is_breitungs_closed_form_with_its_curvatures():
    """y = x3 - (0.3 x1^2 + 0.1 x2^2) / 2 of standard normals, failure y > beta: principal curvatures
    {0.1, 0.3}, Breitung's Phi(-beta) prod (1 + beta kappa)^-1/2, and importance sampling within its interval
    of the exact content (scipy quadrature of the chi-square mixture)."""
    space = _space([{"kind": "norm", "loc": 0.0, "scale": 1.0}] * 3)
    engine = _engine(paraboloid, space, None)
    beta = 3.0
    ds = reliability(engine, space, ReliabilitySettings(thresholds=[beta], form=FormSettings(tolerance=1e-9)), seed=3)
    np.testing.assert_allclose(ds["curvature"].values.ravel(), [0.1, 0.3], rtol=1e-6)
    breitung = stats.norm.sf(beta) / np.sqrt(1.3 * 1.9)
    np.testing.assert_allclose(ds["pf"].sel(reliability_method=1).values, breitung, rtol=1e-7)
    from scipy import integrate

    def inner(a, b):  # P(X3 > beta + (0.3 a^2 + 0.1 b^2) / 2)
        return stats.norm.sf(beta + 0.15 * a * a + 0.05 * b * b) * stats.norm.pdf(a) * stats.norm.pdf(b)

    exact, _ = integrate.dblquad(inner, -12, 12, -12, 12, epsabs=1e-13)
    low, high = ds["pf_interval"].sel(reliability_method=4).values.ravel()
    assert low <= exact <= high


def decay(x):
    t = tf.constant(DAYS, dtype=x.dtype)
    return x[:, :1] * tf.exp(-x[:, 1:2] * t[None, :])


def test_a_series_gives_pf_per_day_and_threshold_in_one_call():
    """a ~ N(10, 1), k fixed-ish N(0.2, 1e-3): P(a exp(-k t) > T) per day against Phi(-(T e^{kt} - 10))
    (k nearly constant), for every day x threshold of one run."""
    space = _space([{"kind": "norm", "loc": 10.0, "scale": 1.0},
                    {"kind": "norm", "loc": 0.2, "scale": 1e-6}])
    output = {"name": "amount", "units": "kg", "dims": [{"name": "day", "values": DAYS, "units": "day"}]}
    engine = _engine(decay, space, output)
    thresholds = np.array([6.0, 8.0, 10.0])
    ds = reliability(engine, space, ReliabilitySettings(thresholds=thresholds.tolist(), methods=("form",)))
    exact = stats.norm.sf(thresholds[:, None] * np.exp(0.2 * np.array(DAYS))[None, :] - 10.0)
    np.testing.assert_allclose(ds["pf"].sel(reliability_method=0).values, exact, rtol=1e-4)
    assert ds["pf"].dims == ("reliability_method", "threshold", "day")
    assert ds["threshold"].attrs["units"] == "kg" and list(ds["day"].values) == DAYS


def test_select_outputs_picks_by_label_keeps_dims_and_refuses_unknowns_in_one_line():
    spec = OutputSpec.from_dict({"name": "c", "units": "1", "dims": [
        {"name": "species", "values": ["S", "I", "R"]}, {"name": "day", "values": [0, 1, 2, 3], "units": "day"}]})
    indices, picked = select_outputs(spec, {"species": "I"})
    assert indices.tolist() == [4, 5, 6, 7] and picked.dim_names == ("day",)
    indices, picked = select_outputs(spec, {"species": ["R", "S"], "day": 2})
    assert indices.tolist() == [10, 2] and picked.dim_names == ("species",)
    indices, picked = select_outputs(spec, {"species": "S", "day": 3})
    assert indices.tolist() == [3] and picked.flat_names() == ["c[species=S,day=3]"]
    with pytest.raises(ConfigError, match="unknown dim 'age'; the output 'c' has dims"):
        select_outputs(spec, {"age": 3})
    with pytest.raises(ConfigError, match=r"`output.species`: 'E' is not on the dim; it has \['S', 'I', 'R'\]"):
        select_outputs(spec, {"species": "E"})


@pytest.mark.parametrize("kwargs, message", [
    (dict(thresholds=[]), "`thresholds` must be a non-empty list"),
    (dict(thresholds=[1.0, 50.0], output_range=(0.0, 10.0)), "recorded range \\[0, 10\\], got 50"),
    (dict(thresholds=[1.0], methods=("sorm",)), "'sorm' needs 'form'"),
    (dict(thresholds=[1.0], methods=("form", "kriging")), "`methods` must be one of"),
    (dict(thresholds=[1.0], direction="over"), "`direction` must be one of"),
])
def test_bad_settings_fail_in_one_line(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        ReliabilitySettings(**kwargs)


def test_plan_refuses_outputs_of_several_units_under_one_threshold():
    spec = OutputSpec(name="y", units=("m", "s"), dims=(OutputSpec.from_dict(QUANTITY).dims[0],))
    space = _space([{"kind": "norm", "loc": 0.0, "scale": 1.0}])
    with pytest.raises(ConfigError, match="several units"):
        plan(space, spec, ReliabilitySettings(thresholds=[1.0]))
