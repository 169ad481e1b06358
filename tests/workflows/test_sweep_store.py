"""Faults around the `sweep` workflow's store: each ends refused (one line, exit 2) or equal to a clean run."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest
import xarray as xr

from sensitivity.errors import ConfigError, DataError
from sensitivity.store.parts import PartStore
from tests.helpers.functions import ishigami_jacobian
from workflows import sweep

SMALL = ["grid.n=96", "jacobian=float64", "jacobian.chunk_size=16", "points_per_part=32", "plots=false"]


def values(path) -> xr.Dataset:
    """Every variable and coordinate with their attributes; global attributes (provenance) differ by design."""
    with xr.open_dataset(path) as ds:
        return ds.load().drop_attrs(deep=False)


def crash_after_first_part(monkeypatch, run):
    write = PartStore.write

    def crash(self, ds, start, stop, dim="sample"):
        write(self, ds, start, stop, dim)
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(PartStore, "write", crash)
    with pytest.raises(KeyboardInterrupt):
        run()
    monkeypatch.undo()


def test_resume_with_another_chunk_size_is_refused(compose_config, tmp_path, monkeypatch):
    out = tmp_path / "run"
    crash_after_first_part(monkeypatch, lambda: sweep.run(compose_config("sweep", SMALL, output_dir=out)))
    with pytest.raises(DataError, match=r"different computation .*block layout\); rerun with the same settings"):
        sweep.run(compose_config("sweep", [*SMALL, "jacobian.chunk_size=24"], output_dir=out))
    resumed = sweep.run(compose_config("sweep", SMALL, output_dir=out))
    clean = sweep.run(compose_config("sweep", SMALL, output_dir=tmp_path / "clean"))
    xr.testing.assert_identical(values(resumed), values(clean))
    np.testing.assert_allclose(values(resumed)["jacobian"].values, ishigami_jacobian(values(resumed)["x"].values),
                               rtol=1e-12)


def test_an_edited_grid_file_is_not_mixed_with_old_parts(compose_config, tmp_path, monkeypatch):
    grid = tmp_path / "points.csv"
    points = np.random.default_rng(1).uniform(-3, 3, (64, 3))
    np.savetxt(grid, points, delimiter=",", header="x1,x2,x3", comments="")
    overrides = ["grid=file", f"grid.path={grid}", "jacobian=float64", "jacobian.chunk_size=16", "points_per_part=16",
                 "plots=false"]
    out = tmp_path / "run"
    crash_after_first_part(monkeypatch, lambda: sweep.run(compose_config("sweep", overrides, output_dir=out)))
    np.savetxt(grid, points[::-1], delimiter=",", header="x1,x2,x3", comments="")  # same path, other content
    with pytest.raises(DataError, match="different computation"):
        sweep.run(compose_config("sweep", overrides, output_dir=out))


def test_flipped_bytes_in_a_part_are_recomputed(compose_config, tmp_path, monkeypatch, caplog):
    out = tmp_path / "run"
    crash_after_first_part(monkeypatch, lambda: sweep.run(compose_config("sweep", SMALL, output_dir=out)))
    part = next((out / "sweep.nc.parts").glob("part-*.nc"))
    data = bytearray(part.read_bytes())
    data[len(data) // 2: len(data) // 2 + 8] = b"\x7f" * 8
    part.write_bytes(bytes(data))
    resumed = sweep.run(compose_config("sweep", SMALL, output_dir=out))
    assert "checksum mismatch (damaged); it will be recomputed" in caplog.text
    clean = sweep.run(compose_config("sweep", SMALL, output_dir=tmp_path / "clean"))
    xr.testing.assert_identical(values(resumed), values(clean))
    record = (out / "sweep.nc.sha256").read_text().split()
    assert subprocess.run(["sha256sum", "-c", "--quiet", "sweep.nc.sha256"], cwd=out).returncode == 0, record


def test_more_shards_than_points_is_a_config_error(compose_config):
    with pytest.raises(ConfigError, match=r"shard 6 of 8 holds no points \(the grid has 4\); use at most 4 shards"):
        sweep.run(compose_config("sweep", ["grid.n=4", "grid.shard=6", "grid.num_shards=8", "plots=false"]))


def test_a_nan_value_has_a_nan_jacobian_and_both_are_counted(compose_config):
    overrides = ["model=function", "model.source=tests.helpers.models:sqrt_model", "model.output={name: y, names: [root]}",
                 "space.parameters=[{name: a, units: '1', low: -1, high: 1}, {name: b, units: '1', low: 0, high: 1}]",
                 "grid.n=64", "plots=false"]
    with xr.open_dataset(sweep.run(compose_config("sweep", overrides))) as ds:
        negative = ds["x"].values[:, 0] < 0  # sqrt of a negative number: NaN value
        assert np.isnan(ds["y"].values[negative]).all() and np.isnan(ds["jacobian"].values[negative]).all()
        assert ds.attrs["nonfinite_jacobian"] >= 2 * negative.sum()


@pytest.mark.parametrize("content, message", [
    ("x1,x2,x3\n0.1,zero,0.3\n", r"column 'x2' must be numeric, got 'zero' in data row 1"),
    ("x1,x2,x3\n", r"the grid is empty \(0 points\)"),
])
def test_bad_grid_files_are_one_line_errors(compose_config, tmp_path, content, message):
    (tmp_path / "points.csv").write_text(content)
    with pytest.raises((ConfigError, DataError), match=message):
        sweep.run(compose_config("sweep", ["grid=file", f"grid.path={tmp_path / 'points.csv'}", "plots=false"]))


def test_a_syntax_error_in_a_user_module_is_a_model_error(compose_config, tmp_path, monkeypatch):
    from sensitivity.errors import ModelError

    (tmp_path / "broken_user_model.py").write_text("def f(x):\n    return x +\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModelError, match=r"cannot be imported: SyntaxError: invalid syntax"):
        sweep.run(compose_config("sweep", ["model=function", "model.source=broken_user_model:f", "plots=false"]))
