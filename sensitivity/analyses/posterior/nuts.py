"""Many NUTS chains in one batched, XLA-compiled TensorFlow Probability call.

The No-U-Turn sampler (Hoffman & Gelman 2014; TFP's ``NoUTurnSampler``, multinomial sampling along the
trajectory) runs on the unconstrained, preconditioned parametrisation of
:func:`~sensitivity.analyses.posterior.density.log_posterior` through ``TransformedTransitionKernel``, with
the step size tuned during warm-up by dual averaging toward a target acceptance probability
(``DualAveragingStepSizeAdaptation``, Hoffman & Gelman 2014, section 3.2; one step size shared by the
chains, their acceptance averaged on the log scale). All chains advance in lockstep as one ``[C, n]``
state, so each leapfrog step is one batched model call of ``C`` points; or, with ``chain_groups``, as
that many such states side by side in their own threads (each its own step size after the metric's
re-estimation from all chains). One XLA-compiled function advances
the chains by a fixed block of transitions, carrying the kernel's state (position, step-size adaptation)
from call to call; every warm-up window and the draws reuse it, so a run compiles the sampler once.

``algorithm="chees"`` replaces NUTS by HMC with one trajectory length shared by the chains, jittered and
adapted during warm-up by TFP's ``GradientBasedTrajectoryLengthAdaptation`` on the ChEES criterion
(Hoffman, Radul & Sountsov 2021), its step size by dual averaging of the harmonic mean acceptance: no
tree building and no lockstep wait for the longest tree, so a batched step is cheaper, but on a posterior
whose curvature varies along a ridge (the demo's, pressed against bounds) the shared step and length mix
the slowest parameter worse than NUTS (README, "Posterior sampling").

``algorithm="snaper"``: TFP's ``SNAPERHamiltonianMonteCarlo`` (Sountsov & Hoffman 2021), HMC whose
trajectory length is adapted on the ChEES-like criterion along the largest principal component of the
chains' cross-chain covariance, with a diagonal preconditioner from the chains' moving moments on top of
the dense metric above, and window 1's first ``min(100, n_adapt / 4)`` adaptation steps one leapfrog step each
(MALA) for stability. Its trajectory length is learnt at 3x TFP's default rate, and window 2 starts at the
length window 1 reached instead of one step (no MALA steps there): at TFP's rate the length takes most of
window 1 to grow from one step, so that window's chains barely move and the metric re-estimated from
them depends on the seed. The draws run at 1.5x the adapted maximum trajectory length (each step's length
still jittered uniformly below it): the length is learnt on the ChEES criterion along the largest principal
component, a bulk, second-moment criterion, while the slowest figure on the demo is a tail ESS; there, the
factor raises the slowest ESS 1.6-2.0x for 1.5x the leapfrog steps per draw (README, measured). It pools statistics across chains, so it
wants many (64 on the demo) and a long warm-up; there, it beats NUTS on effective samples per second at R-hat <
1.01 (README).

References
----------
Hoffman, M. D. & Gelman, A. (2014). The No-U-Turn sampler. JMLR 15, 1593-1623.
https://jmlr.org/papers/v15/hoffman14a.html
Betancourt, M. (2017). A conceptual introduction to Hamiltonian Monte Carlo. arXiv:1701.02434.
Hoffman, M. D., Radul, A. & Sountsov, P. (2021). An adaptive-MCMC scheme for setting trajectory lengths in
Hamiltonian Monte Carlo. AISTATS 2021, PMLR 130, 3907-3915.
Sountsov, P. & Hoffman, M. D. (2021). Focusing on difficult directions for learning HMC trajectory lengths.
arXiv:2110.11576.
"""
from __future__ import annotations

import threading
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np

from sensitivity.analyses.posterior.density import LogPosterior
from sensitivity.errors import ConfigError

_METRIC_WARMUP = 100  # with at least this many warm-up steps, the metric is re-estimated halfway
ALGORITHMS = ("nuts", "chees", "snaper")
_BLOCK_MAX = 100  # at most this many transitions per compiled call
_SNAPER_LENGTH_RATE = 0.15  # SNAPER's trajectory-length learning rate (TFP's 0.05: README, "Posterior sampling")
_SNAPER_DRAW_LENGTH = 1.5  # SNAPER's draws: this multiple of the adapted maximum trajectory length (README)
_DIVERGENCE = 1000.0  # HMC: an energy error above this counts as a divergent transition (Stan's threshold)


@dataclass(frozen=True)
class NUTS:
    """Settings of the No-U-Turn sampler (immutable).

    Parameters
    ----------
    num_draws
        Draws kept per chain after warm-up.
    num_warmup
        Warm-up steps per chain: with >= 100, the first half adapts the step size and yields the metric
        (its second quarter's draws), the second half adapts the step size again; in each, over 80 %.
    target_accept
        Target mean acceptance probability of the dual averaging, in (0, 1).
    max_tree_depth
        Cap on the trajectory doubling: at most ``2^max_tree_depth`` leapfrog steps per draw.
    initial_step_size
        Leapfrog step in the preconditioned space (about 1 posterior standard deviation).
    algorithm
        ``"nuts"``: the No-U-Turn sampler, each chain its own trajectory (in lockstep, a batched step costs
        the longest chain's tree); ``"chees"``: HMC with one jittered trajectory length for all chains,
        adapted during warm-up by gradient ascent on the ChEES criterion (Hoffman, Radul & Sountsov
        2021; TFP's ``GradientBasedTrajectoryLengthAdaptation``), at most ``2^max_tree_depth`` steps;
        ``"snaper"``: the same along the chains' largest principal component, with a diagonal
        preconditioner adapted across chains (Sountsov & Hoffman 2021; TFP's
        ``SNAPERHamiltonianMonteCarlo``), at most ``2^max_tree_depth`` steps.
    chain_groups
        NUTS: the chains split into this many groups that advance side by side, each in its own thread, as
        separate batched calls of the one compiled sampler; the metric is re-estimated from all chains'
        warm-up, each group adapts its own step size from their common start. One batched call waits for
        the deepest tree of all its chains and keeps about 1.3 of 2 CPU cores busy; on the demo
        posterior, 2 groups of 4 chains took 0.61x the time of one call of 8 (``docs/performance.md``).
        On a CPU, about the number of cores (at least 4 chains each); on a GPU, 1.
    """

    num_draws: int = 1000
    num_warmup: int = 500
    target_accept: float = 0.8
    max_tree_depth: int = 8
    initial_step_size: float = 0.3
    algorithm: str = "nuts"
    chain_groups: int = 1

    def __post_init__(self) -> None:
        for attr, minimum in (("num_draws", 4), ("num_warmup", 0), ("max_tree_depth", 1), ("chain_groups", 1)):
            value = getattr(self, attr)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
                raise ConfigError(f"NUTS: `{attr}` must be an integer >= {minimum}, got {value!r}")
        if not isinstance(self.target_accept, (int, float)) or not 0 < self.target_accept < 1:
            raise ConfigError(f"NUTS: `target_accept` must lie in (0, 1), got {self.target_accept!r}")
        if not isinstance(self.initial_step_size, (int, float)) or not self.initial_step_size > 0:
            raise ConfigError(f"NUTS: `initial_step_size` must be > 0, got {self.initial_step_size!r}")
        if self.algorithm not in ALGORITHMS:
            raise ConfigError(f"NUTS: `algorithm` must be one of {ALGORITHMS}, got {self.algorithm!r}")
        if self.chain_groups > 1 and self.algorithm != "nuts":  # their adaptation pools all chains every step
            raise ConfigError(f"NUTS: `chain_groups` = {self.chain_groups} needs algorithm 'nuts', got "
                              f"{self.algorithm!r} (its trajectory-length adaptation pools every chain)")


class Chains(NamedTuple):
    """Raw output of :func:`run_nuts`; arrays on ``[chain, draw, ...]``."""

    draws: np.ndarray  # [C, D, n] physical units
    log_density: np.ndarray  # [C, D] log posterior (physical, unnormalised)
    accept_prob: np.ndarray  # [C, D] NUTS acceptance statistic
    divergent: np.ndarray  # [C, D] bool
    max_depth: np.ndarray  # [C, D] bool: the trajectory hit max_tree_depth
    leapfrogs: np.ndarray  # [C, D] int
    step_size: float  # after adaptation, in the preconditioned space (geometric mean over the chain groups)
    trajectory_length: float  # ChEES/SNAPER: the draws' (maximum) trajectory length there; NUTS: 0
    seconds: float  # wall time of the compiled call (compilation included)


def run_nuts(posterior: LogPosterior, initial: np.ndarray, sampler: NUTS = NUTS(), *,
             seed: int = 0, jit_compile: bool = True, progress: Callable[[int], object] | None = None) -> Chains:
    """Sample ``C`` chains from ``initial [C, n]`` (physical units, strictly inside the support) at once.

    Parameters
    ----------
    posterior
        From :func:`~sensitivity.analyses.posterior.density.log_posterior`.
    initial
        One start per chain.
    sampler
        :class:`NUTS` settings.
    seed
        Seed of TFP's stateless sampling (the run is reproducible).
    jit_compile
        Compile the block function (every transition of the run) with XLA.
    progress
        Called with the number of chain transitions each compiled block completes (``C (warm-up + draws)`` in
        all), from the chain groups' threads: a progress bar's ``update``.
    """
    import time

    import tensorflow as tf
    import tensorflow_probability as tfp
    from tensorflow_probability.python.internal import unnest

    x0 = np.asarray(initial, float)
    if x0.ndim != 2 or x0.shape[1] != posterior.support.lower.size:
        raise ConfigError(f"`initial` must have shape [C, {posterior.support.lower.size}], got {list(x0.shape)}")
    outside = ~posterior.support.inside(x0)
    if outside.any():
        raise ConfigError(f"`initial`: chain {int(np.flatnonzero(outside)[0])} starts on or outside the bounds")
    lp0 = posterior.log_prob(tf.constant(x0, tf.float64)).numpy()
    if not np.all(np.isfinite(lp0)):
        chain = int(np.flatnonzero(~np.isfinite(lp0))[0])
        raise ConfigError(f"`initial`: the log-posterior is not finite at chain {chain}")
    mcmc = tfp.mcmc

    def nuts_kernel(shift, scale, step_size, n_steps, n_adapt):
        nuts = mcmc.NoUTurnSampler(posterior.log_prob, step_size=step_size, max_tree_depth=sampler.max_tree_depth)
        return mcmc.DualAveragingStepSizeAdaptation(
            mcmc.TransformedTransitionKernel(nuts, posterior.transform(shift, scale)), num_adaptation_steps=n_adapt,
            target_accept_prob=np.float64(sampler.target_accept),
            step_size_setter_fn=lambda pkr, s: pkr._replace(inner_results=pkr.inner_results._replace(step_size=s)),
            step_size_getter_fn=lambda pkr: pkr.inner_results.step_size,
            log_accept_prob_getter_fn=lambda pkr: pkr.inner_results.log_accept_ratio)

    def nuts_trace(state, pkr):
        inner = pkr.inner_results.inner_results
        return (posterior.log_prob(state), tf.exp(tf.minimum(inner.log_accept_ratio, 0.0)), inner.has_divergence,
                inner.reach_max_depth, inner.leapfrogs_taken, pkr.new_step_size, tf.zeros([], tf.float64))

    def chees_kernel(shift, scale, step_size, n_steps, n_adapt):
        hmc = mcmc.HamiltonianMonteCarlo(posterior.log_prob, step_size=step_size, num_leapfrog_steps=n_steps)
        adapted = mcmc.DualAveragingStepSizeAdaptation(
            tfp.experimental.mcmc.GradientBasedTrajectoryLengthAdaptation(
                hmc, num_adaptation_steps=n_adapt, max_leapfrog_steps=2 ** sampler.max_tree_depth),
            num_adaptation_steps=n_adapt, target_accept_prob=np.float64(sampler.target_accept),
            reduce_fn=tfp.math.reduce_log_harmonic_mean_exp)
        return mcmc.TransformedTransitionKernel(adapted, posterior.transform(shift, scale))

    def chees_trace(state, pkr):
        adapt = pkr.inner_results
        mh = adapt.inner_results.inner_results
        steps = tf.broadcast_to(mh.proposed_results.num_leapfrog_steps, tf.shape(mh.log_accept_ratio))
        divergent = ~(mh.log_accept_ratio > -_DIVERGENCE)
        return (posterior.log_prob(state), tf.exp(tf.minimum(mh.log_accept_ratio, 0.0)), divergent,
                steps >= 2 ** sampler.max_tree_depth, steps, adapt.new_step_size,
                tf.cast(adapt.inner_results.averaged_max_trajectory_length, tf.float64))

    def snaper_kernel(shift, scale, step_size, n_steps, n_adapt):
        # window 2 starts at window 1's trajectory length (set in `bootstrap`), so it skips the MALA steps: they
        # would clip that length to one leapfrog step
        snaper = tfp.experimental.mcmc.SNAPERHamiltonianMonteCarlo(
            posterior.log_prob, step_size=step_size, num_adaptation_steps=n_adapt,
            max_leapfrog_steps=2 ** sampler.max_tree_depth,
            num_mala_steps=tf.where(n_steps > 1, 0, tf.minimum(100, n_adapt // 4)),
            trajectory_length_adaptation_rate=_SNAPER_LENGTH_RATE)
        adapted = mcmc.DualAveragingStepSizeAdaptation(
            snaper, num_adaptation_steps=n_adapt, target_accept_prob=np.float64(sampler.target_accept),
            reduce_fn=tfp.math.reduce_log_harmonic_mean_exp)
        return mcmc.TransformedTransitionKernel(adapted, posterior.transform(shift, scale))

    def snaper_trace(state, pkr):
        adapt = pkr.inner_results
        gbtla = adapt.inner_results.inner_results
        mh = gbtla.inner_results
        steps = tf.broadcast_to(mh.proposed_results.num_leapfrog_steps, tf.shape(mh.log_accept_ratio))
        divergent = ~(mh.log_accept_ratio > -_DIVERGENCE)
        return (posterior.log_prob(state), tf.exp(tf.minimum(mh.log_accept_ratio, 0.0)), divergent,
                steps >= 2 ** sampler.max_tree_depth, steps, adapt.new_step_size,
                tf.cast(gbtla.averaged_max_trajectory_length, tf.float64))

    kernel, trace = {"nuts": (nuts_kernel, nuts_trace), "chees": (chees_kernel, chees_trace),
                     "snaper": (snaper_kernel, snaper_trace)}[sampler.algorithm]

    def compiled(block: int):
        """``(bootstrap, advance)``: fresh kernel results, and ``block`` steps carrying them on (one graph)."""
        key = ("block", sampler.algorithm, sampler.max_tree_depth, sampler.target_accept, block, jit_compile)
        if key not in posterior.compiled:
            @tf.function(autograph=False)
            def bootstrap(state, shift, scale, step_size, n_steps, n_adapt):
                results = kernel(shift, scale, step_size, n_steps, n_adapt).bootstrap_results(state)
                if sampler.algorithm == "snaper":  # its inner HMC starts at one leapfrog step: carry window 1's length
                    length = step_size * tf.cast(n_steps, step_size.dtype)
                    results = unnest.replace_innermost(results, max_trajectory_length=length)
                return results

            @tf.function(jit_compile=jit_compile, autograph=False)
            def advance(state, results, shift, scale, step_size, n_steps, n_adapt, seed):
                return mcmc.sample_chain(block, state, previous_kernel_results=results,
                                         kernel=kernel(shift, scale, step_size, n_steps, n_adapt), trace_fn=trace,
                                         return_final_kernel_results=True, seed=seed)

            posterior.compiled[key] = bootstrap, advance
        return posterior.compiled[key]

    def window(state, shift, scale, step, n_steps, n_steps_total, n_adapt, keep, block, seed_tag, draw_length=1.0):
        """Run ``n_steps_total`` transitions from fresh adaptation; return the last ``keep`` states and traces.

        SNAPER: once adapted (a block ends there), the maximum trajectory length is ``draw_length`` times the
        adapted one."""
        bootstrap, advance = compiled(block)
        args = (tf.constant(shift, tf.float64), tf.constant(scale, tf.float64), tf.constant(step, tf.float64),
                tf.constant(n_steps, tf.int32), tf.constant(n_adapt, tf.int32))
        results = bootstrap(state, *args)
        states, traces = [], []
        for b in range(n_steps_total // block):
            if stop.is_set():  # another group failed or the run was interrupted: end this thread at a block
                raise RuntimeError("NUTS: stopped with another chain group")
            out = advance(state, results, *args, tf.constant([seed, seed_tag + b], tf.int32))
            state, results = out.all_states[-1], out.final_kernel_results
            if progress is not None:
                progress(block * int(state.shape[0]))
            if sampler.algorithm == "snaper" and (b + 1) * block == n_adapt and draw_length != 1.0:
                length = unnest.get_innermost(results, "averaged_max_trajectory_length")
                results = unnest.replace_innermost(results, averaged_max_trajectory_length=draw_length * length)
            if (b + 1) * block > n_steps_total - keep:
                states.append(np.asarray(out.all_states))
                traces.append([np.asarray(t) for t in out.trace])
        skip = len(states) * block - keep
        return (np.concatenate(states)[skip:],
                [np.concatenate([t[i] for t in traces])[skip:] for i in range(len(traces[0]))], state)

    groups = [g for g in np.array_split(np.arange(len(x0)), sampler.chain_groups) if g.size]
    stop = threading.Event()

    def in_groups(states, *args, seed_tag, **kwargs):
        """``window`` for every group of chains side by side, one thread each (TensorFlow releases the GIL);
        the groups' states and traces joined on the chain axis (a trace shared by a group's chains, such as its
        step size, on a group axis), their final states, and the geometric mean of their last step sizes."""
        def one(g):
            return window(states[g], *args, seed_tag=seed_tag + (g << 24), **kwargs)

        if len(groups) == 1:
            parts = [one(0)]
        else:
            with ThreadPoolExecutor(len(groups), thread_name_prefix="nuts") as pool:
                futures = [pool.submit(one, g) for g in range(len(groups))]
                try:  # woken every 0.2 s, so that a Ctrl-C delivered to any thread is raised here
                    done, running = wait(futures, timeout=0.2, return_when=FIRST_EXCEPTION)
                    while running and not any(f.exception() for f in done):
                        done, running = wait(futures, timeout=0.2, return_when=FIRST_EXCEPTION)
                    for f in done:  # a group's own error first, not another's stop
                        if f.exception() is not None:
                            raise f.exception()
                    parts = [f.result() for f in futures]
                except BaseException:  # an error or Ctrl-C: the other groups stop at their next block
                    stop.set()
                    raise
        draws = np.concatenate([d for d, _, _ in parts], axis=1)
        traces = [np.concatenate(ts, axis=1) if ts[0].ndim > 1 else np.stack(ts, axis=1)  # [draw, chain or group]
                  for ts in zip(*[t for _, t, _ in parts])]
        return draws, traces, [s for _, _, s in parts], float(np.exp(np.mean(np.log(traces[-2][-1]))))

    t0 = time.perf_counter()
    shift, scale, step = posterior.shift, posterior.scale, sampler.initial_step_size
    states = [tf.constant(x0[g], tf.float64) for g in groups]
    n_steps = 1  # ChEES: the first trajectory length is one step; NUTS ignores it
    first = sampler.num_warmup // 2 if sampler.num_warmup >= _METRIC_WARMUP else 0
    second = sampler.num_warmup - first + sampler.num_draws
    block = _block(first, second, int(0.8 * (sampler.num_warmup - first)))  # window 2's adaptation ends on a block
    compiled(block)  # traced here, not by the groups' threads at once
    if first:  # window 1: adapt the step size, then re-estimate the metric from this window's last half
        draws, extra, states, step = in_groups(states, shift, scale, step, n_steps, first,
                                               int(0.8 * (first - first // 2)), first // 2, block, seed_tag=1 << 20)
        n_steps = max(1, int(round(float(extra[-1][-1, 0]) / step)))  # ChEES, SNAPER: window 2 starts at this length
        shift, scale = posterior.metric(draws.reshape(-1, x0.shape[1]))
    draws, (lp, accept, divergent, max_depth, leapfrogs, _, length), _, step = in_groups(
        states, shift, scale, step, n_steps, second, int(0.8 * (sampler.num_warmup - first)), sampler.num_draws,
        block, seed_tag=0, draw_length=_SNAPER_DRAW_LENGTH)
    seconds = time.perf_counter() - t0
    swap = lambda a: np.swapaxes(np.asarray(a), 0, 1)  # noqa: E731 - TFP traces [draw, chain, ...]
    return Chains(swap(draws), swap(lp), swap(accept), swap(divergent).astype(bool), swap(max_depth).astype(bool),
                  swap(leapfrogs).astype(np.int64), step, float(np.asarray(length)[-1].max()), seconds)


def _block(*lengths: int) -> int:
    """Transitions per compiled call: the largest divisor of every window length up to ``_BLOCK_MAX``.

    One graph of a fixed number of steps serves every window (warm-up and draws), so the sampler is
    compiled once per run; fewer, longer calls only save the per-call overhead (about a millisecond
    against tens of milliseconds per NUTS transition on the demo).
    """
    g = int(np.gcd.reduce([n for n in lengths if n]))
    return max(b for b in range(1, min(g, _BLOCK_MAX) + 1) if g % b == 0)
