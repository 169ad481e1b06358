"""Sampling estimators of ``Pf = P(g(U) <= 0)``, ``U ~ N(0, I_n)``: Monte Carlo, importance sampling, subset simulation.

``monte_carlo``
    Plain Monte Carlo in blocks (bounded memory), every event of a ``[K, E]`` limit state at once; the
    Clopper-Pearson (exact binomial) interval and ``CoV = sqrt((1 - Pf) / (N Pf))``.
``importance_sampling``
    Samples from the Gaussian mixture ``h(u) = w_0 phi_n(u) + (1 - w_0) sum_i w_i phi_n(u - u*_i)`` centred at
    design points, with equal weights or ``w_i`` proportional to ``Phi(-beta_i)``, and the defensive component
    ``phi_n`` itself of weight ``w_0`` (Hesterberg 1995: ``phi_n / h <= 1 / w_0``); the estimate ``mean(1[g <= 0] phi_n / h)``,
    its standard error from the sample variance and a normal interval (Melchers 1989). Likelihood ratios in
    log space: ``phi_n(u) / phi_n(u - c) = exp(|c|^2 / 2 - u . c)``.
``subset_simulation``
    Au & Beck (2001): intermediate thresholds at the ``p0`` quantile of ``g``, conditional samples by
    Markov chains started from the ``p0 N`` seeds, here with the adaptive conditional sampler (aCS) of
    Papaioannou et al. (2015): candidate ``rho_k u_k + sqrt(1 - rho_k^2) xi`` per component, kept when
    ``g <= b``, with ``sigma_k = min(1, lambda s_k)`` (``s_k`` the seeds' standard deviation) and ``lambda``
    adapted towards an acceptance rate of 0.44 after every ``10 %`` of the chains. Its CoV is
    ``sqrt(sum_i delta_i^2)`` with ``delta_i^2 = (1 - p_i) / (N p_i) (1 + gamma_i)`` and ``gamma_i`` from the
    chains' indicator autocorrelation (Au & Beck 2001, eq. 27-29; correlation between levels neglected);
    the interval is lognormal: ``Pf exp(-+z sqrt(ln(1 + CoV^2)))``. Measured over 300 independent runs of
    ``N = 2000`` on a linear limit state (2-D and 10-D, ``Pf`` 1e-4 and 1e-6): the mean is within 1.1 % +- 1.7 %
    of the exact ``Pf`` (no bias); this CoV (0.20, 0.25) is 10-20 % below the runs' own (0.22-0.23, 0.30), as
    it neglects the correlation between levels and between chains started from one chain's states, so the
    95 % intervals cover 90-93 % of the time; at ``N = 5000`` the two CoVs agree within 4-16 %.

Seeds: ``seed: int | numpy.random.Generator | None``; a given seed and settings reproduce a result exactly.

References
----------
Clopper, C. J. & Pearson, E. S. (1934), The use of confidence or fiducial limits illustrated in the case of
the binomial, Biometrika 26(4), 404-413, doi:10.1093/biomet/26.4.404.
Melchers, R. E. (1989), Importance sampling in structural systems, Structural Safety 6(1), 3-10,
doi:10.1016/0167-4730(89)90003-9.
Hesterberg, T. (1995), Weighted average importance sampling and defensive mixture distributions,
Technometrics 37(2), 185-194, doi:10.1080/00401706.1995.10484303.
Au, S.-K. & Beck, J. L. (2001), Estimation of small failure probabilities in high dimensions by subset
simulation, Probabilistic Engineering Mechanics 16(4), 263-277, doi:10.1016/S0266-8920(01)00019-4.
Papaioannou, I., Betz, W., Zwirglmaier, K. & Straub, D. (2015), MCMC algorithms for subset simulation,
Probabilistic Engineering Mechanics 41, 89-103, doi:10.1016/j.probengmech.2015.06.006.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal, Sequence

import numpy as np

from sensitivity.analyses.reliability._checks import choice, event_values, fraction, positive, positive_int
from sensitivity.errors import ConfigError
from sensitivity.runtime.lazy import lazy_import

special = lazy_import("scipy.special")
stats = lazy_import("scipy.stats")

#: ``u [K, n] -> g [K]`` or ``[K, E]``, batched; failure is ``g <= 0``.
ValuesFn = Callable[[np.ndarray], np.ndarray]

CONVERGED, MAX_LEVELS, NOT_FINITE = 0, 1, 2
#: What each subset-simulation status code means.
STATUS_MESSAGES = {CONVERGED: "converged", MAX_LEVELS: "max_levels reached before the threshold 0",
                   NOT_FINITE: "g not finite at the level's samples"}


@dataclass(frozen=True)
class MonteCarloSettings:
    """Settings of :func:`monte_carlo`: ``n_samples``, ``block_size`` (points per call), ``level``."""

    n_samples: int = 100_000
    block_size: int = 10_000
    level: float = 0.95

    def __post_init__(self) -> None:
        positive_int("n_samples", self.n_samples)
        positive_int("block_size", self.block_size)
        fraction("level", self.level)


@dataclass(frozen=True)
class ImportanceSettings:
    """Settings of :func:`importance_sampling`.

    Parameters
    ----------
    n_samples, block_size, level
        As in :class:`MonteCarloSettings`.
    weights
        Mixture weights of the centres: ``'equal'`` or ``'probability'`` (``~ Phi(-beta_i)``, needs ``betas``).
    defensive
        Weight of the standard normal itself in the mixture (Hesterberg 1995): every likelihood ratio is at most
        ``1 / defensive``, so failure mass near no centre costs variance, not a biased interval; 0: none.
    """

    n_samples: int = 20_000
    block_size: int = 10_000
    level: float = 0.95
    weights: Literal["equal", "probability"] = "probability"
    defensive: float = 0.1

    def __post_init__(self) -> None:
        positive_int("n_samples", self.n_samples)
        positive_int("block_size", self.block_size)
        fraction("level", self.level)
        choice("weights", self.weights, ("equal", "probability"))
        if not isinstance(self.defensive, (int, float)) or isinstance(self.defensive, bool) or not 0 <= self.defensive < 1:
            raise ConfigError(f"`defensive` must be a weight in [0, 1), got {self.defensive!r}")


@dataclass(frozen=True)
class SubsetSettings:
    """Settings of :func:`subset_simulation`.

    Parameters
    ----------
    n_per_level
        Samples per level ``N``; ``p0 N`` must be a whole number that divides ``N``.
    p0
        Conditional probability of each intermediate level.
    max_levels
        Most levels (the Monte Carlo one included) before giving up with ``MAX_LEVELS``.
    level
        Probability of the lognormal interval of ``pf``, in (0, 1) (an interval's level, not a subset level).
    target_acceptance
        aCS's target acceptance rate (0.44, Papaioannou et al. 2015).
    initial_scale
        aCS's starting ``lambda``.
    """

    n_per_level: int = 2_000
    p0: float = 0.1
    max_levels: int = 20
    level: float = 0.95
    target_acceptance: float = 0.44
    initial_scale: float = 0.6

    def __post_init__(self) -> None:
        positive_int("n_per_level", self.n_per_level)
        fraction("p0", self.p0)
        positive_int("max_levels", self.max_levels)
        fraction("level", self.level)
        fraction("target_acceptance", self.target_acceptance)
        positive("initial_scale", self.initial_scale)
        seeds = self.n_per_level * self.p0
        if abs(seeds - round(seeds)) > 1e-9 or round(seeds) < 1 or self.n_per_level % round(seeds):
            raise ConfigError(f"`n_per_level` * `p0` must be a whole number >= 1 dividing `n_per_level`, got "
                              f"{self.n_per_level} * {self.p0}")


@dataclass(frozen=True)
class SamplingResult:
    """A sampling estimate per event (``[E]``): ``pf``, ``interval [E, 2]`` (low, high), ``cov``,
    ``failures`` (count of failed samples), ``evaluations`` (points evaluated), ``method``, ``interval_kind``."""

    pf: np.ndarray
    interval: np.ndarray
    cov: np.ndarray
    failures: np.ndarray
    evaluations: int
    method: str
    interval_kind: str


@dataclass(frozen=True)
class SubsetResult:
    """Subset simulation of one event.

    ``pf``, ``interval`` ``[2]``, ``cov``, ``status`` (:data:`STATUS_MESSAGES`), ``evaluations``; per level
    ``thresholds`` (``b_i``, the last 0), ``conditional`` (``p_i``), ``gamma`` (chain correlation factor, 0 for
    the Monte Carlo level), ``level_cov`` (``delta_i``), ``acceptance`` (aCS's rate, NaN for level 0).
    """

    pf: float
    interval: np.ndarray
    cov: float
    status: int
    evaluations: int
    thresholds: np.ndarray
    conditional: np.ndarray
    gamma: np.ndarray
    level_cov: np.ndarray
    acceptance: np.ndarray


def _dimension(n: object) -> int:
    return positive_int("n", n)


def clopper_pearson(failures: np.ndarray, n: int, level: float = 0.95) -> np.ndarray:
    """``[..., 2]`` exact binomial interval of ``failures`` out of ``n``, of probability ``level``."""
    k = np.asarray(failures, dtype=float)
    tail = (1.0 - level) / 2.0
    low = np.where(k > 0, stats.beta.ppf(tail, np.maximum(k, 1), n - k + 1), 0.0)
    high = np.where(k < n, stats.beta.ppf(1.0 - tail, k + 1, np.maximum(n - k, 1)), 1.0)
    return np.stack([low, high], axis=-1)


def monte_carlo(limit_state: ValuesFn, n: int, settings: MonteCarloSettings = MonteCarloSettings(), *,
                seed: int | np.random.Generator | None = None) -> SamplingResult:
    """Plain Monte Carlo estimate of every event's ``Pf``, in blocks of ``block_size`` points.

    Parameters
    ----------
    limit_state
        ``u [K, n] -> g [K]`` or ``[K, E]``.
    n
        Dimension of ``u``.
    """
    n = _dimension(n)
    rng = np.random.default_rng(seed)
    failures = None
    done = 0
    while done < settings.n_samples:
        size = min(settings.block_size, settings.n_samples - done)
        g = event_values(limit_state, rng.standard_normal((size, n)))
        count = np.sum(g <= 0, axis=0)
        failures = count if failures is None else failures + count
        done += size
    pf = failures / settings.n_samples
    with np.errstate(divide="ignore", invalid="ignore"):
        cov = np.sqrt((1.0 - pf) / (settings.n_samples * pf))
    return SamplingResult(pf=pf, interval=clopper_pearson(failures, settings.n_samples, settings.level),
                          cov=cov, failures=failures, evaluations=settings.n_samples, method="monte_carlo",
                          interval_kind="clopper-pearson")


def importance_sampling(limit_state: ValuesFn, centres: np.ndarray,
                        settings: ImportanceSettings = ImportanceSettings(), *, betas: np.ndarray | None = None,
                        seed: int | np.random.Generator | None = None) -> SamplingResult:
    """Importance sampling around design points (a Gaussian mixture of unit covariance).

    Parameters
    ----------
    limit_state
        ``u [K, n] -> g [K]`` or ``[K, E]`` (one proposal for every event).
    centres
        ``[D, n]`` design points ``u*_i`` (e.g. the finite rows of ``FormResult.design_u[e]``).
    betas
        ``[D]`` their reliability indices, for ``weights='probability'``.
    """
    mixture = Mixture.proposal(centres, settings, betas)
    rng = np.random.default_rng(seed)
    sums = None
    for size in _blocks(settings):
        u, log_ratio = mixture.draw(size, rng)
        parts = _weighted_sums(event_values(limit_state, u), log_ratio)
        sums = parts if sums is None else tuple(a + b for a, b in zip(sums, parts))
    return _importance_result(*sums, settings)


def importance_sampling_events(limit_state: Callable[[np.ndarray, np.ndarray], np.ndarray],
                               centres: Sequence[np.ndarray], settings: ImportanceSettings = ImportanceSettings(), *,
                               betas: Sequence[np.ndarray] | None = None,
                               seed: int | np.random.Generator | None = None) -> SamplingResult:
    """Importance sampling of ``B`` events at once, each around its own design points, in few batched calls.

    Event ``b`` gets the draws :func:`importance_sampling` would give it were it called on the events in turn
    with one generator (so the estimates are the same), but the points of several events are evaluated together,
    ``settings.block_size`` per call (the events whose samples fill one block at a time; an event of more samples
    in blocks of its own), so the evaluations' memory stays bounded by the block (the draws of one group of
    events are held whole: ``max(block_size, n_samples) x n`` numbers).

    Parameters
    ----------
    limit_state
        ``(u [K, n], which [K]) -> g [K]`` or ``[K, C]``: event ``which[k]`` at ``u[k]`` (``C`` copies of it,
        e.g. an ensemble's mean and members, all estimated on the same draws).
    centres
        ``B`` arrays ``[D_b, n]``: each event's design points.
    betas
        ``B`` arrays ``[D_b]``: their reliability indices, for ``weights='probability'``.

    Returns
    -------
    SamplingResult
        ``pf``, ``cov``, ``failures`` ``[B, C]``, ``interval`` ``[B, C, 2]`` (``C = 1`` for a ``[K]`` limit
        state); ``evaluations`` of all events.
    """
    if betas is not None and len(betas) != len(centres):
        raise ConfigError(f"`betas` must hold one array per event ({len(centres)}), got {len(betas)}")
    mixtures = [Mixture.proposal(c, settings, None if betas is None else betas[b]) for b, c in enumerate(centres)]
    rng = np.random.default_rng(seed)
    sums = None
    group, block = max(1, settings.block_size // settings.n_samples), settings.block_size
    for first in range(0, len(mixtures), group):
        drawn = [mixture.draw(size, rng) for mixture in mixtures[first:first + group] for size in _blocks(settings)]
        u, log_ratio = (np.concatenate(a) for a in zip(*drawn))
        which = np.repeat(np.arange(first, min(first + group, len(mixtures))), settings.n_samples)
        for rows in range(0, len(u), block):
            at = slice(rows, rows + block)
            g = event_values(lambda points: limit_state(points, which[at]), u[at])
            parts = _weighted_sums(g, log_ratio[at], which[at] - first, min(group, len(mixtures) - first))
            if sums is None:
                sums = tuple(np.zeros((len(mixtures), g.shape[1])) for _ in parts)
            for total, part in zip(sums, parts):
                total[first:first + len(part)] += part
    if sums is None:
        raise ConfigError("`centres` must hold at least one event, got none")
    result = _importance_result(*sums, settings)
    return SamplingResult(pf=result.pf, interval=result.interval, cov=result.cov, failures=result.failures,
                          evaluations=settings.n_samples * len(mixtures), method=result.method,
                          interval_kind=result.interval_kind)


def _blocks(settings: ImportanceSettings | MonteCarloSettings) -> list[int]:
    """The sizes of the blocks of ``n_samples`` points, ``block_size`` each but the last."""
    full, rest = divmod(settings.n_samples, settings.block_size)
    return [settings.block_size] * full + ([rest] if rest else [])


def _weighted_sums(g: np.ndarray, log_ratio: np.ndarray, which: np.ndarray | None = None, groups: int = 1
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``sum 1[g <= 0] phi/h``, its sum of squares and the failure count per column of ``g [K, E]``: ``[E]``;
    or, given ``which [K]`` (``0 <= which < groups``), per group of rows and column: ``[groups, E]``."""
    failed = g <= 0
    weighted = np.where(failed, np.exp(log_ratio)[:, None], 0.0)
    parts = (weighted, weighted**2, failed.astype(float))
    if which is None:
        return tuple(part.sum(axis=0) for part in parts)
    out = tuple(np.zeros((groups, g.shape[1])) for _ in parts)
    for total, part in zip(out, parts):
        np.add.at(total, which, part)
    return out


def _importance_result(total: np.ndarray, total_sq: np.ndarray, failures: np.ndarray, settings: ImportanceSettings
                       ) -> SamplingResult:
    """The estimate, its standard error and normal interval from the sums of :func:`_weighted_sums`."""
    m = settings.n_samples
    pf = total / m
    se = np.sqrt(np.maximum(total_sq / m - pf**2, 0.0) / (m - 1))
    z = stats.norm.isf((1.0 - settings.level) / 2.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        cov = se / pf
    return SamplingResult(pf=pf, interval=np.stack([np.maximum(pf - z * se, 0.0), pf + z * se], axis=-1), cov=cov,
                          failures=failures.astype(int), evaluations=m, method="importance_sampling",
                          interval_kind="normal")


@dataclass(frozen=True)
class Mixture:
    """The proposal of :func:`importance_sampling`: ``h(u) = sum_i w_i phi_n(u - c_i)``, log weights ``log_w [D]``."""

    centres: np.ndarray
    log_w: np.ndarray

    @classmethod
    def proposal(cls, centres: np.ndarray, settings: ImportanceSettings, betas: np.ndarray | None = None) -> "Mixture":
        """The proposal of ``settings`` at ``centres [D, n]``: :meth:`of` with its weights and defensive component."""
        return cls.of(centres, settings.weights, betas, defensive=settings.defensive)

    @classmethod
    def of(cls, centres: np.ndarray, weights: str, betas: np.ndarray | None = None, *, defensive: float = 0.0
           ) -> "Mixture":
        """The mixture at ``centres [D, n]`` with ``'equal'`` weights or ``'probability'`` ones (``~ Phi(-beta_i)``),
        and, where ``defensive > 0``, the standard normal (a centre at the origin) of that weight."""
        mix = cls._of(centres, weights, betas)
        return cls(np.concatenate([np.zeros((1, mix.centres.shape[1])), mix.centres]), np.concatenate(
            [[np.log(defensive)], np.log1p(-defensive) + mix.log_w])) if defensive else mix

    @classmethod
    def _of(cls, centres: np.ndarray, weights: str, betas: np.ndarray | None) -> "Mixture":
        c = np.atleast_2d(np.asarray(centres, dtype=float))
        if c.ndim != 2 or c.shape[0] < 1 or not np.all(np.isfinite(c)):
            raise ConfigError(f"`centres` must be a finite [D, n] array with D >= 1, got shape {np.shape(centres)}")
        d = c.shape[0]
        if weights == "probability":
            if betas is None:
                raise ConfigError("`betas` must be given for weights='probability', got None")
            b = np.asarray(betas, dtype=float)
            if b.shape != (d,) or not np.all(np.isfinite(b)):
                raise ConfigError(f"`betas` must be [{d}] finite numbers, got {betas!r}")
        if d == 1:  # one centre: weight 1 (what either rule gives), without scipy's per-call cost
            return cls(c, np.zeros(1))
        if weights == "probability":
            return cls(c, stats.norm.logsf(b) - special.logsumexp(stats.norm.logsf(b)))
        return cls(c, np.full(d, -np.log(d)))

    def draw(self, size: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``(u [size, n], log(phi_n(u) / h(u)) [size])``: draws of the mixture and their log likelihood ratios."""
        c, d = self.centres, len(self.centres)
        which = rng.choice(d, size=size, p=np.exp(self.log_w)) if d > 1 else np.zeros(size, dtype=int)
        u = c[which] + rng.standard_normal((size, c.shape[1]))
        half_norms = 0.5 * np.sum(c * c, axis=1)
        if d == 1:  # the log-sum-exp of one term is the term
            return u, half_norms[0] - u @ c[0]
        return u, -special.logsumexp(self.log_w[None, :] + u @ c.T - half_norms[None, :], axis=1)


def subset_simulation(limit_state: ValuesFn, n: int, settings: SubsetSettings = SubsetSettings(), *,
                      seed: int | np.random.Generator | None = None) -> SubsetResult:
    """Subset simulation (Au & Beck 2001) with the adaptive conditional sampler (Papaioannou et al. 2015).

    Parameters
    ----------
    limit_state
        ``u [K, n] -> g [K]`` (one event; combine several with
        :func:`~sensitivity.analyses.reliability.events.union` or ``intersection``).
    n
        Dimension of ``u``.
    """
    n = _dimension(n)
    rng = np.random.default_rng(seed)
    big_n, p0 = settings.n_per_level, settings.p0
    n_chains = int(round(big_n * p0))
    length = big_n // n_chains

    def values(u: np.ndarray) -> np.ndarray:
        g = event_values(limit_state, u)
        if g.shape[1] != 1:
            raise ConfigError(f"subset simulation takes one event, the limit state returned {g.shape[1]}; "
                              "combine them with union() or intersection()")
        return g[:, 0]

    u = rng.standard_normal((big_n, n))[:, None, :]  # [chains, states, n]; level 0: N chains of length 1
    g = values(u[:, 0])[:, None]
    evaluations = big_n
    thresholds, conditional, gammas, acceptance = [], [], [], []
    scale = settings.initial_scale
    status = MAX_LEVELS
    for level in range(settings.max_levels):
        flat_g = g.reshape(-1)
        if not np.all(np.isfinite(flat_g)):
            status = NOT_FINITE
            break
        order = np.argsort(flat_g, kind="stable")
        b = 0.5 * (flat_g[order[n_chains - 1]] + flat_g[order[n_chains]])
        final = b <= 0
        b = 0.0 if final else b
        p = float(np.mean(flat_g <= b)) if final else p0
        thresholds.append(b)
        conditional.append(p)
        gammas.append(0.0 if level == 0 else _gamma(g <= b, p))
        if final:
            status = CONVERGED
            break
        if level == settings.max_levels - 1:
            break
        seeds_u = u.reshape(-1, n)[order[:n_chains]]
        seeds_g = flat_g[order[:n_chains]]
        u, g, rate, scale = _acs_level(values, seeds_u, seeds_g, b, length, scale, settings.target_acceptance, rng)
        acceptance.append(rate)
        evaluations += n_chains * (length - 1)
    conditional_arr = np.array(conditional)
    gamma_arr = np.array(gammas)
    with np.errstate(divide="ignore", invalid="ignore"):
        level_cov = np.sqrt((1.0 - conditional_arr) / (big_n * conditional_arr) * (1.0 + gamma_arr))
    if status == CONVERGED:
        pf = float(np.prod(conditional_arr))
        cov = float(np.sqrt(np.sum(level_cov**2)))
        spread = np.sqrt(np.log1p(cov**2)) * stats.norm.isf((1.0 - settings.level) / 2.0)
        interval = np.array([pf * np.exp(-spread), pf * np.exp(spread)]) if pf > 0 else np.array([0.0, np.nan])
    else:
        pf, cov, interval = float("nan"), float("nan"), np.full(2, np.nan)
    return SubsetResult(pf=pf, interval=interval, cov=cov, status=status, evaluations=evaluations,
                        thresholds=np.array(thresholds), conditional=conditional_arr, gamma=gamma_arr,
                        level_cov=level_cov, acceptance=np.array([np.nan, *acceptance]))


def _acs_level(values, seeds_u, seeds_g, b, length, scale, target, rng):
    """One level of aCS: ``[chains, length, n]`` states and ``[chains, length]`` values, the acceptance rate
    and the adapted ``lambda`` (Papaioannou et al. 2015, Algorithm 5)."""
    n_chains, n = seeds_u.shape
    order = rng.permutation(n_chains)  # chains in random order, so the adaptation does not follow g
    states = np.empty((n_chains, length, n))
    g = np.empty((n_chains, length))
    states[:, 0], g[:, 0] = seeds_u, seeds_g
    spread = np.std(seeds_u, axis=0)
    group = max(1, n_chains // 10)
    accepted_total = 0
    for start, chunk in enumerate(range(0, n_chains, group), start=1):
        rows = order[chunk:chunk + group]
        sigma = np.minimum(1.0, scale * spread)
        rho = np.sqrt(1.0 - sigma**2)
        accepted = 0
        for k in range(1, length):
            current = states[rows, k - 1]
            candidate = rho * current + sigma * rng.standard_normal(current.shape)
            gc = values(candidate)
            keep = gc <= b
            states[rows, k] = np.where(keep[:, None], candidate, current)
            g[rows, k] = np.where(keep, gc, g[rows, k - 1])
            accepted += int(np.sum(keep))
        accepted_total += accepted
        rate = accepted / (len(rows) * (length - 1))
        scale = float(np.exp(np.log(scale) + (rate - target) / np.sqrt(start)))
    return states, g, accepted_total / (n_chains * (length - 1)), scale


def _gamma(indicator: np.ndarray, p: float) -> float:
    """Au & Beck's (2001, eq. 27-29) ``gamma`` from ``[chains, length]`` indicators of the next event."""
    n_chains, length = indicator.shape
    big_n = n_chains * length
    x = indicator.astype(float)
    r0 = p * (1.0 - p)
    if r0 <= 0 or length < 2:
        return 0.0
    gamma = 0.0
    for k in range(1, length):
        r_k = np.sum(x[:, : length - k] * x[:, k:]) / (big_n - k * n_chains) - p * p
        gamma += 2.0 * (1.0 - k * n_chains / big_n) * r_k / r0
    return float(gamma)
