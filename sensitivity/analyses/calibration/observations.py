"""Observations of a model's outputs, read from netCDF or CSV and aligned to its :class:`OutputSpec`.

Two file layouts are read:

netCDF
    A variable ``observed`` on the model's own output dims (``observed(time)``,
    ``observed(lat, lon)``, or ``observed(output)`` for named scalars, with the names in an
    ``output_name`` or string ``output`` coordinate). Optional ``sigma`` on the same dims
    (standard deviation per value), or ``covariance(output_i, output_j)`` over the values of
    ``observed`` flattened in C order. NaN marks a missing value. The ``units`` of ``observed``
    (and ``sigma``, default: those of ``observed``) and of each output coordinate (``time``) are
    converted to the model's with cf-units (``day-1`` -> ``1e-5 day-1``, ``hours since`` ->
    ``days since``); units that cannot be converted are refused. Absent units mean the model's. Parameter values that
    generated synthetic observations may be stored as global attributes ``true_<name>``, a
    JSON global attribute ``true_parameters`` or a variable ``true_parameter(parameter)``
    with a ``parameter_name`` coordinate.
CSV
    One row per observed value: a column per output dim holding its coordinate (``time``,
    or ``output`` holding the output name), a ``value`` column and an optional ``sigma``
    column. On a CF time axis (``days since <epoch>``) the coordinate may be an ISO 8601 date
    (``2021-03-01``): it is converted to the axis's numbers.

Files may cover a subset of the model's outputs, in any order: the result is laid out in the
model's flat (C) order with NaN where nothing was observed. Every inconsistency is a one-line
:class:`~sensitivity.errors.DataError` naming the file, the field and the value.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from sensitivity.analyses.calibration import ObservationModel
from sensitivity.errors import DataError
from sensitivity.runtime.lazy import lazy_import
from sensitivity.outputs.spec import OutputDim, OutputSpec
from sensitivity.sweep.from_file import check_text
from sensitivity.units import convert, instants, scale

xr = lazy_import("xarray")

#: Relative tolerance when matching numeric coordinates (days, degrees) of a file to the model's.
COORD_RTOL = 1e-9

CSV_COLUMNS = ("value", "sigma")
NETCDF_SUFFIXES = (".nc", ".nc4", ".netcdf")


@dataclass(frozen=True)
class Observations:
    """Observations aligned to a model's outputs (flat C order of its :class:`OutputSpec`).

    Attributes
    ----------
    values
        ``[m]`` observed outputs in output units; NaN where not observed.
    sigma
        ``[m]`` standard deviation per value (NaN where not observed), or None.
    cov
        ``[m, m]`` observation covariance (NaN outside the observed block), or None.
    spec
        The model outputs they are aligned to.
    path
        The file they were read from.
    true_parameters
        Parameter values stored with synthetic observations (name -> value), else empty.
    model
        The validated whitening (:class:`~sensitivity.analyses.calibration.ObservationModel`).
    """

    values: np.ndarray
    sigma: np.ndarray | None
    cov: np.ndarray | None
    spec: OutputSpec
    path: Path
    true_parameters: dict[str, float] = field(default_factory=dict)
    model: ObservationModel | None = None

    @property
    def n_observed(self) -> int:
        """Number of values that enter a fit."""
        return int(np.isfinite(self.values).sum())

    def errors(self) -> dict[str, np.ndarray | None]:
        """``{"sigma": ..., "cov": ...}`` keyword arguments of the calibration functions."""
        return {"sigma": self.sigma, "cov": self.cov}


def read_observations(path: str | Path, spec: OutputSpec) -> Observations:
    """Read observations from a netCDF (``.nc``) or CSV (``.csv``) file and align them to ``spec``.

    Parameters
    ----------
    path
        The file (layouts in the module docstring).
    spec
        The model's outputs: names, dims and coordinate values.

    Returns
    -------
    Observations

    Raises
    ------
    DataError
        Missing file or variable, an output name or coordinate the model does not have, a dims or
        shape mismatch, duplicate entries, NaN / non-positive ``sigma`` where a value is observed,
        a covariance that is not symmetric positive definite on the observed values.
    """
    path = check_path(path)
    reader = _read_csv if path.suffix.lower() == ".csv" else _read_netcdf
    values, sigma, cov, truth = reader(path, spec)
    try:
        model = ObservationModel.from_arrays(values, sigma=sigma, cov=cov, output_names=spec.flat_names())
    except DataError as err:
        raise DataError(f"observations file {path}: {err}") from None
    return Observations(values, sigma, cov, spec, path, truth, model)


def check_path(path: str | Path) -> Path:
    """``path`` as a Path after checking that it is an existing ``.nc`` or ``.csv`` file (before any work)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"observations file not found: {path}")
    if path.suffix.lower() not in (".csv", *NETCDF_SUFFIXES):
        raise DataError(f"observations file {path}: expected a .nc or .csv file, got suffix {path.suffix!r}")
    return path


# ----------------------------------------------------------------------------- netCDF


def _read_netcdf(path: Path, spec: OutputSpec):
    try:
        ds = xr.open_dataset(path, engine="netcdf4", decode_times=False)  # times as the model's numbers
    except (OSError, ValueError) as err:
        raise DataError(f"observations file {path}: cannot be read as netCDF ({err})") from None
    with ds:
        if "observed" not in ds:
            raise DataError(f"observations file {path}: needs a variable `observed` on the model's output dims "
                            f"{list(spec.dim_names)}; it has {sorted(ds.data_vars)}")
        observed = ds["observed"]
        flat = _netcdf_positions(path, ds, observed, spec)
        source = observed.attrs.get("units")
        values = _in_model_units(path, _scatter(observed.values, flat, spec.size), source, spec, "observed")
        sigma = cov = None
        if "sigma" in ds:
            if ds["sigma"].dims != observed.dims:
                raise DataError(f"observations file {path}: `sigma` must have the dims of `observed` "
                                f"{list(observed.dims)}, got {list(ds['sigma'].dims)}")
            sigma = _scatter(ds["sigma"].values, flat, spec.size) * _scales(
                path, ds["sigma"].attrs.get("units", source), spec, "sigma")
        if "covariance" in ds:
            factor = _scales(path, source, spec, "observed")
            cov = _covariance(path, ds["covariance"], flat, spec.size) * np.outer(factor, factor)
        if sigma is not None and cov is not None:
            raise DataError(f"observations file {path}: give either `sigma` or `covariance`, not both")
        return values, sigma, cov, _true_parameters(path, ds)


def _netcdf_positions(path: Path, ds: xr.Dataset, observed: xr.DataArray, spec: OutputSpec) -> np.ndarray:
    """Model flat position of every entry of ``observed`` (flattened in C order of its own dims)."""
    if set(observed.dims) != set(spec.dim_names) or observed.ndim != len(spec.dims):
        raise DataError(f"observations file {path}: `observed` is on dims {list(observed.dims)} with shape "
                        f"{list(observed.shape)} but the model's outputs are on {list(spec.dim_names)} with shape "
                        f"{list(spec.shape)}")
    by_name = {d.name: d for d in spec.dims}
    per_dim = []
    for dim in observed.dims:
        model_dim = by_name[dim]
        if model_dim.is_labels:
            labels = _file_labels(ds, dim)
        elif dim in ds.coords and ds[dim].dtype.kind in "OUS":
            raise DataError(f"observations file {path}: the `{dim}` coordinate holds labels "
                            f"{_preview(ds[dim].values)}, but the model's {dim!r} is numeric ({_preview(model_dim.values)})")
        elif dim in ds.coords:
            labels = convert(ds[dim].values, ds[dim].attrs.get("units"), model_dim.units,
                             where=f"observations file {path}: the `{dim}` coordinate")
        else:
            labels = None
        if labels is None:
            if observed.sizes[dim] != model_dim.size:
                raise DataError(f"observations file {path}: `observed` has {observed.sizes[dim]} entries along "
                                f"{dim!r} and no coordinate to align them, but the model has {model_dim.size}")
            per_dim.append(np.arange(model_dim.size))
        else:
            per_dim.append(_match(path, model_dim, labels, f"the `{dim}` coordinate"))
    grids = np.meshgrid(*per_dim, indexing="ij")  # in the file's dim order
    flat = np.ravel_multi_index([grids[observed.dims.index(d)].ravel() for d in spec.dim_names], spec.shape)
    _check_unique(path, flat, spec)
    return flat


def _in_model_units(path: Path, values: np.ndarray, source: str | None, spec: OutputSpec, name: str) -> np.ndarray:
    """``values`` (model flat order) from the file's ``source`` units to each output's units."""
    targets = np.array(spec.flat_units() if isinstance(spec.units, tuple) else [spec.units] * spec.size)
    out = values.copy()
    for target in np.unique(targets):
        at = targets == target
        out[at] = convert(values[at], source, str(target), where=f"observations file {path}: `{name}`")
    return out


def _scales(path: Path, source: str | None, spec: OutputSpec, name: str) -> np.ndarray:
    """Per-output factor taking a standard deviation from ``source`` units to the model's (flat order)."""
    targets = spec.flat_units() if isinstance(spec.units, tuple) else [spec.units] * spec.size
    factors = {t: scale(source, t, where=f"observations file {path}: `{name}`") for t in set(targets)}
    return np.array([factors[t] for t in targets])


def _file_labels(ds: xr.Dataset, dim: str) -> np.ndarray | None:
    """Labels of a labeled dim in the file: a ``<dim>_name(<dim>)`` coordinate (``species_name``), a string
    ``<dim>`` coordinate, or None."""
    if f"{dim}_name" in ds.coords and ds[f"{dim}_name"].dims == (dim,):
        return ds[f"{dim}_name"].values
    if dim in ds.coords and ds[dim].dtype.kind in "OUS":
        return ds[dim].values
    return None


def _scatter(array: np.ndarray, flat: np.ndarray, size: int) -> np.ndarray:
    """``[size]`` array in the model's flat order with the file's entries at ``flat``, NaN elsewhere."""
    full = np.full(size, np.nan)
    full[flat] = np.asarray(array, dtype=float).ravel()
    return full


def _covariance(path: Path, cov: xr.DataArray, flat: np.ndarray, size: int) -> np.ndarray:
    n_file = flat.size
    if cov.dims != ("output_i", "output_j") or cov.shape != (n_file, n_file):
        raise DataError(f"observations file {path}: `covariance` must be (output_i, output_j) of shape "
                        f"[{n_file}, {n_file}] (one row per entry of `observed`), got {list(cov.dims)} "
                        f"{list(cov.shape)}")
    full = np.full((size, size), np.nan)
    full[np.ix_(flat, flat)] = np.asarray(cov.values, dtype=float)
    return full


def _true_parameters(path: Path, ds: xr.Dataset) -> dict[str, float]:
    truth: dict[str, float] = {}
    if "true_parameters" in ds.attrs:
        try:
            truth.update({str(k): float(v) for k, v in json.loads(ds.attrs["true_parameters"]).items()})
        except (ValueError, TypeError, AttributeError):
            raise DataError(f"observations file {path}: global attribute `true_parameters` must be a JSON object "
                            f"name -> value, got {ds.attrs['true_parameters']!r}") from None
    for key, value in ds.attrs.items():
        if key.startswith("true_") and key != "true_parameters" and np.ndim(value) == 0:
            try:
                truth[key[len("true_"):]] = float(value)
            except (TypeError, ValueError):
                continue
    if "true_parameter" in ds and "parameter_name" in ds.coords:
        truth.update({str(n): float(v) for n, v in zip(ds["parameter_name"].values, ds["true_parameter"].values)})
    return truth


# ----------------------------------------------------------------------------- CSV


def _read_csv(path: Path, spec: OutputSpec):
    import pandas as pd

    check_text(path, f"observations file {path}")
    try:
        table = pd.read_csv(path)
    except (OSError, ValueError) as err:
        reason = next((s.strip() for s in str(err).splitlines() if s.strip()), type(err).__name__)
        raise DataError(f"observations file {path}: cannot be read as CSV ({reason})") from None
    dims = list(spec.dim_names)
    missing = [c for c in [*dims, "value"] if c not in table.columns]
    if missing:
        raise DataError(f"observations file {path}: missing column(s) {missing}; the model's outputs are on "
                        f"{dims}, so the columns must be {dims + list(CSV_COLUMNS)}, got {list(table.columns)}")
    unknown = [c for c in table.columns if c not in [*dims, *CSV_COLUMNS]]
    if unknown:
        raise DataError(f"observations file {path}: unknown column(s) {unknown}; expected {dims + list(CSV_COLUMNS)}")
    if len(table) == 0:
        raise DataError(f"observations file {path}: no rows")
    positions = tuple(_match(path, d, _csv_coordinates(path, d, table[d.name]), f"column `{d.name}`")
                      for d in spec.dims)
    flat = np.ravel_multi_index(positions, spec.shape)
    _check_unique(path, flat, spec)
    values = np.full(spec.size, np.nan)
    values[flat] = _numeric(path, table["value"], "value")
    sigma = None
    if "sigma" in table.columns:
        sigma = np.full(spec.size, np.nan)
        sigma[flat] = _numeric(path, table["sigma"], "sigma")
    return values, sigma, None, {}


def _csv_coordinates(path: Path, dim: OutputDim, column) -> np.ndarray:
    """A CSV column's coordinates along ``dim``: on a CF time axis (``days since 2021-01-01``), dates and times
    in ISO 8601 (``2021-03-01``, ``2021-03-01T06:00``, with or without a UTC offset) become the axis's numbers;
    anything else is matched as it is."""
    import pandas as pd

    if dim.is_labels or column.dtype.kind != "O" or " since " not in dim.units:
        return column.to_numpy()
    dates = pd.to_datetime(column, format="ISO8601", errors="coerce", utc=True)
    bad = dates.isna() & column.notna()
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        raise DataError(f"observations file {path}: column `{dim.name}` must hold dates (ISO 8601, e.g. 2021-03-01) "
                        f"or numbers in the model's {dim.units!r}, got {column.iloc[row]!r} in data row {row + 1}")
    return instants(dates.dt.tz_convert(None).to_numpy("datetime64[us]"), dim.units,
                    where=f"observations file {path}: column `{dim.name}`")


def _numeric(path: Path, column, name: str) -> np.ndarray:
    import pandas as pd

    numbers = pd.to_numeric(column, errors="coerce").to_numpy(dtype=float)
    bad = np.isnan(numbers) & column.notna().to_numpy()
    if bad.any():
        row = int(np.flatnonzero(bad)[0])
        raise DataError(f"observations file {path}: column `{name}` must be numeric, got {column.iloc[row]!r} "
                        f"in data row {row + 1}")
    return numbers


def _check_unique(path: Path, flat: np.ndarray, spec: OutputSpec) -> None:
    unique, counts = np.unique(flat, return_counts=True)
    if (counts > 1).any():
        name = spec.flat_names()[int(unique[counts > 1][0])]
        raise DataError(f"observations file {path}: output {name!r} is given more than once")


# ----------------------------------------------------------------------------- matching


def _match(path: Path, dim: OutputDim, labels: Sequence[Any], what: str) -> np.ndarray:
    """Position in ``dim`` of every file label (names for ``output``, numbers for ``time``/``lat`` ...)."""
    labels = np.asarray(labels)
    if dim.is_labels:
        lookup = {str(v): i for i, v in enumerate(dim.values)}
        found = np.array([lookup.get(str(v), -1) for v in labels])
        if (found < 0).any():
            bad = labels[found < 0][0]
            raise DataError(f"observations file {path}: unknown label {str(bad)!r} in {what}; the model's "
                            f"{dim.name!r} labels are {_preview(dim.values)}")
        return found
    model = np.asarray(dim.values, dtype=float)
    try:
        numbers = labels.astype(float)
    except (TypeError, ValueError):
        raise DataError(f"observations file {path}: {what} must be numeric like the model's {dim.name!r} "
                        f"coordinate, got {labels[:3].tolist()}") from None
    nearest = np.abs(numbers[:, None] - model[None, :]).argmin(axis=1)
    tol = COORD_RTOL * max(1.0, float(np.abs(model).max()))
    off = ~(np.abs(numbers - model[nearest]) <= tol)
    if off.any():
        raise DataError(f"observations file {path}: {dim.name}={numbers[off][0]:g} in {what} is not an output "
                        f"coordinate of the model ({dim.name} {_preview(dim.values)})")
    return nearest


def _preview(values: Sequence[Any], head: int = 6) -> str:
    values = list(values)
    if len(values) <= head:
        return str([_plain(v) for v in values])
    return f"[{', '.join(str(_plain(v)) for v in values[:3])}, ..., {_plain(values[-1])}] ({len(values)} values)"


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


# ----------------------------------------------------------------------------- true parameters


def with_true_parameters(ds: xr.Dataset, truth: dict[str, float]) -> xr.Dataset:
    """Add the true parameter values of synthetic observations to a calibration result, and whether each
    lies in the interval ``parameter_interval`` of the best start.

    Adds ``true_parameter(parameter)`` (NaN for a parameter without a true value) and
    ``true_in_interval(parameter)`` (1 inside, 0 outside, -1 unknown). ``ds`` is returned unchanged when
    ``truth`` is empty.
    """
    if not truth:
        return ds
    names = [str(n) for n in ds["parameter_name"].values]
    values = np.array([truth.get(n, np.nan) for n in names], dtype=float)
    best = int(ds["best_start"])
    inside = np.full(len(names), -1, dtype=np.int8)
    if best >= 0:
        low, high = ds["parameter_interval"].values[best].T
        known = np.isfinite(values) & np.isfinite(low) & np.isfinite(high)
        inside[known] = ((low <= values) & (values <= high))[known]
    level = ds["parameter_interval"].attrs.get("long_name", "interval").split(" ")[0]
    units = {k: v for k, v in ds["estimate"].attrs.items() if k in ("units", "units_coordinate")}
    return ds.assign(
        true_parameter=xr.Variable("parameter", values, {"long_name": "true parameter value of the synthetic "
                                                         "observations", **units}),
        true_in_interval=xr.Variable("parameter", inside, {
            "long_name": f"true parameter value lies in the {level} interval of the best start",
            "flag_values": np.array([-1, 0, 1], np.int8), "flag_meanings": "unknown outside inside"}),
    )
