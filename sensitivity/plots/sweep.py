"""Figures of a sweep: the spread of the derivatives across the grid."""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr


def _flat_jacobian(ds: xr.Dataset) -> tuple[np.ndarray, list[str]]:
    """Jacobian as ``[sample, flat output, parameter]`` and the parameter names."""
    jac = ds["jacobian"]
    out_dims = [d for d in jac.dims if d not in ("sample", "parameter")]
    stacked = jac.transpose("sample", *out_dims, "parameter").values.reshape(jac.sizes["sample"], -1, jac.sizes["parameter"])
    return stacked, [str(n) for n in ds["parameter_name"].values]


def sweep_figure(path: str | Path, figure_path: str | Path, max_samples: int = 20000) -> Path:
    """Derivative spread of a sweep: median |d y / d p| per output and parameter, and its 5-95 % band.

    Parameters
    ----------
    path
        A ``sweep.nc`` file.
    figure_path
        Where to write the PNG.
    max_samples
        At most this many samples (the first ones) are read, so large sweeps plot quickly.
    """
    with xr.open_dataset(path) as ds:
        ds = ds.isel(sample=slice(0, max_samples)).load()
    jac, names = _flat_jacobian(ds)
    scale = np.nanmedian(np.abs(jac), axis=0)  # [out, parameter]
    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    im = ax0.imshow(scale.T, aspect="auto", cmap="viridis", interpolation="nearest")
    ax0.set_yticks(range(len(names)), names)
    ax0.set_xlabel("output index")
    ax0.set_title("median |d output / d parameter|")
    fig.colorbar(im, ax=ax0)
    low, mid, high = np.nanpercentile(jac, [5, 50, 95], axis=0)
    index = np.arange(jac.shape[1])
    for k, name in enumerate(names):
        norm = np.nanmax(np.abs(np.stack([low[:, k], high[:, k]]))) or 1.0
        line, = ax1.plot(index, mid[:, k] / norm, label=name)
        ax1.fill_between(index, low[:, k] / norm, high[:, k] / norm, color=line.get_color(), alpha=0.2)
    ax1.set_xlabel("output index")
    ax1.set_title("derivative across the sweep: median, 5-95 % (scaled per parameter)")
    ax1.legend(fontsize="small", ncol=2)
    figure_path = Path(figure_path)
    fig.savefig(figure_path, dpi=110)
    plt.close(fig)
    return figure_path
