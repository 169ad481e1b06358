"""The `train` workflow on composed configs: a tiny simulator run, a dataset run, and clear errors."""
from __future__ import annotations

import importlib
import json
import subprocess
import sys

import numpy as np
import pytest
import scipy.stats
import xarray as xr

import sensitivity
from sensitivity.datasets.publish import OtherSettings
from sensitivity.errors import DataError
from sensitivity.sweep.from_file import read_samples
from tests.helpers import ROOT
from workflows import train

TINY = ["training.runs=128", "training.epochs=60", "training.hidden=[16,16]", "training.derivative_points=8",
        "jacobian.jit_compile=false"]


def quadratic(x: np.ndarray) -> np.ndarray:
    """[sum x_i^2, x1 x2 + 2 x2 x3]: sensitivity.simulators.analytic.quadratic written in numpy."""
    return np.stack([(x**2).sum(axis=1), x[:, 0] * x[:, 1] + 2 * x[:, 1] * x[:, 2]], axis=1)


@pytest.mark.slow
def test_train_from_a_simulator_writes_a_self_describing_model_and_a_report(compose_config, tmp_path):
    path = train.run(compose_config("train", TINY))
    model = sensitivity.load_surrogate(path)  # nothing but the directory: the default ensemble of 5
    assert path.name == "surrogate.ensemble" and model.n_members == 5
    assert model.input_names == ("x1", "x2", "x3") and list(model.output.dims[0].values) == ["square", "chain"]
    with xr.open_dataset(tmp_path / "training.nc") as ds:
        assert ds["member_rmse"].dims == ("member", "output") and ds["loss"].dims == ("member", "epoch")
        train_counts = ds["bootstrap_count"].values[:, ds["subset"].values == 0]
        assert (ds["bootstrap_count"].values[:, ds["subset"].values > 0] == 0).all()  # validation, test: never
        assert (train_counts.sum(axis=1) == train_counts.shape[1]).all() and (train_counts == 0).any()  # resampled
        np.testing.assert_allclose(ds["y"].values, quadratic(ds["x"].values), rtol=1e-12)  # the simulator's values
        assert ds.sizes["sample"] == 128 and ds.sizes["check"] == 8
        assert set(ds["subset"].values) == {0, 1, 2} and ds["r2"].dims == ("output",)
        for name in ("x", "y", "rmse", "max_error", "r2", "loss", "val_loss", "jacobian_error",
                     "jacobian_parameter_error"):
            assert ds[name].attrs["long_name"] and ("units" in ds[name].attrs or "units_coordinate" in ds[name].attrs)
        assert ds.attrs["Conventions"].startswith("CF") and ds.attrs["surrogate_hash"].startswith("sha256:")
        assert "R^2" in ds.attrs["validation"] and ds.attrs["seed"] == "0"
        # the test predictions with the members' variables: each member's, their sd and the 0.95 interval for a new
        # draw, mean -+ t_{K-1} sqrt(1 + 1/K) s (Geisser 1993), closed forms of the stored members here
        test = ds["test_sample"].values
        assert (ds["subset"].values[test] == 2).all() and ds["prediction_member"].dims == ("member", "test", "output")
        each = ds["prediction_member"].values
        np.testing.assert_allclose(ds["prediction"].values, each.mean(axis=0), rtol=1e-12)
        np.testing.assert_allclose(ds["rmse"].values, np.sqrt(((each.mean(0) - quadratic(ds["x"].values[test])) ** 2)
                                                              .mean(axis=0)), rtol=1e-5)
        half = scipy.stats.t.ppf(0.975, 4) * np.sqrt(1.2) * each.std(axis=0, ddof=1)
        np.testing.assert_allclose(ds["prediction_combined_interval"].values,
                                   np.stack([each.mean(0) - half, each.mean(0) + half], axis=-1), rtol=1e-10)
        np.testing.assert_allclose(ds["member_spread"].values, np.sqrt((1.2 * each.var(axis=0, ddof=1)).mean(0)),
                                   rtol=1e-10)


@pytest.mark.slow
def test_train_from_a_dataset(compose_config, tmp_path):
    x = np.random.default_rng(0).uniform(-1, 1, (100, 3))
    samples = xr.Dataset({"x": (("sample", "parameter"), x), "y": (("sample", "output"), quadratic(x))},
                         coords={"parameter_name": ("parameter", ["x1", "x2", "x3"]),
                                 "output_name": ("output", ["square", "chain"])})
    samples.to_netcdf(tmp_path / "samples.nc")
    overrides = [*TINY, f"training.data={tmp_path / 'samples.nc'}", "training.simulator=null", "training.members=1"]
    path = train.run(compose_config("train", overrides, output_dir=tmp_path / "out"))
    assert path.name == "surrogate.keras" and sensitivity.load_surrogate(path).n_in == 3
    with xr.open_dataset(tmp_path / "out" / "training.nc") as ds:
        np.testing.assert_array_equal(ds["x"].values, x)
        assert "jacobian_error" not in ds and "samples.nc" in ds.attrs["inputs"]
    manifest = tmp_path / "out" / "manifest.json"  # published whole (sensitivity.datasets.publish)
    assert set(json.loads(manifest.read_text())["files"]) == {"surrogate.keras", "training.nc"}
    written = manifest.stat().st_mtime_ns
    assert train.run(compose_config("train", overrides, output_dir=tmp_path / "out")) == path  # nothing to do
    assert manifest.stat().st_mtime_ns == written
    with pytest.raises(OtherSettings, match="holds a train result of other settings"):
        train.run(compose_config("train", [*overrides, "training.epochs=3"], output_dir=tmp_path / "out"))


@pytest.mark.parametrize("change, match", [
    ("drop x2", r"missing parameter\(s\) \['x2'\]"),
    ("rename outputs", "coordinate 'output_name' differs from model.output"),
    ("three outputs", r"the samples have \[3\] outputs per point but model.output declares \[2\]"),
    ("out of bounds", "'x1' = .* is outside its bounds"),
    ("time dim", r"'y' has dims \['sample', 'time'\], model.output needs \['sample', 'output'\]"),
])
def test_mismatched_datasets_are_named(compose_config, tmp_path, change, match):
    x = np.random.default_rng(0).uniform(-1, 1, (20, 3)) * (5.0 if change == "out of bounds" else 1.0)
    y, out_dim = quadratic(x), "time" if change == "time dim" else "output"
    coords = {"parameter_name": ("parameter", ["x1", "x2", "x3"])}
    if change == "three outputs":
        y = np.column_stack([y, y[:, 0]])
    elif out_dim == "output":
        coords["output_name"] = ("output", ["square", "other"] if change == "rename outputs" else ["square", "chain"])
    ds = xr.Dataset({"x": (("sample", "parameter"), x), "y": (("sample", out_dim), y)}, coords=coords)
    (ds.isel(parameter=[0, 2]) if change == "drop x2" else ds).to_netcdf(tmp_path / "bad.nc")
    with pytest.raises(sensitivity.SensitivityError, match=match):
        train.run(compose_config("train", [*TINY, f"training.data={tmp_path / 'bad.nc'}"]))


def test_csv_samples_and_missing_columns(tmp_path):
    from sensitivity.outputs.spec import OutputSpec

    output = OutputSpec.from_dict({"name": "y", "units": "1", "names": ["square", "chain"]})
    (tmp_path / "s.csv").write_text("x1,x2,x3,square,chain\n0.1,0.2,0.3,0.14,0.14\n0.0,0.5,0.1,0.26,0.1\n")
    x, y = read_samples(tmp_path / "s.csv", ["x1", "x2", "x3"], output)
    np.testing.assert_allclose(y, quadratic(x))
    (tmp_path / "t.csv").write_text("x1,x2,square,chain\n0.1,0.2,0.05,0.02\n")
    with pytest.raises(DataError, match=r"missing column\(s\) \['x3'\]"):
        read_samples(tmp_path / "t.csv", ["x1", "x2", "x3"], output)
    (tmp_path / "u.csv").write_text("x1,x2,x3,square,chain\n0.1,0.2,0.3,0.14,0.14\n0.0,0.5,0.1,n/a?,0.1\n")
    with pytest.raises(DataError, match=r"column 'square' must be numeric, got 'n/a\?' in data row 2"):
        read_samples(tmp_path / "u.csv", ["x1", "x2", "x3"], output)


@pytest.mark.slow
def test_corrupt_dataset_fails_with_one_line_and_exit_code_2(tmp_path):
    bad = tmp_path / "corrupt.nc"
    bad.write_bytes(b"CDF\x01 this is not a netCDF file")
    proc = subprocess.run([sys.executable, "-c", "from workflows.cli import main; main()", "train",
                           f"training.data={bad}", "training.simulator=null", f"hydra.run.dir={tmp_path / 'run'}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() + proc.stdout.splitlines() if "cannot be read" in line]
    assert len(errors) == 1 and str(bad) in errors[0] and "Traceback" not in proc.stderr


@pytest.mark.parametrize("overrides, runs, warned", [
    ([], 512, False),                                 # the default training size
    (["training.runs=96"], 96, False),
    (["grid.n=96"], 96, True),                        # a config of the previous release: still its size, warned
    (["grid.n=1024", "training.runs=96"], 96, False),  # grid.n is the sweep's
    (["debug=default"], 64, False),
])
def test_the_training_size_is_training_runs_and_grid_n_is_the_sweeps(compose_config, caplog, overrides, runs,
                                                                      warned):
    from workflows.plumbing import build
    from workflows.plumbing.training_design import training_grid

    cfg = compose_config("train", overrides)
    with caplog.at_level("WARNING"):
        points = training_grid(cfg, build.space_from(cfg)).points()
    assert points.shape == (runs, 3)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == warned
    if warned:
        assert "`grid.n` = 96 is the training size" in warnings[0] and "set `training.runs`" in warnings[0]
        assert "\n" not in warnings[0]


def test_a_study_from_init_trains_on_training_runs_and_sweeps_grid_n(tmp_path, caplog):
    from tests.helpers.study_config import compose_in_study, init_study
    from workflows.plumbing import build
    from workflows.plumbing.training_design import training_grid

    study = init_study(tmp_path / "study")
    cfg = compose_in_study(study, "train")
    with caplog.at_level("WARNING"):
        assert len(training_grid(cfg, build.space_from(cfg)).points()) == cfg.training.runs == 512
    assert not [r for r in caplog.records if r.levelname == "WARNING"]
    assert compose_in_study(study, "sweep").grid.n == 1024


def test_missing_simulator_and_data_is_a_config_error(compose_config):
    with pytest.raises(sensitivity.ConfigError, match="`training.simulator`"):
        train.run(compose_config("train", ["model=ishigami", "space=ishigami"]))


@pytest.mark.slow
def test_seir_experiment_composes_for_train_and_sweeps_the_shipped_surrogate(compose_config, tmp_path, monkeypatch):
    from sensitivity.simulators import seir
    from workflows import sweep

    cfg = compose_config("train", ["experiment=seir"])
    assert cfg.training.simulator == "sensitivity.simulators.seir:simulate" and cfg.training.log_output
    assert cfg.grid.kind == "sobol" and cfg.model.source == "data/seir/surrogate.keras"
    monkeypatch.chdir(tmp_path)  # the relative model source resolves against the repository root, not the cwd
    out = sweep.run(compose_config("sweep", ["experiment=seir", "debug=default", "plots=false"],
                                   output_dir=tmp_path / "sweep"))
    with xr.open_dataset(out) as ds:
        assert ds["jacobian"].dims == ("sample", "day", "parameter") and ds.sizes["day"] == seir.DAYS
        assert str(ROOT / "data" / "seir" / "surrogate.keras") in ds.attrs["surrogate"]


def quadratic_jacobian(x: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """``[N, 2, 3]``: the Jacobian of :func:`quadratic` (``scale`` is the simulator's keyword, bound to both)."""
    x1, x2, x3 = x.T
    return scale * np.stack([np.stack([2 * x1, 2 * x2, 2 * x3], -1), np.stack([x2, x1 + 2 * x3, 2 * x2], -1)], 1)


def wrong_jacobian(x: np.ndarray, scale: float = 1.0) -> np.ndarray:
    return np.zeros((len(x), 2))  # forgot the parameter axis


SOBOLEV = [*TINY, "training.members=1", "training.epochs=5", "training.jacobian_weight=1.0"]


@pytest.mark.slow
def test_train_sobolev_from_a_simulator_jacobian(compose_config, tmp_path):
    train.run(compose_config("train", [*SOBOLEV, "training.simulator_jacobian=tests.workflows.test_train:"
                                                 "quadratic_jacobian"]))
    with xr.open_dataset(tmp_path / "training.nc") as ds:
        assert ds.attrs["jacobian_targets"] == "simulator_jacobian" and ds.attrs["jacobian_weight"] == "1"
        assert ds.attrs["simulator_jacobian"] == "tests.workflows.test_train:quadratic_jacobian"


def test_a_simulator_jacobian_of_the_wrong_shape_is_refused(compose_config):
    from sensitivity.errors import ModelError

    with pytest.raises(ModelError, match=r"^`training.simulator_jacobian` must return \[N, \*out, n\]") as caught:
        train.run(compose_config("train", [*SOBOLEV, "training.simulator_jacobian=tests.workflows.test_train:"
                                                     "wrong_jacobian"]))
    assert "\n" not in str(caught.value)


def test_a_conv_network_needs_one_field_of_inputs(compose_config):
    with pytest.raises(sensitivity.ConfigError, match=r"^`training.architecture: conv` needs `input_fields` naming "
                                                      r"one field of inputs .* got None$"):
        train.run(compose_config("train", [*TINY, "training.architecture=conv"]))
    with pytest.raises(sensitivity.ConfigError, match=r"input_fields.x: shape \[4\] needs 4 parameters named x_\*"):
        train.run(compose_config("train", [*TINY, "training.architecture=conv", "input_fields={x: [4]}"]))


def scaled_quadratic(x: np.ndarray, gain: float) -> np.ndarray:
    """A user's simulator with its own keyword argument (and no ``scale``)."""
    return gain * quadratic(x)


def returns_nan(x: np.ndarray) -> np.ndarray:
    y = quadratic(x)
    y[7] = np.nan
    return y


def test_a_users_simulator_gets_its_own_kwargs_not_the_default_presets(compose_config, tmp_path):
    cfg = compose_config("train", [*TINY, "training.runs=32", "training.members=1", "training.epochs=2",
                                   "training.derivative_points=0",
                                   "training.simulator=tests.workflows.test_train:scaled_quadratic",
                                   "+training.simulator_kwargs.gain=2.5"])
    train.run(cfg)
    with xr.open_dataset(tmp_path / "training.nc") as ds:
        np.testing.assert_allclose(ds["y"].values, 2.5 * quadratic(ds["x"].values), rtol=1e-12)


def test_a_simulators_kwargs_are_checked_and_its_bad_results_refused_before_anything_is_published(compose_config,
                                                                                                  tmp_path):
    from sensitivity.errors import ModelError

    cfg = compose_config("train", [*TINY, "training.simulator=tests.workflows.test_train:scaled_quadratic",
                                   "+training.simulator_kwargs.scale=1.0"])
    with pytest.raises(sensitivity.ConfigError, match=r"`training.simulator_kwargs`: 'scale' is not a parameter of "
                                                      r"tests.workflows.test_train:scaled_quadratic"):
        train.run(cfg)
    cfg = compose_config("train", [*TINY, "training.runs=32",
                                   "training.simulator=tests.workflows.test_train:returns_nan"])
    with pytest.raises(ModelError, match=r"^simulator tests.workflows.test_train:returns_nan \(`training.simulator`\) "
                                         r"returned nan \(output 0\) at point 7 of 16, x = \["):
        train.run(cfg)
    assert not list(tmp_path.rglob("training.nc")) and not list(tmp_path.rglob("surrogate.*"))


#: Three small members, trained quickly: enough to kill a run between members.
RESUMED = [*TINY, "training.runs=64", "training.members=3", "training.epochs=20", "training.derivative_points=0"]


def _member_weights(ensemble) -> list[list[np.ndarray]]:
    """Each member's weights, read from the ensemble's ``.keras`` files."""
    import importlib

    import keras

    importlib.import_module("sensitivity.training")  # registers the scaling layers the members hold
    return [keras.saving.load_model(f, compile=False).get_weights() for f in sorted(ensemble.glob("member_*.keras"))]


def _data_of(path) -> xr.Dataset:
    with xr.open_dataset(path) as ds:
        return ds.load().drop_attrs(deep=False)


def _kept(parts) -> dict:
    """``{file: (mtime, sha256)}`` of the members kept in ``parts``."""
    from sensitivity.datasets import content_hash

    return {p: (p.stat().st_mtime_ns, content_hash(p)) for p in sorted(parts.glob("member-*/*")) if p.is_file()}


@pytest.mark.slow
def test_a_killed_train_keeps_its_finished_members_and_its_rerun_publishes_an_uninterrupted_runs_surrogate(
        compose_config, tmp_path, monkeypatch, caplog):
    import logging

    driver = importlib.import_module("sensitivity.training.fit")  # the module train_surrogate takes its fit from, at the call

    killed, clean = tmp_path / "killed", tmp_path / "clean"
    fit, trained = driver.fit, []

    def killed_after_two_members(*args, **kwargs):
        if len(trained) == 2:
            raise KeyboardInterrupt("killed")
        trained.append(kwargs["seed"])
        return fit(*args, **kwargs)

    monkeypatch.setattr(driver, "fit", killed_after_two_members)
    with pytest.raises(KeyboardInterrupt):
        train.run(compose_config("train", RESUMED, output_dir=killed))
    parts = killed / "train.parts"
    assert sorted(p.name for p in parts.iterdir()) == ["member-0", "member-0.json", "member-1", "member-1.json",
                                                      "simulated", "simulated.json"]
    assert not (killed / "manifest.json").exists() and not (killed / "surrogate.ensemble").exists()
    before = _kept(parts)

    seen = {}

    def counted(*args, **kwargs):
        seen.setdefault("kept", _kept(parts))  # the kept members as the rerun found them, before it publishes
        trained.append(kwargs["seed"])
        return fit(*args, **kwargs)

    trained.clear()
    monkeypatch.setattr(driver, "fit", counted)
    with caplog.at_level(logging.INFO):
        resumed = train.run(compose_config("train", RESUMED, output_dir=killed))
    assert trained == [2], "only the third member (seed 0 + 2) is trained again"
    assert "member 0: reused from an interrupted run" in caplog.text
    assert "member 1: reused from an interrupted run" in caplog.text and "member 2: reused" not in caplog.text
    assert "the simulator's 64 runs reused from an interrupted run" in caplog.text
    assert seen["kept"] == before, "the kept members were read, never rewritten"
    assert not parts.exists() and (killed / "manifest.json").is_file()  # published: nothing unfinished left

    monkeypatch.undo()
    fresh = train.run(compose_config("train", RESUMED, output_dir=clean))
    for mine, theirs in zip(_member_weights(resumed), _member_weights(fresh), strict=True):
        for a, b in zip(mine, theirs, strict=True):
            np.testing.assert_array_equal(a, b)  # bit-identical weights: training is deterministic per seed
    xr.testing.assert_identical(_data_of(killed / "training.nc"), _data_of(clean / "training.nc"))
    manifests = [json.loads((d / "surrogate.ensemble" / "ensemble.json").read_text()) for d in (killed, clean)]
    assert manifests[0]["training_run"] == manifests[1]["training_run"]
    assert [m["best_epoch"] for m in manifests[0]["members"]] == [m["best_epoch"] for m in manifests[1]["members"]]


def test_kept_simulator_runs_are_not_reused_once_the_simulators_code_changed(compose_config, tmp_path, monkeypatch,
                                                                             caplog):
    import logging

    driver = importlib.import_module("sensitivity.training.fit")  # the module train_surrogate takes its fit from, at the call

    study = tmp_path / "study"
    study.mkdir()
    (study / "helper.py").write_text("GAIN = 1.0\n")
    (study / "my_simulator.py").write_text(
        "import numpy as np\nfrom helper import GAIN\n\n\ndef f(x):\n    return GAIN * (x ** 2).sum(axis=1, keepdims=True)\n")
    monkeypatch.syspath_prepend(str(study))
    cfg = [*TINY, "training.runs=32", "training.members=1", "training.epochs=2", "training.derivative_points=0",
           "training.simulator=my_simulator:f", "model.output=null"]

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(driver, "fit", killed)
    with pytest.raises(KeyboardInterrupt):  # killed after the simulator ran: its runs are kept
        train.run(compose_config("train", cfg, output_dir=tmp_path / "out"))
    assert (tmp_path / "out" / "train.parts" / "simulated.json").is_file()
    monkeypatch.undo()
    monkeypatch.syspath_prepend(str(study))
    (study / "helper.py").write_text("GAIN = 2.0\n")  # the simulator's own module unchanged, a helper it imports not
    for name in ("my_simulator", "helper"):
        sys.modules.pop(name, None)
    with caplog.at_level(logging.INFO):
        train.run(compose_config("train", cfg, output_dir=tmp_path / "out"))
    assert "reused from an interrupted run" not in caplog.text
    with xr.open_dataset(tmp_path / "out" / "training.nc") as ds:
        np.testing.assert_allclose(ds["y"].values[:, 0], 2.0 * (ds["x"].values ** 2).sum(axis=1), rtol=1e-12)


def test_a_kept_member_of_other_settings_or_with_a_damaged_file_is_trained_again(compose_config, tmp_path,
                                                                                 monkeypatch, caplog):
    import logging

    driver = importlib.import_module("sensitivity.training.fit")  # the module train_surrogate takes its fit from, at the call

    cfg = compose_config("train", [*TINY, "training.runs=32", "training.members=3", "training.epochs=2",
                                   "training.derivative_points=0"])
    fit, trained = driver.fit, []

    def killed_after_two_members(*args, **kwargs):
        if len(trained) == 2:
            raise KeyboardInterrupt("killed")
        trained.append(kwargs["seed"])
        return fit(*args, **kwargs)

    monkeypatch.setattr(driver, "fit", killed_after_two_members)
    with pytest.raises(KeyboardInterrupt):
        train.run(cfg)
    parts = tmp_path / "train.parts"
    record = json.loads((parts / "member-0.json").read_text())
    (parts / "member-0.json").write_text(json.dumps({**record, "fingerprint": "another training"}))
    model = parts / "member-1" / "model.keras"
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 0xFF
    model.write_bytes(bytes(data))
    trained.clear()
    monkeypatch.setattr(driver, "fit", lambda *args, **kwargs: trained.append(kwargs["seed"]) or fit(*args, **kwargs))
    with caplog.at_level(logging.INFO):
        sensitivity.load_surrogate(train.run(cfg))  # and the published ensemble loads
    assert trained == [0, 1, 2] and "member 0: reused" not in caplog.text and "member 1: reused" not in caplog.text
    assert "member-0: kept by a run of other inputs or settings; computed again" in caplog.text
    assert "member-1: its files do not match their record member-1.json (damaged); computed again" in caplog.text


def test_the_simulators_runs_show_progress_while_train_runs_them(compose_config, tmp_path, monkeypatch, capsys):
    """The simulator runs through the recorded runner with its progress bar (tqdm on stderr), not as one silent
    call; killed after the runs, the kept runs are the simulator's values."""
    driver = importlib.import_module("sensitivity.training.fit")  # the module train_surrogate takes its fit from, at the call

    def killed(*args, **kwargs):
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(driver, "fit", killed)
    cfg = [*TINY, "training.runs=32", "training.members=1", "training.derivative_points=0", "progress=true"]
    with pytest.raises(KeyboardInterrupt):
        train.run(compose_config("train", cfg, output_dir=tmp_path / "out"))
    err = capsys.readouterr().err
    assert "train: simulator: 100%" in err and "32.0/32.0" in err
    parts = tmp_path / "out" / "train.parts"
    assert sorted(p.name for p in parts.iterdir()) == ["simulated", "simulated.json"]  # the runner's file folded in
    y = np.load(parts / "simulated" / "y.npy")
    assert y.shape == (32, 2)
