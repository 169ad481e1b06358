"""A closed-form block computation for the block store's tests (also run by their subprocesses)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import xarray as xr

from sensitivity.datasets import sweep_dataset, write_atomic
from sensitivity.outputs.spec import OutputDim, OutputSpec

#: Samples of the computation and its blocks (the last one short).
SPAN = (3, 40)
BLOCKS = [(a, min(a + 8, SPAN[1])) for a in range(*SPAN, 8)]


def block_dataset(a: int, b: int) -> xr.Dataset:
    """Block ``[a, b)``: y[s, k] = sin(s * k), k = 1..3 (what an uninterrupted run must hold)."""
    sample = np.arange(a, b)
    return xr.Dataset({"y": (("sample", "k"), np.sin(sample[:, None] * np.arange(1, 4)), {"units": "1"})},
                      coords={"sample": ("sample", sample.astype(np.int32), {"units": "1"})})


def sweep_file(path: Path, points: np.ndarray, values: np.ndarray, jacobian: np.ndarray) -> Path:
    """A sweep file of the given arrays (parameters a, b, c in s; output y in m on a ``time`` axis in days)."""
    return write_atomic(_sweep_block(points, values, jacobian), path)


def ensemble_sweep_file(path: Path, points: np.ndarray, values: np.ndarray, jacobian: np.ndarray,
                        store_members: bool = True) -> Path:
    """An ensemble's sweep file of each member's values ``[K, N, m]`` and Jacobians ``[K, N, m, n]``: their mean,
    std (ddof=1), each member's values, the values' surrogate interval and, with ``store_members``, the members'
    Jacobians (the layout of :func:`sensitivity.sweep.stream.sweep`)."""
    from sensitivity.outputs.members import combined_bounds
    from sensitivity.sweep.stream import with_ensemble_variables

    k = len(values)
    ds = with_ensemble_variables(_sweep_block(points, values.mean(0), jacobian.mean(0)), "y", k, 0.95, store_members)
    for name, each in {"y": values, "jacobian": jacobian}.items():
        ds[name + "_surrogate_std"] = ds[name + "_surrogate_std"].copy(data=each.std(axis=0, ddof=1))
        if name + "_member" in ds:
            ds[name + "_member"] = ds[name + "_member"].copy(data=np.moveaxis(each, 0, 1))
    ds["y_combined_interval"] = ds["y_combined_interval"].copy(
        data=combined_bounds(values.mean(0), None, None, values.std(axis=0, ddof=1), k, 0.95))
    return write_atomic(ds, path)


def _sweep_block(points: np.ndarray, values: np.ndarray, jacobian: np.ndarray) -> xr.Dataset:
    spec = OutputSpec(name="y", units="m", dims=(OutputDim("day", tuple(range(values.shape[1])), "day"),))
    return sweep_dataset(np.arange(len(points)), points, values, jacobian, parameter_names=["a", "b", "c"],
                         parameter_units=["s", "s", "s"], parameter_long_names=None, output=spec)
