"""Plumbing shared by the sensitivity-index modules (local, dgsm, sobol, morris, active_subspaces).

Input checks of batched model values ``[N, m]`` and Jacobians ``[N, m, n]``, the
labeled axes of the result datasets, the row bootstrap (one resampling drawn once
and applied to every output), confidence intervals, and the map from the unit
cube to physical parameter values through the space's marginals.
"""
from __future__ import annotations

from typing import Literal, Sequence

import numpy as np
import xarray as xr
from scipy import stats

from sensitivity.analyses.propagation import inputs as sampling
from sensitivity.errors import ConfigError, DataError
from sensitivity.labels import axis_coords, output_coords, parameter_coords
from sensitivity.space import ParameterSpace
from sensitivity.units import product, quotient

IntervalKind = Literal["percentile", "normal"]
INTERVAL_KINDS: tuple[str, ...] = ("percentile", "normal")
Seed = int | np.random.Generator | None

#: Budget of float64 elements for one chunk of per-row terms (128 MiB): outputs are processed in chunks.
CHUNK_ELEMENTS = 1 << 24


# ----------------------------------------------------------------------------- inputs
def as_values(values: np.ndarray, *, what: str = "values") -> np.ndarray:
    """``values`` as a float64 ``[N, m]`` array (one column per output)."""
    y = np.asarray(values, dtype=np.float64)
    if y.ndim != 2 or y.shape[0] == 0:
        raise DataError(f"`{what}` must have shape [N, m] with N >= 1, got {list(y.shape)}")
    return y


def as_jacobian(jacobian: np.ndarray, n_parameters: int, *, what: str = "jacobian") -> np.ndarray:
    """``jacobian`` as a float64 ``[N, m, n]`` array, ``n`` the number of parameters."""
    jac = np.asarray(jacobian, dtype=np.float64)
    if jac.ndim != 3 or jac.shape[0] == 0 or jac.shape[2] != n_parameters:
        raise DataError(f"`{what}` must have shape [N, m, {n_parameters}] with N >= 1, got {list(jac.shape)}")
    return jac


def check_rows(n_rows: int, expected: int, *, what: str) -> None:
    """Raise a :class:`DataError` when two arrays disagree on the number of points."""
    if n_rows != expected:
        raise DataError(f"`{what}` must have {expected} rows (one per point), got {n_rows}")


def check_power_of_two(n: int, *, what: str, minimum: int = 2) -> int:
    """``n`` if it is an integer power of two ``>= minimum`` (Sobol' balance), else a :class:`ConfigError`."""
    if not isinstance(n, (int, np.integer)) or n < minimum or n & (n - 1):
        raise ConfigError(f"`{what}` must be a power of two >= {minimum}, got {n!r}")
    return int(n)


def check_bootstrap(n_resamples: int, conf_level: float, interval: str) -> None:
    """Validate the bootstrap settings shared by every index."""
    if not isinstance(n_resamples, (int, np.integer)) or n_resamples < 2:
        raise ConfigError(f"`n_resamples` must be an integer >= 2, got {n_resamples!r}")
    if not 0.0 < conf_level < 1.0:
        raise ConfigError(f"`conf_level` must lie in (0, 1), got {conf_level!r}")
    if interval not in INTERVAL_KINDS:
        raise ConfigError(f"`interval` must be one of {INTERVAL_KINDS}, got {interval!r}")


def is_correlated(space: ParameterSpace) -> bool:
    """True when the space couples its inputs (a correlation matrix other than the identity)."""
    return space.correlation is not None and not np.allclose(space.correlation, np.eye(len(space)))


def require_independent(space: ParameterSpace, *, method: str) -> None:
    """Refuse a space with correlated inputs for an estimator that assumes independence."""
    if is_correlated(space):
        raise ConfigError(
            f"{method} assumes independent inputs; the space has a correlation matrix "
            "(drop `correlation` or use a method that accepts dependent inputs)"
        )


# ----------------------------------------------------------------------------- sampling
def sobol_base(d: int, n: int, seed: Seed) -> np.ndarray:
    """``[n, d]`` points of a scrambled Sobol' sequence in the unit cube, ``n`` a power of two.

    The scrambling generator is ``numpy.random.default_rng(seed)``, so passing the same
    integer reproduces the points (and SALib, given that same Generator, draws them too).
    The sequence is :func:`sensitivity.analyses.propagation.unit_cube_blocks`' in one block.
    """
    check_power_of_two(n, what="n")
    return next(sampling.unit_cube_blocks(n, d, n, "sobol", np.random.default_rng(seed)))


def to_physical(space: ParameterSpace, u: np.ndarray) -> np.ndarray:
    """Map unit-cube points ``u [N, n]`` to physical values through the space's marginals.

    This is :meth:`sensitivity.analyses.propagation.CopulaInputs.from_unit_cube` of the space:
    each column goes through its marginal's quantile function, coupled by the space's
    Gaussian copula when it has a correlation matrix. ``u`` is clipped to
    ``[2^-53, 1 - 2^-53]``, so the quantiles 0 and 1 of a bounded marginal land within
    one rounding of its bounds.
    """
    return sampling.inputs_from_space(space).from_unit_cube(np.asarray(u, dtype=np.float64))


# ----------------------------------------------------------------------------- bootstrap
def resample_weights(rng: np.random.Generator, n: int, n_resamples: int) -> np.ndarray:
    """``[1 + R, n]`` row weights: ones (the estimate itself) then the bootstrap multiplicities.

    Resample ``r`` draws ``n`` rows with replacement; row ``k`` of the weights counts how
    often each row was drawn. A statistic that is a mean of per-row terms is then one
    matrix product ``weights @ terms / n`` for the estimate and every resample at once.
    The draw is ``rng.integers(n, size=(n, R))`` with column ``r`` the resample, as SALib's
    ``sobol.analyze`` draws it, so equal seeds give equal resamples.
    """
    draws = rng.integers(n, size=(n, n_resamples))
    flat = draws.T + n * np.arange(n_resamples)[:, None]
    counts = np.bincount(flat.ravel(), minlength=n * n_resamples).reshape(n_resamples, n)
    return np.vstack([np.ones((1, n)), counts.astype(np.float64)])


def weighted_mean(weights: np.ndarray, terms: np.ndarray) -> np.ndarray:
    """``weights [K, N] @ terms [N, ...] / N``: the mean of per-row terms under each weighting."""
    n = terms.shape[0]
    return (weights @ terms.reshape(n, -1) / n).reshape((weights.shape[0],) + terms.shape[1:])


def interval(replicates: np.ndarray, conf_level: float, kind: str) -> np.ndarray:
    """Confidence interval ``[..., 2]`` (low, high) from ``[1 + R, ...]`` estimate-then-replicates.

    ``percentile``: the bootstrap quantiles ``(1 -+ conf_level) / 2`` of the replicates
    (Efron & Tibshirani 1993, doi:10.1007/978-1-4899-4541-9). ``normal``: the estimate
    ``-+ z * sd`` with ``z = Phi^-1((1 + conf_level) / 2)`` and ``sd`` the replicates'
    standard deviation (``ddof=1``) — SALib's ``*_conf`` is this half-width.
    """
    estimate, boot = replicates[0], replicates[1:]
    if kind == "normal":
        half = stats.norm.ppf(0.5 + conf_level / 2) * np.std(boot, axis=0, ddof=1)
        return np.stack([estimate - half, estimate + half], axis=-1)
    alpha = (1.0 - conf_level) / 2
    return np.moveaxis(np.quantile(boot, [alpha, 1.0 - alpha], axis=0), 0, -1)


# ----------------------------------------------------------------------------- labels
def output_axis(m: int, names: Sequence[str] | None, units: Sequence[str] | None) -> dict[str, xr.Variable]:
    """Coordinates of the flat ``output`` axis; names default to ``y0 .. y{m-1}``."""
    names = [f"y{k}" for k in range(m)] if names is None else list(names)
    if len(names) != m:
        raise ConfigError(f"`output_names` must name {m} outputs, got {len(names)}")
    if units is not None and len(units) != m:
        raise ConfigError(f"`output_units` must give {m} units, got {len(units)}")
    return output_coords(names, None if units is None else list(units))


def parameter_axis(space: ParameterSpace) -> dict[str, xr.Variable]:
    """Coordinates of the ``parameter`` axis of ``space``."""
    return parameter_coords(space.names, space.units)


BOUND_COORDS: dict[str, xr.Variable] = axis_coords("bound", ["low", "high"])


def common_units(units: Sequence[str] | None) -> str | None:
    """The one units string shared by every element, or None when they differ or are unknown."""
    if units is None or len(set(units)) != 1:
        return None
    return units[0]


def derivative_units(output_units: Sequence[str] | None, parameter_units: Sequence[str]) -> str | None:
    """Units of d(output)/d(parameter) when one string covers every pair, else None."""
    out = common_units(output_units)
    par = common_units(parameter_units)
    return None if out is None or par is None else quotient(out, par)


def squared_units(units: Sequence[str] | None) -> list[str] | None:
    """Units of the square of each element (e.g. of a variance), None when unknown."""
    return None if units is None else [product(u, u) for u in units]


def derivative_table(
    output_units: Sequence[str] | None, parameter_units: Sequence[str], *, squared: bool = False
) -> np.ndarray | None:
    """``[m, n]`` units of d(output k)/d(parameter j) (squared with ``squared``), None when outputs have none."""
    if output_units is None:
        return None
    table = [[quotient(o, p) for p in parameter_units] for o in output_units]
    return np.array([[product(u, u) if squared else u for u in row] for row in table], dtype=object)


def units_table(
    name: str, dims: tuple[str, ...], table: Sequence | np.ndarray | None, long_name: str
) -> tuple[str | None, dict[str, xr.Variable]]:
    """One units string when every entry of ``table`` shares it, else a coordinate holding the table.

    Returns ``(units, coords)``: ``(units, {})`` for uniform units; ``(None, {name: table})``
    when they differ, for a variable whose ``units_coordinate`` attribute then names
    ``name`` (the dataset contract); ``(None, {})`` when ``table`` is None (units unknown).
    """
    if table is None:
        return None, {}
    array = np.asarray(table, dtype=object)
    if len(set(array.ravel())) == 1:
        return str(array.flat[0]), {}
    return None, {name: xr.Variable(dims, array, {"long_name": long_name})}


def variable(
    dims: tuple[str, ...],
    data: np.ndarray,
    long_name: str,
    units: str | None,
    *,
    units_coordinate: str | None = None,
    **attrs: object,
) -> xr.Variable:
    """A labeled variable with ``long_name`` and, when known, ``units``.

    Where the units differ along the output or parameter axis (no one string covers
    them) the ``units`` attribute is left out and ``units_coordinate`` names the
    coordinate holding them per entry (e.g. ``parameter_units``, ``nu_units``); without
    such a coordinate a ``units_note`` says the units are mixed.
    """
    meta: dict[str, object] = {"long_name": long_name}
    if units is not None:
        meta["units"] = units
    elif units_coordinate is not None:
        meta["units_coordinate"] = units_coordinate
    else:
        meta["units_note"] = "units differ along the output/parameter axes: see output_units and parameter_units"
    meta.update(attrs)
    return xr.Variable(dims, data, meta)
