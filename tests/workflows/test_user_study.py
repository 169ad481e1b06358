"""A scientist's own study: `sensitivity init`, ./conf on the search path, the working directory
importable, scalar outputs, no kwargs leaking from the default model, short safe run directories."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest
import xarray as xr
import yaml

from tests.helpers import CLI
from workflows.init import FILES
from workflows.plumbing.naming import run_name


def test_run_names_are_short_safe_and_stable():
    long = "model.output={name: H, names: [" + ", ".join(f"output_number_{i}" for i in range(60)) + "]}"
    for overrides in ("grid.n=64", "model.source=/home/me/models/m.py:f", long):
        name = run_name(overrides)
        assert len(name) <= 57 and "/" not in name and " " not in name and "{" not in name
        assert name == run_name(overrides)  # rerunning lands in the same directory (resume)
    assert run_name("grid.n-64").startswith("grid.n-64-")
    assert run_name(long) != run_name(long + ",seed=1") and run_name("") == ""


@pytest.mark.slow
def test_init_then_sweep_from_the_study_folder(tmp_path):
    done = subprocess.run(CLI + ["init", str(tmp_path / "study")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    study = tmp_path / "study"
    assert sorted(str(p.relative_to(study)) for p in study.rglob("*") if p.is_file()) == sorted(FILES)
    assert 15 <= len((study / "README.md").read_text().splitlines()) <= 30
    again = subprocess.run(CLI + ["init", str(study)], capture_output=True, text=True)
    assert again.returncode == 2 and "exists" in again.stderr

    out = subprocess.run(CLI + ["sweep", "experiment=study", "grid.n=64", "jacobian=float64", "plots=false",
                                "progress=false"], capture_output=True, text=True, cwd=study)
    assert out.returncode == 0, out.stderr[-3000:]
    run_dir = (study / "outputs" / "sweep" / "latest").resolve()  # the stable name of the last run
    assert yaml.safe_load((run_dir / ".hydra" / "overrides.yaml").read_text())[0] == "experiment=study"
    ds = xr.open_dataset(run_dir / "sweep.nc")
    a, b, c = ds.x.values.T
    assert ds.y.dims == ("sample", "output") and list(ds.output_name.values) == ["y"]
    np.testing.assert_allclose(ds.y.values[:, 0], a + b**2 * c, rtol=1e-12)  # the stub: y = a + b^2 c
    expected = np.stack([np.ones_like(a), 2 * b * c, b**2], axis=1)
    np.testing.assert_allclose(ds.jacobian.values[:, 0, :], expected, rtol=1e-12)
    assert ds.x.values[:, 1].min() >= 0.5  # b: normal truncated below at 0.5


@pytest.mark.slow
def test_forgetting_model_function_names_the_leaked_key(tmp_path):
    (tmp_path / "mymodel.py").write_text("def logistic(x, r=1.0):\n    return x[:, 0] * r\n")
    out = subprocess.run(CLI + ["sweep", "model.source=mymodel:logistic", "grid.n=8", f"hydra.run.dir={tmp_path / 'r'}",
                                "progress=false"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 2
    assert "model `kwargs`: 'a' is not a parameter of mymodel:logistic(x, r=1.0)" in out.stdout + out.stderr
    assert not (tmp_path / "r" / "sweep.nc").exists()
