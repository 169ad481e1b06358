"""Grids: contents, reproducibility, streaming blocks, shards, and files."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr
from scipy.stats import qmc

from sensitivity.errors import ConfigError, DataError
from sensitivity.sweep.designs import make_grid, shard_bounds
from sensitivity.outputs.labels import parameter_coords
from sensitivity.inputs.space import ParameterSpace

SPACE = ParameterSpace.from_records([
    dict(name="a", units="1", low=0.0, high=2.0),
    dict(name="b", units="day", low=1.0, high=100.0, scale="log"),
    dict(name="c", units="m", low=-1.0, high=1.0),
])


def test_factorial_levels_linear_and_log():
    grid = make_grid(SPACE, "factorial", levels=[3, 3, 1])
    x = grid.points()
    assert grid.size == 9 and x.shape == (9, 3)
    np.testing.assert_allclose(np.unique(x[:, 0]), [0, 1, 2])
    np.testing.assert_allclose(np.unique(x[:, 1]), [1, 10, 100])  # geometric levels
    np.testing.assert_allclose(x[:, 2], 0.0)  # a single level sits at nominal
    np.testing.assert_allclose(x[:3, 1], [1, 10, 100])  # last parameter with > 1 level varies fastest


@pytest.mark.parametrize("kind", ["sobol", "halton", "lhs", "random"])
def test_designs_are_seeded_in_bounds_and_blockwise(kind):
    grid = make_grid(SPACE, kind, n=256, seed=7)
    x = grid.points()
    assert x.shape == (256, 3)
    np.testing.assert_array_equal(x, make_grid(SPACE, kind, n=256, seed=7).points())
    assert not np.array_equal(x, make_grid(SPACE, kind, n=256, seed=8).points())
    lo, hi = SPACE.bounds.T
    assert np.all(x >= lo) and np.all(x <= hi)
    np.testing.assert_array_equal(np.concatenate([grid.block(0, 100), grid.block(100, 256)]), x)


def test_sobol_is_scipy_sequence_mapped_to_bounds():
    x = make_grid(SPACE, "sobol", n=64, seed=3).points()
    unit = qmc.Sobol(3, scramble=True, rng=np.random.default_rng(3)).random(64)
    np.testing.assert_allclose(x[:, 0], 2 * unit[:, 0])
    np.testing.assert_allclose(x[:, 1], 10 ** (2 * unit[:, 1]))
    # the LHS stratifies each margin: one point per 1/n stratum
    lhs = make_grid(SPACE, "lhs", n=50, seed=1).points()
    np.testing.assert_array_equal(np.sort(np.floor(lhs[:, 0] / 2 * 50)), np.arange(50))


@pytest.mark.parametrize("kind, engine", [("sobol", "Sobol"), ("halton", "Halton")])
def test_blocks_in_any_order_are_rows_of_scipys_sequence(kind, engine):
    """The grid's engine continues consecutive blocks and rewinds for any other start."""
    unit = getattr(qmc, engine)(3, scramble=True, rng=np.random.default_rng(5)).random(256)
    grid = make_grid(SPACE, kind, n=256, seed=5)
    for a, b in [(200, 256), (10, 50), (50, 60), (60, 61), (0, 3), (255, 256)]:
        np.testing.assert_allclose(grid.block(a, b)[:, 0], 2 * unit[a:b, 0], rtol=1e-15)


@pytest.mark.parametrize("size, shards", [(1000, 8), (7, 3), (5, 5), (4, 4)])
def test_shards_concatenate_to_the_grid(size, shards):
    grid = make_grid(SPACE, "sobol", n=size)
    bounds = [shard_bounds(size, i, shards) for i in range(shards)]
    assert bounds[0][0] == 0 and bounds[-1][1] == size
    assert all(b[1] == c[0] for b, c in zip(bounds, bounds[1:]))
    np.testing.assert_array_equal(np.concatenate([grid.block(a, b) for a, b in bounds]), grid.points())


def test_an_empty_shard_is_refused():
    with pytest.raises(ConfigError, match=r"shard 0 of 4 holds no points \(the grid has 3\); use at most 3 shards"):
        shard_bounds(3, 0, 4)


def test_one_at_a_time():
    x = make_grid(SPACE, "oat", steps=3).points()
    assert x.shape == (1 + 3 * 3, 3)
    np.testing.assert_allclose(x[0], SPACE.nominal)
    changed = (x[1:] != SPACE.nominal).sum(axis=1)
    assert np.all(changed <= 1)


def test_points_from_csv_and_netcdf(tmp_path):
    points = make_grid(SPACE, "random", n=10, seed=0).points()
    table = pd.DataFrame(points[:, ::-1], columns=["c", "b", "a"]).assign(extra=1)
    table.to_csv(tmp_path / "p.csv", index=False)
    np.testing.assert_allclose(make_grid(SPACE, "file", path=tmp_path / "p.csv").points(), points)
    ds = xr.Dataset({"x": (("sample", "parameter"), points)}, coords=parameter_coords(SPACE.names))
    ds.to_netcdf(tmp_path / "p.nc")
    np.testing.assert_allclose(make_grid(SPACE, "file", path=tmp_path / "p.nc").points(), points)
    table.drop(columns="b").to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(DataError, match=r"missing column\(s\) \['b'\]"):
        make_grid(SPACE, "file", path=tmp_path / "bad.csv")
    table.assign(a=99.0).to_csv(tmp_path / "out.csv", index=False)
    with pytest.raises(ConfigError, match=r"'a' = 99.0 at point 0 \(data row 1\) is outside its bounds"):
        make_grid(SPACE, "file", path=tmp_path / "out.csv")
    (tmp_path / "text.csv").write_text("a,b,c\n0.5,x,0.5\n")
    with pytest.raises(DataError, match=r"grid.path .*text.csv: column 'b' must be numeric, got 'x' in data row 1"):
        make_grid(SPACE, "file", path=tmp_path / "text.csv")
    (tmp_path / "corrupt.nc").write_bytes(b"CDF\x01 not a netCDF file")
    with pytest.raises(DataError, match=r"grid.path .*corrupt.nc cannot be read as netCDF"):
        make_grid(SPACE, "file", path=tmp_path / "corrupt.nc")


@pytest.mark.parametrize("kwargs, message", [
    (dict(kind="sobolx", n=4), "grid.kind must be one of"),
    (dict(kind="sobol", n=0), "grid.n must be an integer >= 1, got 0"),
    (dict(kind="factorial", levels=[2, 2]), "need one level count per parameter (3)"),
    (dict(kind="factorial", levels=[2, 0, 2]), "grid.levels for 'b' must be an integer >= 1, got 0"),
])
def test_bad_grid_inputs(kwargs, message):
    with pytest.raises(ConfigError) as err:
        make_grid(SPACE, **kwargs)
    assert message in str(err.value)


def test_bad_shard():
    with pytest.raises(ConfigError, match=r"grid.shard must be an integer in \[0, 4\), got 4"):
        shard_bounds(10, 4, 4)


def test_through_distribution_on_a_correlated_space_draws_its_gaussian_copula():
    """Each column keeps its marginal (Kolmogorov-Smirnov against scipy), and the rank correlation of a Gaussian
    copula of correlation r is (6 / pi) arcsin(r / 2) (Kruskal 1958), on a Sobol' net of 8192 points."""
    from scipy import stats

    r = 0.7
    space = ParameterSpace.from_records([
        {"name": "a", "units": "1", "low": 0.0, "high": 1.0},
        {"name": "b", "units": "1", "distribution": {"kind": "gumbel_r", "loc": 2.0, "scale": 0.5, "truncate": [0, 6]}},
    ], correlation=[[1.0, r], [r, 1.0]])
    x = make_grid(space, "sobol", n=8192, through="distribution").block(0, 8192)
    assert stats.kstest(x[:, 0], stats.uniform().cdf).statistic < 0.01
    assert stats.kstest(x[:, 1], space.parameters[1].frozen_distribution().cdf).statistic < 0.01
    assert abs(stats.spearmanr(x[:, 0], x[:, 1]).statistic - 6 / np.pi * np.arcsin(r / 2)) < 0.01
