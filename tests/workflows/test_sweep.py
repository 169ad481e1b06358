"""The `sweep` workflow end to end: labeled CF output, provenance, resume after a kill, NaN reporting, CLI."""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import scipy.stats
import xarray as xr

from sensitivity.datasets import open_result
from sensitivity.errors import ConfigError
from tests.helpers import CLI, ROOT
from tests.helpers.cf import cf_errors
from tests.helpers.functions import ishigami_jacobian
from workflows import sweep

def test_sweep_writes_a_labeled_cf_dataset(compose_config, tmp_path):
    cfg = compose_config("sweep", ["grid.n=300", "jacobian=float64", "jacobian.chunk_size=128"])
    path = sweep.run(cfg)
    ds = open_result(path)
    assert dict(ds.sizes) == {"sample": 300, "parameter": 3, "output": 1}
    np.testing.assert_allclose(ds["jacobian"].values, ishigami_jacobian(ds["x"].values), rtol=1e-10, atol=1e-10)
    assert ds["jacobian"].sel(parameter_name="x2").dims == ("sample", "output")
    assert ds["jacobian"].attrs["units"] == "1" and ds["y"].attrs["long_name"] == "Ishigami function"
    for key in ("Conventions", "title", "history", "source", "config", "surrogate_hash", "package_versions", "seed"):
        assert ds.attrs[key], key
    assert "grid:" in ds.attrs["config"] and ds.attrs["nonfinite_values"] == 0
    assert not (tmp_path / "sweep.nc.parts").exists()
    assert cf_errors(path) == []


@pytest.mark.slow
def test_an_ensemble_sweep_carries_the_members_spread_of_every_value_and_derivative(compose_config, tmp_path):
    """The shipped 5-member SEIR ensemble: values and Jacobians are the members' mean and ``*_surrogate_std`` their
    standard deviation (ddof=1), each member computed here by its own single-model engine (tested against central
    differences in tests/engine/test_ensemble.py) and spread about the mean by the ensemble's recorded calibration."""
    import sensitivity

    cfg = compose_config("sweep", ["experiment=seir_ensemble", "grid.n=40", "jacobian=float64", "plots=false"])
    path = sweep.run(cfg)
    assert cf_errors(path) == []
    ds = open_result(path)
    ensemble = sensitivity.load_surrogate(ROOT / "data" / "seir" / "surrogate.ensemble", dtype="float64")
    x = ds["x"].values
    own = [sensitivity.compile_jacobian(m, jit_compile=False)(x) for m in ensemble.members]
    scale = np.asarray(ensemble.spread_scale).reshape(ensemble.output.shape)
    for name, k in (("new_infections", 0), ("jacobian", 1)):
        stacked = np.stack([result[k] for result in own])
        mean = stacked.mean(axis=0)
        spread = scale[..., None] if k else scale  # on the output's axes, also of the derivatives
        np.testing.assert_allclose(ds[name].values, mean, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(ds[f"{name}_surrogate_std"].values, spread * stacked.std(axis=0, ddof=1),
                                   rtol=1e-8, atol=1e-12)
        units = {key: value for key, value in ds[name].attrs.items() if key != "long_name"}  # units, or their table
        assert {key: value for key, value in ds[f"{name}_surrogate_std"].attrs.items() if key != "long_name"} == units
    # the values' members and their 0.95 prediction interval for a new draw (Geisser 1993): mean -+ t sqrt(1+1/K) s
    stacked = np.stack([result[0] for result in own])
    members = stacked.mean(axis=0) + scale * (stacked - stacked.mean(axis=0))
    np.testing.assert_allclose(np.moveaxis(ds["new_infections_member"].values, 1, 0), members, rtol=1e-10, atol=1e-12)
    half = scipy.stats.t.ppf(0.975, 4) * np.sqrt(1 + 1 / 5) * members.std(axis=0, ddof=1)
    np.testing.assert_allclose(ds["new_infections_combined_interval"].values,
                               np.stack([members.mean(0) - half, members.mean(0) + half], axis=-1), rtol=1e-8, atol=1e-12)
    assert ds["new_infections_combined_interval"].attrs["units"] == ds["new_infections"].attrs["units"]


@pytest.mark.slow
def test_an_ensemble_sweep_with_store_members_stores_each_members_values_and_derivatives(compose_config):
    """``store_members=true``: ``<output>_member`` and ``jacobian_member`` on ``(sample, member, ...)`` are each
    member's own single-model engine output (spread about the mean by the ensemble's recorded calibration, as the engine
    returns them), their mean and ddof=1 std the stored mean and ``*_surrogate_std``; CF-clean."""
    import sensitivity
    from sensitivity.datasets.publish import OtherSettings

    common = ["experiment=seir_ensemble", "grid.n=24", "jacobian=float64", "plots=false"]
    without = open_result(sweep.run(compose_config("sweep", common)))
    assert "jacobian_surrogate_std" in without and "jacobian_member" not in without  # off by default
    with pytest.raises(OtherSettings):  # the option is part of the run directory's fingerprint
        sweep.run(compose_config("sweep", [*common, "store_members=true"]))
    path = sweep.run(compose_config("sweep", [*common, "store_members=true", "replace_other_settings=true"]))
    assert cf_errors(path) == []
    ds = open_result(path)
    ensemble = sensitivity.load_surrogate(ROOT / "data" / "seir" / "surrogate.ensemble", dtype="float64")
    own = [sensitivity.compile_jacobian(m, jit_compile=False)(ds["x"].values) for m in ensemble.members]
    scale = np.asarray(ensemble.spread_scale).reshape(ensemble.output.shape)
    assert ds.sizes["member"] == len(ensemble.members) == 5
    for name, k in (("new_infections", 0), ("jacobian", 1)):
        stacked = np.stack([result[k] for result in own])  # [K, N, *out(, n)]
        mean = stacked.mean(axis=0)
        members = mean + (scale[..., None] if k else scale) * (stacked - mean)
        stored = ds[f"{name}_member"]
        assert stored.dims == (ds[name].dims[0], "member", *ds[name].dims[1:])
        np.testing.assert_allclose(np.moveaxis(stored.values, 1, 0), members, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(ds[name].values, stored.mean("member").values, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(ds[f"{name}_surrogate_std"].values, stored.std("member", ddof=1).values,
                                   rtol=1e-10, atol=1e-14)
        units = {key: value for key, value in ds[name].attrs.items() if key != "long_name"}
        assert {key: value for key, value in stored.attrs.items() if key != "long_name"} == units


def test_store_members_of_one_model_is_refused_in_one_line(compose_config, tmp_path):
    cfg = compose_config("sweep", ["grid.n=16", "plots=false", "store_members=true"])
    with pytest.raises(ConfigError, match="`store_members` needs an ensemble surrogate") as info:
        sweep.run(cfg)
    assert "\n" not in str(info.value) and not (tmp_path / "sweep.nc").exists()


@pytest.mark.slow
def test_field_outputs_keep_their_dims(compose_config):
    cfg = compose_config("sweep", ["experiment=plume", "grid.n=32", "plots=false"])
    ds = xr.open_dataset(sweep.run(cfg))
    assert ds["jacobian"].dims == ("sample", "lat", "lon", "parameter")
    assert ds["concentration"].attrs["units"] == "kg m-3"
    assert ds["lat"].attrs["standard_name"] == "latitude"
    # parameters have different units, so the Jacobian's units live in a coordinate
    assert list(ds["jacobian_units"].values) == ["1", "kg m-3", "kg m-3", "kg m-3"]
    assert cf_errors(Path(ds.encoding["source"])) == []


def test_nonfinite_values_are_counted_and_reported(compose_config, caplog):
    overrides = ["model=function", "model.source=tests.helpers.models:sqrt_model", "model.output={name: y, names: [root]}",
                 "space.parameters=[{name: a, units: '1', low: -1, high: 1}, {name: b, units: '1', low: 0, high: 1}]",
                 "grid.n=64", "plots=false"]
    path = sweep.run(compose_config("sweep", overrides))
    ds = xr.open_dataset(path)
    negative = int((ds["x"].values[:, 0] < 0).sum())
    assert negative > 0 and ds.attrs["nonfinite_values"] == negative
    assert ds.attrs["nonfinite_jacobian"] >= negative
    assert "non-finite values" in caplog.text


@pytest.mark.slow
def test_cli_help_lists_workflows():
    out = subprocess.run(CLI + ["--help"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and "sweep " in out.stdout and "values and Jacobians" in out.stdout


@pytest.mark.slow
@pytest.mark.parametrize("override, message", [
    ("space.parameters.0.low=5", "bounds must be low < high, got (5.0, 3.14"),
    ("grid.kind=sobolx", "grid.kind must be one of"),
    ("grid.nn=3", "Key 'nn' not in 'GridConf'"),
    ("grid.n=many", "Value 'many' of type 'str' could not be converted to Integer"),
    ("jacobian.mode=sideways", "`mode` must be one of"),
    ("model.source=nowhere.keras", "surrogate file not found: nowhere.keras"),
    ("model.source=nowhere", "neither a .keras file"),
])
def test_cli_bad_input_fails_clearly_without_output(tmp_path, override, message):
    out = subprocess.run(CLI + ["sweep", override, f"hydra.run.dir={tmp_path}", "progress=false"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode != 0
    assert message in out.stdout + out.stderr
    assert not (tmp_path / "sweep.nc").exists()


@pytest.mark.slow
def test_kill_and_resume_equals_an_uninterrupted_run(tmp_path):
    args = ["sweep", "grid.n=65536", "jacobian.chunk_size=512", "points_per_part=512", "plots=false",
            "progress=false"]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    killed = tmp_path / "killed"
    proc = subprocess.Popen(CLI + args + [f"hydra.run.dir={killed}"], cwd=ROOT, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    parts = killed / "sweep.nc.parts"
    deadline = time.time() + 120
    while len(list(parts.glob("part-*.nc"))) < 3 and time.time() < deadline and proc.poll() is None:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (killed / "sweep.nc").exists(), "the run finished before it could be killed: make the grid larger"
    done_before = len(list(parts.glob("part-*.nc")))
    assert 3 <= done_before < 128

    resumed = subprocess.run(CLI + args + [f"hydra.run.dir={killed}"], cwd=ROOT, env=env, capture_output=True,
                             text=True)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resumed: {done_before} of 128 parts" in resumed.stdout + resumed.stderr
    whole = subprocess.run(CLI + args + [f"hydra.run.dir={tmp_path / 'whole'}"], cwd=ROOT, env=env,
                           capture_output=True, text=True)
    assert whole.returncode == 0, whole.stderr
    a, b = xr.open_dataset(killed / "sweep.nc"), xr.open_dataset(tmp_path / "whole" / "sweep.nc")
    xr.testing.assert_identical(a.drop_attrs(), b.drop_attrs())
    assert a.sizes["sample"] == 65536 and not parts.exists()


@pytest.mark.parametrize("value", [0, -3])
def test_a_points_per_part_below_one_is_refused_naming_the_key(compose_config, tmp_path, value):
    """0 and -3 were accepted (rounded up to one chunk per part)."""
    cfg = compose_config("sweep", ["grid.n=8", f"points_per_part={value}"], output_dir=tmp_path / "run")
    with pytest.raises(ConfigError, match=rf"^`points_per_part` must be a whole number of points >= 1 .* got {value}$"):
        sweep.run(cfg)
    assert not (tmp_path / "run").exists()


def test_the_sweep_library_refuses_points_per_part_below_one():
    from sensitivity.settings import check_points_per_part

    assert check_points_per_part(None) is None and check_points_per_part(1) == 1
    for bad in (0, -3, True, 2.5):
        with pytest.raises(ConfigError, match="`points_per_part`"):
            check_points_per_part(bad)
