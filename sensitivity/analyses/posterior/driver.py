"""The verb: sample a calibration problem's posterior with NUTS and return a labeled dataset.

:func:`sample_posterior` builds the log-posterior (:mod:`.density`), checks that it is proper where a
flat prior meets an unbounded parameter, runs the chains (:mod:`.nuts`), diagnoses them
(:mod:`.diagnostics`) and lays everything out on ``(chain, draw, parameter)`` beside the Laplace
approximation it started from. Chains that did not converge are never summarised silently: a
:class:`PosteriorWarning` names each failed check, the dataset's ``converged`` is 0 and its
``diagnostics`` attribute lists the failures. A stuck chain (far below the others' log density, or never moved:
:func:`~sensitivity.analyses.posterior.diagnostics.chain_health`) is named with its log density and start and left
out of the diagnostics and summaries (``chain_kept``); chains that do not mix at all (R-hat above ``RHAT_FAIL``) or
stuck chains raise :class:`PosteriorError` unless ``throw=False``, with the advice of that diagnosis.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from sensitivity.analyses.calibration import ObservationModel
from sensitivity.analyses.posterior.density import ModelFn, Prior, Support, log_posterior
from sensitivity.analyses.posterior.diagnostics import ESS_MIN, RHAT_MAX, chain_health, diagnose, problems
from sensitivity.analyses.posterior.nuts import NUTS, Chains, run_nuts
from sensitivity.analyses.posterior.outputs import model_at_draws
from sensitivity.errors import ConfigError, SensitivityError
from sensitivity.inputs.space import ParameterSpace
from sensitivity.outputs.labels import matrix_coords, parameter_coords
from sensitivity.outputs.spec import OutputSpec
from sensitivity.runtime.lazy import lazy_import
from sensitivity.units import product

xr = lazy_import("xarray")

#: R-hat above which the chains are taken not to mix at all (an error unless throw=False).
RHAT_FAIL = 1.1
QUANTILES = (0.025, 0.05, 0.25, 0.5, 0.75, 0.95, 0.975)
_IMPROPER_RTOL = 1e-10  # curvature below this fraction of the largest counts as flat


class PosteriorError(SensitivityError, RuntimeError):
    """The posterior is improper, or the chains do not mix."""


class PosteriorWarning(UserWarning):
    """The chains failed a convergence check (R-hat, ESS or divergences)."""


def initial_points(minima: np.ndarray, mean: np.ndarray, cov: np.ndarray | None, support: Support, n_chains: int,
                   *, spread: float = 2.0, seed: int | np.random.Generator | None = 0) -> np.ndarray:
    """``[n_chains, n]`` chain starts: the distinct minima first, then overdispersed Laplace draws.

    The extra starts are drawn from ``N(mean, spread^2 cov)`` and redrawn (up to 100 times) until strictly
    inside the support, so that R-hat can detect chains that forget where they started only slowly. Without
    a covariance (``cov`` None: a rank-deficient fit has none) they are drawn uniformly over the bounds.

    Parameters
    ----------
    minima
        ``[M, n]`` the calibration's distinct minima, best first (only the first ``n_chains`` are used).
    mean, cov
        The Laplace approximation [parameter units]; ``cov`` None where it is undefined.
    support
        Bounds and log parameters; finite bounds where ``cov`` is None.
    n_chains
        Number of chains (>= 2).
    spread
        Overdispersion factor of the extra starts.
    seed
        Seed or generator.
    """
    if isinstance(n_chains, bool) or not isinstance(n_chains, (int, np.integer)) or n_chains < 2:
        raise ConfigError(f"`n_chains` must be an integer >= 2, got {n_chains!r}")
    rng = np.random.default_rng(seed)
    minima = support.interior(np.asarray(minima, float).reshape(-1, len(mean))[:n_chains])
    if cov is None:
        return np.vstack([minima, _uniform_starts(support, n_chains - len(minima), rng)])
    w, v = np.linalg.eigh(0.5 * (cov + cov.T))
    root = v * np.sqrt(np.maximum(w, 0.0))
    extra = np.empty((n_chains - len(minima), len(mean)))
    for i in range(len(extra)):
        for _ in range(100):
            extra[i] = mean + spread * root @ rng.standard_normal(len(mean))
            if support.inside(extra[i][None])[0]:
                break
        else:
            extra[i] = support.interior(mean)
    return np.vstack([minima, extra])


def _uniform_starts(support: Support, count: int, rng: np.random.Generator) -> np.ndarray:
    """``[count, n]`` starts uniform over the bounds (the log parameters' in ``log x``), a thousandth of each
    range off its ends."""
    logged = support.log_mask
    with np.errstate(divide="ignore", invalid="ignore"):  # np.where takes the log of the linear ones too
        low = np.where(logged, np.log(np.maximum(support.lower, 0.0)), support.lower)
        high = np.where(logged, np.log(support.upper), support.upper)
    unbounded = ~(np.isfinite(low) & np.isfinite(high))
    if unbounded.any():
        raise ConfigError(f"the chains have no Laplace covariance to start from (a rank-deficient calibration) and "
                          f"parameter {int(np.flatnonzero(unbounded)[0])} has no finite bounds to draw starts in "
                          "(a log parameter: bounds > 0): give it bounds in the space")
    margin = 1e-3 * (high - low)
    u = rng.uniform(low + margin, high - margin, (count, low.size))
    return np.where(logged, np.exp(u), u)


@dataclass(frozen=True)
class Sampling:
    """How :func:`sample_posterior` samples: the only defaults of a posterior run.

    Attributes
    ----------
    sampler
        :class:`~sensitivity.analyses.posterior.nuts.NUTS` settings (draws, warm-up, algorithm, ...).
    throw
        Raise :class:`PosteriorError` when a chain is stuck or the chains do not mix (R-hat > ``RHAT_FAIL``);
        otherwise the draws are returned with ``converged`` 0, summarised over the chains that are not stuck.
    jit_compile
        Compile the sampler with XLA.
    stuck_level
        A chain whose mean log density lies more than ``chi2.ppf(stuck_level, n) / 2`` below the median chain's
        is stuck (:func:`~sensitivity.analyses.posterior.diagnostics.chain_health`; 9.2 for 4 parameters at
        0.999): within one mode the log density varies about its mean by ``chi2_n / 2``.
    level
        Probability of the interval of each model output over the draws, and of an ensemble's combined interval
        (:func:`~sensitivity.analyses.posterior.outputs.model_at_draws`).
    """

    sampler: NUTS = NUTS()
    throw: bool = True
    jit_compile: bool = True
    stuck_level: float = 0.999
    level: float = 0.95

    def __post_init__(self) -> None:
        if not isinstance(self.sampler, NUTS):
            raise ConfigError(f"Sampling: `sampler` must be a NUTS settings object, got {self.sampler!r}")
        if not isinstance(self.stuck_level, (int, float)) or not 0 < self.stuck_level < 1:
            raise ConfigError(f"Sampling: `stuck_level` must lie in (0, 1), got {self.stuck_level!r}")
        if isinstance(self.level, bool) or not isinstance(self.level, (int, float)) or not 0 < self.level < 1:
            raise ConfigError(f"Sampling: `level` must lie in (0, 1), got {self.level!r}")


def sample_posterior(
    model: ModelFn,
    observations: ObservationModel,
    settings: Sampling = Sampling(),
    *,
    prior: Prior,
    initial: np.ndarray,
    space: ParameterSpace | None = None,
    bounds: np.ndarray | None = None,
    log_parameters: np.ndarray | None = None,
    laplace_mean: np.ndarray | None = None,
    laplace_cov: np.ndarray | None = None,
    seed: int = 0,
    model_dtype: str = "float64",
    members: ModelFn | None = None,
    output: OutputSpec | None = None,
    progress: Callable[[int], object] | None = None,
) -> xr.Dataset:
    """Draw from ``p(x | y)`` with many NUTS chains at once; return draws, diagnostics and summaries.

    Parameters
    ----------
    model
        TF-traceable ``x [B, n] (float64) -> y [B, ...]`` in output units.
    observations
        :class:`~sensitivity.analyses.calibration.ObservationModel` (sigma or covariance, masks).
    settings
        The sampler and what a failure does (:class:`Sampling`).
    prior
        ``space_prior(space)``, ``gaussian_prior(mean, cov)`` or ``flat_prior()``.
    initial
        ``[C, n]`` one start per chain (see :func:`initial_points`), strictly inside the bounds.
    space
        The parameters: their names and units label the result, their bounds are the support. None: ``p0 ..``,
        unbounded.
    bounds
        ``[n, 2]`` support of the parameters (``±inf`` for none), in place of the space's.
    log_parameters
        ``[n]`` bool: parameters that must stay > 0 and move in ``log x``.
    laplace_mean, laplace_cov
        The calibration's Gaussian approximation: preconditions the sampler and is stored beside the
        posterior's moments. ``laplace_mean`` alone (a rank-deficient fit has no covariance) is stored, and
        the sampler is not preconditioned, as without either: its metric comes from the warm-up alone.
    seed
        Seed of the sampler.
    model_dtype
        The dtype ``model`` computes in (see :func:`~sensitivity.analyses.posterior.density.log_posterior`).
    members
        An ensemble's members ``x -> [K, B, ...]``: the likelihood carries their predictive variance as emulator
        variance (see :func:`~sensitivity.analyses.posterior.density.log_posterior`); the dataset's attribute
        ``likelihood`` says which was sampled; the members' means of every output over the draws and their spread
        are recorded beside the ensemble's.
    output
        The model's output spec: labels the model's outputs at the draws (None: a flat ``output`` axis ``y0 ..``).
    progress
        Called with the chain transitions each compiled block completes (see
        :func:`~sensitivity.analyses.posterior.nuts.run_nuts`).

    Returns
    -------
    xarray.Dataset
        ``draws(chain, draw, parameter)``, ``log_density``, ``accept_prob``, ``divergent``,
        ``max_tree_depth_reached``, ``n_leapfrog`` on ``(chain, draw)``; ``initial(chain, parameter)``;
        ``chain_kept``, ``chain_mean_log_density`` and ``chain_moved`` on ``chain`` (the diagnostics and summaries
        below use the kept chains only); per parameter ``rhat``, ``ess_bulk``, ``ess_tail``, ``mcse_mean``, ``posterior_mean``,
        ``posterior_std``, ``posterior_quantile(quantile, parameter)``, ``laplace_mean``, ``laplace_std``;
        ``posterior_covariance`` and ``laplace_covariance`` on ``(parameter_i, parameter_j)``; scalars
        ``converged``, ``n_divergent``, ``step_size``; the model's outputs over the kept draws,
        ``predictive_mean`` and ``predictive_interval`` (at ``settings.level``) beside the ``observed`` values, on
        the output spec's dims (:func:`~sensitivity.analyses.posterior.outputs.model_at_draws`, with an ensemble's
        member variables).

    Raises
    ------
    PosteriorError
        A flat prior on a parameter without a finite bound that the data do not identify (an improper
        posterior), or (with ``throw``) a stuck chain or chains that do not mix.
    """
    n = np.shape(initial)[-1]
    names = space.names if space is not None else [f"p{j}" for j in range(n)]
    bounds = space.bounds if bounds is None and space is not None else bounds
    support = Support.of(bounds, log_parameters, n, names)
    sampler = settings.sampler
    if laplace_cov is not None and laplace_mean is None:
        raise ConfigError("`laplace_cov` needs `laplace_mean` (the estimate it is the covariance of)")
    posterior = log_posterior(model, observations, prior, support,
                              center=None if laplace_cov is None else laplace_mean, covariance=laplace_cov,
                              model_dtype=model_dtype, members=members)
    if prior.kind == "flat":
        check_proper(posterior, np.asarray(initial, float)[0], names)
    chains = run_nuts(posterior, initial, sampler, seed=seed, jit_compile=settings.jit_compile, progress=progress)
    initial = np.asarray(initial, float)
    health = chain_health(chains.log_density, chains.draws, settings.stuck_level)
    stuck = health.words(names, initial)
    if stuck and settings.throw:
        raise PosteriorError("posterior: " + "; ".join(stuck) + ": a chain far below the others sits in a far mode "
                             "or on a bound, where a calibration start that did not fit leaves it; start the chains "
                             "at the calibration's minima within chi-square reach of the best fit (its rejected starts "
                             "are not minima), or throw=False summarises the other chains")
    kept = health.kept
    kept_draws = chains.draws[kept]
    if len(kept_draws) == 1:  # one healthy chain: its halves are the two chains R-hat compares
        kept_draws = kept_draws[:, : 2 * (kept_draws.shape[1] // 2)].reshape(2, -1, kept_draws.shape[2])
    diag = diagnose(kept_draws)
    n_div = int(chains.divergent[kept].sum())
    failed = stuck + problems(diag, names, n_div, chains.divergent[kept].size)
    mixing = [names[j] for j in np.flatnonzero(~(diag.rhat <= RHAT_FAIL))]
    if mixing and settings.throw:
        raise PosteriorError(f"the chains do not mix: R-hat > {RHAT_FAIL} for {mixing} "
                             f"({', '.join(f'{r:.3g}' for r in diag.rhat)}), though every chain reaches the same log "
                             f"density (mean {np.median(health.mean_log_density):.4g}, none stuck): more warm-up "
                             "(nuts.num_warmup) and draws (nuts.num_draws); if that does not bring them together, the "
                             "posterior has separate modes of similar height (throw=False keeps the draws)")
    if failed:
        warnings.warn("posterior chains failed convergence checks: " + "; ".join(failed), PosteriorWarning,
                      stacklevel=2)
    units = None if space is None else space.units
    ds = _to_dataset(chains, health, diag, failed, names, units, laplace_mean, laplace_cov, sampler, seed,
                     prior, posterior.n_observed, initial)
    ds = ds.assign(model_at_draws(model, chains.draws[kept].reshape(-1, n), observations, level=settings.level,
                                  model_dtype=model_dtype, output=output, members=members))
    ds.attrs["model_dtype"] = model_dtype
    ds.attrs["likelihood"] = "observation covariance" if members is None else (
        "ensemble mean, observation covariance + the members' predictive variance (emulator variance, Kennedy and "
        "O'Hagan 2001)")
    return ds


def check_proper(posterior, at: np.ndarray, names: Sequence[str]) -> None:
    """Raise :class:`PosteriorError` when a flat prior leaves a direction with no finite bound uncurved.

    The Hessian of the log-posterior at ``at`` (float64, by autodiff) is eigen-decomposed; an eigenvalue
    below ``1e-10`` of the largest whose eigenvector loads on a parameter with an infinite bound means the
    data do not confine that parameter, and a flat prior does not either: the posterior cannot be normalised.
    A space bounded on every side is proper under a flat prior, so it needs no Hessian.
    """
    import tensorflow as tf

    open_ = ~(np.isfinite(posterior.support.lower) & np.isfinite(posterior.support.upper))
    if not open_.any():
        return
    x = tf.constant(at[None], tf.float64)
    with tf.GradientTape() as outer:
        outer.watch(x)
        with tf.GradientTape() as inner:
            inner.watch(x)
            lp = tf.reduce_sum(posterior.log_prob(x))
        grad = inner.gradient(lp, x)
    hessian = outer.jacobian(grad, x).numpy().reshape(at.size, at.size)
    w, v = np.linalg.eigh(-0.5 * (hessian + hessian.T))
    flat = w <= _IMPROPER_RTOL * max(w.max(), 0.0)
    loose = [names[j] for j in np.flatnonzero(open_) if (np.abs(v[j, flat]) > 1e-3).any()]
    if loose:
        raise PosteriorError(f"improper posterior: the prior is flat and the data do not identify {loose}, "
                             "which have no finite bound; give them bounds or a prior")


def _to_dataset(chains: Chains, health, diag, failed: list[str], names: list[str], units: Sequence[str] | None,
                laplace_mean, laplace_cov, sampler: NUTS, seed: int, prior: Prior, n_observed: int,
                initial: np.ndarray) -> xr.Dataset:
    c, d, n = chains.draws.shape
    units = list(units) if units is not None else None
    common = units[0] if units is not None and len(set(units)) == 1 else None

    def pu(long_name: str, squared: bool = False) -> dict:
        """Calibration's convention: one shared unit as ``units``, else ``units_coordinate``."""
        if units is None:
            return {"long_name": long_name}
        if common is not None:
            return {"long_name": long_name, "units": product(common, common) if squared else common}
        return {"long_name": long_name, "units_coordinate": "parameter_units"}

    one = lambda long_name, **extra: {"long_name": long_name, "units": "1", **extra}  # noqa: E731
    flat = chains.draws[health.kept].reshape(-1, n)
    cov_attrs = pu("posterior covariance of the parameters", squared=True)
    nan_vec, nan_mat = np.full(n, np.nan), np.full((n, n), np.nan)
    lm = nan_vec if laplace_mean is None else np.asarray(laplace_mean, float)
    lc = nan_mat if laplace_cov is None else np.asarray(laplace_cov, float)
    chain_dims, draw_dims = ("chain",), ("chain", "draw")
    data = {
        "draws": (("chain", "draw", "parameter"), chains.draws, pu("posterior draws")),
        "log_density": (draw_dims, chains.log_density,
                        one("unnormalised log posterior density -1/2 |W r|^2 + log prior")),
        "accept_prob": (draw_dims, chains.accept_prob, one("NUTS acceptance statistic")),
        "divergent": (draw_dims, chains.divergent.astype(np.int8), one("divergent transition (1 = yes)")),
        "max_tree_depth_reached": (draw_dims, chains.max_depth.astype(np.int8),
                                   one("trajectory stopped at max_tree_depth (1 = yes)")),
        "n_leapfrog": (draw_dims, chains.leapfrogs.astype(np.int32), one("leapfrog steps (model gradient calls)")),
        "initial": (chain_dims + ("parameter",), initial, pu("chain start")),
        "chain_kept": (chain_dims, health.kept.astype(np.int8), one(
            "chain enters the diagnostics and summaries (0: stuck, far below the others' log density or never "
            "moved)", flag_values=np.array([0, 1], np.int8), flag_meanings="stuck kept")),
        "chain_mean_log_density": (chain_dims, health.mean_log_density, one("mean log posterior density of the chain")),
        "chain_moved": (chain_dims, health.moved, one("share of the chain's transitions that changed its position")),
        "rhat": (("parameter",), diag.rhat, one("rank-normalised split R-hat (max of bulk and folded)")),
        "ess_bulk": (("parameter",), diag.ess_bulk, one("bulk effective sample size")),
        "ess_tail": (("parameter",), diag.ess_tail, one("tail effective sample size (5 % and 95 % quantiles)")),
        "mcse_mean": (("parameter",), diag.mcse_mean, pu("Monte Carlo standard error of the posterior mean")),
        "posterior_mean": (("parameter",), flat.mean(axis=0), pu("posterior mean")),
        "posterior_std": (("parameter",), flat.std(axis=0, ddof=1), pu("posterior standard deviation")),
        "posterior_quantile": (("quantile", "parameter"), np.quantile(flat, QUANTILES, axis=0),
                               pu("posterior quantile")),
        "posterior_covariance": (("parameter_i", "parameter_j"), np.cov(flat, rowvar=False).reshape(n, n), cov_attrs),
        "laplace_mean": (("parameter",), lm, pu("Laplace (calibration) estimate")),
        "laplace_std": (("parameter",), np.sqrt(np.diag(lc)), pu("Laplace (calibration) standard error")),
        "laplace_covariance": (("parameter_i", "parameter_j"), lc,
                               {**cov_attrs, "long_name": "Laplace (calibration) covariance of the parameters"}),
        "converged": ((), np.int8(not failed), one("1 when no chain is stuck, R-hat < 1.01, ESS > 400 and no "
                                                   "divergence")),
        "n_divergent": ((), np.int32(chains.divergent[health.kept].sum()),
                        one("divergent transitions after warm-up (kept chains)")),
        "step_size": ((), chains.step_size,
                      one("adapted leapfrog step in the preconditioned space (geometric mean over the chain groups)")),
    }
    coords = {
        "chain": ("chain", np.arange(c, dtype=np.int32), one("chain index")),
        "draw": ("draw", np.arange(d, dtype=np.int32), one("draw index after warm-up")),
        "quantile": xr.Variable("quantile", np.asarray(QUANTILES), one("probability"),
                                encoding={"_FillValue": None}),  # CF: no fill value on a coordinate
        **parameter_coords(names, units), **matrix_coords("parameter", names, units),
    }
    ds = xr.Dataset(data, coords=coords)
    ds.attrs.update(
        sampler=repr(sampler), sampler_seed=str(seed), prior=prior.description(), n_observed=str(n_observed),
        sampling_seconds=f"{chains.seconds:.3f}", rhat_threshold=str(RHAT_MAX), ess_threshold=str(ESS_MIN),
        diagnostics="; ".join(failed) if failed else "all checks passed",
        stuck_threshold=f"{health.gap:.4g}",
        mean_accept_prob=f"{float(chains.accept_prob[health.kept].mean()):.4f}")
    return ds
