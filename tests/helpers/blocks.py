"""A closed-form block computation for the block store's tests (also run by their subprocesses)."""
from __future__ import annotations

import numpy as np
import xarray as xr

#: Samples of the computation and its blocks (the last one short).
SPAN = (3, 40)
BLOCKS = [(a, min(a + 8, SPAN[1])) for a in range(*SPAN, 8)]


def block_dataset(a: int, b: int) -> xr.Dataset:
    """Block ``[a, b)``: y[s, k] = sin(s * k), k = 1..3 (what an uninterrupted run must hold)."""
    sample = np.arange(a, b)
    return xr.Dataset({"y": (("sample", "k"), np.sin(sample[:, None] * np.arange(1, 4)), {"units": "1"})},
                      coords={"sample": ("sample", sample.astype(np.int32), {"units": "1"})})
