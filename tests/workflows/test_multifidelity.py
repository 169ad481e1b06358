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
        "multifidelity.n_resamples=100", "multifidelity.cost_ratio=10000", "multifidelity.batch_size=64"]
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
    assert ds.attrs["verdict"] == "no significant bias"


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
    (["multifidelity.simulator=null"], "`multifidelity.simulator` \\('package.module:function'\\) is required"),
    (["multifidelity.budget=40"], "`budget` must exceed the pilot's 50 simulator runs"),
    (["multifidelity.workers=0"], "`workers` must be an integer >= 1, got 0"),
    (["multifidelity.surrogate_rows=1000"], "`surrogate_rows` must be a power of two, got 1000"),
])
def test_bad_settings_are_one_line_before_the_model_loads(compose_config, tmp_path, override, message):
    cfg = compose_config("multifidelity", FAST + ["model.source=no.such.module:f"] + override)
    with pytest.raises(ConfigError, match=message):
        multifidelity.run(cfg)
    assert not (tmp_path / "multifidelity.nc").exists()
