"""The designs of the sensitivity indices, and checks of the model evaluations on them.

A design is a set of points in the unit cube (a scrambled Sobol' sequence, :func:`sobol_base`) mapped
to physical parameter values through the space's input distribution (:func:`to_distribution`; not
:func:`sensitivity.sweep.designs.to_bounds`, which maps the unit cube linearly, or geometrically on log scale,
onto the bounds). The checks turn the model's values ``[N, m]`` and Jacobians ``[N, m, n]`` into
float64 arrays of the right shape, and refuse settings (a non-power-of-two size, correlated inputs)
an estimator cannot use.
"""
from __future__ import annotations

import warnings

import numpy as np

from sensitivity.inputs.uncertainty import CopulaInputs, inputs_from_space
from sensitivity.runtime.lazy import lazy_import
from sensitivity.errors import ConfigError, DataError
from sensitivity.inputs.space import ParameterSpace

qmc = lazy_import("scipy.stats.qmc")

Seed = int | np.random.Generator | None


# ----------------------------------------------------------------------------- points
def sobol_base(d: int, n: int, seed: Seed, replicates: int = 1) -> np.ndarray:
    """``[n, d]`` points of ``replicates`` independent scramblings of a Sobol' sequence, ``n / replicates`` rows each.

    ``n`` and ``replicates`` are powers of two, so each scrambling keeps the balance of a Sobol'
    sequence; the scramblings are stacked in order (the randomised-QMC replicates of
    :mod:`~sensitivity.analyses.indices.intervals`). The scrambling generator is
    ``numpy.random.default_rng(seed)``, drawn from in order, so the same integer reproduces the
    points; with one scrambling SALib, given that same Generator, draws them too. This is
    :class:`SobolBase`'s rows ``[0, n)``.
    """
    return SobolBase(d, n, seed, replicates).rows(0, n)


class SobolBase:
    """:func:`sobol_base`'s design, any rows ``[start, stop)`` of it without the others (:meth:`rows`).

    The scramblings are drawn from ``numpy.random.default_rng(seed)`` in order when the object is made (as
    :func:`sensitivity.inputs.uncertainty.unit_cube_blocks` draws one: scipy's scrambled ``qmc.Sobol``);
    a row range is then the engines' sequence fast-forwarded to it, so a design of any size is produced in
    blocks of bounded memory.
    """

    def __init__(self, d: int, n: int, seed: Seed, replicates: int = 1):
        check_power_of_two(n, what="n", minimum=2 * replicates)
        rng, self.n, self.size = np.random.default_rng(seed), n, n // replicates
        self.engines = [qmc.Sobol(d, scramble=True, rng=rng) for _ in range(replicates)]

    def rows(self, start: int, stop: int) -> np.ndarray:
        """``[stop - start, d]`` rows ``start .. stop - 1`` of the design."""
        if not 0 <= start <= stop <= self.n:
            raise ConfigError(f"rows [{start}, {stop}) must lie in the design's [0, {self.n})")
        out = []
        for r in range(start // self.size, -(-stop // self.size)):
            lo, hi = max(start, r * self.size) - r * self.size, min(stop, (r + 1) * self.size) - r * self.size
            engine = self.engines[r]
            if engine.num_generated != lo:  # blocks asked in order continue the sequence: no O(lo) fast-forward
                engine.reset()
                if lo:  # scipy's fast_forward(0) fails
                    engine.fast_forward(lo)
            with warnings.catch_warnings():  # a range of a balanced sequence: its balance is the whole's
                warnings.filterwarnings("ignore", "The balance properties of Sobol' points", UserWarning)
                out.append(engine.random(hi - lo))
        return np.concatenate(out) if out else np.empty((0, self.engines[0].d))


def to_distribution(space: ParameterSpace, u: np.ndarray, inputs: CopulaInputs | None = None) -> np.ndarray:
    """Map unit-cube points ``u [N, n]`` to physical values through the space's marginals.

    This is :meth:`sensitivity.inputs.uncertainty.CopulaInputs.from_unit_cube` of the space:
    each column goes through its marginal's quantile function, coupled by the space's
    Gaussian copula when it has a correlation matrix. ``u`` is clipped to
    ``[2^-53, 1 - 2^-53]``, so the quantiles 0 and 1 of a bounded marginal land within
    one rounding of its bounds. ``inputs``: the space's
    :func:`~sensitivity.inputs.uncertainty.inputs_from_space`, made once by a caller that maps many blocks
    (building the frozen marginals costs ~5 ms, more than mapping 1,024 design rows).
    """
    inputs = inputs_from_space(space) if inputs is None else inputs
    return inputs.from_unit_cube(np.asarray(u, dtype=np.float64))


# ----------------------------------------------------------------------------- checks
def as_values(values: np.ndarray, *, what: str = "values", dtype: type | None = np.float64) -> np.ndarray:
    """``values`` as a float64 ``[N, m]`` array (one column per output); ``dtype=None`` keeps the model's."""
    y = np.asarray(values, dtype=dtype)
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


def is_correlated(space: ParameterSpace) -> bool:
    """True when the space couples its inputs (a correlation matrix other than the identity)."""
    return space.correlation is not None and not np.allclose(space.correlation, np.eye(len(space)))


def require_independent(space: ParameterSpace, *, method: str,
                        instead: str = "a method that accepts dependent inputs") -> None:
    """Refuse a space with correlated inputs for an estimator that assumes independence; ``instead``: the way out."""
    if is_correlated(space):
        raise ConfigError(
            f"{method} assumes independent inputs; the space has a correlation matrix "
            f"(drop `correlation` or use {instead})"
        )
