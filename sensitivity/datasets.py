"""CF-style labeled datasets: building, provenance, atomic writes with checksum records, opening by name.

Every workflow writes its results through this module, so every file shares one
contract (see ``DESIGN.md``): integer index dims with names as non-dimension
coordinates, ``long_name`` and ``units`` on every variable, and global attributes
recording where the numbers came from. Writes are atomic (a temporary file
renamed into place; a full disk is a one-line error). Long computations write
verified, resumable parts through :mod:`sensitivity.store`, so a kill loses no
finished work and a partial result is never mistaken for a complete one.
"""
from __future__ import annotations

import datetime as _dt
import errno
import hashlib
import json
import logging
import os
import platform
import shutil
from pathlib import Path
from typing import Any, Callable, Iterable, NamedTuple, Sequence

import numpy as np
import xarray as xr

from sensitivity import __version__
from sensitivity.errors import DataError, disk_error
from sensitivity.labels import parameter_coords, units_attrs
from sensitivity.output_axes import own_coords
from sensitivity.outputs import OutputDim, OutputSpec
from sensitivity.units import quotient

log = logging.getLogger(__name__)

CONVENTIONS = "CF-1.8"
ENCODING_ENGINE = "netcdf4"


# ----------------------------------------------------------------------------- building


def jacobian_units(spec: OutputSpec, parameter_units: Sequence[str]) -> tuple[str | None, np.ndarray]:
    """Units of d output / d parameter: one string when they are uniform, and the full table.

    Returns ``(uniform units or None, units array over (the labels of spec.units_dim?, parameter))``.
    """
    out_units = list(spec.units) if spec.units_dim is not None else [spec.units]
    table = np.array([[quotient(o, p) for p in parameter_units] for o in out_units], dtype=object)
    uniform = table.flat[0] if np.all(table == table.flat[0]) else None
    return uniform, table


def sweep_dataset(
    sample: np.ndarray,
    points: np.ndarray,
    values: np.ndarray,
    jacobian: np.ndarray,
    *,
    parameter_names: Sequence[str],
    parameter_units: Sequence[str],
    parameter_long_names: Sequence[str] | None,
    output: OutputSpec,
    grid_size: int | None = None,
) -> xr.Dataset:
    """Label one block of a sweep: ``x(sample, parameter)``, ``y(sample, *out)``, ``jacobian(sample, *out, parameter)``.

    Parameters
    ----------
    sample
        Global indices of the points in the grid.
    points, values, jacobian
        ``[N, n]``, ``[N, *out]``, ``[N, *out, n]`` arrays in physical units.
    grid_size
        Size of the whole grid: the ``sample`` index is int32 (CF 1.8 has no int64) when it fits,
        float64 (exact to 2^53) beyond.
    """
    out_dims = list(output.dim_names)
    coords: dict[str, Any] = {
        "sample": xr.Variable("sample", np.asarray(sample, dtype=sample_dtype(grid_size or len(sample))), {"long_name": "index of the point in the grid", "units": "1"}),
        **parameter_coords(parameter_names, parameter_units),
        **own_coords(output),
    }
    if parameter_long_names:
        coords["parameter_long_name"] = xr.Variable("parameter", np.asarray(parameter_long_names, dtype=object), {"long_name": "parameter description"})
    uniform, table = jacobian_units(output, parameter_units)
    data = {
        "x": (("sample", "parameter"), points, {"long_name": "parameter value at the point",
                                                 **units_attrs(parameter_units, "parameter_units")}),
        output.name: (("sample", *out_dims), values, {"long_name": output.long_name,
                                                      **units_attrs(output.units, _units_coordinate(output))}),
        "jacobian": (
            ("sample", *out_dims, "parameter"),
            jacobian,
            {"long_name": f"derivative of {output.long_name} with respect to the parameter",
             **units_attrs(uniform, "jacobian_units")},
        ),
    }
    ds = xr.Dataset(data, coords=coords)
    if uniform is None:
        dims = (output.units_dim.name, "parameter") if table.shape[0] > 1 else ("parameter",)
        ds = ds.assign_coords(jacobian_units=(dims, table if table.shape[0] > 1 else table[0], {"long_name": "units of the jacobian"}))
    return ds


def _units_coordinate(spec: OutputSpec) -> str | None:
    """The coordinate holding per-label units (``species_units``), None when one unit covers every output."""
    return None if spec.units_dim is None else f"{spec.units_dim.name}_units"


def sample_dtype(grid_size: int) -> type:
    """int32 for grids that fit it (CF 1.8 allows no int64), else float64."""
    return np.int32 if grid_size < 2**31 else np.float64


# ----------------------------------------------------------------------------- provenance


def content_hash(path: str | Path) -> str:
    """SHA-256 of a file's bytes, as ``sha256:<hex>``."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


def _installed_version(*distributions: str) -> str:
    """Version of the first installed distribution among ``distributions``, read from package metadata
    (no import: recording provenance must not load TensorFlow into a process that does not use it)."""
    from importlib.metadata import PackageNotFoundError, version

    for name in distributions:
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return "not installed"


def provenance(
    *,
    title: str,
    workflow: str,
    config_yaml: str,
    surrogate_source: str | None = None,
    surrogate_hash: str | None = None,
    seed: int | None = None,
    inputs: Iterable[str | Path] = (),
    history: str | None = None,
) -> dict[str, str]:
    """Global attributes: CF ``Conventions``/``title``/``history``/``source`` and the full provenance.

    netCDF rejects dict and bool attributes, so everything is serialised to strings.
    ``inputs`` are the result files this one was computed from; each is recorded with its hash.
    """
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    line = f"{now}: sensitivity {__version__} {workflow}"
    inputs = [str(p) for p in inputs]
    versions = {"sensitivity": __version__, "python": platform.python_version(), "tensorflow": _installed_version("tensorflow-cpu", "tensorflow"),
                "numpy": np.__version__, "xarray": xr.__version__}
    return {
        "Conventions": CONVENTIONS,
        "title": title,
        "history": f"{history}\n{line}" if history else line,
        "source": f"sensitivity {__version__} workflow '{workflow}' on surrogate {surrogate_source or 'none'}",
        "config": config_yaml,
        "surrogate": surrogate_source or "",
        "surrogate_hash": surrogate_hash or "",
        "seed": "" if seed is None else str(seed),
        "package_versions": json.dumps(versions, sort_keys=True),
        "inputs": json.dumps({p: content_hash(p) for p in inputs}, sort_keys=True),
    }


# ----------------------------------------------------------------------------- writing


def write_atomic(ds: xr.Dataset, path: str | Path, *, before_rename: Callable[[Path], Any] | None = None) -> Path:
    """Write ``ds`` to netCDF at ``path`` through a temporary file renamed into place.

    ``before_rename(tmp)`` runs on the finished temporary file before the rename (e.g.
    :func:`record_checksum`). A failed write (full disk, read-only directory) raises a one-line
    :class:`DataError` and leaves ``path`` as it was.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        ds.to_netcdf(tmp, engine=ENCODING_ENGINE, encoding=_encoding(ds))
        if before_rename is not None:
            before_rename(tmp)
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise disk_error(path, e) from None
    except RuntimeError:  # netCDF-C reports a full disk as "NetCDF: HDF error"
        tmp.unlink(missing_ok=True)
        if shutil.disk_usage(path.parent).free < 2**24:
            raise disk_error(path, OSError(errno.ENOSPC, "no space left on device")) from None
        raise
    return path


def record_checksum(path: str | Path, tmp: str | Path | None = None) -> Path:
    """Record the SHA-256 of ``tmp`` (default ``path``) as ``<path>.sha256`` (``sha256sum -c`` format)."""
    digest = content_hash(tmp or path).removeprefix("sha256:")
    return write_text_atomic(f"{digest}  {Path(path).name}\n", checksum_path(path))


def checksum_path(path: str | Path) -> Path:
    """Where :func:`write_atomic` records the checksum of ``path``."""
    path = Path(path)
    return path.with_name(path.name + ".sha256")


def verify_checksum(path: str | Path, sha256: str | None = None) -> bool | None:
    """Whether ``path`` matches its recorded checksum; None when none was recorded.

    ``sha256`` is the file's :func:`content_hash` when the caller has it already.
    """
    record = checksum_path(path)
    if not record.is_file():
        return None
    return record.read_text().split()[:1] == [(sha256 or content_hash(path)).removeprefix("sha256:")]


def _encoding(ds: xr.Dataset) -> dict[str, dict[str, Any]]:
    """Object (string) variables as variable-length strings, and no fill value on a float dimension coordinate
    (CF 2.5.1: coordinate variables must have no missing values); everything else as is."""
    encoding: dict[str, dict[str, Any]] = {name: {"dtype": str} for name, var in ds.variables.items()
                                           if var.dtype == object}
    encoding.update({name: {"_FillValue": None} for name in ds.dims if name in ds.coords
                     and ds[name].dtype.kind == "f" and "_FillValue" not in ds[name].encoding})
    return encoding


# ----------------------------------------------------------------------------- reading


def by_name(ds: xr.Dataset) -> xr.Dataset:
    """Index every ``<axis>_name`` coordinate so that ``ds.sel(parameter_name="beta")`` works."""
    for name in list(ds.coords):
        if name.endswith("_name") and ds[name].ndim == 1 and ds[name].dims[0] in ds.dims:
            ds = ds.set_xindex(name)
    return ds


def open_result(path: str | Path) -> xr.Dataset:
    """Open a result file with name indexes set (``ds.sel(parameter_name="beta")``)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"result file not found: {path}")
    return by_name(xr.open_dataset(path, engine=ENCODING_ENGINE))


def select(ds: xr.Dataset | str | Path, **names: Any) -> xr.Dataset:
    """Select by name, in memory or from a file: ``select(ds, output="H", parameter="Q")``.

    Each keyword ``axis=label`` selects on the ``<axis>_name`` coordinate (``parameter_name``,
    ``output_name``, ``method_name`` ...); a list of labels keeps that axis. ``ds`` may be a
    result dataset (indexed here with :func:`by_name`) or the path of a result file
    (:func:`open_result`).

    Raises
    ------
    DataError
        An axis without a name coordinate, or a label that is not on it (naming the labels there).
    """
    ds = open_result(ds) if isinstance(ds, (str, Path)) else by_name(ds)
    for axis, label in names.items():
        coord = f"{axis}_name"
        if coord not in ds.coords:
            known = sorted(c[:-5] for c in ds.coords if c.endswith("_name"))
            raise DataError(f"select: no `{coord}` coordinate; name axes here: {known}")
        wanted = label if isinstance(label, (list, tuple)) else [label]
        there = [str(v) for v in ds[coord].values]
        missing = [w for w in wanted if w not in there]
        if missing:
            raise DataError(f"select: {axis} {missing[0]!r} not found; {coord} has {there}")
        ds = ds.sel({coord: label})
    return ds


# ----------------------------------------------------------------------------- flat outputs, estimates


class Estimate(NamedTuple):
    """A parameter estimate with its covariance, read from a result file (e.g. ``calibration.nc``)."""

    names: list[str]
    units: list[str] | None
    mean: np.ndarray
    covariance: np.ndarray
    path: Path


def read_estimate(path: str | Path, estimate: str = "estimate", covariance: str = "covariance",
                  start: int | None = None, names: Sequence[str] | None = None) -> Estimate:
    """Read an estimate ``(parameter)`` and its covariance ``(parameter_i, parameter_j)`` by variable name.

    Parameters
    ----------
    path
        A result file with ``parameter_name(parameter)`` labels (``parameter_units`` when present).
    estimate, covariance
        Names of the two variables. A leading ``start`` dim (a multi-start calibration) is reduced to
        one start: ``start`` when given, else the file's ``best_start``.
    start
        Which start to read.
    names
        Return the parameters in this order (e.g. a space's); every name must be in the file.

    Raises
    ------
    DataError
        Missing file or variable, wrong dims, no usable start, or a non-finite estimate or covariance
        (e.g. NaN from a rank-deficient fit).
    """
    with open_result(path) as ds:
        for name in (estimate, covariance):
            if name not in ds.variables:
                raise DataError(f"{path}: no variable `{name}` (variables: {sorted(map(str, ds.data_vars))})")
        if "parameter_name" not in ds.coords:
            raise DataError(f"{path}: no `parameter_name` coordinate labelling the parameters")
        ds = _one_start(ds, path, start)
        if names is not None:
            ds = _in_order(ds, path, names)
        mean, cov = ds[estimate], ds[covariance]
        if mean.dims != ("parameter",) or cov.dims != ("parameter_i", "parameter_j"):
            raise DataError(f"{path}: `{estimate}` must be on (parameter) and `{covariance}` on (parameter_i, "
                            f"parameter_j), got {mean.dims} and {cov.dims}")
        units = [str(u) for u in ds["parameter_units"].values] if "parameter_units" in ds.coords else None
        result = Estimate([str(n) for n in ds["parameter_name"].values], units, mean.values.astype(float),
                          cov.values.astype(float), Path(path))
    for name, values in ((estimate, result.mean), (covariance, result.covariance)):
        if not np.isfinite(values).all():
            raise DataError(f"{path}: `{name}` has non-finite entries (a failed or rank-deficient fit?): "
                            f"{np.array2string(values, precision=4, threshold=20)}")
    return result


def read_prior(path: str | Path, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray] | None:
    """The Gaussian prior a calibration was fitted with, ``(mean [n], covariance [n, n])`` in the order ``names``,
    or None when it was fitted without one (flat within the bounds).

    Raises
    ------
    DataError
        Missing file, or parameters that are not ``names``.
    """
    with open_result(path) as ds:
        if "prior_mean" not in ds.variables:
            return None
        if "prior_covariance" not in ds.variables:
            raise DataError(f"{path}: has `prior_mean` but no `prior_covariance` (written by an older version); "
                            "calibrate again")
        ds = _in_order(ds, path, names)
        return ds["prior_mean"].values.astype(float), ds["prior_covariance"].values.astype(float)


class Draws(NamedTuple):
    """MCMC draws read by :func:`read_draws`."""

    values: np.ndarray  # [chain * draw, n]
    n_chains: int
    units: list[str] | None
    converged: bool  # the file's own verdict (R-hat, ESS, divergences)
    diagnostics: str
    prior: str  # the prior they were sampled under (the file's description)


def read_draws(path: str | Path, names: Sequence[str], variable: str = "draws") -> Draws:
    """The MCMC draws of a ``posterior.nc``, stacked over chains, in the order ``names``.

    Raises
    ------
    DataError
        Missing file or variable, wrong dims, or a parameter of ``names`` missing.
    """
    with open_result(path) as ds:
        if variable not in ds.variables or ds[variable].dims != ("chain", "draw", "parameter"):
            raise DataError(f"{path}: no variable `{variable}` on (chain, draw, parameter)")
        ds = _in_order(ds, path, names)
        units = [str(u) for u in ds["parameter_units"].values] if "parameter_units" in ds.coords else None
        converged = "converged" not in ds.variables or int(ds["converged"]) == 1
        return Draws(ds[variable].values.reshape(-1, len(names)).astype(float), ds.sizes["chain"], units, converged,
                     str(ds.attrs.get("diagnostics", "")), str(ds.attrs.get("prior", "not recorded")))


def _one_start(ds: xr.Dataset, path: str | Path, start: int | None) -> xr.Dataset:
    """Select one ``start`` of a multi-start result: ``start``, else ``best_start``."""
    if "start" not in ds.dims:
        if start is not None:
            raise DataError(f"{path}: has no `start` dim, but start={start} was requested")
        return ds
    if start is None:
        if "best_start" not in ds.variables:
            raise DataError(f"{path}: {ds.sizes['start']} starts and no `best_start`; choose one with `start`")
        start = int(ds["best_start"].values)
        if start < 0:
            raise DataError(f"{path}: `best_start` is {start}: no start of the calibration succeeded")
    if not 0 <= start < ds.sizes["start"]:
        raise DataError(f"{path}: `start` must be in [0, {ds.sizes['start']}), got {start}")
    return ds.isel(start=start)


def _in_order(ds: xr.Dataset, path: str | Path, names: Sequence[str]) -> xr.Dataset:
    """``ds`` with its ``parameter`` (and ``parameter_i``/``parameter_j``) axes in the order of ``names``."""
    stored = [str(n) for n in ds["parameter_name"].values]
    if sorted(stored) != sorted(names):
        raise DataError(f"{path}: parameters {stored} do not match the expected {list(names)}")
    index = [stored.index(n) for n in names]
    axes = {d: index for d in ("parameter", "parameter_i", "parameter_j") if d in ds.dims}
    return ds.drop_indexes([k for k in ds.xindexes if k.endswith("_name")]).isel(axes)


# ----------------------------------------------------------------------------- flat output axes


def output_spec_from(ds: xr.Dataset, exclude: Sequence[str] = ("x", "jacobian")) -> OutputSpec:
    """The :class:`OutputSpec` of a sweep-like result, read back from its output variable and coordinates.

    The output variable is the data variable on ``sample`` not named in ``exclude``; its dims after
    ``sample`` are the output dims (inverse of :func:`sensitivity.output_axes.own_coords`): a dim with a
    ``<dim>_name`` coordinate is labeled, any other is numeric.
    """
    candidates = [n for n, v in ds.data_vars.items() if n not in exclude and v.dims[:1] == ("sample",)]
    if len(candidates) != 1:
        raise DataError(f"cannot tell the output variable of the dataset: candidates {candidates}")
    var = ds[candidates[0]]
    dims, units = [], var.attrs.get("units")
    for dim in var.dims[1:]:
        if f"{dim}_name" in ds.coords:
            labels = ds[f"{dim}_name"]
            described = labels.attrs.get("long_name", "")
            dims.append(OutputDim(dim, tuple(str(v) for v in labels.values),
                                  long_name="" if described == f"{dim} name" else described))
            if units is None and f"{dim}_units" in ds.coords:
                units = tuple(str(u) for u in ds[f"{dim}_units"].values)
        else:
            coord = ds[dim]
            dims.append(OutputDim(dim, tuple(coord.values.tolist()), coord.attrs.get("units", "1"),
                                  coord.attrs.get("long_name", "")))
    if units is None:
        raise DataError(f"the output variable `{var.name}` has no `units` attribute and no per-label units coordinate")
    return OutputSpec(name=str(var.name), units=units, dims=tuple(dims), long_name=var.attrs.get("long_name", ""))


def flat_sweep_block(block: xr.Dataset, spec: OutputSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Points ``[N, n]``, values ``[N, m]`` and Jacobians ``[N, m, n]`` of a sweep block, outputs flat in C order."""
    n_points = block.sizes["sample"]
    out = list(spec.dim_names)
    values = block[spec.name].transpose("sample", *out).values.reshape(n_points, spec.size)
    jacobian = block["jacobian"].transpose("sample", *out, "parameter").values.reshape(n_points, spec.size, -1)
    return block["x"].transpose("sample", "parameter").values, values, jacobian


# ----------------------------------------------------------------------------- other artifacts


def write_bytes_atomic(data: bytes, path: str | Path) -> Path:
    """Write ``data`` to ``path`` through a temporary file renamed into place (binary interop files)."""
    return _replace_atomic(path, lambda tmp: tmp.write_bytes(data))


def copy_atomic(source: str | Path, path: str | Path) -> Path:
    """Copy the file ``source`` to ``path`` through a temporary file renamed into place (an exported model).

    A failed copy (full disk, read-only directory) raises a one-line :class:`DataError` and leaves
    ``path`` as it was: the old file or none, never a partial copy.
    """
    return _replace_atomic(path, lambda tmp: shutil.copyfile(source, tmp))


def _replace_atomic(path: str | Path, fill: Callable[[Path], Any]) -> Path:
    """``fill(tmp)`` writes the temporary sibling ``.<name>.tmp``, which is synced to disk and renamed onto
    ``path``; on any failure the temporary file is removed, and an OSError becomes :func:`disk_error`."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fill(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise disk_error(path, e) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def write_text_atomic(text: str, path: str | Path) -> Path:
    """Write UTF-8 ``text`` to ``path`` atomically (JSON, PEST uncertainty files)."""
    return write_bytes_atomic(text.encode("utf-8"), path)


def write_directory_atomic(path: str | Path, fill: Callable[[Path], Any]) -> Path:
    """Build a directory artifact (e.g. a TF SavedModel) in a temporary sibling, then rename it into place.

    ``fill(tmp_dir)`` writes the content; if it raises, the temporary directory is removed and
    ``path`` is left as it was. An existing ``path`` is replaced only once the new content is complete.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    old = path.with_name(f".{path.name}.old")
    for stale in (tmp, old):
        shutil.rmtree(stale, ignore_errors=True)
    try:
        fill(tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if path.exists():
        os.replace(path, old)
    os.replace(tmp, path)
    shutil.rmtree(old, ignore_errors=True)
    return path


def index_string_dims(ds: xr.Dataset) -> xr.Dataset:
    """Replace every string *dimension* coordinate (e.g. ``bound = ["low", "high"]``) by an integer index
    with the strings as ``<dim>_name``, the layout netCDF and the CF checker accept (see :mod:`labels`)."""
    from sensitivity.labels import axis_coords

    for dim in [d for d in ds.dims if d in ds.coords and ds[d].dtype.kind in "OUS"]:
        names = [str(v) for v in ds[dim].values]
        ds = ds.drop_vars(dim).assign_coords(axis_coords(dim, names))
    return ds
