"""``select`` from a result file: the selection in memory, the file closed (no lazy handle outlives the call)."""
from __future__ import annotations

import numpy as np
import xarray as xr
from xarray.backends.file_manager import FILE_CACHE

from sensitivity.datasets import select


def test_select_from_a_file_reads_the_selection_and_leaves_no_handle_open(tmp_path):
    """A lazy handle left open by ``select(path)`` in a session made a later open of the same result in the process
    fail with "NetCDF: HDF error" (the tutorial's posterior-averaged worth after ``post = select(posterior.nc)``)."""
    path = tmp_path / "result.nc"
    xr.Dataset({"x": (("parameter",), np.array([1.0, 2.0]))},
               coords={"parameter_name": ("parameter", ["a", "b"])}).to_netcdf(path, engine="netcdf4")
    got = select(path, parameter="b")
    assert [key for key in FILE_CACHE.keys() if str(path) in str(key)] == []
    assert isinstance(got["x"].variable._data, np.ndarray) and float(got["x"]) == 2.0
    path.unlink()
    assert float(got["x"]) == 2.0
