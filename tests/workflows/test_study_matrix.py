"""A scientist's own study, of every output shape, through every workflow (issue: the principal gap).

The study is a folder made by ``sensitivity init`` holding the user's models, configs and observations
(:mod:`tests.helpers.study_matrix`): three inputs with scipy marginals truncated on one or both sides,
and one experiment file per model that sets every workflow's keys. Each workflow is composed as the
command line composes it (the study's ``conf/`` first) and run in process; the multirun of the merge
runs through the command line itself. Every run must exit cleanly, write CF-clean datasets (the IOOS
checker: no error) that keep the model's own output dims, and the calibration must cover the truth.
"""
from __future__ import annotations

import subprocess

import numpy as np
import pytest
import xarray as xr

from sensitivity.datasets import open_result
from tests.helpers import CLI
from tests.helpers.cf import cf_errors_of
from tests.helpers.study_matrix import SHAPES, TRUTH, write_study

pytestmark = pytest.mark.slow

#: Each shape's own output dims as they appear in the datasets (a scalar model is one named output).
DIMS = {"scalar": ("output",), "named": ("output",), "series": ("day",), "labels_by_numbers": ("species", "day"),
        "field": ("lat", "lon")}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The study folder: ``sensitivity init``, then the user's own files; the command's working directory."""
    from workflows.init import init

    folder = tmp_path_factory.mktemp("matrix") / "study"
    init(folder)
    write_study(folder)
    return folder


@pytest.fixture
def run(study, monkeypatch):
    """``run(workflow, shape, *overrides, into=workflow)``: compose as the command line does and run in
    ``runs/<shape>/<into>``; returns the result path."""
    from workflows.cli import _compose
    from workflows.plumbing.runner import run_workflow
    from workflows.plumbing.schema import register

    register()
    monkeypatch.chdir(study)
    monkeypatch.syspath_prepend(str(study))

    def _run(workflow: str, shape: str, *overrides: str, into: str | None = None):
        out = study / "runs" / shape / (into or workflow)
        cfg = _compose(workflow, [f"experiment={shape}", f"output_dir={out}", *overrides], str(study / "conf"))
        return run_workflow(workflow, cfg)

    return _run


def own_dims(da: xr.DataArray, shape: str) -> tuple[str, ...]:
    return tuple(d for d in da.dims if d in DIMS[shape])


@pytest.fixture(scope="module")
def merged_sweeps(study):
    """One multirun of the command line: each shape's sweep in two shards, grouped by experiment."""
    sweep_dir = study / "multirun"
    done = subprocess.run(CLI + ["sweep", "-m", f"experiment={','.join(SHAPES)}", "grid.shard=0,1", "grid.num_shards=2",
                                 "plots=false", f"hydra.sweep.dir={sweep_dir}",
                                 "hydra.sweep.subdir=${hydra:runtime.choices.experiment}/${hydra:job.num}"],
                          cwd=study, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return sweep_dir


@pytest.mark.parametrize("shape", SHAPES)
def test_every_workflow_on_a_study_of_this_shape(study, run, merged_sweeps, shape):
    dims = DIMS[shape]
    sweep = run("sweep", shape, "grid.through=distribution")
    with open_result(sweep) as ds:
        y = next(v for n, v in ds.data_vars.items() if n not in ("x", "jacobian"))
        assert own_dims(y, shape) == dims and ds["jacobian"].dims[-1] == "parameter"
        assert ds["x"].values[:, 1].min() >= 0.6  # b: a normal truncated below at 0.6

    calibration = run("calibrate", shape, f"sweep_path={sweep}")
    with open_result(calibration) as ds:
        assert own_dims(ds["y_obs"], shape) == dims and own_dims(ds["prediction_band"], shape) == dims
        best = int(ds["best_start"])
        estimate, se = ds["estimate"].values[best], ds["standard_error"].values[best]
        truth = np.array([TRUTH[n] for n in map(str, ds["parameter_name"].values)])
        assert np.all(np.abs(estimate - truth) < 4 * se), (estimate, truth, se)  # covers the truth (4 std errors)

    posterior = run("posterior", shape, f"calibration={calibration}")
    with open_result(posterior) as ds:
        assert ds.attrs["prior_source"] == "calibration" and ds["draws"].dims == ("chain", "draw", "parameter")

    propagation = run("propagate", shape, "propagate=calibration", f"uncertainty.path={calibration}",
                      f"posterior.path={posterior}", f"pointwise.sweep={sweep}")
    with open_result(propagation) as ds:
        assert own_dims(ds["output_mean"], shape) == dims and ds["output_mean"].dims[0] == "propagation_method"
        assert ds["output_covariance"].dims[1:] == ("output_i", "output_j")
    with open_result(propagation.parent / "local_propagation.nc") as ds:
        assert own_dims(ds["output_std"], shape) == dims

    indices = run("indices", shape, f"dgsm.sweep={sweep}")
    with open_result(indices) as ds:
        assert own_dims(ds["sobol_ST"], shape) == dims and own_dims(ds["dgsm_nu"], shape) == dims

    exported = run("export", shape)
    with open_result(exported.parent / "export.nc") as ds:
        assert ds.attrs["title"]

    merged = run("merge", shape, f"input_dir={merged_sweeps / shape}")
    with open_result(merged) as ds:
        y = next(v for n, v in ds.data_vars.items() if n not in ("x", "jacobian"))
        assert own_dims(y, shape) == dims and ds.sizes["sample"] == 64

    trained = run("train", shape)
    with open_result(trained.parent / "training.nc") as ds:
        assert own_dims(ds["y"] if "y" in ds else next(v for n, v in ds.data_vars.items()
                                                        if v.dims[:1] == ("sample",) and n != "x"), shape) == dims

    # the trained ensemble's sweep with each member's values and Jacobians, and the step map's member spread
    ensemble = [f"model.source={trained}", "model.output=null"]
    members = run("sweep", shape, *ensemble, "store_members=true", into="members_sweep")
    with open_result(members) as ds:
        name = next(n for n, v in ds.data_vars.items() if n != "x" and not n.startswith("jacobian")
                    and not n.endswith(("_member", "_surrogate_std", "_combined_interval")))
        each = ds[f"{name}_member"]
        assert each.dims == ("sample", "member", *ds[name].dims[1:]) and own_dims(each, shape) == dims
        np.testing.assert_allclose(ds[name].values, each.values.mean(axis=1), rtol=1e-5, atol=1e-6)
        assert ds["jacobian_member"].dims == ("sample", "member", *ds["jacobian"].dims[1:])
    step_map = run("calibrate", shape, *ensemble, "fit=false", f"sweep_path={members}", into="members_step_map")
    with open_result(step_map) as ds:
        assert ds["gn_step_member_std"].dims == ("sample", "parameter") and ds.sizes["sample"] == 64
        assert np.isfinite(ds["gn_step_member_std"].values).all()

    written = sorted((study / "runs" / shape).rglob("*.nc"))
    assert len(written) >= 9
    assert cf_errors_of(written) == {path: [] for path in written}


def test_a_shape_the_contract_cannot_hold_is_refused_in_one_line(study, run):
    """`time` without an epoch, an xarray keyword, a dim list of bare names: one line naming the field, before any
    work; through the command line (exit 2, no traceback) and in process."""
    from sensitivity.errors import ConfigError

    cases = {"dims: [day]": "each entry of `dims` must be a mapping",
             "dims: [{name: method, values: [1, 2]}]": "`name` 'method' is reserved",
             "dims: [{name: time, values: [1, 2], units: day}]": "CF keeps a dim named `time` for instants"}
    for dims, message in cases.items():
        with pytest.raises(ConfigError, match=message.replace("[", r"\[")) as err:
            run("sweep", "series", f"model.output={{name: y, units: '1', {dims}}}")
        assert "\n" not in str(err.value)
    done = subprocess.run(CLI + ["sweep", "experiment=series", "model.output={name: y, units: '1', dims: [day]}"],
                          cwd=study, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "output: each entry of `dims` must be a mapping" in done.stdout + done.stderr
    assert not (study / "outputs" / "sweep").exists()


#: One setting of each workflow that changes its result, for the reruns below.
OTHER_SETTING = {"sweep": "grid.n=32", "calibrate": "starts.n=3", "posterior": "n_chains=3",
                 "propagate": "propagation.n_samples=2048", "indices": "sobol.n=64", "export": "export.check_points=8",
                 "merge": "chunk=16", "train": "training.epochs=2"}


def test_every_workflow_reruns_its_run_directory_by_the_protocol(study, run, merged_sweeps):
    """The scalar study's runs above, replayed: with the same settings each workflow finds its complete, verified
    set and does no work (its manifest is not rewritten); with one other setting it is refused in one line, and
    the set stays as it was (the run-directory protocol, sensitivity.datasets.publish)."""
    from sensitivity.datasets.publish import MANIFEST, OtherSettings

    runs = study / "runs" / "scalar"
    sweep, calibration = runs / "sweep" / "sweep.nc", runs / "calibrate" / "calibration.nc"
    posterior = runs / "posterior" / "posterior.nc"
    same = {"sweep": ["grid.through=distribution"], "calibrate": [f"sweep_path={sweep}"],
            "posterior": [f"calibration={calibration}"],
            "propagate": ["propagate=calibration", f"uncertainty.path={calibration}", f"posterior.path={posterior}",
                          f"pointwise.sweep={sweep}"],
            "indices": [f"dgsm.sweep={sweep}"], "export": [], "merge": [f"input_dir={merged_sweeps / 'scalar'}"],
            "train": []}
    for workflow, overrides in same.items():
        manifest = runs / workflow / MANIFEST
        assert manifest.is_file(), f"{workflow}: the matrix run above publishes a manifest"
        written, published = manifest.stat().st_mtime_ns, manifest.read_text()
        run(workflow, "scalar", *overrides)
        assert manifest.stat().st_mtime_ns == written, f"{workflow}: a rerun with the same settings did work"
        with pytest.raises(OtherSettings) as refused:
            run(workflow, "scalar", *overrides, OTHER_SETTING[workflow])
        assert "\n" not in str(refused.value) and f"holds a {workflow} result of other settings" in str(refused.value)
        assert manifest.read_text() == published, f"{workflow}: a refused run changed the set"
