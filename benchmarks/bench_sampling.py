"""Posterior sampling of the demo calibration: NUTS (batched, XLA, exact gradients) against emcee.

The same posterior both ways: the demo SEIR surrogate (float64) fitted to data/seir/observations.nc, the
space's (uniform) priors, its bounds, ``initial_infected`` in log space, as one compiled log-density
(:func:`sensitivity.analyses.posterior.log_posterior`).
  (a) NUTS: :func:`sensitivity.analyses.posterior.sample_posterior`, ``--chains`` chains at once,
      preconditioned by the calibration's Laplace approximation; the time is of one complete run,
      warm-up and XLA compilation included, as the ``sample`` workflow pays it;
  (b) emcee 3 (affine-invariant ensemble, Goodman & Weare 2010), ``--walkers`` walkers moved together,
      their log-densities from the same compiled function (``tf.function(jit_compile=True)``, warmed up
      before timing), ``--steps`` steps with the first ``--burn`` discarded, started from the Laplace draws.
The figure of merit is the effective sample size per second of the slowest parameter: NUTS's bulk and
tail ESS (Vehtari et al. 2021), emcee's draws divided by its integrated autocorrelation time per parameter.
It also prints the cost of one batched value-and-gradient of the log-density per chain count (XLA, 500 in a
loop), the profile that decides how many chains pay on this machine.

``--algorithm chees`` runs ChEES-HMC (one adapted trajectory length for all chains) instead of NUTS.

Usage: python benchmarks/bench_sampling.py [--chains 8] [--draws 1000] [--warmup 500] [--algorithm nuts]
       [--target-accept 0.95] [--walkers 32] [--steps 20000] [--burn 2000]
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from sensitivity.tf_runtime import import_tensorflow  # noqa: E402

import_tensorflow()  # TensorFlow without the CUDA-probe lines of its wheel on a machine with no GPU

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SEIR = ROOT / "data" / "seir"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=8)
    parser.add_argument("--draws", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--target-accept", type=float, default=0.95)
    parser.add_argument("--algorithm", choices=["nuts", "chees"], default="nuts")
    parser.add_argument("--walkers", type=int, default=32)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--burn", type=int, default=2000)
    parser.add_argument("--profile", type=int, nargs="*", default=[8, 16, 32, 64, 256],
                        help="chain counts whose batched value-and-gradient cost is timed")
    args = parser.parse_args()

    import emcee
    import tensorflow as tf

    from sensitivity.analyses.calibration import ObservationModel, calibrate
    from sensitivity.analyses.posterior import (NUTS, Support, initial_points, log_posterior, sample_posterior,
                                                space_prior)
    from sensitivity.jacobian import compile_jacobian
    from sensitivity.observations import read_observations
    from sensitivity.simulators.seir import output_spec
    from sensitivity.simulators.seir import space as seir_space
    from sensitivity.surrogate import load_surrogate

    space = seir_space()
    model = load_surrogate(str(SEIR / "surrogate.keras"), input_names=space.names, input_units=space.units,
                           output=output_spec(), dtype="float64")
    obs = read_observations(SEIR / "observations.nc", model.output)
    log_mask = np.array([p.scale == "log" for p in space.parameters])
    fit = calibrate(compile_jacobian(model).flat_value_and_jacobian, obs.values, space.nominal, **obs.errors(),
                    bounds=space.bounds, log_parameters=log_mask, record_history=False)
    mean, cov = fit["estimate"].values[0], fit["covariance"].values[0]
    observations = ObservationModel.from_arrays(obs.values, **obs.errors())
    support = Support.of(space.bounds, log_mask, len(space), space.names)
    start = initial_points(mean[None], mean, cov, support, args.chains, seed=0)

    t0 = time.perf_counter()
    ds = sample_posterior(model.fn, observations, space_prior(space), start, bounds=space.bounds,
                          log_parameters=log_mask, laplace_mean=mean, laplace_cov=cov,
                          sampler=NUTS(num_draws=args.draws, num_warmup=args.warmup,
                                       target_accept=args.target_accept, algorithm=args.algorithm),
                          parameter_names=space.names, throw=False)
    nuts_seconds = time.perf_counter() - t0
    nuts_ess = np.minimum(ds["ess_bulk"].values, ds["ess_tail"].values)
    gradients = int(ds["n_leapfrog"].sum())

    log_prob = tf.function(log_posterior(model.fn, observations, space_prior(space), support).log_prob,
                           jit_compile=True)
    walkers0 = initial_points(np.empty((0, len(space))), mean, cov, support, args.walkers, spread=1.0, seed=1)
    log_prob(tf.constant(walkers0))  # compile before timing
    np.random.seed(1)  # emcee draws its moves from numpy's global generator
    sampler = emcee.EnsembleSampler(args.walkers, len(space), lambda x: log_prob(tf.constant(x)).numpy(),
                                    vectorize=True)
    t0 = time.perf_counter()
    sampler.run_mcmc(walkers0, args.steps)
    emcee_seconds = time.perf_counter() - t0
    tau = sampler.get_autocorr_time(discard=args.burn, quiet=True)
    emcee_ess = (args.steps - args.burn) * args.walkers / tau

    print(f"demo posterior: {len(space)} parameters, {observations.n_observed} observations")
    print(f"{args.algorithm}: {args.chains} chains x ({args.warmup} warm-up + {args.draws}) in {nuts_seconds:.1f} s "
          f"(compilation included), {gradients} gradient evaluations after warm-up, "
          f"{int(ds['n_divergent'])} divergent, max R-hat {float(ds['rhat'].max()):.3f}")
    print(f"emcee: {args.walkers} walkers x {args.steps} steps in {emcee_seconds:.1f} s, "
          f"autocorrelation times {np.array2string(tau, precision=0)}")
    print(f"{'parameter':<24}{'NUTS ESS':>10}{'NUTS ESS/s':>12}{'emcee ESS':>11}{'emcee ESS/s':>13}")
    for j, name in enumerate(space.names):
        print(f"{name:<24}{nuts_ess[j]:>10.0f}{nuts_ess[j] / nuts_seconds:>12.1f}{emcee_ess[j]:>11.0f}"
              f"{emcee_ess[j] / emcee_seconds:>13.1f}")
    for chains, seconds in gradient_cost(log_posterior(model.fn, observations, space_prior(space), support).log_prob,
                                         initial_points(mean[None], mean, cov, support, max(args.profile), seed=0),
                                         args.profile):
        print(f"one batched value-and-gradient of {chains:>4} chains: {1e3 * seconds:8.3f} ms "
              f"({1e6 * seconds / chains:.1f} us per chain)")
    slow_nuts, slow_emcee = nuts_ess.min() / nuts_seconds, emcee_ess.min() / emcee_seconds
    print(f"slowest parameter: NUTS {slow_nuts:.1f} ESS/s, emcee {slow_emcee:.1f} ESS/s: "
          f"{slow_nuts / slow_emcee:.1f}x")


def gradient_cost(log_prob, points: np.ndarray, chain_counts: list[int], repeats: int = 500) -> list[tuple[int, float]]:
    """Seconds of one value-and-gradient of ``log_prob`` at the first ``C`` points, for each ``C``: ``repeats``
    evaluations in one XLA-compiled loop (so dispatch is not timed), after a compiling call."""
    import tensorflow as tf

    tf.get_logger().setLevel("ERROR")  # one compiled loop per chain count is the point, not a retracing accident
    costs = []
    for c in chain_counts:
        @tf.function(jit_compile=True)
        def loop(x):
            def body(i, total):
                at = x * (1.0 + 1e-12 * tf.cast(i, tf.float64))  # depends on i: XLA cannot hoist it
                with tf.GradientTape() as tape:
                    tape.watch(at)
                    lp = tf.reduce_sum(log_prob(at))
                return i + 1, total + tf.reduce_sum(tape.gradient(lp, at))

            return tf.while_loop(lambda i, _: i < repeats, body, (0, tf.constant(0.0, tf.float64)))

        x = tf.constant(points[:c])
        loop(x)
        t0 = time.perf_counter()
        loop(x)
        costs.append((c, (time.perf_counter() - t0) / repeats))
    return costs


if __name__ == "__main__":
    main()
