"""Derivative-based global sensitivity measures (DGSM) from exact Jacobians, and the Sobol' bound they imply.

For each parameter ``i`` and output ``k``, ``nu_ik = E[(d y_k / d x_i)^2]`` over the
input distribution (Sobol' & Kucherenko 2009, doi:10.1016/j.matcom.2009.01.023),
estimated by the sample mean of the squared Jacobian entries on points drawn from
the space (:func:`sample`). With independent inputs, the Poincare inequality
``Var(g) <= C_i E[g'^2]`` of the marginal of ``x_i`` bounds the total Sobol' index
(Lamboni et al. 2013, doi:10.1016/j.matcom.2012.07.009)::

    ST_ik <= C_i nu_ik / V_k

Poincare constants ``C_i`` used here, from the marginal's scipy family (the original kinds map
to theirs: ``normal``/``truncnormal`` -> ``norm``, ``triangular`` -> ``triang``, ``lognormal`` ->
``lognorm``) and its support ``[a, b]`` after truncation:

* ``uniform``: ``(b - a)^2 / pi^2`` (optimal);
* ``norm``: ``sigma^2`` (optimal untruncated), also when truncated on one or both sides (a normal
  restricted to an interval is ``1/sigma^2``-uniformly log-concave: Bakry-Emery bound); on a
  bounded interval ``min(sigma^2, (b - a)^2 / pi^2)`` (Payne-Weinberger bound of a log-concave
  density on ``[a, b]``); see Roustant, Barthe & Iooss 2017, doi:10.1214/17-EJS1310;
* any log-concave density on a bounded ``[a, b]`` (Payne-Weinberger, Bebendorf 2003,
  doi:10.4171/ZAA/1170): ``(b - a)^2 / pi^2``. Log-concave families recognised: ``triang``,
  ``gumbel_r``, ``gumbel_l``, ``logistic``, ``laplace``, ``expon``, ``beta`` with ``a, b >= 1``,
  ``gamma`` with ``a >= 1``, ``weibull_min`` with ``c >= 1``; so a truncated Gumbel or a Beta(2, 3)
  has a bound;
* ``expon`` untruncated: ``4 scale^2`` (optimal; Bobkov & Ledoux 1997, Probab. Theory Relat. Fields 107);
* any other density on a bounded ``[a, b]``, finite at both ends and positive inside (a truncated ``lognorm``, a
  ``beta`` with ``a < 1 <= b`` truncated away from its pole, a bimodal mixture): the optimal constant, the inverse
  of the first non-zero eigenvalue of ``-(p u')' = lambda p u`` with Neumann ends (Roustant, Barthe & Iooss 2017),
  by linear finite elements with a lumped mass on 4,096 cells (:func:`spectral_constant`; about 1e-6 relative
  for smooth densities);
* anything else (an untruncated ``lognorm`` or another heavy tail, an unbounded support of another family, a
  density with a pole or a gap): no constant is claimed, the bound is NaN.

Dependent inputs (a correlation matrix in the space): ``nu_i = E[(d y / d x_i)^2]`` is defined under
the joint law and estimated the same way, on draws of the space's Gaussian copula (:func:`sample`):
it measures how fast the output moves along ``x_i`` where the inputs actually lie. The bound does not
hold: it rests on the Sobol'-Hoeffding decomposition and a Poincare inequality of each marginal,
neither of which survives dependence (the inputs do not vary one at a time), so ``sobol_total_bound``
and ``poincare_constant`` are NaN and the ``inputs`` attribute says why. A constant output has no bound (NaN).
"""
from __future__ import annotations

import math
from typing import Callable, Iterable, Sequence

import numpy as np

from sensitivity.analyses.indices import bootstrap, dataset, design, onepass, tails
from sensitivity.analyses.indices.design import Seed
from sensitivity.analyses.indices.intervals import RQMC, IntervalPlan, REPLICATES
from sensitivity.errors import DataError
from sensitivity.runtime.lazy import lazy_import
from sensitivity.inputs.space import Parameter, ParameterSpace

xr = lazy_import("xarray")


def sample(space: ParameterSpace, n: int, *, seed: Seed = None, replicates: int = REPLICATES) -> np.ndarray:
    """``[n, d]`` points of the input distribution: ``replicates`` scrambled Sobol' sequences through the marginals.

    ``n`` and ``replicates`` must be powers of two: ``replicates`` independent scramblings of
    ``n / replicates`` points each, stacked (the total budget is split), for randomised-QMC
    intervals. A correlation matrix couples the inputs through the space's Gaussian copula.
    """
    return design.to_distribution(space, design.sobol_base(len(space), n, seed, replicates))


def poincare_constant(parameter: Parameter) -> float:
    """Poincare constant ``C`` of the parameter's input distribution, in parameter units squared.

    NaN for a distribution without a constant claimed here. See the module docstring.
    """
    family, params = parameter.distribution.scipy_form(parameter.low, parameter.high)
    low, high = parameter.frozen_distribution().support()
    bounded = math.isfinite(low) and math.isfinite(high)
    width2 = (high - low) ** 2 / math.pi**2 if bounded else math.inf
    if family == "uniform":
        return width2
    if family == "norm":
        return min(params.get("scale", 1.0) ** 2, width2)
    truncated = parameter.distribution.truncate is not None
    if family == "expon" and not truncated:
        return 4 * params.get("scale", 1.0) ** 2
    if bounded and _log_concave(family, params):
        return width2
    if bounded:
        return spectral_constant(parameter.frozen_distribution().pdf, low, high)
    return math.nan


def spectral_constant(pdf: Callable[[np.ndarray], np.ndarray], low: float, high: float, cells: int = 4096) -> float:
    """The optimal Poincare constant of the density ``pdf`` on ``[low, high]``, NaN where it has none.

    ``1 / lambda_1`` of ``-(p u')' = lambda p u``, ``u'(low) = u'(high) = 0`` (Roustant, Barthe & Iooss 2017,
    doi:10.1214/17-EJS1310, section 4), by linear finite elements on ``cells`` equal cells with the density at
    their midpoints and a lumped (diagonal) mass, so the generalised problem is one symmetric tridiagonal
    matrix and ``lambda_1`` one bisection (:func:`scipy.linalg.eigh_tridiagonal`). The lumped mass lowers the
    eigenvalues: for the uniform law ``(2 / h)^2 sin^2(pi h / 2 L)`` against ``(pi / L)^2``, so there the constant
    errs upward, by ``(pi h / L)^2 / 12`` (5e-8 on 4,096 cells); for smooth densities the error is of that order
    either way. NaN when the density is not finite at an end (a pole) or not positive at a midpoint (a gap: no
    Poincare inequality).
    """
    from scipy import linalg

    ends = np.asarray(pdf(np.array([low, high])), dtype=float)
    h = (high - low) / cells
    p = np.asarray(pdf(low + h * (np.arange(cells) + 0.5)), dtype=float)
    if not (np.all(np.isfinite(ends)) and np.all(np.isfinite(p)) and np.all(p > 0)):
        return math.nan
    mass = 0.5 * h * (np.concatenate([p, [0.0]]) + np.concatenate([[0.0], p]))  # [cells + 1] lumped
    diagonal = (np.concatenate([p, [0.0]]) + np.concatenate([[0.0], p])) / h / mass
    off = -(p / h) / np.sqrt(mass[:-1] * mass[1:])
    gap = linalg.eigh_tridiagonal(diagonal, off, eigvals_only=True, select="i", select_range=(1, 1))[0]
    return 1.0 / gap if gap > 0 else math.nan


#: Families whose density is log-concave, with the shape condition that makes it so.
_LOG_CONCAVE = {
    "triang": lambda p: True,
    "gumbel_r": lambda p: True,
    "gumbel_l": lambda p: True,
    "logistic": lambda p: True,
    "laplace": lambda p: True,
    "expon": lambda p: True,
    "beta": lambda p: p["a"] >= 1 and p["b"] >= 1,
    "gamma": lambda p: p["a"] >= 1,
    "weibull_min": lambda p: p["c"] >= 1,
}


def _log_concave(family: str, params: dict) -> bool:
    test = _LOG_CONCAVE.get(family)
    return bool(test and test(params))


def analyze(
    jacobian: np.ndarray,
    values: np.ndarray,
    space: ParameterSpace,
    *,
    intervals: IntervalPlan = RQMC,
    output_names: Sequence[str] | None = None,
    output_units: Sequence[str] | None = None,
) -> xr.Dataset:
    """DGSM ``nu`` and the implied upper bound on the total Sobol' index, for every output.

    Parameters
    ----------
    jacobian
        ``[N, m, n]`` exact d(output)/d(parameter) at ``N`` points drawn from the input
        distribution (e.g. :func:`sample`), in output units per parameter unit.
    values
        ``[N, m]`` outputs at the same points; their variance is ``V`` of the bound.
    space
        The parameter space (marginals give the Poincare constants).
    intervals
        The interval plan (:class:`~sensitivity.analyses.indices.intervals.IntervalPlan`): ``"rqmc"`` over the
        ``replicates`` scramblings of :func:`sample`, ``"bootstrap"`` over the ``N`` points
        (shared by all outputs and parameters), or ``"none"``; as
        :func:`sensitivity.analyses.indices.sobol.analyze`.
    output_names, output_units
        Labels and UDUNITS-2 units of the ``m`` outputs.

    Returns
    -------
    xarray.Dataset
        ``nu (parameter, output)`` [(output/parameter units)^2], ``variance (output)``,
        ``poincare_constant (parameter)``, ``sobol_total_bound (parameter, output)`` [1],
        each estimate with a ``*_interval`` over ``bound`` (``low``, ``high``) unless ``intervals="none"``,
        and the heavy-tail check of every output on its first points (65,536, fewer on many outputs:
        :func:`~sensitivity.analyses.indices.tails.sample_rows`; ``tail_share``,
        ``tail_index``, ``tail_flag``; :mod:`~sensitivity.analyses.indices.tails`).
    """
    plan = intervals.check()
    jac, y = _checked(jacobian, values, space)
    weights = plan.weights(y.shape[0])
    nu = np.swapaxes(bootstrap.weighted_mean(weights, jac**2), 1, 2)  # [K, n, m]
    tail = tails.tail_variables(y[: tails.sample_rows(y.shape[1])])
    y = y - y.mean(axis=0)  # centred: the one-pass variance below is then free of cancellation
    mean = bootstrap.weighted_mean(weights, y)
    variance = bootstrap.weighted_mean(weights, y * y) - mean**2
    attrs = {"n_points": y.shape[0]}
    if plan.kind == "bootstrap":
        attrs["bootstrap"] = "multinomial resampling of the points"
    return _dataset(nu, variance, space, attrs, plan, output_names, output_units).assign(tail)


def analyze_model(
    model: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    space: ParameterSpace,
    n: int,
    *,
    seed: Seed = None,
    intervals: IntervalPlan = RQMC,
    block: int = onepass.BLOCK_POINTS,
    output_names: Sequence[str] | None = None,
    output_units: Sequence[str] | None = None,
) -> xr.Dataset:
    """:func:`analyze` of ``model`` on :func:`sample`'s points, in one pass: memory independent of ``n``.

    The points are drawn (:func:`~sensitivity.analyses.indices.onepass.sample_blocks`), evaluated and reduced
    ``block`` at a time into the means of ``(dy/dx)^2`` and ``y`` and the co-moment of ``y`` of each scrambling
    (:class:`Statistics`, fed by :func:`~sensitivity.analyses.indices.onepass.evaluate`); only the first
    :func:`~sensitivity.analyses.indices.tails.sample_rows` values are kept, for the heavy-tail check. The result
    is :func:`analyze`'s of the same points to float64 round-off, with randomised-QMC intervals or none; bootstrap
    intervals resample all ``n`` points and are refused here.

    Parameters
    ----------
    model
        ``points [b, n] -> (values [b, m], jacobian [b, m, n])`` in physical units.
    space, n, seed
        As :func:`sample`'s (the replicates are ``intervals``').
    intervals, output_names, output_units
        As :func:`analyze`'s.
    block
        Points per model call, a power of two.
    """
    plan = intervals.check()
    draws = onepass.Draws.of(plan, n, seed=seed, block=block, what="the one-pass DGSM makes")
    stats = Statistics(space, draws, intervals=plan, output_names=output_names, output_units=output_units)
    onepass.evaluate(model, space, draws, [stats])
    return stats.result()


class Statistics:
    """:func:`analyze_model`'s statistics over ``draws``, fed block by block
    (a :class:`~sensitivity.analyses.indices.onepass.Reduction`): the means of ``(dy/dx)^2`` and ``y`` and the
    co-moment of ``y`` of each scrambling, and the first :func:`~sensitivity.analyses.indices.tails.sample_rows`
    values for the heavy-tail check.

    Parameters
    ----------
    space
        The parameter space.
    draws
        The points' size and scramblings (:meth:`~sensitivity.analyses.indices.onepass.Draws.of` of ``intervals``).
    intervals, output_names, output_units
        As :func:`analyze`'s; the plan neither the bootstrap nor unchecked.
    """

    def __init__(self, space: ParameterSpace, draws: onepass.Draws, *, intervals: IntervalPlan,
                 output_names: Sequence[str] | None = None, output_units: Sequence[str] | None = None):
        self.space, self.n, self.plan, self.labels = space, draws.n, intervals, (output_names, output_units)
        d = len(space)
        self.stats, self.head = onepass.Replicates(draws.n, draws.replicates, [[d, d]]), onepass.Head()

    def update(self, values: np.ndarray, jacobian: np.ndarray) -> None:
        """Add the next block's ``values [b, m]`` and ``jacobian [b, m, n]``."""
        jac, y = _checked(jacobian, values, self.space)
        self.stats.update(np.concatenate([np.swapaxes(jac**2, 1, 2), y[:, None]], axis=1))  # [b, n + 1, m]
        self.head.update(y)

    def result(self) -> xr.Dataset:
        """:func:`analyze_model`'s dataset."""
        sets, d = self.stats.sets(), len(self.space)
        nu, variance = onepass.stacked_means(sets)[:, :d], onepass.stacked_covariances(sets)[:, 0]
        return _dataset(nu, variance, self.space, {"n_points": self.n}, self.plan, *self.labels).assign(
            tails.tail_variables(self.head.values()))


def analyze_blocks(
    blocks: Iterable[tuple[np.ndarray, np.ndarray]],
    space: ParameterSpace,
    *,
    intervals: IntervalPlan = IntervalPlan(),
    output_names: Sequence[str] | None = None,
    output_units: Sequence[str] | None = None,
) -> xr.Dataset:
    """:func:`analyze` over points that arrive in blocks (e.g. read from a sweep file): bounded memory.

    The estimate is the same sample mean as :func:`analyze`'s. The bootstrap cannot draw
    ``N`` rows with replacement without holding all ``N``, so each row gets an independent
    Poisson(1) multiplicity per resample instead, drawn block by block, and each resample is
    the weighted mean (sum of weighted terms over the sum of weights) — the Poisson
    bootstrap, which approximates the multinomial one for large ``N`` (Hanley & MacGibbon
    2006, Comput. Methods Programs Biomed. 83, 57-62); ``n_resamples=0`` gives no intervals. Memory is one block plus
    ``(1 + n_resamples) m n`` running sums.

    Parameters
    ----------
    blocks
        Iterable of ``(jacobian [b, m, n], values [b, m])`` at points drawn from the input
        distribution; every block has the same ``m``.
    space, output_names, output_units
        As :func:`analyze`.
    intervals
        The interval plan (:class:`~sensitivity.analyses.indices.intervals.IntervalPlan`), on these i.i.d. points
        the bootstrap (``rqmc`` counts as it, ``none`` as zero resamples).
    """
    plan = intervals.iid().check()
    rng = np.random.default_rng(plan.seed)
    sums: dict[str, np.ndarray] = {}
    shift, n_points = None, 0
    for jacobian, values in blocks:
        jac, y = _checked(jacobian, values, space)
        if shift is None:
            shift = y.mean(axis=0)  # centring keeps the one-pass variance free of cancellation
        elif y.shape[1] != shift.size:
            raise DataError(f"every block must have {shift.size} outputs, got {y.shape[1]}")
        weights = np.vstack([np.ones((1, y.shape[0])), rng.poisson(1.0, size=(plan.n_resamples, y.shape[0]))])
        yc = y - shift
        for key, terms in (("weight", np.ones((y.shape[0], 1))), ("nu", jac**2), ("y", yc), ("yy", yc * yc)):
            part = weights @ terms.reshape(y.shape[0], -1)
            sums[key] = part if key not in sums else sums[key] + part
        n_points += y.shape[0]
    if shift is None:
        raise DataError("`blocks` must yield at least one block of points, got none")
    total = np.where(sums["weight"] > 0, sums["weight"], np.nan)  # [K, 1]
    m, d = shift.size, len(space)
    nu = np.swapaxes((sums["nu"] / total).reshape(-1, m, d), 1, 2)
    mean = sums["y"] / total
    variance = sums["yy"] / total - mean**2
    attrs = {"n_points": n_points, "bootstrap": "Poisson(1) weights per point (streaming)"}
    return _dataset(nu, variance, space, attrs, plan, output_names, output_units)


def _checked(jacobian: np.ndarray, values: np.ndarray, space: ParameterSpace) -> tuple[np.ndarray, np.ndarray]:
    """``jacobian [N, m, n]`` and ``values [N, m]`` as float64, checked against each other."""
    jac = design.as_jacobian(jacobian, len(space))
    y = design.as_values(values)
    design.check_rows(y.shape[0], jac.shape[0], what="values")
    if y.shape[1] != jac.shape[1]:
        raise DataError(f"`values` must have {jac.shape[1]} outputs like `jacobian`, got {y.shape[1]}")
    return jac, y


def _dataset(
    nu: np.ndarray,
    variance: np.ndarray,
    space: ParameterSpace,
    attrs: dict[str, object],
    plan: IntervalPlan,
    output_names: Sequence[str] | None,
    output_units: Sequence[str] | None,
) -> xr.Dataset:
    """Label ``nu [K, n, m]`` and ``variance [K, m]`` (estimate, then replicates) with the implied bounds."""
    constants = np.array([poincare_constant(p) for p in space.parameters])
    if design.is_correlated(space):
        constants[:] = np.nan
    bound = constants[None, :, None] * nu / np.where(variance > 0, variance, np.nan)[:, None, :]

    nu_table = dataset.derivative_table(output_units, space.units, squared=True)
    nu_units, nu_coords = dataset.units_table(
        "nu_units", ("output", "parameter"), nu_table, "units of DGSM nu"
    )
    var_units, var_coords = dataset.units_table(
        "variance_units", ("output",), dataset.squared_units(output_units), "units of the output variance"
    )
    const_units, const_coords = dataset.units_table(
        "poincare_constant_units", ("parameter",), dataset.squared_units(space.units),
        "units of the Poincare constant",
    )
    coords = {
        **dataset.parameter_axis(space),
        **dataset.output_axis(nu.shape[2], output_names, output_units),
        **dataset.BOUND_COORDS,
        **nu_coords,
        **var_coords,
        **const_coords,
    }
    nu_ref, var_ref, const_ref = (next(iter(c), None) for c in (nu_coords, var_coords, const_coords))
    data = {
        "nu": dataset.variable(
            ("parameter", "output"), nu[0], "DGSM nu = E[(dy/dx)^2]", nu_units, units_coordinate=nu_ref
        ),
        "variance": dataset.variable(("output",), variance[0], "output variance", var_units, units_coordinate=var_ref),
        "poincare_constant": dataset.variable(
            ("parameter",), constants, "Poincare constant of the input marginal", const_units,
            units_coordinate=const_ref,
        ),
        "sobol_total_bound": dataset.variable(
            ("parameter", "output"), bound[0], "DGSM upper bound on the total Sobol' index C nu / V", "1"
        ),
    }
    if plan.kind != "none":
        intervals = {"nu": (nu, nu_units, nu_ref), "variance": (variance, var_units, var_ref),
                     "sobol_total_bound": (bound, "1", None)}
        for key, (reps, units, ref) in intervals.items():
            data[f"{key}_interval"] = dataset.variable(
                data[key].dims + ("bound",), plan.bounds(reps), f"{data[key].attrs['long_name']}, {plan.describe()}",
                units, units_coordinate=ref,
            )
    attrs = {
        "inputs": "dependent (Gaussian copula): nu under the joint law; no Sobol' bound (it needs independent inputs)"
                  if design.is_correlated(space) else "independent",
        "method": "DGSM from exact Jacobians (Sobol' & Kucherenko 2009) with Poincare bounds (Lamboni et al. 2013)",
        "references": "doi:10.1016/j.matcom.2009.01.023 doi:10.1016/j.matcom.2012.07.009 doi:10.1214/17-EJS1310",
        **attrs,
        **plan.attrs(),
    }
    return xr.Dataset(data, coords=coords, attrs=attrs)
