"""Sobol' indices of dependent inputs: the "full" and "independent" first-order and total indices of every output.

With a correlation matrix the classic Sobol' indices are undefined (the functional ANOVA needs independent
inputs), and :mod:`~sensitivity.analyses.indices.sobol` refuses the space. Mara, Tarantola & Annoni (2015,
doi:10.1016/j.envsoft.2015.07.010) define four indices per input ``x_i`` from the Rosenblatt transform of
the inputs into independent uniforms, taken in the two orders that put ``x_i`` first and last:

``S1_full``  = Var(E[Y | x_i]) / V
    the first-order index of ``x_i`` with everything it carries through its correlations (also
    Kucherenko, Tarantola & Annoni 2012's first-order index, doi:10.1016/j.cpc.2011.12.020);
``ST_full``  = E[Var(Y | u_{-i})] / V
    the total index of ``x_i`` first in the order: ``u_{-i}`` are the other inputs' parts that do not
    depend on ``x_i``, so ``x_i`` acts directly and through the inputs it moves;
``S1_ind``   = Var(E[Y | u_i]) / V
    the first-order index of ``u_i``, the part of ``x_i`` independent of all the others (``x_i`` last);
``ST_ind``   = E[Var(Y | x_{-i})] / V
    what is left of ``V`` once every other input is known (Kucherenko et al. 2012's total index).

For independent inputs ``S1_full = S1_ind`` and ``ST_full = ST_ind`` are the classic indices. With
correlated inputs ``S1_full`` can exceed ``S1_ind`` (an input that does nothing still gets the share of a
correlated input that acts), and none of them need sum to 1.

Estimation. Under the space's Gaussian copula both Rosenblatt parts are linear in the normal scores
``z ~ N(0, R)`` (:mod:`~sensitivity.inputs.copula`): with ``x_i`` first, ``z_i`` and the residual
``w = z_{-i} - R_{-i,i} z_i`` are independent; with ``x_i`` last, ``z_{-i}`` and the residual
``e_i = z_i - b_i^T z_{-i}`` (``b_i = R_{-i,-i}^-1 R_{-i,i}``) are. ``sample`` draws two independent
matrices ``A``, ``B`` of scores and, per input, the points

    A_B^(full, i):  z_i from B,  w from A       ->  z = z_A + R_{:,i} (z_{B,i} - z_{A,i})
    A_B^(ind, i):   e_i from B,  z_{-i} from A  ->  z_{A,i} <- b_i^T z_{A,-i} + e_{B,i}

and ``analyze`` applies the estimators of :mod:`~sensitivity.analyses.indices.sobol` (Saltelli 2010 first
order, Jansen total) to these ``2 d`` pick-freeze columns, with the same centring, intervals and layout
rules: every base row is ``A``, ``A_B^(full, 1..d)``, ``A_B^(ind, 1..d)``, ``B``, so the cost is
``N (2 d + 2)`` model runs for all four indices of every input and output.

In one pass: :func:`sensitivity.analyses.indices.sobol_onepass.analyze_model` with ``dependent=True`` draws
this design ``block`` base rows at a time (:func:`sample_rows`), evaluates and reduces each block into the
pick-freeze statistics of :mod:`~sensitivity.analyses.indices.pickfreeze` (resumable and sharded as the
Sobol' analysis'): the same indices as :func:`analyze` on the same rows, in memory independent of ``N``.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from sensitivity.analyses.indices import dataset, design, sobol
from sensitivity.inputs.copula import NormalScores, standard_normal
from sensitivity.analyses.indices.design import Seed
from sensitivity.analyses.indices.intervals import RQMC, IntervalPlan, REPLICATES
from sensitivity.runtime.lazy import lazy_import
from sensitivity.inputs.space import ParameterSpace

xr = lazy_import("xarray")

#: The four indices: (variable, which pick-freeze columns, estimator key, long name).
INDICES: tuple[tuple[str, str, str, str], ...] = (
    ("S1_full", "full", "S1", "full first-order Sobol' index Var(E[Y|x_i])/V (dependent inputs)"),
    ("ST_full", "full", "ST", "full total Sobol' index, x_i first in the Rosenblatt order (dependent inputs)"),
    ("S1_ind", "ind", "S1", "independent first-order Sobol' index, x_i last in the Rosenblatt order "
                            "(dependent inputs)"),
    ("ST_ind", "ind", "ST", "independent total Sobol' index E[Var(Y|x_~i)]/V (dependent inputs)"),
)


def sample(space: ParameterSpace, n: int, *, seed: Seed = None, replicates: int = REPLICATES) -> np.ndarray:
    """The pick-freeze design of ``n`` base rows: ``[n (2 d + 2), d]`` physical points.

    Row block ``k`` holds ``A_k``, ``A_B^(full, 1..d)_k``, ``A_B^(ind, 1..d)_k``, ``B_k`` (see the module
    docstring). ``A`` and ``B`` are the normal scores of a scrambled Sobol' sequence of ``2 d`` columns
    coupled by the copula's Cholesky factor; with ``replicates = R`` the ``n`` base rows are ``R``
    independent scramblings of ``n / R`` rows (randomised-QMC intervals), ``n`` and ``R`` powers of two.
    """
    return sample_rows(space, design.SobolBase(2 * len(space), n, seed, replicates), 0, n)


def sample_rows(space: ParameterSpace, base: design.SobolBase, start: int, stop: int) -> np.ndarray:
    """The points of :func:`sample`'s base rows ``start .. stop - 1`` (``(stop - start) (2 d + 2)`` rows), from
    their unit-cube base rows (``base``: ``2 d`` columns) alone: the one-pass analysis draws the design in blocks."""
    scores = NormalScores.of(space)
    d, r = scores.d, scores.correlation
    e = standard_normal(base.rows(start, stop))
    factor = np.linalg.cholesky(r)
    za, zb = e[:, :d] @ factor.T, e[:, d:] @ factor.T
    full = [za + r[:, i] * (zb[:, i:i + 1] - za[:, i:i + 1]) for i in range(d)]
    ind = []
    for i, b in enumerate(_regressions(r)):
        z = za.copy()  # the residual e_i of B on top of the regression on A's other scores
        z[:, i] = np.delete(za, i, axis=1) @ b + zb[:, i] - np.delete(zb, i, axis=1) @ b
        ind.append(z)
    blocks = np.stack([za, *full, *ind, zb], axis=1)
    return scores.to_inputs(blocks.reshape(-1, d))


def _regressions(r: np.ndarray) -> list[np.ndarray]:
    """``b_i = R_{-i,-i}^-1 R_{-i,i}`` for every input: ``E[z_i | z_{-i}] = b_i^T z_{-i}``."""
    d = len(r)
    out = []
    for i in range(d):
        rest = np.delete(np.arange(d), i)
        out.append(np.linalg.solve(r[np.ix_(rest, rest)], r[rest, i]))
    return out


def analyze(
    values: np.ndarray,
    space: ParameterSpace,
    *,
    intervals: IntervalPlan = RQMC,
    output_names: Sequence[str] | None = None,
    output_units: Sequence[str] | None = None,
) -> xr.Dataset:
    """Full and independent first-order and total indices of every output, with confidence intervals.

    Parameters
    ----------
    values
        ``[N (2 d + 2), m]`` model values on the rows of :func:`sample`, ``N`` a power of two.
    space
        The parameter space the design was drawn from (its correlation matrix, if any).
    intervals
        The interval plan, as :func:`sensitivity.analyses.indices.sobol.analyze`'s: randomised-QMC intervals over the
        ``replicates`` scramblings of :func:`sample`, the bootstrap over the base rows, or none.
    output_names, output_units
        Labels and UDUNITS-2 units of the ``m`` outputs.

    Returns
    -------
    xarray.Dataset
        ``S1_full``, ``ST_full``, ``S1_ind``, ``ST_ind`` ``(parameter, output)`` with ``*_interval``
        ``(parameter, output, bound)`` (none with ``intervals="none"``), ``variance (output)``,
        ``status (output)`` (1 where an output is constant) and the heavy-tail check of every output.
    """
    plan = intervals.check()
    d = len(space)
    y = design.as_values(values)
    n = sobol.base_size(y.shape[0], 2 * d + 2, 2 * d, False)
    reps = sobol.replicate_estimates(y.reshape(n, 2 * d + 2, y.shape[1]), 2 * d, False, plan)
    return indices_dataset(reps, y, space, n, plan=plan, output_names=output_names, output_units=output_units)


def indices_dataset(reps: dict[str, np.ndarray], values: np.ndarray, space: ParameterSpace, n: int, *,
                    plan: IntervalPlan, output_names: Sequence[str] | None,
                    output_units: Sequence[str] | None) -> xr.Dataset:
    """:func:`analyze`'s dataset from the replicate estimates of the ``2 d`` pick-freeze columns
    (:func:`~sensitivity.analyses.indices.sobol.replicate_estimates`) and the design's values in order (the first
    :func:`~sensitivity.analyses.indices.tails.sample_rows` suffice); ``n`` base rows."""
    d = len(space)
    data, var_coords = sobol.summary_variables(reps, values, output_units)
    for key, columns, estimator, long_name in INDICES:
        part = slice(0, d) if columns == "full" else slice(d, 2 * d)
        data.update(sobol.index_variables(key, reps[estimator][:, part], ("parameter", "output"), long_name, plan))
    coords = {
        **dataset.parameter_axis(space),
        **dataset.output_axis(values.shape[1], output_names, output_units),
        **dataset.BOUND_COORDS,
        **var_coords,
    }
    attrs = {
        "method": "full and independent Sobol' indices of dependent inputs (Mara, Tarantola & Annoni 2015) under "
                  "the space's Gaussian copula: Saltelli 2010 first order, Jansen total order",
        "references": "doi:10.1016/j.envsoft.2015.07.010 doi:10.1016/j.cpc.2011.12.020 doi:10.1016/j.cpc.2009.09.018",
        "inputs": "dependent (Gaussian copula)" if design.is_correlated(space) else "independent",
        "base_sample_size": n,
        **plan.attrs(),
    }
    return xr.Dataset(data, coords=coords, attrs=attrs)
