"""Training samples of a simulator read from a file: the ``training.data`` of the `train` workflow.

netCDF
    ``x(sample, parameter)`` with a ``parameter_name`` coordinate, and the output variable
    ``<output.name>(sample, *output dims)`` (``y`` when no output description is given) whose
    output coordinates, when stored, must be the model's.
CSV
    One row per sample: a column per parameter name and one per flat output name
    (:meth:`~sensitivity.outputs.OutputSpec.flat_names`).

Every inconsistency is a one-line :class:`~sensitivity.errors.DataError` naming the file.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

from sensitivity.errors import ConfigError, DataError
from sensitivity.outputs import OutputSpec


def read_samples(path: Path, names: list[str], output: OutputSpec | None) -> tuple[np.ndarray, np.ndarray]:
    """Samples from a netCDF file (``x(sample, parameter)`` with ``parameter_name``, and the output variable
    ``<output.name>(sample, *dims)`` or ``y``) or a CSV file (one column per parameter and per flat output name).

    Parameters
    ----------
    path
        The samples file (``.nc`` or ``.csv``).
    names
        The parameter names, in the order of the columns of ``x``.
    output
        The model's output description; None: the netCDF variable ``y`` as it is (a CSV file needs one).

    Returns
    -------
    x, y
        ``x [N, n]`` in ``names`` order (the parameters' units, as stored) and ``y [N, *out]``.
    """
    if not path.is_file():
        raise DataError(f"training.data: file not found: {path}")
    if path.suffix == ".csv":
        return _read_csv(path, names, output)
    try:
        ds = xr.open_dataset(path)
    except Exception as err:  # netCDF4/h5 raise many types for a corrupt file
        raise DataError(f"training.data {path} cannot be read as netCDF: {err}") from None
    with ds:
        if "x" not in ds or "parameter_name" not in ds.coords or ds["x"].dims != ("sample", "parameter"):
            raise DataError(f"training.data {path}: needs x(sample, parameter) with coordinate parameter_name")
        stored = [str(v) for v in ds["parameter_name"].values]
        missing = [n for n in names if n not in stored]
        if missing:
            raise DataError(f"training.data {path}: missing parameter(s) {missing}; it has {stored}")
        x = ds["x"].values[:, [stored.index(n) for n in names]].astype(float)
        var = output.name if output is not None else "y"
        if var not in ds:
            raise DataError(f"training.data {path}: no output variable {var!r}; it has {sorted(ds.data_vars)}")
        dims = ("sample", *output.dim_names) if output is not None else None
        if dims is not None and set(ds[var].dims) != set(dims):
            raise DataError(f"training.data {path}: {var!r} has dims {list(ds[var].dims)}, model.output needs "
                            f"{list(dims)}")
        y = (ds[var].transpose(*dims) if dims else ds[var]).values.astype(float)
        if output is not None:
            _check_coords(ds, output, path)
    return x, y


def _check_coords(ds: xr.Dataset, output: OutputSpec, path: Path) -> None:
    """The file's output coordinates must be the model's (same days, same labels)."""
    for d in output.dims:
        key = "output_name" if d.is_labels else d.name
        if key in ds.coords:
            stored = ds[key].values
            same = (list(map(str, stored)) == list(map(str, d.values)) if d.is_labels else
                    stored.shape == (d.size,) and np.allclose(stored.astype(float), np.asarray(d.values, float)))
            if not same:
                raise DataError(f"training.data {path}: coordinate {key!r} differs from model.output "
                                f"({list(stored[:5])}... vs {list(d.values[:5])}...)")


def _read_csv(path: Path, names: list[str], output: OutputSpec | None) -> tuple[np.ndarray, np.ndarray]:
    try:
        table = pd.read_csv(path)
    except Exception as err:  # pandas raises many types for malformed text
        raise DataError(f"training.data {path} cannot be read as CSV: {err}") from None
    if output is None:
        raise ConfigError(f"training.data {path}: a CSV file needs model.output to name its output columns")
    columns = [*names, *output.flat_names()]
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise DataError(f"training.data {path}: missing column(s) {missing[:4]}{' ...' if len(missing) > 4 else ''}; "
                        f"it has {list(table.columns)[:8]}")
    try:
        x = table[names].to_numpy(dtype=float)
        y = table[output.flat_names()].to_numpy(dtype=float).reshape(len(table), *output.shape)
    except ValueError as err:
        raise DataError(f"training.data {path}: non-numeric values: {err}") from None
    return x, y
