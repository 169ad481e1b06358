"""Reading results: open with name indexes, select by name, and the readers of estimates, priors and draws."""
from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple, Sequence

import numpy as np

from sensitivity.datasets.write import ENCODING_ENGINE
from sensitivity.errors import DataError
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")


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
    (:func:`open_result`): then the selection is read into memory and the file closed, so no handle on it
    outlives the call (a lazy handle left open in a session made later opens of a result file in the same
    process fail with "NetCDF: HDF error").

    Raises
    ------
    DataError
        An axis without a name coordinate, or a label that is not on it (naming the labels there).
    """
    if isinstance(ds, (str, Path)):
        with open_result(ds) as opened:
            return _select(opened, names).load()
    return _select(by_name(ds), names)


def _select(ds: xr.Dataset, names: dict[str, Any]) -> xr.Dataset:
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


class Estimate(NamedTuple):
    """A parameter estimate with its covariance, read from a result file (e.g. ``calibration.nc``)."""

    names: list[str]
    units: list[str] | None
    mean: np.ndarray
    covariance: np.ndarray
    path: Path


def read_estimate(path: str | Path, estimate: str = "estimate", covariance: str = "covariance",
                  start: int | None = None, names: Sequence[str] | None = None,
                  finite_covariance: bool = True) -> Estimate:
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
    finite_covariance
        Refuse a non-finite covariance (NaN from a rank-deficient fit); with False it is returned as stored,
        for a caller that can do without it (the posterior sampler).

    Raises
    ------
    DataError
        Missing file or variable, wrong dims, no usable start, or a non-finite estimate or (with
        ``finite_covariance``) covariance, e.g. NaN from a rank-deficient fit.
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
    for name, values in ((estimate, result.mean), *([(covariance, result.covariance)] if finite_covariance else [])):
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
    """The MCMC draws of a ``posterior.nc``, stacked over its kept chains (``chain_kept``: not stuck), in the order
    ``names``.

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
        if "chain_kept" in ds.variables:  # a stuck chain is not part of the posterior
            ds = ds.isel(chain=np.flatnonzero(ds["chain_kept"].values == 1))
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
