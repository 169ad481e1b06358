"""The `verify` workflow end to end: a calibration and Sobol' indices of a surrogate checked against a simulator that
is the surrogate (the verdict holds) and against one that is not (it fails, by the amount the closed form says)."""
from __future__ import annotations

import importlib
import numpy as np
import pytest

from sensitivity.datasets import open_result
from sensitivity.errors import ConfigError, DataError
from tests.helpers.calibration_models import LINEAR, LINEAR_W, linear_observations
from workflows import calibrate, indices, verify

LINEAR_SIMULATOR = "verify.simulator=sensitivity.simulators.analytic:linear"


@pytest.mark.parametrize("scale, holds", [(1.0, True), (1.3, False)])
def test_a_calibration_is_verified_by_the_shift_the_simulator_makes(compose_config, tmp_path, scale, holds):
    path, y, sigma = linear_observations(tmp_path)
    common = [*LINEAR, f"observations.path={path}"]
    fit = calibrate.run(compose_config("calibrate", common, output_dir=tmp_path / "calibrate"))
    truth = (LINEAR_W * scale).tolist()
    cfg = compose_config("verify", [*common, LINEAR_SIMULATOR, f"+verify.simulator_kwargs.weights={truth}",
                                    f"verify.calibration={fit}"], output_dir=tmp_path / "verify")
    ds = open_result(verify.run(cfg))
    best = open_result(fit).isel(start=int(open_result(fit)["best_start"]))["estimate"].values
    error = (LINEAR_W - LINEAR_W * scale) @ best
    np.testing.assert_allclose(ds["calibration_surrogate_error"].isel(fit_point=0).values, error, atol=1e-9)
    shift = np.linalg.lstsq(LINEAR_W / sigma[:, None], error / sigma, rcond=None)[0]
    np.testing.assert_allclose(ds["calibration_estimate_shift"].values, shift, rtol=1e-6, atol=1e-9)
    assert int(ds["calibration_verdict"]) == holds
    assert ds.attrs["verdict"] == ("holds" if holds else "fails")
    assert list(ds["output_name"].values) == ["o1", "o2", "o3", "o4", "o5"]
    # a rerun finds the complete result set and does no work
    assert verify.run(cfg) == tmp_path / "verify" / "verify.nc"


def test_sobol_indices_are_verified_on_the_first_rows_of_their_design(compose_config, tmp_path, caplog):
    common = ["jacobian=float64", "jacobian.jit_compile=false"]
    result = indices.run(compose_config("indices", [*common, "methods=[sobol]", "sobol.n=1024", "plots=false"],
                                        output_dir=tmp_path / "indices"))
    same = open_result(verify.run(compose_config("verify", [
        *common, "verify.simulator=sensitivity.simulators.analytic:ishigami", f"verify.indices={result}",
        "verify.sobol_rows=128"], output_dir=tmp_path / "same")))
    assert int(same["sobol_verdict"]) == 1
    np.testing.assert_allclose(same["sobol_ST_error"].values, 0.0, atol=1e-6)
    other = open_result(verify.run(compose_config("verify", [
        *common, "verify.simulator=sensitivity.simulators.analytic:ishigami", "+verify.simulator_kwargs.a=3.0",
        f"verify.indices={result}", "verify.sobol_rows=128"], output_dir=tmp_path / "other")))
    # a = 3 instead of 7: the x2 term's share of the variance falls from 0.44 to ~0.13
    assert int(other["sobol_verdict"]) == 0
    assert float(other["sobol_S1_error"].isel(parameter=1, output=0)) > 0.2
    # the log names the worst index and parameter, and the share within one half-width
    ratios = {k: other[f"sobol_{k}_error_ratio"].values[:, 0] for k in ("S1", "ST")}
    index = max(ratios, key=lambda k: ratios[k].max())
    name = str(other["parameter_name"].values[int(np.argmax(ratios[index]))])
    within = np.mean(np.concatenate(list(ratios.values())) <= 1)
    assert f"sampling half-widths ({index} of {name}); {within:.0%} of the (index, parameter, output) triples" in \
        caplog.text


def test_nothing_to_verify_and_missing_inputs_are_refused(compose_config, tmp_path):
    with pytest.raises(ConfigError, match="nothing to verify"):
        verify.run(compose_config("verify", ["verify.simulator=sensitivity.simulators.analytic:ishigami"]))
    with pytest.raises(ConfigError, match="verify.simulator.*no training.nc beside model.source"):
        verify.run(compose_config("verify", [f"verify.indices={tmp_path / 'indices.nc'}"]))
    with pytest.raises(DataError, match="not found"):
        verify.run(compose_config("verify", ["verify.simulator=sensitivity.simulators.analytic:ishigami",
                                             f"verify.indices={tmp_path / 'indices.nc'}"]))


def test_indices_without_sobol_intervals_are_refused_before_the_simulator_runs(compose_config, tmp_path):
    common = ["jacobian=float64", "jacobian.jit_compile=false"]
    result = indices.run(compose_config("indices", [*common, "methods=[local, morris]", "plots=false"],
                                        output_dir=tmp_path / "indices"))
    cfg = compose_config("verify", [*common, "verify.simulator=tests.workflows.test_verify:_never_run",
                                    f"verify.indices={result}"], output_dir=tmp_path / "verify")
    with pytest.raises(ConfigError, match=r"`verify.indices`: .* holds no Sobol' indices with sampling intervals .*"
                                          r"its methods: local, morris\): .* run indices with `sobol` among"):
        verify.run(cfg)
    assert not (tmp_path / "verify").exists() or not any((tmp_path / "verify").glob("*.nc"))


def _never_run(x: np.ndarray) -> np.ndarray:
    raise AssertionError("the simulator ran before the indices were checked")


def _ishigami(x: np.ndarray) -> np.ndarray:
    """The Ishigami function (a = 7, b = 0.1) written here in numpy: the reference the refined surrogate is judged by."""
    return np.sin(x[:, 0]) + 7.0 * np.sin(x[:, 1]) ** 2 + 0.1 * x[:, 2] ** 4 * np.sin(x[:, 0])


def _ensemble_mean(path, points: np.ndarray) -> np.ndarray:
    """``[P]`` the mean of the ensemble's members at ``points`` (float64)."""
    from sensitivity import load_surrogate
    from sensitivity.engine.ensemble import compile_ensemble

    ensemble = compile_ensemble(load_surrogate(path, dtype="float64"), jit_compile=False)
    return ensemble.values(points).mean(axis=0).reshape(-1)


def _relative_rms(path, points: np.ndarray) -> float:
    """The ensemble mean's error at ``points`` against :func:`_ishigami`, relative to the function's spread there."""
    truth = _ishigami(points)
    return float(np.sqrt(((_ensemble_mean(path, points) - truth) ** 2).mean()) / truth.std())


@pytest.mark.slow
def test_refinement_retrains_an_under_trained_ensemble_where_its_members_disagree(compose_config, tmp_path, caplog):
    from sensitivity.analyses.indices import sobol
    from sensitivity.sweep.from_file import read_samples
    from workflows import train
    from workflows.plumbing import build

    common = ["model=ishigami", "space=ishigami", "jacobian=float64", "jacobian.jit_compile=false"]
    source = train.run(compose_config("train", [
        *common, "grid.n=48", "training.simulator=sensitivity.simulators.analytic:ishigami", "training.members=3",
        "training.epochs=1000", "training.hidden=[64,64]", "training.batch_size=16", "training.patience=200",
        "training.derivative_points=0"], output_dir=tmp_path / "train"))
    model = [f"model.source={source}", "model.kwargs={}"]
    result = indices.run(compose_config("indices", [*common, *model, "methods=[sobol]", "sobol.n=256", "plots=false"],
                                        output_dir=tmp_path / "indices"))
    cfg = compose_config("verify", [*common, *model,  # no verify.simulator: the one training.nc records
                                    f"verify.indices={result}", "verify.sobol_rows=32", "refine.rounds=2",
                                    "refine.runs_per_round=64"], output_dir=tmp_path / "verify")
    with caplog.at_level("INFO", logger="sensitivity.training.driver"):
        ds = open_result(verify.run(cfg))
    assert ds.attrs["simulator"] == "sensitivity.simulators.analytic:ishigami"
    # each round's retraining leaves out train's derivative check by its setting, with the simulator at hand
    # (issue 48: it logged "no simulator" while verify ran that simulator)
    rounds = [r.getMessage() for r in caplog.records if r.name == "sensitivity.training.driver"]
    assert rounds.count("derivative fidelity not checked: derivative_points=0 (no simulator runs spent on it)") == 2
    assert not any(m.startswith("no simulator:") for m in rounds)
    # every round recorded: the training size, the verdict, the disagreement, the error, the runs added
    assert ds.sizes["round"] == 3 and ds.attrs["refine_outcome"] == "budget spent"
    np.testing.assert_array_equal(ds["refine_training_size"].values, [48, 112, 176])
    np.testing.assert_array_equal(ds["refine_verdict"].values, [0, 0, 0])
    assert np.all(ds["refine_member_std_max"].values >= ds["refine_member_std_mean"].values)
    np.testing.assert_array_equal(np.bincount(ds["refine_added_round"].values), [0, 64, 64])
    # the analysis's points: the first 32 base rows of the indices' Sobol' design; every run added is one of them
    points = sobol.sample(build.space_from(cfg), 256, seed=0)[:32 * 5]
    added = ds["refine_added"].values
    assert all(np.isclose(points, a).all(axis=1).any() for a in added) and len(np.unique(added, axis=0)) == 128
    # the refined ensemble, retrained on training.nc's samples and the runs added, is closer to the true function
    refined = tmp_path / "verify" / ds.attrs["refined_surrogate"]
    before, after = _relative_rms(source, points), _relative_rms(refined, points)
    np.testing.assert_allclose(ds["refine_error_rms"].values[[0, -1]], [before, after], rtol=1e-4)
    assert after < 0.6 * before, (before, after)
    # the refined ensemble's own checks beside the given one's, on the same rows: its error against the numpy Ishigami
    assert int(ds["refined_sobol_verdict"]) == int(ds["refine_verdict"].values[-1])
    assert ds["refined_sobol_surrogate_rmse"].attrs["long_name"].startswith("refined ensemble: ")
    for path, variable in ((source, "sobol_surrogate_rmse"), (refined, "refined_sobol_surrogate_rmse")):
        rmse = np.sqrt(((_ensemble_mean(path, points) - _ishigami(points)) ** 2).mean())
        np.testing.assert_allclose(float(ds[variable].squeeze()), rmse, rtol=1e-4)
    assert float(ds["refined_sobol_surrogate_rmse"].squeeze()) < float(ds["sobol_surrogate_rmse"].squeeze())
    x, _ = read_samples(tmp_path / "verify" / "refined" / "training.nc", ["x1", "x2", "x3"], None)
    assert len(x) == 176 and np.isclose(x[:, None], added[None]).all(axis=2).any(axis=0).all()
    # a rerun finds the complete result set
    assert verify.run(cfg) == tmp_path / "verify" / "verify.nc"


def test_the_worst_sobol_pair_is_named_by_parameter_label_and_date(recwarn):
    """A ratio on (parameter, station, time): its largest entry, put at (k_slow, lower, day 234), is named by the
    parameter, the station's label and the date (the index 234 and an xarray FutureWarning were logged before)."""
    import xarray as xr

    from sensitivity.analyses.verify.summary import where_largest as _where_largest

    ratio = np.zeros((2, 3, 365))
    ratio[1, 2, 234] = 5.0
    da = xr.DataArray(ratio, dims=("parameter", "station", "time"), coords={
        "parameter_name": ("parameter", ["smax", "k_slow"]), "station_name": ("station", ["upper", "middle", "lower"]),
        "time": ("time", np.arange(365.0), {"units": "days since 2021-01-01"})})
    assert _where_largest(da, "ST") == "ST of k_slow at station = lower, time = 2021-08-23"
    assert not [w for w in recwarn if issubclass(w.category, FutureWarning)]


def _ishigami_nan(x: np.ndarray) -> np.ndarray:
    y = _ishigami(x)
    y[5] = np.nan
    return y


def _ishigami_raises(x: np.ndarray) -> np.ndarray:
    raise FloatingPointError("the solver diverged")


def _ishigami_two_outputs(x: np.ndarray) -> np.ndarray:
    return np.stack([_ishigami(x), _ishigami(x)], axis=1)


def _ishigami_string(x: np.ndarray) -> str:
    return "finished"


def _ishigami_exits(x: np.ndarray) -> np.ndarray:
    import sys

    sys.exit(0)


def _ishigami_sleeps(x: np.ndarray) -> np.ndarray:
    import time

    time.sleep(60)
    return _ishigami(x)


@pytest.fixture
def ishigami_indices(compose_config, tmp_path):
    """An indices.nc of the Ishigami surrogate with Sobol' intervals."""
    return indices.run(compose_config("indices", ["jacobian=float64", "jacobian.jit_compile=false", "methods=[sobol]",
                                                  "sobol.n=256", "plots=false"], output_dir=tmp_path / "indices"))


@pytest.mark.parametrize("name, overrides, message", [
    ("_ishigami_nan", [], r"returned nan \(output 0\) at point 5 of 16, x = \["),
    ("_ishigami_raises", [], r"raised FloatingPointError: the solver diverged on a batch of 16 points"),
    ("_ishigami_two_outputs", [], r"returned shape \[16, 2\] for 16 points; expected \[16, 1\]"),
    ("_ishigami_string", [], r"returned 'finished' \(str, dtype <U8\) on a batch of 16 points"),
    ("_ishigami_exits", [], r"raised SystemExit \(sys.exit\(0\)\) on a batch of 16 points"),
    ("_ishigami_sleeps", ["simulator.timeout=1"], r"did not return within `simulator.timeout` = 1 s on a batch of 16"),
])
def test_a_misbehaving_simulator_ends_verify_with_one_line_and_nothing_published(compose_config, tmp_path,
                                                                                ishigami_indices, name, overrides,
                                                                                message):
    from sensitivity.errors import ModelError

    cfg = compose_config("verify", ["jacobian=float64", "jacobian.jit_compile=false", *overrides,
                                    f"verify.simulator=tests.workflows.test_verify:{name}",
                                    f"verify.indices={ishigami_indices}", "verify.sobol_rows=64"],
                         output_dir=tmp_path / "verify")
    with pytest.raises(ModelError, match=rf"^simulator tests.workflows.test_verify:{name} \(`verify.simulator`\) "
                                         rf"{message}") as err:
        verify.run(cfg)
    assert "\n" not in str(err.value)
    assert not list((tmp_path / "verify").rglob("verify.nc"))


def test_verify_simulator_kwargs_are_checked_before_any_run(compose_config, tmp_path, ishigami_indices):
    cfg = compose_config("verify", [*("jacobian=float64", "jacobian.jit_compile=false"),
                                    "verify.simulator=tests.workflows.test_verify:_never_run",
                                    "+verify.simulator_kwargs.scale=1.0", f"verify.indices={ishigami_indices}"],
                         output_dir=tmp_path / "verify")
    with pytest.raises(ConfigError, match=r"`verify.simulator_kwargs`: 'scale' is not a parameter of "
                                          r"tests.workflows.test_verify:_never_run"):
        verify.run(cfg)


@pytest.mark.slow
def test_strict_makes_a_failing_verdict_a_non_zero_exit_after_publishing_it(compose_config, tmp_path,
                                                                           ishigami_indices):
    import subprocess
    import sys

    from sensitivity.errors import VerificationFailed
    from tests.helpers import ROOT

    common = ["jacobian=float64", "jacobian.jit_compile=false", f"verify.indices={ishigami_indices}",
              "verify.sobol_rows=64", "verify.simulator=sensitivity.simulators.analytic:ishigami",
              "+verify.simulator_kwargs.a=3.0"]  # not the function the surrogate learnt: the verdict fails
    with pytest.raises(VerificationFailed, match=r"verify.strict: the verdict fails \(indices=fails\)"):
        verify.run(compose_config("verify", [*common, "verify.strict=true"], output_dir=tmp_path / "strict"))
    assert open_result(tmp_path / "strict" / "verify.nc").attrs["verdict"] == "fails"  # published all the same
    cli = [sys.executable, "-m", "workflows", "verify", *common, "progress=false"]
    loose = subprocess.run([*cli, f"hydra.run.dir={tmp_path / 'loose'}"], cwd=ROOT, capture_output=True, text=True,
                           timeout=300)
    assert loose.returncode == 0 and "the verdict FAILS (indices=fails)" in loose.stdout + loose.stderr
    strict = subprocess.run([*cli, "verify.strict=true", f"hydra.run.dir={tmp_path / 'cli'}"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert strict.returncode == 1, strict.stderr[-2000:]
    assert "verify.strict: the verdict fails" in strict.stdout + strict.stderr
    assert "Traceback" not in strict.stdout + strict.stderr and (tmp_path / "cli" / "verify.nc").is_file()


def _data_of(path):
    import xarray as xr

    with xr.open_dataset(path) as ds:
        return ds.load().drop_attrs(deep=False)


def _kept_round(parts, r: int) -> dict:
    """``{file: (mtime, sha256)}`` of the members refinement round ``r`` kept in ``parts``."""
    from sensitivity.datasets import content_hash

    return {p: (p.stat().st_mtime_ns, content_hash(p)) for p in sorted(parts.glob(f"round-{r}/member-*/*"))}


@pytest.mark.slow
def test_a_killed_refinement_continues_at_its_first_unfinished_round_and_equals_an_uninterrupted_run(
        compose_config, tmp_path, monkeypatch, caplog):
    import logging

    import xarray as xr

    driver = importlib.import_module("sensitivity.training.fit")  # the module train_surrogate takes its fit from, at the call
    from workflows import train

    common = ["model=ishigami", "space=ishigami", "jacobian=float64", "jacobian.jit_compile=false"]
    source = train.run(compose_config("train", [
        *common, "grid.n=48", "training.simulator=sensitivity.simulators.analytic:ishigami", "training.members=3",
        "training.epochs=20", "training.hidden=[16,16]", "training.derivative_points=0"], output_dir=tmp_path / "train"))
    model = [f"model.source={source}", "model.kwargs={}"]
    result = indices.run(compose_config("indices", [*common, *model, "methods=[sobol]", "sobol.n=256", "plots=false"],
                                        output_dir=tmp_path / "indices"))
    refining = [*common, *model, f"verify.indices={result}", "verify.sobol_rows=16", "refine.rounds=2",
                "refine.runs_per_round=16"]
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    fit, trained = driver.fit, []

    def killed_in_round_two(*args, **kwargs):
        if len(trained) == 3:  # round 1 retrained its 3 members: the kill comes as round 2 starts
            raise KeyboardInterrupt("killed")
        trained.append(kwargs["seed"])
        return fit(*args, **kwargs)

    monkeypatch.setattr(driver, "fit", killed_in_round_two)
    with pytest.raises(KeyboardInterrupt):
        verify.run(compose_config("verify", refining, output_dir=killed))
    parts = killed / "verify.parts"
    assert (parts / "round-1" / "member-2.json").is_file() and not (parts / "round-2").exists()
    assert not (killed / "manifest.json").exists() and not (killed / "verify.nc").exists()
    before, seen = _kept_round(parts, 1), {}

    def counted(*args, **kwargs):
        seen.setdefault("kept", _kept_round(parts, 1))  # round 1 as the rerun found it, before it publishes
        trained.append(kwargs["seed"])
        return fit(*args, **kwargs)

    trained.clear()
    monkeypatch.setattr(driver, "fit", counted)
    with caplog.at_level(logging.INFO):
        resumed = verify.run(compose_config("verify", refining, output_dir=killed))
    assert len(trained) == 3, "only round 2's three members are trained"
    assert "verify: refinement round 1: reused from an interrupted run on 64 samples" in caplog.text
    assert "verify: refinement round 2: retrained on 80 samples" in caplog.text
    assert "the simulator's 80 runs reused from an interrupted run" in caplog.text
    assert seen["kept"] == before and len(before) == 6, "round 1's members were read, never rewritten"
    assert not parts.exists() and (killed / "manifest.json").is_file()

    monkeypatch.undo()
    fresh = verify.run(compose_config("verify", refining, output_dir=clean))
    with open_result(resumed) as ds:
        assert ds.sizes["round"] == 3 and ds.attrs["refine_outcome"] == "budget spent"
        np.testing.assert_array_equal(ds["refine_training_size"].values, [48, 64, 80])
    xr.testing.assert_identical(_data_of(resumed), _data_of(fresh))
    xr.testing.assert_identical(_data_of(killed / "refined" / "training.nc"), _data_of(clean / "refined" / "training.nc"))


A, MU, SD = [1.0, -2.0, 0.5], np.array([0.5, -0.5, 1.0]), np.array([1.0, 0.5, 2.0])


def _linear_reliability(compose_config, tmp_path, bias: float, overrides: list[str]):
    """The reliability of the surrogate ``a . x + bias s`` at ``beta = 3`` (a . x > T), and the config of its
    verification against the simulator ``a . x``: ``(verify config, s, reliability.nc)``."""
    from workflows import reliability

    s = float(np.sqrt(np.sum((np.array(A) * SD) ** 2)))
    threshold = float(np.array(A) @ MU + 3.0 * s)
    params = [f"{{name: x{i}, units: '1', distribution: {{kind: norm, loc: {m}, scale: {d}}}}}"
              for i, (m, d) in enumerate(zip(MU, SD))]
    common = ["model=function", "model.source=sensitivity.simulators.analytic:linear",
              "model.output={name: y, units: m}", f"space.parameters=[{', '.join(params)}]", "jacobian=float64",
              "jacobian.jit_compile=false", f"++model.kwargs={{weights: [{A}], offset: [{bias * s}]}}"]
    result = reliability.run(compose_config("reliability", [
        *common, f"event.thresholds=[{threshold}]", "methods=[form,importance_sampling]", "plots=false"],
        output_dir=tmp_path / "reliability"))
    return compose_config("verify", [*common, "verify.simulator=sensitivity.simulators.analytic:linear",
                                     f"+verify.simulator_kwargs.weights=[{A}]", f"verify.reliability={result}",
                                     *overrides], output_dir=tmp_path / "verify"), s, result


def test_refinement_of_a_reliability_runs_near_its_limit_state_where_the_u_function_is_lowest(compose_config,
                                                                                            tmp_path):
    """The candidates of a refinement: the design point, then draws of the importance-sampling proposal around it;
    the priority: the U-function of the members' limit states (here members a . x + c_k: U = |T - a . x - mean c| /
    sd c)."""
    from sensitivity.analyses.reliability import nataf
    from sensitivity.analyses.verify import VerdictSettings, VerifyPlan
    from sensitivity.store.checkpoints import Checkpoints
    from workflows.plumbing import build
    from workflows.plumbing.simulation import simulation_from

    cfg, s, result = _linear_reliability(compose_config, tmp_path, 0.0, ["verify.failure_runs=5",
                                                                         "verify.safe_runs=3"])
    space = build.space_from(cfg)
    simulation = simulation_from(cfg, cfg.verify.simulator, cfg.verify.simulator_kwargs, "`verify.simulator`")
    kept = verify.Kept(Checkpoints(tmp_path / verify.PARTS), "test")
    checks = verify.Checks(cfg, space, build.surrogate_from(cfg, space), simulation.simulator,
                           VerifyPlan(failure_runs=5, safe_runs=3), None, VerdictSettings(), kept)
    candidates = checks.points("reliability", result)
    design = open_result(result)["design_x"].values.reshape(-1, 3)[:1]
    assert candidates.shape == (1 + 8, 3)
    np.testing.assert_allclose(candidates[:1], design, rtol=1e-9)
    u = nataf([p.frozen_distribution() for p in space.parameters]).to_standard(candidates)
    assert np.all(np.linalg.norm(u - u[:1], axis=1)[1:] < 6)  # draws of N(u*, I) around the design point
    offsets = np.array([-0.1, 0.0, 0.2]) * s
    values = (candidates @ np.array(A))[None, :, None] + offsets[:, None, None]
    threshold = float(np.array(A) @ MU + 3.0 * s)
    expected = np.abs(threshold - values.mean(axis=0)[:, 0]) / offsets.std(ddof=1)
    np.testing.assert_allclose(checks.u_priority(result)(values), expected, rtol=1e-9)
    simulation.close()


@pytest.mark.parametrize("bias, holds", [(0.0, True), (0.5, False)])
def test_a_reliability_analysis_is_verified_at_its_design_point_and_in_its_failure_region(compose_config, tmp_path,
                                                                                          bias, holds):
    """The surrogate a . x + b s of normal x against the simulator a . x (s the sd of a . x), failure a . x > T at
    beta = 3: the simulator's first-order index at the surrogate's design point is exactly 3, its re-weighted Pf the
    exact Phi(-3) within 3 standard errors, and a bias of 0.5 s (Pf x 3.4) changes the answer."""
    from scipy import stats

    cfg, s, _ = _linear_reliability(compose_config, tmp_path, bias, ["verify.failure_runs=300", "verify.safe_runs=300"])
    ds = open_result(verify.run(cfg))
    np.testing.assert_allclose(ds["reliability_design_error"].values, bias * s, atol=1e-9)
    np.testing.assert_allclose(ds["reliability_design_beta_simulator"].values, 3.0, rtol=1e-6)
    pf, se = float(ds["reliability_pf_simulator"][0]), float(ds["reliability_pf_simulator_se"][0])
    assert abs(pf - stats.norm.sf(3.0)) <= 3 * se
    assert int(ds["reliability_verdict"]) == holds and ds.attrs["verdict"] == ("holds" if holds else "fails")
    assert ds.attrs["verdicts"] == f"reliability={'holds' if holds else 'fails'}"


def test_a_reliability_result_without_importance_sampling_is_refused_before_any_simulator_run(compose_config,
                                                                                              tmp_path):
    from workflows import reliability

    common = ["jacobian=float64", "jacobian.jit_compile=false"]
    result = reliability.run(compose_config("reliability", [*common, "methods=[form]", "event.thresholds=[10]",
                                                            "plots=false"], output_dir=tmp_path / "reliability"))
    with pytest.raises(ConfigError, match="`verify.reliability`: .* ran \\['form'\\]; verify redraws") as err:
        verify.run(compose_config("verify", [*common, "verify.simulator=sensitivity.simulators.analytic:ishigami",
                                             f"verify.reliability={result}"], output_dir=tmp_path / "verify"))
    assert "\n" not in str(err.value) and not (tmp_path / "verify" / "verify.nc").exists()


def _linear_propagation(compose_config, tmp_path, scale: float, methods: str = "[monte_carlo]"):
    """The Monte Carlo propagation of normal x through the surrogate ``mean + scale (a . x - mean)`` (the exact mean,
    the std scaled: a bias an ensemble's members would share), and the config of its verification against the
    simulator ``a . x``."""
    from workflows import propagate

    mean = float(np.array(A) @ MU)
    params = [f"{{name: x{i}, units: '1', distribution: {{kind: norm, loc: {m}, scale: {d}}}}}"
              for i, (m, d) in enumerate(zip(MU, SD))]
    common = ["model=function", "model.source=sensitivity.simulators.analytic:linear",
              "model.output={name: y, units: m}", f"space.parameters=[{', '.join(params)}]", "jacobian=float64",
              "jacobian.jit_compile=false",
              f"++model.kwargs={{weights: [{(scale * np.array(A)).tolist()}], offset: [{(1 - scale) * mean}]}}"]
    result = propagate.run(compose_config("propagate", [*common, f"propagation.methods={methods}", "plots=false"],
                                          output_dir=tmp_path / "propagate"))
    return compose_config("verify", [*common, "verify.simulator=sensitivity.simulators.analytic:linear",
                                     f"+verify.simulator_kwargs.weights=[{A}]", f"verify.propagation={result}"],
                          output_dir=tmp_path / "verify")


@pytest.mark.parametrize("scale, holds", [(1.0, True), (0.99, False)])
def test_a_propagation_is_verified_by_the_simulators_moments_anchored_on_its_monte_carlo_sample(compose_config,
                                                                                              tmp_path, caplog,
                                                                                              scale, holds):
    """A 1 % bias in the std, far outside the propagation's own RQMC interval, fails the verdict naming the std; the
    simulator's anchored std is the exact one (the surrogate an affine map of the simulator: the control variate
    recovers the simulator's std on the whole sample)."""
    std = float(np.sqrt(np.sum((np.array(A) * SD) ** 2)))
    ds = open_result(verify.run(_linear_propagation(compose_config, tmp_path, scale)))
    assert int(ds["propagation_verdict"]) == holds and ds.attrs["verdicts"] == \
        f"propagation={'holds' if holds else 'fails'}"
    assert int(ds["propagation_runs"]) == 1024 and int(ds["propagation_sample_size"]) == 2**16
    np.testing.assert_allclose(ds["propagation_std_simulator"].values, std, rtol=1e-3)
    np.testing.assert_allclose(ds["propagation_mean_simulator"].values, np.array(A) @ MU, atol=1e-3 * std)
    low, high = ds["propagation_std_simulator_interval"].values[0]
    assert low <= std <= high
    np.testing.assert_allclose(ds["propagation_std_error"].values, (scale - 1) * std, atol=1e-3 * std)
    assert int(ds["propagation_mean_flag"][0]) == 0 and int(ds["propagation_std_flag"][0]) == (0 if holds else 1)
    if not holds:
        assert "flagged: std of y: the surrogate's Monte Carlo mean and std differ from the simulator's" in caplog.text


def test_a_propagation_without_monte_carlo_is_refused_before_any_simulator_run(compose_config, tmp_path):
    cfg = _linear_propagation(compose_config, tmp_path, 1.0, methods="[first_order]")
    with pytest.raises(ConfigError, match=r"`verify.propagation`: .* ran \['first_order'\]; verify redraws its Monte "
                                          "Carlo sample") as err:
        verify.run(cfg)
    assert "\n" not in str(err.value) and not (tmp_path / "verify" / "verify.nc").exists()


def test_the_redrawn_propagation_sample_is_the_one_it_ran_and_its_first_runs_are_the_refinement_candidates(
        compose_config, tmp_path):
    """The sample redrawn from propagation.nc's recorded settings gives its recorded Monte Carlo mean and std
    through the surrogate; a refinement's candidates are the verified runs, its first verify.propagation_runs."""
    from sensitivity.analyses.verify import VerdictSettings, VerifyPlan
    from sensitivity.store.checkpoints import Checkpoints
    from workflows.plumbing import build

    cfg = _linear_propagation(compose_config, tmp_path, 0.99)
    space = build.space_from(cfg)
    surrogate = build.surrogate_from(cfg, space)
    checks = verify.Checks(cfg, space, surrogate, None, VerifyPlan(propagation_runs=32), None, VerdictSettings(),
                           verify.Kept(Checkpoints(tmp_path / verify.PARTS), "test"))
    recorded = open_result(cfg.verify.propagation)
    at = list(recorded["propagation_method_name"].values).index("monte_carlo")
    sample = checks._propagation_sample(cfg.verify.propagation)
    values = checks.engine.flat_values(sample)[:, 0]
    np.testing.assert_allclose(values.mean(), float(recorded["output_mean"].isel(propagation_method=at).squeeze()), rtol=1e-12)
    np.testing.assert_allclose(values.std(ddof=1), float(recorded["output_std"].isel(propagation_method=at).squeeze()),
                               rtol=1e-9)
    np.testing.assert_array_equal(checks.points("propagation", cfg.verify.propagation), sample[:32])
