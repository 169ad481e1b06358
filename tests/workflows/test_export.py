"""The `export` workflow: SavedModel + check, CF summary, SALib problem file as the space, PEST files; CLI."""
from __future__ import annotations

import json
import subprocess
import sys
import warnings

import numpy as np
import pytest
import xarray as xr

from sensitivity.datasets import record_checksum, write_atomic
from sensitivity.interop.salib import read_problem
from tests.helpers import ROOT
from tests.helpers.cf import cf_errors
from tests.helpers.functions import ishigami_jacobian
from workflows import export, sweep

CLI = [sys.executable, "-m", "workflows"]
PROBLEM = {"num_vars": 3, "names": ["x1", "x2", "x3"], "bounds": [[-1.0, 1.0], [0.0, 2.0], [-2.0, 0.5]],
           "dists": ["unif", "unif", "unif"], "units": ["1", "1", "1"]}


@pytest.mark.slow
def test_export_with_a_salib_space_and_pest(compose_config, tmp_path):
    (tmp_path / "in").mkdir()
    problem_path = tmp_path / "in" / "problem.json"
    problem_path.write_text(json.dumps(PROBLEM))
    calibration = tmp_path / "in" / "calibration.nc"  # the variables a calibration.nc holds, by name
    estimates = np.array([[0.0, 0.0, 0.0], [0.5, 1.0, -1.5]])
    write_atomic(xr.Dataset({"estimate": (("start", "parameter"), estimates[:, ::-1]), "best_start": ((), 1),
                             "observation_std": (("output",), [0.25])},
                            coords={"parameter_name": ("parameter", ["x3", "x2", "x1"])}), calibration)
    record_checksum(calibration)  # a hand-made result with its record, as a user re-creates one
    out = tmp_path / "run"
    cfg = compose_config("export", ["jacobian=float64", "export.check_points=32", "export.bench_seconds=0.2", "export.hessian=false",
                                    f"space_file={problem_path}", f"pest.calibration={calibration}"], output_dir=out)
    target = export.run(cfg)
    assert target == out / "jacobian_model" and (target / "saved_model.pb").is_file()
    ds = xr.open_dataset(out / "export.nc")
    assert ds.attrs["export_passed"] == 1 and ds.sizes["sample"] == 32
    assert str(calibration) in json.loads(ds.attrs["inputs"])  # provenance of the PEST point
    check = json.loads(ds.attrs["export_check"])
    assert check["jacobian_error"] <= 1e-6 and check["importable"] is False
    x = ds["x"].values  # the check points come from the SALib space
    assert (x >= np.array(PROBLEM["bounds"])[:, 0]).all() and (x <= np.array(PROBLEM["bounds"])[:, 1]).all()
    np.testing.assert_allclose(ds["jacobian"].values, ishigami_jacobian(x), rtol=1e-12, atol=1e-12)
    assert cf_errors(out / "export.nc") == []
    np.testing.assert_array_equal(read_problem(out / "problem.json").bounds, PROBLEM["bounds"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pyemu = pytest.importorskip("pyemu")
    jco = pyemu.Jco.from_binary(str(out / "jacobian.jcb"))
    assert jco.col_names == ["x1", "x2", "x3"] and jco.row_names == ["ishigami"]
    np.testing.assert_allclose(jco.x, ishigami_jacobian(np.array([[0.5, 1.0, -1.5]]))[0], rtol=1e-12)
    assert np.diag(pyemu.Cov.from_uncfile(str(out / "jacobian.unc")).as_2d).tolist() == [0.0625]


def test_a_salib_problem_file_drives_a_sweep(compose_config, tmp_path):
    """`space_file=problem.yaml` replaces `space`."""
    problem_path = tmp_path / "problem.yaml"
    problem_path.write_text(json.dumps(PROBLEM))
    cfg = compose_config("sweep", ["grid.n=64", "jacobian=float64", "plots=false", f"space_file={problem_path}"],
                         output_dir=tmp_path / "sweep")
    ds = xr.open_dataset(sweep.run(cfg))
    x = ds["x"].values
    assert x.min(axis=0).tolist() >= [-1.0, 0.0, -2.0] and x.max(axis=0).tolist() <= [1.0, 2.0, 0.5]
    assert x[:, 1].max() > 1.5 and x[:, 2].min() < -1.5  # the file's bounds, not the config's
    np.testing.assert_allclose(ds["jacobian"].values, ishigami_jacobian(x), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("override, message", [
    (["pest.point=nominal", "pest.calibration=c.nc"], "give either `pest.point` or `pest.calibration`"),
    (["pest.point={x1: 0.1}"], "`pest.point` must be 'nominal' or a value for every parameter"),
    (["pest.calibration=missing.nc"], "result file not found: missing.nc"),
])
def test_bad_pest_settings_fail_before_any_work(compose_config, tmp_path, override, message):
    from sensitivity.errors import SensitivityError

    with pytest.raises(SensitivityError, match=message):
        export.run(compose_config("export", override))
    assert not (tmp_path / "jacobian_model").exists() and not (tmp_path / "export.nc").exists()


@pytest.mark.slow
def test_cli_error_is_one_line(tmp_path):
    out = subprocess.run(CLI + ["export", f"hydra.run.dir={tmp_path}", "space_file=missing.json"], capture_output=True,
                         text=True, cwd=ROOT)
    assert out.returncode == 2 and "export: SALib problem file not found: missing.json" in out.stderr + out.stdout
    assert not (tmp_path / "jacobian_model").exists() and not (tmp_path / "export.nc").exists()


def test_a_salib_problem_file_is_the_space_its_results_record_and_are_checked_against(compose_config, tmp_path):
    """A study whose space is a problem file: the sweep records the file's space (not the config's default one),
    a stage that consumes it accepts it, and an edited file is a new computation, not the stored sweep."""
    import yaml

    from sensitivity.errors import SensitivityError
    from workflows.plumbing.runner import run_workflow

    problem_path = tmp_path / "problem.json"
    problem_path.write_text(json.dumps(PROBLEM))
    study = ["jacobian=float64", "plots=false", f"space_file={problem_path}"]
    swept = run_workflow("sweep", compose_config("sweep", [*study, "grid.n=64"], output_dir=tmp_path / "sweep"))
    with xr.open_dataset(swept) as ds:
        recorded = yaml.safe_load(ds.attrs["config"])["space"]["parameters"]
    assert [(p["name"], p["low"], p["high"]) for p in recorded] == \
        [(name, *bounds) for name, bounds in zip(PROBLEM["names"], PROBLEM["bounds"])]
    propagated = run_workflow("propagate", compose_config("propagate", [*study, f"pointwise.sweep={swept}",
                                                                        "propagation.n_samples=1024", "propagation.n_replicates=4"],
                                                          output_dir=tmp_path / "propagate"))
    assert propagated.is_file()

    problem_path.write_text(json.dumps({**PROBLEM, "bounds": [[-1.0, 1.0], [0.0, 2.0], [-2.0, 3.0]]}))
    with pytest.raises(SensitivityError, match="result of other settings"):  # not the stored sweep of the old space
        run_workflow("sweep", compose_config("sweep", [*study, "grid.n=64"], output_dir=tmp_path / "sweep"))
