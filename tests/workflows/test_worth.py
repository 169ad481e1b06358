"""Workflow `worth` on the SEIR demo: the worth of every unobserved day for three forecasts and greedy designs of 10,
checked against Bayes' rule by direct inversion of the information matrix at the best fit (float64 numpy), and its
one-line refusals before the model loads."""
from __future__ import annotations

import json
import re
import subprocess
import time

import numpy as np
import pytest
import xarray as xr
import yaml

from sensitivity.datasets import open_result, read_estimate, record_checksum
from sensitivity.errors import ConfigError, DataError
from tests.helpers import CLI, ROOT
from tests.helpers.cf import cf_errors
from workflows import calibrate, worth
from workflows.plumbing import build

FORECASTS = ("peak_daily_infections", "cumulative_cases", "infections_on_day_90")
OBSERVED_DAYS, CANDIDATE_DAYS = np.arange(1, 71), np.arange(71, 101)  # data/seir/observations.nc: days 1-70
CALIBRATE = ["experiment=seir_worth", "starts.n=8", "step_slice.enabled=false", "plots=false"]


def compose(name: str, overrides: list[str], output_dir):
    from hydra import compose as hydra_compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from workflows.plumbing.registry import CONF_DIR
    from workflows.plumbing.schema import register

    register()
    GlobalHydra.instance().clear()
    with initialize_config_dir(str(CONF_DIR), version_base=None):
        cfg = hydra_compose(name, overrides=[f"output_dir={output_dir}", "progress=false", *overrides])
    GlobalHydra.instance().clear()
    return cfg


@pytest.fixture(scope="module")
def seir(tmp_path_factory):
    """The SEIR calibration (8 starts + nominal) and the worth study at its best fit; ``(calibration, worth.nc,
    seconds of the worth run)``."""
    root = tmp_path_factory.mktemp("seir_worth")
    calibration = calibrate.run(compose("calibrate", CALIBRATE, root / "calibrate"))
    t0 = time.perf_counter()
    result = worth.run(compose("worth", ["experiment=seir_worth", f"calibration={calibration}"], root / "worth"))
    seconds = time.perf_counter() - t0
    print(f"\nworth workflow on the SEIR demo (30 candidates, 3 forecasts, 3 designs of 10, figures): {seconds:.2f} s "
          f"wall, the verb {open_result(result).attrs['analysis_seconds']} s")
    return calibration, result, seconds


def reference(calibration):
    """Values ``[100]`` and Jacobian ``[100, 6]`` of the surrogate at the best fit (float64), the observations'
    sigma, the prior (the space's uniform marginals: (high - low)^2 / 12) and the forecasts' gradients ``[6, 3]``."""
    from sensitivity.engine.jacobian import compile_jacobian
    from sensitivity.surrogates.load import load_surrogate

    space = yaml.safe_load((ROOT / "conf" / "space" / "seir.yaml").read_text())["parameters"]
    names = [p["name"] for p in space]
    x = read_estimate(calibration, names=names).mean
    surrogate = load_surrogate(str(ROOT / "data" / "seir" / "surrogate.keras"), input_names=names, dtype="float64")
    values, jac = compile_jacobian(surrogate, "forward")(x[None, :])
    y, J = values[0].astype(float), jac[0].astype(float)
    with xr.open_dataset(ROOT / "data" / "seir" / "observations.nc") as obs:
        sigma = obs["sigma"].values.astype(float)
        assert np.array_equal(np.flatnonzero(np.isfinite(obs["observed"].values)), OBSERVED_DAYS - 1)
    prior = np.diag([(p["high"] - p["low"]) ** 2 / 12 for p in space])
    g = np.stack([J[np.argmax(y)], J.sum(axis=0), J[89]], axis=1)
    return y, J, sigma, prior, g


def posterior_variance(J, sigma, prior, g, rows, extra_rows=(), extra_sigma=()):
    """``g^T (J_o^T W J_o + C_p^-1)^-1 g`` by direct inversion (the forecasts' posterior variances)."""
    rows, extra_rows = list(rows), list(extra_rows)
    A = J[rows + extra_rows]
    w = np.r_[1.0 / sigma[rows] ** 2, 1.0 / np.asarray(extra_sigma, float) ** 2]
    information = A.T @ (w[:, None] * A) + np.linalg.inv(prior)
    return np.einsum("pf,pf->f", g, np.linalg.solve(information, g))


def test_the_worth_of_every_unobserved_day_and_the_designs(seir):
    calibration, path, _ = seir
    ds = open_result(path)
    assert cf_errors(path) == []
    published = json.loads((path.parent / "manifest.json").read_text())["files"]
    assert {"worth.nc", "worth_candidates.png", "worth_designs.png", "worth_contributions.png"} <= set(published)
    assert list(ds["forecast_name"].values) == list(FORECASTS)
    assert ds["added_worth"].dims == ("forecast", "day") and ds["removed_worth"].dims == ("forecast", "day")
    added, removed = ds["added_worth"].values, ds["removed_worth"].values
    assert np.isfinite(added[:, CANDIDATE_DAYS - 1]).all() and np.isnan(added[:, OBSERVED_DAYS - 1]).all()
    assert np.isfinite(removed[:, OBSERVED_DAYS - 1]).all() and np.isnan(removed[:, CANDIDATE_DAYS - 1]).all()
    assert (added[:, CANDIDATE_DAYS - 1] >= 0).all() and (removed[:, OBSERVED_DAYS - 1] >= 0).all()
    assert (ds["posterior_variance"] < ds["prior_variance"]).all()
    assert ds.attrs["n_observed"] == 70 and ds.attrs["n_candidates"] == 30
    assert list(ds["design_name"].values) == list(FORECASTS) and ds.sizes["step"] == 10
    for f in range(3):
        chosen = [int(re.search(r"day=(\d+)", c).group(1)) for c in ds["design_choice"].values[f]]
        assert len(set(chosen)) == 10 and set(chosen) <= set(CANDIDATE_DAYS)
        assert chosen[0] == int(CANDIDATE_DAYS[np.argmax(added[f, CANDIDATE_DAYS - 1])])  # step 1: the best single
        assert (np.diff(ds["design_variance"].values[f, :, f]) <= 0).all()


def test_the_worth_of_a_candidate_equals_direct_inversion_at_the_best_fit(seir):
    """Oracle: the surrogate's Jacobian at the best fit (compiled here), the information matrix
    ``J_o^T W J_o + C_p^-1`` inverted in float64 numpy, with and without one candidate day (noise 10 % of the model's
    value there, the default ``candidate_relative_sigma``), and with the ten days of each design added."""
    calibration, path, _ = seir
    ds = open_result(path)
    y, J, sigma, prior, g = reference(calibration)
    observed = list(OBSERVED_DAYS - 1)
    np.testing.assert_allclose(ds["forecast_value"].values, [y.max(), y.sum(), y[89]], rtol=1e-10)
    np.testing.assert_allclose(ds["prior_variance"].values, np.einsum("pf,pq,qf->f", g, prior, g), rtol=1e-10)
    base = posterior_variance(J, sigma, prior, g, observed)
    np.testing.assert_allclose(ds["posterior_variance"].values, base, rtol=1e-7)
    for day in (71, 85, 100):
        added = posterior_variance(J, sigma, prior, g, observed, [day - 1], [0.1 * abs(y[day - 1])])
        np.testing.assert_allclose(ds["added_worth"].sel(day=day).values, base - added, rtol=1e-6)
    dropped = [d for d in observed if d != 39]
    np.testing.assert_allclose(ds["removed_worth"].sel(day=40).values,
                               posterior_variance(J, sigma, prior, g, dropped) - base, rtol=1e-6)
    for f in range(3):
        days = [int(re.search(r"day=(\d+)", c).group(1)) - 1 for c in ds["design_choice"].values[f]]
        after = posterior_variance(J, sigma, prior, g, observed, days, 0.1 * np.abs(y[days]))
        np.testing.assert_allclose(ds["design_variance"].values[f, -1], after, rtol=1e-6)


def singular_prior_calibration(calibration, tmp_path):
    """The calibration, as if it had been fitted with a singular Gaussian prior (rank 5 of 6)."""
    with xr.open_dataset(calibration) as ds:
        edited = ds.load()
    cov = np.diag([0.01, 1.0, 1.0, 1e-8, 100.0, 0.0])
    edited["prior_mean"] = ("parameter", edited["estimate"].values[0])
    edited["prior_covariance"] = (("parameter_i", "parameter_j"), cov)
    path = tmp_path / "calibration.nc"
    edited.to_netcdf(path)
    record_checksum(path)
    return path


#: A bad input per check that needs no model: overrides, the error, a part of its message.
BAD = {
    "forecast over an unknown dim": (["forecasts=[{name: weekly, kind: sum, over: [week]}]"], ConfigError,
                                     "forecast 'weekly': 'week' is not an output dim; the dims are ['day']"),
    "candidate already observed": (["candidates={day: [60, 80]}"], ConfigError,
                                   "candidates: new_infections[day=60] is already observed"),
    "singular prior": (["calibration={singular}"], ConfigError, "prior covariance must be positive definite"),
    "design of no forecast": (["design.forecast=peak"], ConfigError, "design.forecast 'peak' is not one of"),
    "grouping by no dim": (["group_candidates_by=week"], ConfigError, "`group_candidates_by` 'week' is not an output"),
    "unknown prior source": (["prior_source=flat"], ConfigError, "`prior_source` must be one of"),
    "no noise": (["observations.path={no_sigma}", "allow_other_sources=true"], DataError,
                 "no `sigma` or `cov` variable"),
    "missing calibration": (["calibration={missing}"], DataError, "`calibration`: result not found: "),
}


def _overrides(case, calibration, tmp_path):
    no_sigma = tmp_path / "observations.nc"
    with xr.open_dataset(ROOT / "data" / "seir" / "observations.nc") as obs:
        obs.load().drop_vars("sigma").to_netcdf(no_sigma)
    singular = singular_prior_calibration(calibration, tmp_path) if case == "singular prior" else None
    missing = tmp_path / "calibrate" / "calibration.nc"
    return [f"calibration={calibration}", *(o.replace("{singular}", str(singular)).replace("{no_sigma}", str(no_sigma))
                                          .replace("{missing}", str(missing)) for o in BAD[case][0])]


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_before_the_model_loads_and_nothing_is_published(seir, tmp_path, monkeypatch, case):
    calibration, _, _ = seir
    monkeypatch.setattr(build, "surrogate_from", lambda *a, **k: pytest.fail("the model was loaded"))
    cfg = compose("worth", ["experiment=seir_worth", *_overrides(case, calibration, tmp_path)], tmp_path / "out")
    with pytest.raises(BAD[case][1]) as err:
        worth.run(cfg)
    assert BAD[case][2] in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "out" / "worth.nc").exists() and not (tmp_path / "out" / "manifest.json").exists()


@pytest.mark.slow
@pytest.mark.parametrize("case", ["forecast over an unknown dim", "candidate already observed", "singular prior"])
def test_the_command_line_exits_non_zero_with_one_line(seir, tmp_path, case):
    calibration, _, _ = seir
    out = subprocess.run(CLI + ["worth", "experiment=seir_worth", *_overrides(case, calibration, tmp_path),
                                f"hydra.run.dir={tmp_path / 'run'}"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode != 0
    text = out.stdout + out.stderr
    assert len([line for line in text.splitlines() if BAD[case][2] in line]) == 1, text
    assert "Traceback" not in text
    assert not (tmp_path / "run" / "worth.nc").exists()


def test_the_report_reads_the_forecasts_of_worth_nc(seir):
    """The study's report: a worth.nc is told by its variables, its table holds the file's numbers."""
    from workflows.report.kinds import kind_of

    _, path, _ = seir
    ds = open_result(path)
    kind = kind_of(ds)
    assert kind.name == "data worth"
    summary = kind.summarize(ds)
    (table,) = summary.tables
    assert [row[0].text for row in table.rows] == list(FORECASTS)
    for row, prior, post in zip(table.rows, ds["prior_variance"].values, ds["posterior_variance"].values):
        assert float(row[3].text) == pytest.approx(np.sqrt(prior), rel=1e-3)
        assert float(row[4].text) == pytest.approx(np.sqrt(post), rel=1e-3)
    assert [f.label for f in summary.facts][1:] == [f"design for {name}" for name in FORECASTS]
    assert summary.warnings == ()


#: Three linear members y_k = W_k x + b_k of the SEIR demo's shape (6 parameters -> 100 days): members that differ.
MEMBER_RNG = np.random.default_rng(21)


@pytest.fixture(scope="module")
def linear_ensemble(tmp_path_factory):
    """An ensemble of three exactly linear members written by ``write_ensemble``, calibrated to the demo's
    observations, and its worth study; ``(weights [K, 100, 6] as stored, biases [K, 100], calibration, worth.nc)``."""
    from sensitivity.outputs.spec import OutputSpec
    from sensitivity.surrogates.ensemble import write_ensemble
    from tests.helpers.models import linear_members

    root = tmp_path_factory.mktemp("worth_ensemble")
    space = yaml.safe_load((ROOT / "conf" / "space" / "seir.yaml").read_text())["parameters"]
    names, width = [p["name"] for p in space], np.array([p["high"] - p["low"] for p in space])
    output = OutputSpec.from_dict(yaml.safe_load((ROOT / "conf" / "model" / "seir.yaml").read_text())["output"])
    shape = np.sin(np.linspace(0, np.pi, 100))[:, None] * np.linspace(1, 2, 6)[None, :]
    weights = (shape + MEMBER_RNG.normal(0, 0.4, (3, 100, 6))) * 40 / width
    biases = MEMBER_RNG.normal(-15, 1, (3, 100))
    models = linear_members(weights, biases, names, output.to_dict(), [p["units"] for p in space])
    path = write_ensemble(root / "linear.ensemble", lambda k, file: models[k].save(file),
                          [{"seed": k} for k in range(3)])
    model = [f"model.source={path}"]
    calibration = calibrate.run(compose("calibrate", CALIBRATE + model + ["emulator.enabled=false"],
                                        root / "calibrate"))
    result = worth.run(compose("worth", ["experiment=seir_worth", f"calibration={calibration}", "plots=false",
                                         "candidate_sigma=5.0", "candidate_relative_sigma=0.0", *model],
                               root / "worth"))
    stored = weights.astype(np.float32).astype(float), biases.astype(np.float32).astype(float)  # Keras keeps float32
    return *stored, calibration, result


def member_worth(a, b, x, sigma, prior):
    """Closed form of one linear model ``y = a x + b`` at ``x``: posterior forecast variances and the worth of each
    candidate day (noise 5) by direct inversion; the peak's gradient is the row of its largest value."""
    g = np.stack([a[np.argmax(a @ x + b)], a.sum(axis=0), a[89]], axis=1)
    observed = list(OBSERVED_DAYS - 1)
    base = posterior_variance(a, sigma, prior, g, observed)
    added = np.stack([base - posterior_variance(a, sigma, prior, g, observed, [d - 1], [5.0]) for d in CANDIDATE_DAYS])
    return base, added.T


def test_the_worth_on_an_ensemble_per_member_with_the_spread_and_the_ranking_verdict(linear_ensemble):
    """Oracle: each linear member's Jacobian is its weight matrix, so its worth is Bayes' rule by direct inversion
    with that matrix; the ensemble mean's with the mean matrix; the verdict from scipy's Spearman of those."""
    from scipy import stats

    from sensitivity.analyses.worth import summary as worth_summary

    weights, biases, calibration, path = linear_ensemble
    ds = open_result(path)
    assert cf_errors(path) == []
    assert ds.attrs["ensemble_members"] == 3 and ds["added_worth_member"].dims == ("member", "forecast", "day")
    space = yaml.safe_load((ROOT / "conf" / "space" / "seir.yaml").read_text())["parameters"]
    x = read_estimate(calibration, names=[p["name"] for p in space]).mean
    with xr.open_dataset(ROOT / "data" / "seir" / "observations.nc") as obs:
        sigma = obs["sigma"].values.astype(float)
    prior = np.diag([(p["high"] - p["low"]) ** 2 / 12 for p in space])
    members = [member_worth(a, b, x, sigma, prior) for a, b in zip(weights, biases)]
    mean_base, mean_added = member_worth(weights.mean(axis=0), biases.mean(axis=0), x, sigma, prior)
    for k, (base, added) in enumerate(members):
        np.testing.assert_allclose(ds["posterior_variance_member"].values[k], base, rtol=1e-7)
        np.testing.assert_allclose(ds["added_worth_member"].values[k][:, CANDIDATE_DAYS - 1], added, rtol=1e-6)
    np.testing.assert_allclose(ds["added_worth"].values[:, CANDIDATE_DAYS - 1], mean_added, rtol=1e-6)
    np.testing.assert_allclose(ds["added_worth_surrogate_std"].values[:, CANDIDATE_DAYS - 1],
                               np.std([a for _, a in members], axis=0, ddof=1), rtol=1e-6)
    for k, (_, added) in enumerate(members):
        for f in range(3):
            assert ds["added_worth_rank_correlation"].values[k, f] == pytest.approx(
                stats.spearmanr(mean_added[f], added[f]).statistic, abs=1e-9)
            best = f"new_infections[day={CANDIDATE_DAYS[np.argmax(added[f])]}]"
            assert str(ds["added_worth_best_member"].values[k, f]) == best
    verdicts = worth_summary(ds).verdicts
    assert [v.holds for v in verdicts] == [bool(r) for r in ds["worth_ranking_robust"].values]
    assert [v.subject for v in verdicts] == [f"worth ranking of {name} robust to the surrogate" for name in FORECASTS]
