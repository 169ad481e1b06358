"""Uncertainty propagation through a batched model, four methods side by side, with a linearity verdict.

Given input uncertainty (:mod:`sensitivity.analyses.sampling`) with mean ``mu`` and covariance ``S``,
and a model ``f: [K, n] -> [K, m]`` evaluated in batches, each method returns the output mean,
standard deviation, covariance and quantiles as a labeled dataset:

``first_order``
    Delta method: mean ``f(mu)``, covariance ``J S J^T`` with ``J`` the Jacobian at ``mu``. One
    value-and-Jacobian evaluation.
``second_order``
    Mean ``f_k(mu) + 1/2 tr(H_k S)`` and covariance ``J S J^T + 1/2 tr(H_k S H_l S)`` with ``H_k`` the
    Hessian of output ``k`` at ``mu``. Exact for a quadratic model of Gaussian inputs; for other inputs
    the mean term is still exact for a quadratic, while the covariance term assumes Gaussian third
    (zero) and fourth moments (Gustafsson & Hendeby 2012).
``unscented``
    Scaled unscented transform: ``2n + 1`` sigma points ``mu``, ``mu +- sqrt(n + lambda) L_i``
    (``L L^T = S``, ``lambda = alpha^2 (n + kappa) - n``) with the weights of Wan & van der Merwe
    (2000): ``Wm_0 = lambda / (n + lambda)``, ``Wc_0 = Wm_0 + 1 - alpha^2 + beta``,
    ``W_i = 1 / (2 (n + lambda))``. Exact in the mean of a quadratic model.
``monte_carlo``
    Plain Monte Carlo or randomised QMC (Owen-scrambled Sobol) from the full input distribution, in
    ``R`` independent replicates of ``N_r`` points, each evaluated in blocks. Memory is bounded by one
    replicate of outputs (``N_r * m`` floats, ``N_r`` chosen from ``max_bytes``) and one ``m x m``
    covariance, whatever the total number of samples:

    * mean and covariance are pooled over replicates with the update of Chan, Golub & LeVeque (1983);
    * quantiles are the average of the replicates' sample quantiles (the batch-quantile estimator:
      its bias, ``O(1 / N_r)``, is far below its standard error, ``O(1 / sqrt(R N_r))``, for the
      replicate sizes used here, and it needs no second pass or per-sample state such as P^2);
    * every standard error is the spread of the ``R`` replicate estimates divided by ``sqrt(R)``; for
      RQMC the replicates are independent scrambles, the only valid error estimate for QMC
      (L'Ecuyer 2018). The standard errors of the std and of the quantiles are those of the replicate
      averages, used for the pooled estimates too.

Moment methods report normal-approximation quantiles ``mean + std Phi^-1(p)``; their standard errors
are NaN (no sampling). The verdict (:func:`nonlinearity_verdict`) compares each moment method with
Monte Carlo.

References
----------
Julier, S. J. (2002), The scaled unscented transformation, Proc. American Control Conference,
doi:10.1109/ACC.2002.1025369.
Wan, E. A. & van der Merwe, R. (2000), The unscented Kalman filter for nonlinear estimation, Proc. IEEE
AS-SPCC, doi:10.1109/ASSPCC.2000.882463.
Gustafsson, F. & Hendeby, G. (2012), Some relations between extended and unscented Kalman filters,
IEEE Trans. Signal Process. 60, 545-555, doi:10.1109/TSP.2011.2172431.
Chan, T. F., Golub, G. H. & LeVeque, R. J. (1983), Algorithms for computing the sample variance,
Am. Stat. 37, 242-247, doi:10.1080/00031305.1983.10483115.
L'Ecuyer, P. (2018), Randomized quasi-Monte Carlo: an introduction for practitioners, MCQMC 2016,
doi:10.1007/978-3-319-91436-7_2.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Literal, Sequence

import numpy as np
import xarray as xr
from scipy import special

from sensitivity.analyses.sampling import InputUncertainty, Sampler, checked_covariance, unit_cube_blocks
from sensitivity.errors import ConfigError, ModelError
from sensitivity.labels import axis_coords, matrix_coords, output_coords, parameter_coords
from sensitivity.units import product

ValuesFn = Callable[[np.ndarray], np.ndarray]
ValueAndJacobianFn = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
HessianFn = Callable[[np.ndarray], np.ndarray]
Method = Literal["first_order", "second_order", "unscented", "monte_carlo"]
METHODS: tuple[str, ...] = ("first_order", "second_order", "unscented", "monte_carlo")
DEFAULT_QUANTILES: tuple[float, ...] = (0.05, 0.25, 0.5, 0.75, 0.95)

STATUS_OK, STATUS_NON_FINITE = 0, 1
VERDICT_NOT_ASSESSED, VERDICT_CONSISTENT, VERDICT_NONLINEAR = -1, 0, 1
#: Rounding allowance of the verdict, in units of eps * |mean| (so exact methods are never flagged).
_ROUNDING_ULPS = 64.0


@dataclass(frozen=True)
class _Outputs:
    """Names and units of the flat output axis."""

    names: tuple[str, ...]
    units: tuple[str, ...] | None

    @classmethod
    def of(cls, m: int, names: Sequence[str] | None, units: Sequence[str] | None) -> "_Outputs":
        names = tuple(f"y{k}" for k in range(m)) if names is None else tuple(names)
        for what, labels in (("output_names", names), ("output_units", units)):
            if labels is not None and len(labels) != m:
                raise ConfigError(f"`{what}` must have {m} entries (the model's outputs), got {len(labels)}")
        return cls(names, None if units is None else tuple(units))


# ----------------------------------------------------------------------------------------------- methods


def first_order(
    inputs: InputUncertainty,
    value_and_jacobian: ValueAndJacobianFn,
    *,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
    output_names: Sequence[str] | None = None,
    output_units: Sequence[str] | None = None,
) -> xr.Dataset:
    """First-order (delta method) propagation: mean ``f(mu)``, covariance ``J S J^T``.

    Parameters
    ----------
    inputs
        Input uncertainty; only its ``mean`` and ``covariance`` are used.
    value_and_jacobian
        ``points [K, n] -> (values [K, m], jacobian [K, m, n])``, batched.
    quantiles
        Probabilities of the reported (normal-approximation) quantiles, in (0, 1).
    output_names, output_units
        Labels of the ``m`` outputs (default ``y0 ..``; no units).

    Returns
    -------
    xarray.Dataset
        ``mean``, ``std`` (output), ``covariance`` (output_i, output_j), ``output_quantile``
        (quantile, output), NaN standard errors, ``outside_bounds``, ``status``, ``status_message``.
    """
    probabilities = _checked_quantiles(quantiles)
    value, jac = _value_and_jacobian_at(value_and_jacobian, inputs)
    outputs = _Outputs.of(value.size, output_names, output_units)
    return _moment_result(value, jac @ inputs.covariance @ jac.T, probabilities, outputs, 0.0)


def second_order(
    inputs: InputUncertainty,
    value_and_jacobian: ValueAndJacobianFn,
    hessian: HessianFn,
    *,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
    output_names: Sequence[str] | None = None,
    output_units: Sequence[str] | None = None,
) -> xr.Dataset:
    """Second-order propagation with the Hessians at the mean.

    Mean ``f_k(mu) + 1/2 tr(H_k S)``; covariance ``J S J^T + 1/2 tr(H_k S H_l S)`` (Gaussian inputs).

    Parameters
    ----------
    hessian
        ``points [K, n] -> hessians [K, m, n, n]``, e.g. :func:`sensitivity.hessian.compile_hessian`.

    See :func:`first_order` for the other parameters and the result.
    """
    probabilities = _checked_quantiles(quantiles)
    value, jac = _value_and_jacobian_at(value_and_jacobian, inputs)
    m, n = jac.shape
    hess = _checked_array(hessian(inputs.mean[None, :]), (1, m, n, n), "hessian")[0]
    outputs = _Outputs.of(m, output_names, output_units)
    h_s = hess @ inputs.covariance  # [m, n, n]: H_k S
    mean = value + 0.5 * np.trace(h_s, axis1=1, axis2=2)
    # tr(A_k A_l) = vec(A_k) . vec(A_l^T), one matrix product for all (k, l)
    quadratic = 0.5 * h_s.reshape(m, n * n) @ h_s.transpose(0, 2, 1).reshape(m, n * n).T
    return _moment_result(mean, jac @ inputs.covariance @ jac.T + quadratic, probabilities, outputs, 0.0)


def unscented(
    inputs: InputUncertainty,
    values_fn: ValuesFn,
    *,
    alpha: float = 1.0,
    beta: float = 2.0,
    kappa: float = 0.0,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
    output_names: Sequence[str] | None = None,
    output_units: Sequence[str] | None = None,
) -> xr.Dataset:
    """Scaled unscented transform (Julier 2002; weights of Wan & van der Merwe 2000).

    Parameters
    ----------
    values_fn
        ``points [K, n] -> values [K, m]``, batched; called once on the ``2n + 1`` sigma points.
    alpha
        Spread of the sigma points, > 0. The default 1 puts them at ``mu +- sqrt(n + kappa) L_i``;
        the often quoted 1e-3 gives weights of order 1e6 of both signs, which cancels
        catastrophically with a float32 surrogate.
    beta
        Prior knowledge of the distribution: 2 is optimal for Gaussian inputs.
    kappa
        Secondary scaling, with ``n + lambda = alpha^2 (n + kappa) > 0``.

    See :func:`first_order` for the other parameters and the result. Sigma points may fall
    outside the parameter bounds for wide inputs; ``outside_bounds`` reports the fraction.
    """
    probabilities = _checked_quantiles(quantiles)
    points, w_mean, w_cov = sigma_points(inputs.mean, inputs.covariance, alpha=alpha, beta=beta, kappa=kappa)
    values = _evaluate(values_fn, points)
    mean = w_mean @ values
    centred = values - mean
    cov = (centred * w_cov[:, None]).T @ centred
    outputs = _Outputs.of(values.shape[1], output_names, output_units)
    return _moment_result(mean, cov, probabilities, outputs, float(inputs.outside_bounds(points).mean()))


def sigma_points(mean: np.ndarray, covariance: np.ndarray, *, alpha: float = 1.0, beta: float = 2.0,
                 kappa: float = 0.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sigma points and weights of the scaled unscented transform.

    Returns
    -------
    points : ``[2n + 1, n]``
        ``mu``, then ``mu + c L_i`` and ``mu - c L_i`` for each column ``L_i`` of the Cholesky factor,
        ``c = sqrt(n + lambda)``.
    w_mean, w_cov : ``[2n + 1]``
        Weights of the mean and of the covariance.
    """
    for name, value in (("alpha", alpha), ("beta", beta), ("kappa", kappa)):
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(f"`{name}` must be a finite number, got {value!r}")
    if alpha <= 0:
        raise ConfigError(f"`alpha` must be > 0, got {alpha}")
    n = len(mean)
    spread = alpha**2 * (n + kappa)  # n + lambda
    if spread <= 0:
        raise ConfigError(f"`kappa` must satisfy n + kappa > 0 (n = {n}), got kappa = {kappa}")
    lam = spread - n
    offsets = math.sqrt(spread) * np.linalg.cholesky(covariance).T  # rows: scaled columns of L
    points = np.concatenate([mean[None, :], mean + offsets, mean - offsets])
    w_mean = np.full(2 * n + 1, 0.5 / spread)
    w_mean[0] = lam / spread
    w_cov = w_mean.copy()
    w_cov[0] += 1.0 - alpha**2 + beta
    return points, w_mean, w_cov


def monte_carlo(
    inputs: InputUncertainty,
    values_fn: ValuesFn,
    *,
    n_samples: int = 2**16,
    n_replicates: int = 16,
    sampler: Sampler = "sobol",
    block_size: int = 4096,
    max_bytes: int = 2**28,
    seed: int | np.random.Generator | None = None,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
    output_names: Sequence[str] | None = None,
    output_units: Sequence[str] | None = None,
) -> xr.Dataset:
    """Monte Carlo or randomised QMC propagation of the full input distribution.

    Parameters
    ----------
    values_fn
        ``points [K, n] -> values [K, m]``, batched; called once per block of ``block_size`` points
        (plus once at the mean to learn ``m``).
    n_samples
        Target total number of model evaluations, >= 2 * n_replicates. For ``"sobol"`` the replicate
        size is a power of 2, so the total is the largest multiple of it not above ``n_samples``.
    n_replicates
        Minimum number of independent replicates (scrambles for ``"sobol"``), >= 2; more are used when
        one replicate of outputs would exceed ``max_bytes``.
    sampler
        ``"sobol"`` (randomised QMC) or ``"random"`` (plain Monte Carlo).
    block_size
        Points per model call (a power of 2 for ``"sobol"``).
    max_bytes
        Memory allowed for one replicate of float64 outputs [bytes].
    seed
        Seed or generator; the replicates draw from it in turn.

    Returns
    -------
    xarray.Dataset
        As :func:`first_order`, with sample quantiles and Monte Carlo standard errors ``mean_se``,
        ``std_se``, ``covariance_se``, ``quantile_se``; attributes ``n_samples``, ``n_replicates``,
        ``sampler``.
    """
    probabilities = _checked_quantiles(quantiles)
    rng = np.random.default_rng(seed)
    m = _evaluate(values_fn, inputs.mean[None, :]).shape[1]
    outputs = _Outputs.of(m, output_names, output_units)
    n_rep, rep_size = replicate_plan(n_samples, n_replicates, m, max_bytes, power_of_two=sampler == "sobol")
    block = min(_checked_positive_int(block_size, "block_size"), rep_size)
    pooled, spread = _PooledMoments(m), _Spread()
    outside = 0
    buffer = np.empty((rep_size, m))
    for _ in range(n_rep):
        start = 0
        for u in unit_cube_blocks(rep_size, inputs.n, block, sampler, rng):
            x = inputs.from_unit_cube(u)
            outside += int(inputs.outside_bounds(x).sum())
            buffer[start : start + len(x)] = _evaluate(values_fn, x)
            start += len(x)
        mean, cov, q = _replicate_statistics(buffer, probabilities)
        pooled.merge(rep_size, mean, cov * (rep_size - 1))
        spread.add(mean=mean, std=np.sqrt(np.diag(cov)), covariance=cov, quantile=q)
    result = _result(pooled.mean, pooled.covariance, probabilities, outputs, outside / (n_rep * rep_size),
                     quantile_values=spread.mean["quantile"], se=spread.standard_error())
    result.attrs.update(n_samples=n_rep * rep_size, n_replicates=n_rep, sampler=sampler)
    return result


def replicate_plan(n_samples: int, n_replicates: int, m: int, max_bytes: int, *,
                   power_of_two: bool) -> tuple[int, int]:
    """``(replicates, replicate size)`` for about ``n_samples`` points in at least ``n_replicates``
    replicates whose ``[size, m]`` float64 outputs fit ``max_bytes``."""
    n_samples = _checked_positive_int(n_samples, "n_samples")
    n_replicates = _checked_positive_int(n_replicates, "n_replicates")
    max_bytes = _checked_positive_int(max_bytes, "max_bytes")
    if n_replicates < 2:
        raise ConfigError(f"`n_replicates` must be >= 2 (standard errors need two), got {n_replicates}")
    size = min(n_samples // n_replicates, max_bytes // (8 * m))
    if power_of_two and size >= 2:
        size = 2 ** int(math.log2(size))
    if size < 2:
        raise ConfigError(
            f"`n_samples` = {n_samples} with `n_replicates` = {n_replicates} and `max_bytes` = {max_bytes} for "
            f"{m} outputs leaves < 2 samples per replicate"
        )
    return n_samples // size, size


def _replicate_statistics(values: np.ndarray, probabilities: np.ndarray) -> tuple[np.ndarray, ...]:
    """Mean, covariance (ddof 1) and quantiles of one replicate; centres ``values`` in place."""
    mean = values.mean(axis=0)
    values -= mean
    cov = np.dot(values.T, values) / (len(values) - 1)  # 10x faster than `values.T @ values` (numpy 2.4, measured)
    q = np.quantile(values, probabilities, axis=0, overwrite_input=True) + mean  # reorders columns: last
    return mean, cov, q


class _PooledMoments:
    """Streaming mean and scatter matrix, merged group by group (Chan, Golub & LeVeque 1983)."""

    def __init__(self, m: int) -> None:
        self.count, self.mean, self.scatter = 0, np.zeros(m), np.zeros((m, m))

    def merge(self, count: int, mean: np.ndarray, scatter: np.ndarray) -> None:
        total = self.count + count
        delta = mean - self.mean
        self.scatter += scatter + np.outer(delta, delta) * (self.count * count / total)
        self.mean += delta * (count / total)
        self.count = total

    @property
    def covariance(self) -> np.ndarray:
        return self.scatter / (self.count - 1)


class _Spread:
    """Welford running mean and variance of named replicate estimates."""

    def __init__(self) -> None:
        self.count, self.mean, self.m2 = 0, {}, {}

    def add(self, **estimates: np.ndarray) -> None:
        self.count += 1
        for key, value in estimates.items():
            previous = self.mean.get(key, np.zeros_like(value))
            delta = value - previous
            self.mean[key] = previous + delta / self.count
            self.m2[key] = self.m2.get(key, np.zeros_like(value)) + delta * (value - self.mean[key])

    def standard_error(self) -> dict[str, np.ndarray]:
        """Standard error of each replicate average: sqrt(sample variance / count)."""
        return {key: np.sqrt(m2 / (self.count - 1) / self.count) for key, m2 in self.m2.items()}


# ----------------------------------------------------------------------------------------- all together


def propagate(
    inputs: InputUncertainty,
    *,
    values_fn: ValuesFn | None = None,
    value_and_jacobian: ValueAndJacobianFn | None = None,
    hessian: HessianFn | None = None,
    methods: Sequence[Method] = METHODS,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
    output_names: Sequence[str] | None = None,
    output_units: Sequence[str] | None = None,
    alpha: float = 1.0,
    beta: float = 2.0,
    kappa: float = 0.0,
    n_samples: int = 2**16,
    n_replicates: int = 16,
    sampler: Sampler = "sobol",
    block_size: int = 4096,
    max_bytes: int = 2**28,
    seed: int | np.random.Generator | None = None,
    k_sigma: float = 3.0,
    rtol: float = 0.05,
) -> xr.Dataset:
    """Propagate ``inputs`` with several methods and compare them with Monte Carlo.

    Parameters
    ----------
    inputs
        Input uncertainty (:func:`~sensitivity.analyses.sampling.inputs_from_space` or
        :func:`~sensitivity.analyses.sampling.gaussian_inputs`).
    values_fn
        Batched ``[K, n] -> [K, m]``; needed by ``unscented`` and ``monte_carlo``.
    value_and_jacobian
        Batched ``[K, n] -> ([K, m], [K, m, n])``; needed by ``first_order`` and ``second_order``.
    hessian
        Batched ``[K, n] -> [K, m, n, n]``; needed by ``second_order``.
    methods
        Any of ``first_order``, ``second_order``, ``unscented``, ``monte_carlo``, in output order.
    alpha, beta, kappa
        Unscented transform settings (:func:`unscented`).
    n_samples, n_replicates, sampler, block_size, max_bytes, seed
        Monte Carlo settings (:func:`monte_carlo`).
    k_sigma, rtol
        Verdict settings (:func:`nonlinearity_verdict`).

    Returns
    -------
    xarray.Dataset
        The methods' results stacked on ``method`` (labels in ``method_name(method)``), the input
        ``input_mean(parameter)`` and ``input_covariance(parameter_i, parameter_j)``, and the verdict
        ``mean_discrepancy``, ``std_discrepancy``, ``nonlinear`` on ``(method, output)``.
    """
    _check_methods(methods, values_fn, value_and_jacobian, hessian)
    labels = dict(quantiles=quantiles, output_names=output_names, output_units=output_units)
    run = {
        "first_order": lambda: first_order(inputs, value_and_jacobian, **labels),
        "second_order": lambda: second_order(inputs, value_and_jacobian, hessian, **labels),
        "unscented": lambda: unscented(inputs, values_fn, alpha=alpha, beta=beta, kappa=kappa, **labels),
        "monte_carlo": lambda: monte_carlo(inputs, values_fn, n_samples=n_samples, n_replicates=n_replicates,
                                           sampler=sampler, block_size=block_size, max_bytes=max_bytes, seed=seed,
                                           **labels),
    }
    results = [run[name]() for name in methods]
    mc_attrs = results[list(methods).index("monte_carlo")].attrs if "monte_carlo" in methods else {}
    ds = xr.concat([xr.Dataset(r.data_vars, r.coords) for r in results], dim="method", data_vars="all", coords="minimal",
                   compat="override", join="override")
    ds = ds.assign_coords(axis_coords("method", list(methods)))
    ds = ds.assign(input_variables(inputs))
    ds = nonlinearity_verdict(ds, k_sigma=k_sigma, rtol=rtol)
    ds.attrs.update(
        input_distribution=inputs.description,
        unscented_alpha=float(alpha), unscented_beta=float(beta), unscented_kappa=float(kappa),
        seed=str(seed) if seed is None or isinstance(seed, (int, np.integer)) else "generator",
        **{f"monte_carlo_{k}": v for k, v in mc_attrs.items()},
    )
    return ds


def _check_methods(methods: Sequence[str], values_fn: ValuesFn | None, value_and_jacobian: ValueAndJacobianFn | None,
                   hessian: HessianFn | None) -> None:
    if not methods or len(set(methods)) != len(methods):
        raise ConfigError(f"`methods` must list distinct methods from {METHODS}, got {list(methods)}")
    needs = {"first_order": ("value_and_jacobian",), "second_order": ("value_and_jacobian", "hessian"),
             "unscented": ("values_fn",), "monte_carlo": ("values_fn",)}
    given = {"values_fn": values_fn, "value_and_jacobian": value_and_jacobian, "hessian": hessian}
    for method in methods:
        if method not in needs:
            raise ConfigError(f"`methods` entries must be one of {METHODS}, got {method!r}")
        for arg in needs[method]:
            if given[arg] is None:
                raise ConfigError(f"method {method!r} needs `{arg}`, got None")


def nonlinearity_verdict(ds: xr.Dataset, *, reference: str = "monte_carlo", k_sigma: float = 3.0,
                         rtol: float = 0.05) -> xr.Dataset:
    """Flag, per method and output, where a moment method disagrees with the Monte Carlo reference.

    Method ``M`` is ``nonlinear`` at output ``k`` when its mean or its std differs from the
    reference's by more than the reference's error band plus a tolerance::

        |mean_M - mean_MC| > k_sigma * mean_se_MC + rtol * std_MC      (or the same for std)

    (plus a rounding allowance of 64 eps |mean_MC|). The disagreements are reported in units of
    the reference std (``mean_discrepancy``, ``std_discrepancy``; NaN where that std is 0).

    Parameters
    ----------
    ds
        Propagation results stacked on ``method`` with ``method_name(method)``.
    reference
        The method to compare with; when absent, every flag is ``not_assessed``.
    k_sigma
        Width of the error band in standard errors, > 0.
    rtol
        Tolerance relative to the reference std, >= 0.

    Returns
    -------
    xarray.Dataset
        ``ds`` with ``mean_discrepancy``, ``std_discrepancy`` [1] and ``nonlinear`` (flags -1
        not_assessed: the reference itself, a failed method or no reference; 0 consistent;
        1 nonlinear) on ``(method, output)``.
    """
    if not (isinstance(k_sigma, (int, float)) and k_sigma > 0):
        raise ConfigError(f"`k_sigma` must be > 0, got {k_sigma!r}")
    if not (isinstance(rtol, (int, float)) and rtol >= 0):
        raise ConfigError(f"`rtol` must be >= 0, got {rtol!r}")
    names = list(ds["method_name"].values)
    shape = (ds.sizes["method"], ds.sizes["output"])
    mean_gap, std_gap = np.full(shape, np.nan), np.full(shape, np.nan)
    flags = np.full(shape, VERDICT_NOT_ASSESSED, dtype=np.int8)
    if reference in names:
        ref = ds.isel(method=names.index(reference))
        scale = ref["output_std"].values
        floor = _ROUNDING_ULPS * np.finfo(float).eps * np.abs(ref["output_mean"].values)
        band_mean = k_sigma * ref["mean_se"].values + rtol * scale + floor
        band_std = k_sigma * ref["std_se"].values + rtol * scale + floor
        for i, name in enumerate(names):
            if name == reference or ds["status"].values[i] != STATUS_OK or ref["status"].values != STATUS_OK:
                continue
            d_mean = ds["output_mean"].values[i] - ref["output_mean"].values
            d_std = ds["output_std"].values[i] - scale
            with np.errstate(divide="ignore", invalid="ignore"):
                mean_gap[i] = np.where(scale > 0, d_mean / scale, np.nan)
                std_gap[i] = np.where(scale > 0, d_std / scale, np.nan)
            flags[i] = np.where((np.abs(d_mean) > band_mean) | (np.abs(d_std) > band_std),
                                VERDICT_NONLINEAR, VERDICT_CONSISTENT)
    dims = ("method", "output")
    where = f"relative to {reference}, in units of its std"
    return ds.assign(
        mean_discrepancy=(dims, mean_gap, {"long_name": f"mean minus the mean of {reference}, {where}", "units": "1"}),
        std_discrepancy=(dims, std_gap, {"long_name": f"std minus the std of {reference}, {where}", "units": "1"}),
        nonlinear=(dims, flags, {
            "long_name": f"mean or std outside {k_sigma:g} standard errors + {rtol:g} std of {reference}",
            "flag_values": np.array([VERDICT_NOT_ASSESSED, VERDICT_CONSISTENT, VERDICT_NONLINEAR], np.int8),
            "flag_meanings": "not_assessed consistent nonlinear",
            "verdict_k_sigma": float(k_sigma), "verdict_rtol": float(rtol),
        }),
    )


# ------------------------------------------------------------------------------------ local propagation


def propagate_local(jacobian: np.ndarray, input_cov: np.ndarray) -> np.ndarray:
    """Linear output standard deviations ``sqrt(diag(J S J^T))`` at every point of a sweep.

    Parameters
    ----------
    jacobian
        ``[N, m, n]`` (or ``[N, *out, n]``) Jacobians d output / d parameter
        [output units / parameter units].
    input_cov
        ``[n, n]`` symmetric positive definite input covariance [units_i * units_j].

    Returns
    -------
    ``[N, m]`` (or ``[N, *out]``) sigma_y [output units], the row norms of ``J L`` (``L L^T = S``), so
    never negative. Memory is one temporary the size of ``jacobian``: call it block by block on
    sweeps larger than memory.
    """
    jac = np.asarray(jacobian, dtype=float)
    if jac.ndim < 2:
        raise ConfigError(f"`jacobian` must have shape [N, m, n], got {list(jac.shape)}")
    chol = np.linalg.cholesky(checked_covariance(input_cov, jac.shape[-1], "input_cov"))
    return np.linalg.norm(jac @ chol, axis=-1)


# ----------------------------------------------------------------------------------------------- helpers


def _value_and_jacobian_at(value_and_jacobian: ValueAndJacobianFn, inputs: InputUncertainty
                           ) -> tuple[np.ndarray, np.ndarray]:
    """Value ``[m]`` and Jacobian ``[m, n]`` at the input mean."""
    values, jac = value_and_jacobian(inputs.mean[None, :])
    values = _checked_array(values, (1, None), "value_and_jacobian values")
    return values[0], _checked_array(jac, (1, values.shape[1], inputs.n), "value_and_jacobian jacobian")[0]


def _evaluate(values_fn: ValuesFn, points: np.ndarray) -> np.ndarray:
    """``values_fn(points)`` as a float64 ``[K, m]`` array, with a clear error on a wrong shape."""
    return _checked_array(values_fn(points), (len(points), None), "values_fn")


def _checked_array(array: np.ndarray, shape: tuple[int | None, ...], what: str) -> np.ndarray:
    a = np.asarray(array, dtype=float)
    if a.ndim != len(shape) or any(s is not None and s != t for s, t in zip(shape, a.shape)):
        expected = "[" + ", ".join("m" if s is None else str(s) for s in shape) + "]"
        raise ModelError(f"`{what}` returned shape {list(a.shape)}, expected {expected}")
    return a


def _checked_quantiles(quantiles: Sequence[float]) -> np.ndarray:
    p = np.asarray(quantiles, dtype=float)
    if p.ndim != 1 or p.size == 0 or not ((p > 0) & (p < 1)).all():
        raise ConfigError(f"`quantiles` must be probabilities in (0, 1), got {np.asarray(quantiles).tolist()}")
    return p


def _checked_positive_int(value: int, what: str) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"`{what}` must be a positive integer, got {value!r}")
    return int(value)


def _moment_result(mean: np.ndarray, cov: np.ndarray, probabilities: np.ndarray, outputs: _Outputs,
                   outside: float) -> xr.Dataset:
    """Result of a moment method: normal-approximation quantiles, NaN standard errors."""
    return _result(mean, cov, probabilities, outputs, outside,
                   quantile_values=mean + _std(cov) * special.ndtri(probabilities)[:, None], se=None)


def _std(cov: np.ndarray) -> np.ndarray:
    """Square root of the diagonal; NaN where a variance is negative."""
    with np.errstate(invalid="ignore"):
        return np.sqrt(np.diag(cov))


def _result(mean: np.ndarray, cov: np.ndarray, probabilities: np.ndarray, outputs: _Outputs, outside: float, *,
            quantile_values: np.ndarray, se: dict[str, np.ndarray] | None) -> xr.Dataset:
    """The labeled dataset of one method, with its status."""
    m, p, std = len(mean), len(probabilities), _std(cov)
    se = se or {"mean": np.full(m, np.nan), "std": np.full(m, np.nan), "covariance": np.full((m, m), np.nan),
                "quantile": np.full((p, m), np.nan)}
    finite = all(np.isfinite(a).all() for a in (mean, std, cov))
    out_units, cov_units = _units_attrs(outputs.units, "output"), _units_attrs(outputs.units, "output", squared=True)
    vec, mat, qnt = ("output",), ("output_i", "output_j"), ("quantile", "output")
    variables = {
        "output_mean": (vec, mean, {"long_name": "output mean", **out_units}),
        "output_std": (vec, std, {"long_name": "output standard deviation", **out_units}),
        "output_covariance": (mat, cov, {"long_name": "output covariance", **cov_units}),
        "output_quantile": (qnt, quantile_values, {"long_name": "output quantile", **out_units}),
        "mean_se": (vec, se["mean"], {"long_name": "Monte Carlo standard error of the mean", **out_units}),
        "std_se": (vec, se["std"], {"long_name": "Monte Carlo standard error of the std", **out_units}),
        "covariance_se": (mat, se["covariance"], {"long_name": "Monte Carlo standard error of the covariance", **cov_units}),
        "quantile_se": (qnt, se["quantile"], {"long_name": "Monte Carlo standard error of the quantile", **out_units}),
        "outside_bounds": ((), outside, {"long_name": "fraction of model evaluations outside the parameter bounds", "units": "1"}),
        "status": ((), np.int8(STATUS_OK if finite else STATUS_NON_FINITE), {
            "long_name": "method status", "units": "1", "flag_values": np.array([0, 1], np.int8),
            "flag_meanings": "ok non_finite"}),
        "status_message": ((), "ok" if finite else "non-finite mean or covariance (NaN/inf model output, or a "
                           "negative unscented variance)", {"long_name": "method status message"}),
    }
    coords = {**output_coords(outputs.names, outputs.units), **matrix_coords("output", outputs.names, outputs.units),
              "quantile": xr.Variable("quantile", probabilities, {"long_name": "probability of the quantile", "units": "1"},
                                      encoding={"_FillValue": None})}  # CF: no fill value on a coordinate
    return xr.Dataset(variables, coords=coords)


def input_variables(inputs: InputUncertainty) -> xr.Dataset:
    """The propagated input mean and covariance, labeled by parameter (propagation.nc, local_propagation.nc)."""
    coords = {**parameter_coords(inputs.names, inputs.units), **matrix_coords("parameter", inputs.names, inputs.units)}
    units, squared = _units_attrs(inputs.units, "parameter"), _units_attrs(inputs.units, "parameter", squared=True)
    return xr.Dataset(
        {
            "input_mean": ("parameter", inputs.mean, {"long_name": "input mean", **units}),
            "input_covariance": (("parameter_i", "parameter_j"), inputs.covariance,
                                 {"long_name": "input covariance", **squared}),
        },
        coords=coords,
    )


def _units_attrs(units: Sequence[str] | None, axis: str, *, squared: bool = False) -> dict[str, str]:
    """``units`` attribute of a variable over a labeled axis (squared for a covariance).

    None when no units were given; when the elements have different units, ``units`` is left out and
    ``units_coordinate`` names the ``{axis}_units`` coordinate holding them (for a covariance, the
    units of entry ``(i, j)`` are the product of entries ``i`` and ``j``), as the dataset contract says.
    """
    if units is None:
        return {}
    if len(set(units)) > 1:
        return {"units_coordinate": f"{axis}_units"}
    return {"units": product(units[0], units[0]) if squared else units[0]}
