"""Convergence diagnostics of MCMC chains, per parameter: split R-hat, bulk and tail ESS, MCSE.

The recipe of Vehtari, Gelman, Simpson, Carpenter & Buerkner (2021), assembled from TensorFlow
Probability's estimators (``tfp.mcmc.potential_scale_reduction`` with ``split_chains=True`` and
``tfp.mcmc.effective_sample_size`` with ``cross_chain_dims`` and Geyer's initial positive sequence):

* R-hat: the larger of the split R-hat of the rank-normalised draws and of the rank-normalised folded
  draws ``|x - median|`` (section 4.2);
* bulk ESS: the multi-chain ESS of the rank-normalised split chains (section 4.3);
* tail ESS: the smaller of the ESS of the indicators ``x <= q05`` and ``x <= q95`` (section 4.3): how
  well the 5 % and 95 % quantiles are estimated;
* MCSE of the mean: ``sd / sqrt(ESS)`` with the ESS of the raw split chains.

The ESS is TFP's estimator written in numpy and vectorised over every entry at once
(:func:`effective_sample_size`): on the demo's posterior predictive (32 split chains of 500 draws, 700
series) it replaces three TFP calls that took 5.6 s and 1.6 GB.

Stuck chains (:func:`chain_health`), before any of these: a chain whose mean log density lies far below the best
chain's (more than ``chi2.ppf(level, n) / 2`` below it: within one mode the log density of an ``n``-parameter
posterior varies about its mean by ``chi2_n / 2``, and the chains' means agree to their Monte Carlo error) sits in
a far mode or on a bound, and a chain that moved on fewer than :data:`MOVED_MIN` of its transitions never left its
start; either is named, left out of the diagnostics and summaries, and the advice says where it is, not "more
warm-up". The best chain, not the median, is the reference, so that most chains stuck (seven of eight started on
bounds) are told from the one that is not. A mode that far below in density holds ``exp(-gap)`` of the best's
mass unless it is as many times wider: such a posterior is misread, and needs a study of its own.

Rank normalisation: ``z = Phi^-1((rank - 3/8) / (S + 1/4))`` over all ``S`` pooled draws (Blom 1958),
average ranks for ties. Thresholds of the paper: R-hat < 1.01 and ESS > 400 (100 per chain for 4 chains).

References
----------
Vehtari, A., Gelman, A., Simpson, D., Carpenter, B. & Buerkner, P.-C. (2021). Rank-normalization,
folding, and localization: an improved R-hat for assessing convergence of MCMC. Bayesian Analysis
16(2), 667-718. https://doi.org/10.1214/20-BA1221
Geyer, C. J. (1992). Practical Markov chain Monte Carlo. Statistical Science 7(4), 473-483.
https://doi.org/10.1214/ss/1177011137
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from sensitivity.runtime.lazy import lazy_import

fft = lazy_import("scipy.fft")
special = lazy_import("scipy.special")
stats = lazy_import("scipy.stats")

RHAT_MAX = 1.01
ESS_MIN = 400.0
#: Memory for the spectra of one block of entries in :func:`effective_sample_size` [bytes]: 4 MiB (about 16
#: entries of 32 chains of 500 draws) ran 1.5-4x faster than 1 or 32 MiB on the demo's shapes (cache-sized
#: blocks, no fresh pages per block).
ESS_BLOCK_BYTES = 4 * 2**20


#: A chain that moves on fewer than this share of its transitions has never left its start [1].
MOVED_MIN = 0.05


class ChainHealth(NamedTuple):
    """Per-chain facts of :func:`chain_health`, each ``[C]``."""

    mean_log_density: np.ndarray  # mean log posterior density over the chain's draws
    moved: np.ndarray  # share of the chain's transitions that changed its position [1]
    stuck: np.ndarray  # bool: far below the others, or never moved
    gap: float  # the largest distance below the median chain's mean log density that is not stuck

    @property
    def kept(self) -> np.ndarray:
        """``[C]`` bool: the chains the diagnostics and summaries use (all of them when none is healthy)."""
        return ~self.stuck if (~self.stuck).any() else np.ones_like(self.stuck)

    def words(self, names: list[str], initial: np.ndarray) -> list[str]:
        """One line per stuck chain: where it is and where it started, against the healthy chains' log density."""
        healthy = float(np.median(self.mean_log_density[~self.stuck])) if (~self.stuck).any() else np.nan
        lines = []
        for c in np.flatnonzero(self.stuck):
            start = ", ".join(f"{name} {x:.4g}" for name, x in zip(names, initial[c]))
            where = (f"never moved (on {self.moved[c]:.0%} of its transitions)" if self.moved[c] < MOVED_MIN else
                     f"stuck at mean log density {self.mean_log_density[c]:.4g} (the kept chains' median "
                     f"{healthy:+.4g}, more than {self.gap:.3g} above)")
            lines.append(f"chain {c} {where}, started at ({start})")
        return lines


def chain_health(log_density: np.ndarray, draws: np.ndarray, level: float = 0.999) -> ChainHealth:
    """Which chains are stuck: far below the others' log density, or never moved.

    Parameters
    ----------
    log_density
        ``[C, D]`` log posterior density of every draw.
    draws
        ``[C, D, n]`` the draws.
    level
        A chain is stuck when its mean log density lies more than ``chi2.ppf(level, n) / 2`` below the highest
        mean of the chains that moved (9.2 for 4 parameters at 0.999), or when it moved on fewer than
        :data:`MOVED_MIN` of its transitions.
    """
    x = np.asarray(draws, float)
    mean = np.asarray(log_density, float).mean(axis=1)
    moved = np.any(np.diff(x, axis=1) != 0, axis=2).mean(axis=1) if x.shape[1] > 1 else np.ones(x.shape[0])
    gap = 0.5 * float(stats.chi2.ppf(level, x.shape[2]))
    still = moved < MOVED_MIN
    best = np.nanmax(np.where(still, np.nan, mean)) if not still.all() else np.nan
    with np.errstate(invalid="ignore"):
        stuck = ~(mean >= best - gap) | still
    return ChainHealth(mean, moved, stuck, gap)


class Diagnostics(NamedTuple):
    """Per-parameter diagnostics, each ``[n]``."""

    rhat: np.ndarray
    ess_bulk: np.ndarray
    ess_tail: np.ndarray
    ess_mean: np.ndarray
    mcse_mean: np.ndarray


def diagnose(draws: np.ndarray) -> Diagnostics:
    """Diagnostics of ``draws [chain, draw, parameter]`` (at least 2 chains of at least 4 draws)."""
    x = np.asarray(draws, float)
    c, d, n = x.shape
    if c < 2 or d < 4:
        raise ValueError(f"diagnostics need >= 2 chains of >= 4 draws, got {c} x {d}")
    z = _rank_normal(x)
    folded = _rank_normal(np.abs(x - np.median(x.reshape(-1, n), axis=0)))
    rhat = np.maximum(_split_rhat(z), _split_rhat(folded))
    ess_bulk = effective_sample_size(z)
    q05, q95 = np.quantile(x.reshape(-1, n), [0.05, 0.95], axis=0)
    ess_tail = np.minimum(effective_sample_size((x <= q05).astype(float)),
                          effective_sample_size((x <= q95).astype(float)))
    ess_mean = effective_sample_size(x)
    mcse = x.reshape(-1, n).std(axis=0, ddof=1) / np.sqrt(ess_mean)
    return Diagnostics(rhat, ess_bulk, ess_tail, ess_mean, mcse)


def problems(diag: Diagnostics, names: list[str], divergences: int, total: int) -> list[str]:
    """One line per failed check (empty when the chains look converged)."""
    lines = []
    for j, name in enumerate(names):
        bad = []
        if not diag.rhat[j] < RHAT_MAX:
            bad.append(f"R-hat {diag.rhat[j]:.4f} >= {RHAT_MAX}")  # 4 digits: 1.0102, not "1.010 >= 1.01"
        ess = min(diag.ess_bulk[j], diag.ess_tail[j])
        if not ess >= ESS_MIN:
            bad.append(f"ESS {ess:.0f} < {ESS_MIN:.0f} (bulk {diag.ess_bulk[j]:.0f}, tail {diag.ess_tail[j]:.0f})")
        if bad:
            lines.append(f"{name}: " + ", ".join(bad))
    if any(not r < RHAT_MAX for r in diag.rhat):
        lines.append("R-hat: the chains disagree; longer chains (nuts.num_draws) or a longer warm-up "
                     "(nuts.num_warmup) bring them together")
    if divergences:
        lines.append(f"{divergences} of {total} transitions diverged: the posterior has regions the step size "
                     "cannot resolve (raise target_accept), draws may be biased")
    return lines


def _rank_normal(x: np.ndarray) -> np.ndarray:
    c, d, n = x.shape
    ranks = stats.rankdata(x.reshape(-1, n), axis=0)
    return special.ndtri((ranks - 0.375) / (c * d + 0.25)).reshape(c, d, n)


def _split(x: np.ndarray) -> np.ndarray:
    """``[2C, D/2, n]`` the first and second halves of every chain as chains (odd middle draw dropped)."""
    half = x.shape[1] // 2
    return np.concatenate([x[:, :half], x[:, x.shape[1] - half:]], axis=0)


def _split_rhat(x: np.ndarray) -> np.ndarray:
    import tensorflow_probability as tfp

    # TFP wants [draw, chain, ...]; it splits the chains itself
    return np.asarray(tfp.mcmc.potential_scale_reduction(np.swapaxes(x, 0, 1), independent_chain_ndims=1,
                                                         split_chains=True))


def effective_sample_size(x: np.ndarray, block_bytes: int = ESS_BLOCK_BYTES) -> np.ndarray:
    """Multi-chain ESS of ``x [chain, draw, ...]`` per trailing entry, on the split chains; a constant series
    (e.g. an indicator never true) counts as 0.

    The estimator of TFP's ``effective_sample_size(split, filter_beyond_positive_pairs=True,
    cross_chain_dims=1)`` (Vehtari et al. 2021, eq. 10, with Geyer's initial positive sequence), vectorised
    over all trailing entries at once: one real FFT (scipy) per chain of every entry, zero-padded to
    ``2^ceil(log2(2 D))`` (no circular wrap), gives the unbiased autocovariances
    ``acov_c[k] = sum_t d_t d_(t+k) / (D - k)`` of the centred chains. The entries go through in blocks
    whose spectra fit ``block_bytes`` (each block converted to float64 on its own, so ``x`` may be e.g.
    booleans), and memory stays bounded however many entries there are.
    """
    x = np.asarray(x)
    chains, draws = x.shape[:2]
    flat = x.reshape(chains, draws, -1)
    n = draws // 2  # draws per split chain
    padded = 1 << int(np.ceil(np.log2(2 * n)))
    step = max(1, block_bytes // (2 * chains * (padded // 2 + 1) * 16))  # complex128 spectra of one block
    ess = np.empty(flat.shape[2])
    for start in range(0, flat.shape[2], step):
        block = _split(flat[:, :, start : start + step])  # [2C, D/2, entries], in the caller's dtype
        ess[start : start + step] = _ess(np.moveaxis(block, 1, 2).astype(float, order="C"), padded)
    return np.where(np.isfinite(ess), ess, 0.0).reshape(x.shape[2:])


def _ess(x: np.ndarray, padded: int) -> np.ndarray:
    """ESS of ``x [chain, entry, draw]`` (the chains already split)."""
    chains, n = x.shape[0], x.shape[2]
    means = x.mean(axis=2)
    spectrum = fft.rfft(x - means[..., None], n=padded, axis=2)
    spectrum = spectrum.real**2 + spectrum.imag**2
    acov = fft.irfft(spectrum, n=padded, axis=2)[..., :n] / (n - np.arange(n))
    mean_acov = acov.mean(axis=0)  # [entry, lag]
    within = mean_acov[:, :1]  # W (D - 1) / D
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = 1.0 - (within - mean_acov) / (within + means.var(axis=0, ddof=1)[:, None])  # var+ = that + B / D
        weighted = rho * (n - np.arange(n)) / n
        even = n - n % 2
        pairs = rho[:, 0:even:2] + rho[:, 1:even:2]
        positive = np.cumsum(pairs < 0, axis=1) == 0  # up to the first negative pair sum
        total = ((weighted[:, 0:even:2] + weighted[:, 1:even:2]) * positive).sum(axis=1)
        return chains * n / (2 * total - 1)
