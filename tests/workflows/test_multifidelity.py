"""The `multifidelity` workflow end to end: on Ishigami with a deliberately biased surrogate the simulator-anchored
indices cover the exact values where the surrogate's do not; with a perfect surrogate the anchored estimates are
the surrogate's; a series output keeps its dims; one-line errors before the model loads; a rerun after a kill
resumes the simulator's recorded runs."""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.datasets import open_result
from sensitivity.errors import ConfigError
from tests.helpers.cf import cf_errors
from tests.helpers.functions import ishigami_indices
from workflows import multifidelity

FAST = ["jacobian.jit_compile=false", "multifidelity.simulator=tests.helpers.functions:ishigami",
        "multifidelity.budget=500", "multifidelity.pilot=50", "multifidelity.surrogate_rows=2048",
        "multifidelity.n_resamples=100", "multifidelity.cost_ratio=10000", "simulator.batch_size=64"]
BIASED = ["model=function", "model.source=tests.helpers.models:ishigami_biased",
          "model.output={name: y, units: '1', names: [ishigami]}"]


def test_anchored_indices_cover_the_exact_values_where_the_biased_surrogates_do_not(compose_config, tmp_path):
    exact = ishigami_indices()
    path = multifidelity.run(compose_config("multifidelity", FAST + BIASED + ["seed=1"]))
    ds = open_result(path)
    for q in ("S1", "ST"):
        low, high = np.moveaxis(ds[f"{q}_interval"].values[:, 0], -1, 0)
        assert ((low <= exact[q]) & (exact[q] <= high)).all(), (q, low, high)
    low, high = ds["S1_surrogate_interval"].values[0, 0]
    assert not low <= exact["S1"][0] <= high and int(ds["S1_bias_significant"].values[0, 0]) == 1
    assert ds.attrs["verdict"] == "bias significant" and ds.attrs["n_sim_runs"] <= 500
    assert list(ds["parameter_name"].values) == ["x1", "x2", "x3"] and cf_errors(path) == []
    assert (path.parent / "simulator_pilot.nc").is_file() and not list(path.parent.glob("*.parts"))
    from workflows.report.kinds import kind_of  # the study report tells multifidelity.nc and states its summary

    kind = kind_of(ds)
    assert kind.name == "multifidelity" and not kind.summarize(ds).verdicts[0].holds


def test_a_perfect_surrogate_gives_its_own_estimates(compose_config):
    ds = open_result(multifidelity.run(compose_config("multifidelity", FAST)))  # model: Ishigami itself
    for q in ("S1", "ST", "output_mean", "output_variance"):
        np.testing.assert_allclose(ds[q].values, ds[f"{q}_surrogate"].values, rtol=1e-6, atol=1e-9)
    assert ds.attrs["verdict"] != "bias significant" and int(ds["S1_bias_significant"].sum()) == 0


def test_a_series_keeps_its_dims(compose_config):
    ds = open_result(multifidelity.run(compose_config("multifidelity", [
        "jacobian.jit_compile=false", "model=function", "model.source=tests.helpers.models:decay",
        "model.output={name: y, units: m, dims: [{name: day, values: {start: 0, stop: 10}, units: day}]}",
        "space.parameters=[{name: a, units: m, low: 1, high: 2}, {name: k, units: day-1, low: 0.1, high: 0.5}]",
        "multifidelity.simulator=tests.helpers.models:decay_numpy", "multifidelity.budget=200",
        "multifidelity.pilot=20", "multifidelity.surrogate_rows=256", "multifidelity.n_resamples=20"])))
    assert ds["S1"].dims == ("parameter", "day") and ds["output_mean_interval"].dims == ("bound", "day")
    assert list(ds["day"].values) == list(range(10)) and ds["output_mean"].attrs["units"] == "m"
    np.testing.assert_allclose(ds["output_mean"].values, ds["output_mean_surrogate"].values, rtol=1e-6)


@pytest.mark.parametrize("override, message", [
    (["multifidelity.simulator=null"],
     "`multifidelity.simulator` \\('package.module:function'\\) or `simulator.program` is required"),
    (["multifidelity.budget=40"], "`budget` must exceed the pilot's 50 simulator runs"),
    (["simulator.workers=0"], "`simulator.workers` must be an integer >= 1, got 0"),
    (["multifidelity.surrogate_rows=1000"], "`surrogate_rows` must be a power of two, got 1000"),
])
def test_bad_settings_are_one_line_before_the_model_loads(compose_config, tmp_path, override, message):
    cfg = compose_config("multifidelity", FAST + ["model.source=no.such.module:f"] + override)
    with pytest.raises(ConfigError, match=message):
        multifidelity.run(cfg)
    assert not (tmp_path / "multifidelity.nc").exists()


A, MU, SD = [1.0, -2.0, 0.5], np.array([0.5, -0.5, 1.0]), np.array([1.0, 0.5, 2.0])


def _linear(bias: float) -> tuple[list[str], list[str], float]:
    """``(model overrides, reliability overrides, s)``: the surrogate ``a . x + bias s`` of normal ``x`` (``s`` the sd
    of ``a . x``), failure ``a . x > T`` at ``beta = 3``; the simulator is ``a . x``."""
    s = float(np.sqrt(np.sum((np.array(A) * SD) ** 2)))
    threshold = float(np.array(A) @ MU + 3.0 * s)
    params = [f"{{name: x{i}, units: '1', distribution: {{kind: norm, loc: {m}, scale: {d}}}}}"
              for i, (m, d) in enumerate(zip(MU, SD))]
    common = ["model=function", "model.source=sensitivity.simulators.analytic:linear",
              "model.output={name: y, units: m}", f"space.parameters=[{', '.join(params)}]",
              "jacobian.jit_compile=false", f"++model.kwargs={{weights: [{A}], offset: [{bias * s}]}}"]
    return common, ["jacobian=float64", f"event.thresholds=[{threshold}]", "methods=[form,importance_sampling]"], s


#: The simulator of :func:`_linear` and a small study of it.
LINEAR_STUDY = ["multifidelity.simulator=sensitivity.simulators.analytic:linear",
                f"+multifidelity.simulator_kwargs.weights=[{A}]", "multifidelity.budget=200", "multifidelity.pilot=20",
                "multifidelity.surrogate_rows=256", "multifidelity.n_resamples=20", "multifidelity.cost_ratio=10000"]


def test_the_simulators_failure_probability_stands_beside_the_biased_surrogates(compose_config, tmp_path):
    """The surrogate a . x + 0.5 s of normal x against the simulator a . x (s the sd of a . x), failure a . x > T at
    beta = 3: on the surrogate's importance-sampling proposal the anchored Pf is the exact Phi(-3) within its
    interval, the surrogate's (Pf x 3.4) is not; the simulator's runs are recorded in the run directory."""
    from scipy import stats

    from workflows import reliability

    common, events, _ = _linear(0.5)
    result = reliability.run(compose_config("reliability", [*common, *events, "plots=false"],
                                            output_dir=tmp_path / "reliability"))
    path = multifidelity.run(compose_config("multifidelity", [
        *common, *LINEAR_STUDY, f"multifidelity.reliability={result}", "multifidelity.failure_runs=200",
        "multifidelity.safe_runs=20"], output_dir=tmp_path / "multifidelity"))
    ds = open_result(path)
    exact = stats.norm.sf(3.0)
    low, high = ds["reliability_pf_simulator_interval"].values[0]
    assert low <= exact <= high
    low, high = ds["reliability_pf_surrogate_interval"].values[0]
    assert exact < low and int(ds["reliability_changes"][0]) == 1
    assert int(ds["reliability_runs"]) == 1 + 200 + 20 and cf_errors(path) == []
    assert sorted(p.name for p in path.parent.glob("simulator_reliability_*.nc")) == [
        "simulator_reliability_0.nc", "simulator_reliability_1.nc", "simulator_reliability_2.nc"]
    from workflows.report.kinds import kind_of

    verdicts = kind_of(ds).summarize(ds).verdicts
    assert [v.holds for v in verdicts] == [False, False] and "changes Pf" in verdicts[1].statement  # the mean too


def test_a_reliability_result_without_importance_sampling_is_refused_before_any_simulator_run(compose_config,
                                                                                              tmp_path):
    from workflows import reliability

    common = ["jacobian=float64", "jacobian.jit_compile=false"]
    result = reliability.run(compose_config("reliability", [*common, "methods=[form]", "event.thresholds=[10]",
                                                            "plots=false"], output_dir=tmp_path / "reliability"))
    with pytest.raises(ConfigError, match="`multifidelity.reliability`: .* ran \\['form'\\]; multifidelity redraws"):
        multifidelity.run(compose_config("multifidelity", [*FAST, f"multifidelity.reliability={result}"],
                                         output_dir=tmp_path / "multifidelity"))
    assert not list((tmp_path / "multifidelity").glob("simulator_*"))


def test_multifidelity_is_a_stage_of_run_fed_by_a_reliability_stage(compose_config, tmp_path):
    """`sensitivity run` with a reliability stage feeding `multifidelity.reliability`: the study's dataset carries
    the indices and the event's Pf (a perfect surrogate: the anchored Pf is the surrogate's), its figure is drawn,
    and a rerun finds both stages complete."""
    from hydra import initialize_config_dir
    from hydra.core.hydra_config import HydraConfig

    from workflows import run
    from workflows.plumbing.registry import CONF_DIR

    HydraConfig.instance().cfg = None  # no job config left by an earlier in-process composition: its overrides
    common, events, _ = _linear(0.0)   # would pass on to every stage (an in-process `run` has no command line)
    cfg = compose_config("run")  # in process, study null: each stage composes its own defaults and overrides
    cfg.stages = [
        run.StageConf(name="reliability", workflow="reliability", overrides=[*common, *events,
                                                                              "importance.n_samples=2000"]),
        run.StageConf(name="multifidelity", workflow="multifidelity", overrides=[
            *common, *LINEAR_STUDY, "multifidelity.failure_runs=10", "multifidelity.safe_runs=5"],
            inputs={"multifidelity.reliability": "reliability"})]
    with initialize_config_dir(str(CONF_DIR), version_base=None):
        run.run(cfg)
    stage = tmp_path / "multifidelity"
    ds = open_result(stage / "multifidelity.nc")
    assert {"S1", "reliability_pf_simulator_interval"} <= set(ds.variables)
    assert float(ds["reliability_pf_simulator"][0]) == float(ds["reliability_pf_surrogate"][0]) > 0
    assert (stage / "multifidelity_indices.png").is_file() and (stage / "simulator_reliability_1.nc").is_file()
    published = (stage / "manifest.json").stat().st_mtime_ns
    with initialize_config_dir(str(CONF_DIR), version_base=None):
        run.run(cfg)
    assert (stage / "manifest.json").stat().st_mtime_ns == published


def _spread_carried(ds) -> None:
    """The members' surrogate-only estimates, their spread and the combined intervals, beside the anchored ones."""
    k = ds.attrs["ensemble_members"]
    for q in ("S1", "ST", "output_mean", "output_variance"):
        members = ds[f"{q}_surrogate_member"]
        assert members.dims[0] == "member" and members.sizes["member"] == k
        np.testing.assert_allclose(ds[f"{q}_surrogate_surrogate_std"].values, members.std("member", ddof=1).values)
        combined, sampling = ds[f"{q}_surrogate_combined_interval"], ds[f"{q}_surrogate_interval"]
        assert (combined.sel(bound=0) <= sampling.sel(bound=0) + 1e-12).all()
        assert (combined.sel(bound=1) >= sampling.sel(bound=1) - 1e-12).all()


@pytest.mark.slow
def test_an_ensemble_from_train_anchors_the_exact_indices_and_carries_its_members_spread(compose_config, tmp_path):
    from workflows import train

    common = ["model=ishigami", "space=ishigami", "jacobian=float64", "jacobian.jit_compile=false"]
    source = train.run(compose_config("train", [
        *common, "training.simulator=tests.helpers.functions:ishigami", "training.runs=128", "training.members=3",
        "training.epochs=60", "training.hidden=[16,16]", "training.derivative_points=0"],
        output_dir=tmp_path / "train"))
    assert source.name == "surrogate.ensemble"
    path = multifidelity.run(compose_config("multifidelity", [*FAST, *common, f"model.source={source}",
                                                               "model.kwargs={}", "seed=2"],
                                            output_dir=tmp_path / "mf"))
    ds, exact = open_result(path), ishigami_indices()
    for q in ("S1", "ST"):  # the anchor holds the closed form whatever the under-trained members say
        low, high = np.moveaxis(ds[f"{q}_interval"].values[:, 0], -1, 0)
        assert ((low <= exact[q]) & (exact[q] <= high)).all(), (q, low, high)
    _spread_carried(ds)
    assert ds.attrs["ensemble_members"] == 3 and cf_errors(path) == []


@pytest.mark.slow
def test_the_demos_shipped_ensemble_anchors_the_simulators_own_mean(compose_config, tmp_path):
    """data/seir/surrogate.ensemble anchored on the SEIR simulator: the anchored mean's interval holds a plain Monte
    Carlo mean of the simulator (512 other points, its own 3-se band added), on every day."""
    from sensitivity.simulators.seir import simulate
    from workflows.plumbing import build

    cfg = compose_config("multifidelity", [
        "experiment=seir_ensemble", "jacobian.jit_compile=false",
        "multifidelity.simulator=sensitivity.simulators.seir:simulate", "multifidelity.budget=240",
        "multifidelity.surrogate_rows=256", "multifidelity.n_resamples=20", "multifidelity.cost_ratio=100",
        "plots=false"])
    ds = open_result(multifidelity.run(cfg))
    _spread_carried(ds)
    assert ds.attrs["ensemble_members"] == 5
    space = build.space_from(cfg)
    x = space.bounds[:, 0] + np.random.default_rng(7).random((512, len(space))) * np.ptp(space.bounds, axis=1)
    y = np.asarray(simulate(x), float).reshape(512, -1)
    mc, se = y.mean(axis=0), y.std(axis=0, ddof=1) / np.sqrt(512)
    low, high = ds["output_mean_interval"].transpose("bound", ...).values.reshape(2, -1)
    assert ((low - 3 * se <= mc) & (mc <= high + 3 * se)).all()


def test_an_edited_simulator_is_a_new_computation(compose_config, tmp_path, monkeypatch):
    """The study fingerprints the simulator's code: after an edit of its module the same command (as a `run`
    stage gives it, replacing other settings) runs the new simulator on every point, none of the old runs kept."""
    import sys

    folder = tmp_path / "study"
    folder.mkdir()
    (folder / "my_sim.py").write_text("import numpy as np\n\ndef f(x):\n    return (x[:, :1] + x[:, 1:2])\n")
    monkeypatch.syspath_prepend(str(folder))
    overrides = ["jacobian.jit_compile=false", "model=function", "model.source=tests.helpers.models:decay",
                 "model.output={name: y, units: m}",
                 "space.parameters=[{name: a, units: m, low: 1, high: 2}, {name: k, units: day-1, low: 0.1, high: 0.5}]",
                 "++model.kwargs={days: 1}", "multifidelity.simulator=my_sim:f", "multifidelity.budget=200",
                 "multifidelity.pilot=20", "multifidelity.surrogate_rows=256", "multifidelity.n_resamples=20",
                 "multifidelity.cost_ratio=100", "replace_other_settings=true", "plots=false"]
    first = open_result(multifidelity.run(compose_config("multifidelity", overrides, output_dir=tmp_path / "mf")))
    np.testing.assert_allclose(first["output_mean_simulator_only"].values, 1.5 + 0.3, rtol=0.05)  # E[a + k]
    (folder / "my_sim.py").write_text("import numpy as np\n\ndef f(x):\n    return 10 + (x[:, :1] + x[:, 1:2])\n")
    monkeypatch.delitem(sys.modules, "my_sim")  # a new process imports the edited module
    second = open_result(multifidelity.run(compose_config("multifidelity", overrides, output_dir=tmp_path / "mf")))
    np.testing.assert_allclose(second["output_mean_simulator_only"].values, 11.5 + 0.3, rtol=0.05)


HANGS = "import time\n\ndef f(x):\n    time.sleep(3600)\n    return x[:, :1]\n"
CRASHES = "import ctypes\n\ndef f(x):\n    ctypes.string_at(0)\n    return x[:, :1]\n"


def _cli(tmp_path, module: str):
    """``sensitivity multifidelity`` on a simulator ``my_sim:f`` of source ``module``, started in a subprocess."""
    import os
    import subprocess

    from tests.helpers import CLI, ROOT

    (tmp_path / "my_sim.py").write_text(module)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    command = CLI + ["multifidelity", "model=ishigami", "jacobian.jit_compile=false", "multifidelity.simulator=my_sim:f",
                     "multifidelity.budget=100", "multifidelity.pilot=20", "multifidelity.surrogate_rows=64",
                     "multifidelity.cost_ratio=100", "plots=false", "progress=false",
                     f"hydra.run.dir={tmp_path / 'run'}"]
    return subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_sigterm_ends_a_run_whose_in_process_simulator_call_hangs(tmp_path):
    import signal
    import time

    from workflows.cli import TERMINATE_GRACE_S

    proc = _cli(tmp_path, HANGS)
    deadline = time.monotonic() + 300
    while not list((tmp_path / "run").glob("simulator_pilot.nc.parts")) and time.monotonic() < deadline \
            and proc.poll() is None:
        time.sleep(0.1)
    assert proc.poll() is None, proc.communicate()[1][-2000:]
    time.sleep(1.0)  # inside the simulator's call
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=TERMINATE_GRACE_S + 60)
    assert proc.returncode == 143, err[-2000:]
    assert "terminated" in err and "abandoned" in err


@pytest.mark.slow
def test_a_simulator_that_crashes_the_process_is_named(tmp_path):
    proc = _cli(tmp_path, CRASHES)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == -11, err[-2000:]  # SIGSEGV: the shell's exit 139
    assert "Segmentation fault" in err and "my_sim.py" in err
