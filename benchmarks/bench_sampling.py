"""Posterior sampling of the demo calibration: NUTS (batched, XLA, exact gradients) against emcee.

The same posterior both ways: the demo SEIR surrogate (float64) fitted to data/seir/observations.nc, the
space's (uniform) priors, its bounds, ``initial_infected`` in log space, as one compiled log-density
(:func:`sensitivity.analyses.posterior.log_posterior`).
  (a) NUTS (or ``--algorithm chees|snaper``): :func:`sensitivity.analyses.posterior.run_nuts`, ``--chains``
      chains at once, preconditioned by the calibration's Laplace approximation, warm-up included in the time.
      Run once per ``--seeds`` entry on the same posterior: the first run's time includes the one-time XLA
      compilation (as one ``sample`` workflow pays it), the others reuse the compiled sampler. Each run prints
      every parameter's bulk and tail ESS and R-hat, how far the chains' means spread and the slowest single
      chain (a chain stuck in a tail shows there), the acceptance both as mean and as the harmonic mean over
      the chains that ChEES/SNAPER adapt the step size on, and the adapted trajectory length;
  (b) emcee 3 (affine-invariant ensemble, Goodman & Weare 2010) with each of ``--walkers`` walker counts,
      their log-densities from the same compiled function (``tf.function(jit_compile=True)``, compiled
      before timing), ``--steps`` steps with the first ``--burn`` discarded, started from the Laplace draws.
The figure of merit is the effective sample size per second of the slowest parameter, with ONE estimator for
both samplers: the smaller of the rank-normalised bulk and tail ESS of Vehtari et al. (2021)
(:func:`sensitivity.analyses.posterior.diagnose`, split chains; emcee's walkers as chains). emcee's own
estimate (draws / integrated autocorrelation time, ``get_autocorr_time``) is printed beside it.
The last lines give each sampler's ratio per seed and the minimum over the seeds (the robust figure).
``--profile`` prints the cost of one batched value-and-gradient of the log-density per chain count (XLA, 500
in a loop), the profile that decides how many chains pay on this machine.

``--model-dtype float64 float32`` runs NUTS on the float64 surrogate and on a float32 one inside the same float64
density (the ``sample`` workflow's ``model_dtype``), and prints the float32 log-density's error.

Usage: python benchmarks/bench_sampling.py [--chains 16] [--draws 500] [--warmup 300] [--algorithm nuts] [--seeds 0 1 2]
       [--target-accept 0.95] [--model-dtype float64 float32] [--walkers 32 128] [--steps 8000] [--burn 1000]
       [--profile 8 16 32]
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from sensitivity.runtime.tf_import import import_tensorflow  # noqa: E402

import_tensorflow()  # TensorFlow without the CUDA-probe lines of its wheel on a machine with no GPU

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SEIR = ROOT / "data" / "seir"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chains", type=int, default=16)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                        help="one sampler run per seed on one posterior; the first pays the XLA compilation")
    parser.add_argument("--draws", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--target-accept", type=float, default=0.95)
    parser.add_argument("--max-tree-depth", type=int, default=8)
    parser.add_argument("--algorithm", choices=["nuts", "chees", "snaper"], default="nuts")
    parser.add_argument("--model-dtype", nargs="+", choices=["float64", "float32"], default=["float64", "float32"],
                        help="the surrogate's compute dtype inside the float64 density, one NUTS pair per entry")
    parser.add_argument("--walkers", type=int, nargs="*", default=[32, 128])
    parser.add_argument("--steps", type=int, default=8000)
    parser.add_argument("--burn", type=int, default=1000)
    parser.add_argument("--profile", type=int, nargs="*", default=[],
                        help="chain counts whose batched value-and-gradient cost is timed")
    args = parser.parse_args()

    import emcee
    import tensorflow as tf

    from sensitivity.analyses.calibration import BatchedModel, Fit, ObservationModel, calibrate
    from sensitivity.analyses.posterior import NUTS, Support, diagnose, initial_points, log_posterior, run_nuts
    from sensitivity.analyses.posterior import space_prior
    from sensitivity.engine.jacobian import compile_jacobian
    from sensitivity.analyses.calibration.observations import read_observations
    from sensitivity.simulators.seir import output_spec
    from sensitivity.simulators.seir import space as seir_space
    from sensitivity.surrogates.load import load_surrogate

    space = seir_space()
    model = load_surrogate(str(SEIR / "surrogate.keras"), input_names=space.names, input_units=space.units,
                           output=output_spec(), dtype="float64")
    obs = read_observations(SEIR / "observations.nc", model.output)
    log_mask = np.array([p.scale == "log" for p in space.parameters])
    fit = calibrate(BatchedModel(value_and_jacobian=compile_jacobian(model).flat_value_and_jacobian),
                    ObservationModel.from_arrays(obs.values, **obs.errors()), Fit(record_history=False),
                    starts=space.nominal, bounds=space.bounds, log_parameters=log_mask)
    mean, cov = fit["estimate"].values[0], fit["covariance"].values[0]
    observations = ObservationModel.from_arrays(obs.values, **obs.errors())
    support = Support.of(space.bounds, log_mask, len(space), space.names)
    posterior = log_posterior(model.fn, observations, space_prior(space), support, center=mean, covariance=cov)
    model32 = load_surrogate(str(SEIR / "surrogate.keras"), input_names=space.names, input_units=space.units,
                             output=output_spec(), dtype="float32")
    start = initial_points(mean[None], mean, cov, support, args.chains, seed=0)
    sampler = NUTS(num_draws=args.draws, num_warmup=args.warmup, target_accept=args.target_accept,
                   max_tree_depth=args.max_tree_depth, algorithm=args.algorithm)
    print(f"demo posterior: {len(space)} parameters, {observations.n_observed} observations; slowest parameter's "
          "ESS = min(bulk, tail), rank-normalised split chains (Vehtari et al. 2021), for every sampler")
    rows = []
    for dtype in args.model_dtype:
        target = posterior if dtype == "float64" else log_posterior(
            model32.fn, observations, space_prior(space), support, center=mean, covariance=cov, model_dtype=dtype)
        for i, seed in enumerate(args.seeds):
            chains = run_nuts(target, start, sampler, seed=seed)
            diag = diagnose(chains.draws)
            label = f"seed {seed}" + (", with compilation" if i == 0 else ", compiled")
            name = f"{args.algorithm} {args.chains} x ({args.warmup} + {args.draws}) {dtype}, {label}"
            rows.append((name, chains.seconds, slowest(diag), float(diag.rhat.max())))
            print(f"{name}: {chains.seconds:.1f} s, {chains.leapfrogs.mean():.0f} leapfrog steps per draw (max-depth "
                  f"hits {chains.max_depth.mean():.1%}), step {chains.step_size:.3g}, trajectory length "
                  f"{chains.trajectory_length:.3g}, {int(chains.divergent.sum())} divergent, acceptance "
                  f"{chains.accept_prob.mean():.3f} (harmonic mean over chains {harmonic_accept(chains):.3f})")
            print_parameters(chains, diag, space.names)
    if "float32" in args.model_dtype:
        points = initial_points(np.empty((0, len(space))), mean, cov, support, 256, spread=0.5, seed=2)
        lp64 = posterior.log_prob(tf.constant(points)).numpy()
        lp32 = log_posterior(model32.fn, observations, space_prior(space), support,
                             model_dtype="float32").log_prob(tf.constant(points)).numpy()
        print(f"float32 model: log-density error at 256 points near the estimate (log-density {lp64.min():.0f} to "
              f"{lp64.max():.1f}): max {np.abs(lp32 - lp64).max():.2e}, median {np.median(np.abs(lp32 - lp64)):.2e}")

    log_prob = tf.function(posterior.log_prob, jit_compile=True)
    for walkers in args.walkers:
        walkers0 = initial_points(np.empty((0, len(space))), mean, cov, support, walkers, spread=1.0, seed=1)
        log_prob(tf.constant(walkers0))  # compile before timing
        np.random.seed(1)  # emcee draws its moves from numpy's global generator
        ensemble = emcee.EnsembleSampler(walkers, len(space), lambda x: log_prob(tf.constant(x)).numpy(),
                                         vectorize=True)
        t0 = time.perf_counter()
        ensemble.run_mcmc(walkers0, args.steps)
        seconds = time.perf_counter() - t0
        chain = ensemble.get_chain(discard=args.burn)  # [steps, walkers, n]
        diag = diagnose(np.swapaxes(chain, 0, 1))
        tau = ensemble.get_autocorr_time(discard=args.burn, quiet=True)
        own = (args.steps - args.burn) * walkers / tau
        rows.append((f"emcee {walkers} walkers x {args.steps} ({args.burn} burn-in)", seconds, slowest(diag),
                     float(diag.rhat.max())))
        print(f"emcee {walkers} walkers: {seconds:.1f} s, acceptance {ensemble.acceptance_fraction.mean():.3f}, "
              f"autocorrelation times {np.array2string(tau, precision=0)} (emcee's own slowest ESS "
              f"{own.min():.0f}, {own.min() / seconds:.1f} ESS/s)")

    best_emcee = max((ess / s for name, s, ess, _ in rows if name.startswith("emcee")), default=np.nan)
    print(f"{'sampler':<66}{'seconds':>9}{'slowest ESS':>13}{'ESS/s':>8}{'max R-hat':>11}{'vs best emcee':>15}")
    for name, seconds, ess, rhat in rows:
        print(f"{name:<66}{seconds:>9.1f}{ess:>13.0f}{ess / seconds:>8.1f}{rhat:>11.3f}"
              f"{ess / seconds / best_emcee:>14.2f}x")
    for dtype in args.model_dtype:
        ratios = [ess / s / best_emcee for name, s, ess, _ in rows if name.startswith(args.algorithm) and dtype in name]
        print(f"{args.algorithm} {dtype} over seeds {args.seeds}: minimum {min(ratios):.2f}x best emcee "
              f"(compiled seeds only: {min(ratios[1:], default=np.nan):.2f}x), max R-hat "
              f"{max(r for name, _, _, r in rows if name.startswith(args.algorithm) and dtype in name):.3f}")
    for chains, seconds in gradient_cost(posterior.log_prob, initial_points(mean[None], mean, cov, support,
                                                                            max(args.profile, default=2), seed=0),
                                         args.profile):
        print(f"one batched value-and-gradient of {chains:>4} chains: {1e3 * seconds:8.3f} ms "
              f"({1e6 * seconds / chains:.1f} us per chain)")


def harmonic_accept(chains) -> float:
    """The acceptance the step size is adapted on (ChEES/SNAPER): per draw, the harmonic mean over the chains;
    then the mean over the draws."""
    return float(np.mean(1.0 / np.mean(1.0 / np.maximum(chains.accept_prob, 1e-300), axis=0)))


def print_parameters(chains, diag, names: list[str]) -> None:
    """Per parameter: bulk and tail ESS, R-hat, and the chains' spread (their means' standard deviation, and the
    smallest and median single-chain bulk ESS, in posterior standard deviations and draws)."""
    from sensitivity.analyses.posterior.diagnostics import _rank_normal, effective_sample_size

    x = chains.draws
    z = _rank_normal(x)
    per_chain = np.stack([effective_sample_size(z[c:c + 1]) for c in range(x.shape[0])])  # [C, n]
    spread = x.mean(axis=1).std(axis=0) / x.reshape(-1, x.shape[2]).std(axis=0)
    for j, name in enumerate(names):
        print(f"    {name:<20} bulk ESS {diag.ess_bulk[j]:>8.0f}  tail ESS {diag.ess_tail[j]:>8.0f}  R-hat "
              f"{diag.rhat[j]:.4f}  chain means' sd {spread[j]:.3f} posterior sd  single-chain bulk ESS min "
              f"{per_chain[:, j].min():.0f} (chain {per_chain[:, j].argmin()}), "
              f"median {np.median(per_chain[:, j]):.0f}")
    accept = chains.accept_prob.mean(axis=1)
    print(f"    per chain: acceptance {accept.min():.3f} (chain {accept.argmin()}) to {accept.max():.3f}; draws with "
          f"acceptance < 0.5: {np.mean(chains.accept_prob < 0.5):.2%}")


def slowest(diag) -> float:
    """The slowest parameter's ESS: the smallest of its bulk and tail ESS."""
    return float(np.minimum(diag.ess_bulk, diag.ess_tail).min())


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
