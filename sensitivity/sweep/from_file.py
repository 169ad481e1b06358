"""Points and samples read from a file: a ``grid.path`` design and the ``training.data`` of the `train` workflow.

netCDF
    ``x(sample, parameter)`` with a ``parameter_name`` coordinate (any other parameters ignored), and, for
    samples, the output variable ``<output.name>(sample, *output dims)`` (``y`` when no output description is
    given) whose output coordinates, when stored, must be the model's.
CSV
    One row per point: a column per parameter name and, for samples, one per flat output name
    (:meth:`~sensitivity.outputs.spec.OutputSpec.flat_names`); other columns are ignored.

Every inconsistency is a one-line :class:`~sensitivity.errors.DataError` naming the config key and the file.
pandas and xarray are imported when a file is read, so that importing this module (and :mod:`sensitivity.sweep.designs`,
which reads its designs here) stays cheap.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from sensitivity.errors import ConfigError, DataError
from sensitivity.outputs.spec import OutputSpec

if TYPE_CHECKING:
    import pandas as pd
    import xarray as xr


def read_points(path: str | Path, names: list[str], key: str) -> np.ndarray:
    """Points from a netCDF file (``x(sample, parameter)`` with ``parameter_name``) or a CSV file (one column per
    parameter name; extra columns or parameters are ignored).

    Parameters
    ----------
    path
        The points file (``.csv``, else netCDF).
    names
        The parameter names, in the order of the returned columns.
    key
        The config key that named the file (``grid.path``), for the error messages.

    Returns
    -------
    numpy.ndarray
        ``x [N, n]`` in ``names`` order (the parameters' units, as stored).
    """
    path = _existing(path, key)
    if path.suffix == ".csv":
        return _numeric_columns(_read_csv(path, key), names, path, key)
    with _open_netcdf(path, key) as ds:
        return _points(ds, names, path, key)


def read_samples(path: Path, names: list[str], output: OutputSpec | None, *,
                 key: str = "training.data") -> tuple[np.ndarray, np.ndarray]:
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
    key
        The config key that named the file, for the error messages.

    Returns
    -------
    x, y
        ``x [N, n]`` in ``names`` order (the parameters' units, as stored) and ``y [N, *out]``.
    """
    path = _existing(path, key)
    if path.suffix == ".csv":
        table = _read_csv(path, key)
        if output is None:
            raise ConfigError(f"{key} {path}: a CSV file needs model.output to name its output columns")
        _check_columns(table, [*names, *output.flat_names()], path, key)
        y = _numeric_columns(table, output.flat_names(), path, key)
        return _numeric_columns(table, names, path, key), y.reshape(len(table), *output.shape)
    with _open_netcdf(path, key) as ds:
        x = _points(ds, names, path, key)
        var = output.name if output is not None else "y"
        if var not in ds:
            raise DataError(f"{key} {path}: no output variable {var!r}; it has {sorted(ds.data_vars)}")
        dims = ("sample", *output.dim_names) if output is not None else None
        if dims is not None and set(ds[var].dims) != set(dims):
            raise DataError(f"{key} {path}: {var!r} has dims {list(ds[var].dims)}, model.output needs "
                            f"{list(dims)}")
        y = (ds[var].transpose(*dims) if dims else ds[var]).values.astype(float)
        if output is not None:
            _check_coords(ds, output, path, key)
    return x, y


def _existing(path: str | Path, key: str) -> Path:
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{key}: file not found: {path}")
    return path


def check_text(path: Path, what: str) -> None:
    """Refuse a binary file given as CSV (a netCDF file renamed, an image) in one line: a NUL byte, or bytes that
    are not UTF-8 (the file is read whole, as the CSV reader reads it next).

    Parameters
    ----------
    path
        The CSV file.
    what
        What the file is, opening the message (``observations file data.csv``, ``grid.path data.csv``).

    Raises
    ------
    DataError
        ``<what>: a binary file, not CSV text (NUL byte at offset 5)``.
    """
    data = path.read_bytes()
    if b"\0" in data:
        raise DataError(f"{what}: a binary file, not CSV text (NUL byte at offset {data.index(bytes(1))})")
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataError(f"{what}: a binary file, not CSV text (byte {data[err.start]:#04x} at offset {err.start} "
                        "is not UTF-8)") from None


def _read_csv(path: Path, key: str) -> pd.DataFrame:
    import pandas as pd

    check_text(path, f"{key} {path}")
    try:
        return pd.read_csv(path)
    except Exception as err:  # pandas raises many types for malformed text
        reason = next((s.strip() for s in str(err).splitlines() if s.strip()), type(err).__name__)
        raise DataError(f"{key} {path} cannot be read as CSV: {reason}") from None


def _open_netcdf(path: Path, key: str) -> xr.Dataset:
    import xarray as xr

    try:
        return xr.open_dataset(path)
    except Exception as err:  # netCDF4/h5 raise many types for a corrupt file
        raise DataError(f"{key} {path} cannot be read as netCDF: {err}") from None


def _points(ds: xr.Dataset, names: list[str], path: Path, key: str) -> np.ndarray:
    """``x [N, n]`` of an open dataset, columns in ``names`` order."""
    if "x" not in ds or "parameter_name" not in ds.coords or set(ds["x"].dims) != {"sample", "parameter"}:
        raise DataError(f"{key} {path}: needs a variable x(sample, parameter) with coordinate parameter_name")
    stored = [str(v) for v in ds["parameter_name"].values]
    missing = [n for n in names if n not in stored]
    if missing:
        raise DataError(f"{key} {path}: missing parameter(s) {missing}; it has {stored}")
    return ds["x"].transpose("sample", "parameter").values[:, [stored.index(n) for n in names]].astype(float)


def _check_columns(table: pd.DataFrame, columns: list[str], path: Path, key: str) -> None:
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise DataError(f"{key} {path}: missing column(s) {missing[:4]}{' ...' if len(missing) > 4 else ''}; "
                        f"it has {list(table.columns)[:8]}{' ...' if len(table.columns) > 8 else ''}")


def _numeric_columns(table: pd.DataFrame, columns: list[str], path: Path, key: str) -> np.ndarray:
    """``table[columns]`` as a float ``[N, len(columns)]`` array; a missing column or a cell that is not a number
    (an empty one is NaN) is a :class:`DataError` naming it."""
    import pandas as pd

    _check_columns(table, columns, path, key)
    numbers = table[columns].apply(pd.to_numeric, errors="coerce")
    bad = (numbers.isna() & table[columns].notna()).to_numpy()
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise DataError(f"{key} {path}: column {columns[col]!r} must be numeric, got "
                        f"{table[columns[col]].iloc[row]!r} in data row {row + 1}")
    return numbers.to_numpy(dtype=float)


def _check_coords(ds: xr.Dataset, output: OutputSpec, path: Path, key: str) -> None:
    """The file's output coordinates must be the model's (same days, same labels)."""
    for d in output.dims:
        coord = f"{d.name}_name" if d.is_labels else d.name
        if coord in ds.coords:
            stored: Any = ds[coord].values
            same = (list(map(str, stored)) == list(map(str, d.values)) if d.is_labels else
                    stored.shape == (d.size,) and np.allclose(stored.astype(float), np.asarray(d.values, float)))
            if not same:
                raise DataError(f"{key} {path}: coordinate {coord!r} differs from model.output "
                                f"({list(stored[:5])}... vs {list(d.values[:5])}...)")
