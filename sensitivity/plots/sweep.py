"""Figures of a sweep: how strongly and how variably each parameter moves each output."""
from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import xarray as xr


def _flat_axis(ds: xr.Dataset, out_dims: list[str]) -> tuple[np.ndarray, str]:
    """The x axis of the figure: the output coordinate of a 1-D output, else the flat output index."""
    if len(out_dims) == 1 and out_dims[0] != "output":
        coord = ds[out_dims[0]]
        return coord.values, f"{coord.attrs.get('long_name', out_dims[0])} [{coord.attrs.get('units', '1')}]"
    return np.arange(int(np.prod([ds.sizes[d] for d in out_dims]))), "output index"


def sweep_figure(path: str | Path, figure_path: str | Path, max_samples: int = 20000) -> Path:
    """Scaled derivatives of a sweep: median |dy/dx| times each parameter's range, and the 5-95 % band.

    Multiplying by the range swept (max - min of the parameter over the sweep) puts parameters
    with different units on one scale: the change of the output across the parameter's range,
    to first order.

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
    jac = ds["jacobian"]
    out_dims = [d for d in jac.dims if d not in ("sample", "parameter")]
    n_samples, n_params = jac.sizes["sample"], jac.sizes["parameter"]
    values = jac.transpose("sample", *out_dims, "parameter").values.reshape(n_samples, -1, n_params)
    spread = np.ptp(ds["x"].values, axis=0)  # [parameter]
    scaled = values * spread
    names = [str(n) for n in ds["parameter_name"].values]
    axis, axis_label = _flat_axis(ds, out_dims)
    units = ds[[v for v in ds.data_vars if v not in ("x", "jacobian")][0]].attrs.get("units", "")

    fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(12, 4.4), constrained_layout=True)
    median = np.nanmedian(np.abs(scaled), axis=0)  # [out, parameter]
    left, right = (axis[0], axis[-1]) if len(axis) > 1 else (axis[0] - 0.5, axis[0] + 0.5)
    im = ax0.imshow(median.T, aspect="auto", cmap="viridis", interpolation="nearest",
                    extent=(left, right, n_params - 0.5, -0.5))
    ax0.set_yticks(range(n_params), names)
    ax0.set_xlabel(axis_label)
    ax0.set_title("median |dy/dx| x range of x")
    fig.colorbar(im, ax=ax0, label=units)
    low, mid, high = np.nanpercentile(scaled, [5, 50, 95], axis=0)
    for k, name in enumerate(names):
        line, = ax1.plot(axis, mid[:, k], label=name)
        ax1.fill_between(axis, low[:, k], high[:, k], color=line.get_color(), alpha=0.15)
    ax1.set_xlabel(axis_label)
    ax1.set_ylabel(f"dy/dx x range of x [{units}]" if units else "dy/dx x range of x")
    ax1.set_title(f"across {n_samples} sweep points: median and 5-95 %")
    ax1.legend(fontsize="small", ncol=2)
    figure_path = Path(figure_path)
    fig.savefig(figure_path, dpi=110)
    plt.close(fig)
    return figure_path
