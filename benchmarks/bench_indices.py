"""Sobol' first/total indices of every output of the demo surrogate: this package against SALib, same analysis.

Both sides run the same Saltelli design (N base rows, all d parameters, no second order), the same
Saltelli-2010 / Jansen estimators, and a 100-resample bootstrap for every index of every output:

  (a) this package: ``sobol.sample`` -> the compiled surrogate's batched ``values`` -> one
      ``sobol.analyze`` over all outputs at once (it also records the convergence over N);
  (b) SALib: ``SALib.sample.sobol.sample`` -> Keras ``model.predict`` -> ``SALib.analyze.sobol.analyze``
      in a loop over the outputs (its only mode).

The surrogate is ``data/seir/surrogate.keras`` when it exists (6 parameters -> 100 daily values), else a
same-shape Keras MLP (6 -> [128, 128] gelu -> 100) built here. Both sides draw the same design, so the
printed agreement of the indices checks that they computed the same thing. When the SALib loop would
take long, ``--salib-outputs K`` times the first K outputs and extrapolates linearly to all of them
(the loop's cost is the same for every output), and says so.

The bootstrap of (a) is two matrix products per analysis; on a machine whose cores are busy with other
work, OpenBLAS's spinning threads can make them 10x slower than one thread (measured here with a load
of 4-6 on 2 cores), so the printout names the BLAS thread setting; ``OPENBLAS_NUM_THREADS=1`` pins it.

Then (``--shapley``, on by default) Shapley effects of every output of the same surrogate under dependent
inputs — the demo space with a correlation of ``--rho`` between ``beta`` and ``infectious_period`` (a Gaussian
copula) — by exact permutations (``2^6 - 2 = 62`` subset costs of ``--shapley-outer`` outer draws x 3 inner
conditional draws, plus ``--shapley-variance`` draws for the variance), run part by part through the compiled
values function (``shapley.analyze_model``); it prints the wall time (sampling, model runs and analysis) and the
largest and median standard error over the 6 parameters x 100 outputs. Target: every standard error <= 0.01 in
under a minute on 2 cores.

Usage: [OPENBLAS_NUM_THREADS=1] python benchmarks/bench_indices.py [--surrogate PATH] [--n 1024]
       [--resamples 100] [--salib-outputs K] [--repeats 5] [--no-sobol] [--no-shapley] [--shapley-outer 8192]
       [--shapley-variance 262144] [--rho -0.5]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from sensitivity.runtime.tf_import import import_tensorflow  # noqa: E402

import_tensorflow()  # TensorFlow without the CUDA-probe lines of its wheel on a machine with no GPU

import keras  # noqa: E402
import numpy as np  # noqa: E402
from SALib.analyze import sobol as salib_analyze  # noqa: E402
from SALib.sample import sobol as salib_sample  # noqa: E402

import sensitivity.surrogates.scaling  # noqa: E402,F401  (registers the scaling layers a trained surrogate holds)
from sensitivity.analyses.indices import shapley, sobol  # noqa: E402
from sensitivity.analyses.indices.intervals import IntervalPlan  # noqa: E402
from sensitivity.engine.jacobian import compile_jacobian  # noqa: E402
from sensitivity.simulators import seir  # noqa: E402
from sensitivity.inputs.space import ParameterSpace  # noqa: E402
from sensitivity.surrogates.load import load_surrogate  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "data" / "seir" / "surrogate.keras"


def demo_shaped_mlp(path: Path, seed: int = 0) -> Path:
    """Save a 6 -> [128, 128] gelu -> 100 MLP (the demo surrogate's shape) to ``path``."""
    keras.utils.set_random_seed(seed)
    model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(128, activation="gelu"),
                              keras.layers.Dense(128, activation="gelu"), keras.layers.Dense(100)])
    model.save(path)
    return path


def problem_of(space: ParameterSpace) -> dict:
    """SALib's problem dict of ``space`` (uniform inputs on the bounds)."""
    return {"num_vars": len(space), "names": space.names, "bounds": space.bounds.tolist()}


def ours(space: ParameterSpace, jac, n: int, resamples: int, seed: int) -> tuple[float, float, np.ndarray]:
    """Seconds of (a) (all of it, and the model evaluations alone) and the total indices ``[d, m]``."""
    t0 = time.perf_counter()
    x = sobol.sample(space, n, seed=seed, replicates=1)  # SALib's design, like for like
    t1 = time.perf_counter()
    y = jac.values(x).reshape(len(x), -1)
    t2 = time.perf_counter()
    ds = sobol.analyze(y, space, intervals=IntervalPlan("bootstrap", n_resamples=resamples, interval="normal",
                       seed=seed))
    return time.perf_counter() - t0, t2 - t1, ds["ST"].values


def salib(space: ParameterSpace, model: keras.Model, n: int, resamples: int, seed: int,
          outputs: int | None) -> tuple[float, float, int, int, np.ndarray]:
    """Seconds of (b): sample + predict, and the analysis loop over ``outputs`` outputs (all when None);
    the outputs timed, the number of outputs, and ``ST [d, k]``."""
    problem = problem_of(space)
    t0 = time.perf_counter()
    x = salib_sample.sample(problem, n, calc_second_order=False, seed=np.random.default_rng(seed))
    y = model.predict(x, verbose=0).reshape(len(x), -1)
    t1 = time.perf_counter()
    m = y.shape[1]
    k = m if outputs is None else min(outputs, m)
    totals = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for j in range(k):
            res = salib_analyze.analyze(problem, np.ascontiguousarray(y[:, j], dtype=np.float64),
                                        calc_second_order=False, num_resamples=resamples, seed=seed)
            totals.append(res["ST"])
    return t1 - t0, time.perf_counter() - t1, k, m, np.stack(totals, axis=1)


def shapley_run(space: ParameterSpace, jac, n_outer: int, n_variance: int, seed: int) -> tuple[float, object]:
    """Seconds of one Shapley analysis of every output (design, model runs part by part, analysis) and its dataset."""
    t0 = time.perf_counter()
    design = shapley.sample(space, n_variance=n_variance, n_outer=n_outer, n_inner=3, n_permutations=2,
                            exact_up_to=len(space), seed=seed)
    ds = shapley.analyze_model(lambda x: jac.values(x).reshape(len(x), -1), design, space)
    return time.perf_counter() - t0, ds


def correlated(space: ParameterSpace, rho: float) -> ParameterSpace:
    """``space`` with a copula correlation ``rho`` between ``beta`` and ``infectious_period``."""
    corr = np.eye(len(space))
    i, j = space.index("beta"), space.index("infectious_period")
    corr[i, j] = corr[j, i] = rho
    return ParameterSpace(space.parameters, corr)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--surrogate", type=Path, default=None,
                        help=f"a .keras surrogate of the SEIR space (default: {DEMO.relative_to(ROOT)} if it exists, "
                             "else a same-shape MLP built here)")
    parser.add_argument("--n", type=int, default=1024, help="base sample size N (a power of two)")
    parser.add_argument("--resamples", type=int, default=100, help="bootstrap resamples")
    parser.add_argument("--salib-outputs", type=int, default=None,
                        help="time SALib's loop on the first K outputs only and extrapolate to all")
    parser.add_argument("--repeats", type=int, default=5, help="best of this many timed runs per side")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-sobol", dest="sobol", action="store_false", help="skip the Sobol'/SALib comparison")
    parser.add_argument("--no-shapley", dest="shapley", action="store_false", help="skip the Shapley effects")
    parser.add_argument("--shapley-outer", type=int, default=8192, help="outer draws per subset cost")
    parser.add_argument("--shapley-variance", type=int, default=262144, help="draws for the output variance")
    parser.add_argument("--rho", type=float, default=-0.5, help="copula correlation of beta and infectious_period")
    args = parser.parse_args(argv)

    space = seir.space()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.surrogate or (DEMO if DEMO.exists() else demo_shaped_mlp(Path(tmp) / "mlp.keras"))
        trained = path == DEMO or args.surrogate is not None
        surrogate = load_surrogate(str(path), input_names=space.names, input_units=space.units,
                                   output=None if trained else seir.output_spec().to_dict(), dtype="float32")
        jac = compile_jacobian(surrogate)
        label = f"{path.name if trained else 'same-shape MLP (6 -> [128, 128] gelu -> 100)'}"
        if args.sobol:
            sobol_comparison(space, jac, keras.models.load_model(path), label, surrogate.output_size, args)
        if args.shapley:
            shapley_benchmark(correlated(space, args.rho), jac, label, surrogate.output_size, args)


def shapley_benchmark(space: ParameterSpace, jac, label: str, m: int, args: argparse.Namespace) -> None:
    """Print the time and standard errors of the Shapley effects of every output (best of ``--repeats``)."""
    d = len(space)
    rows = (2**d - 2) * args.shapley_outer * 3 + args.shapley_variance
    print(f"Shapley effects, exact permutations: {label}, d={d}, m={m} outputs, copula correlation {args.rho:g} "
          f"(beta, infectious_period), {2**d - 2} subsets x {args.shapley_outer} outer x 3 inner + "
          f"{args.shapley_variance} variance draws = {rows} evaluations; best of {args.repeats}; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    shapley_run(space, jac, 2, 16, args.seed)  # warm-up: trace the values function
    seconds, ds = min((shapley_run(space, jac, args.shapley_outer, args.shapley_variance, args.seed)
                       for _ in range(args.repeats)), key=lambda r: r[0])
    se = ds["effect_se"].values
    total = ds["effect"].sum("parameter").values
    print(f"  wall time {seconds:.1f} s (target < 60 s); standard error: largest {np.nanmax(se):.4f}, median "
          f"{np.nanmedian(se):.4f} over {se.size} (parameter, output) pairs (target <= 0.01); "
          f"outputs with any se > 0.01: {int((se > 0.01).any(axis=0).sum())} of {se.shape[1]}")
    print(f"  sum of the effects over the parameters: {np.nanmin(total):.12f} .. {np.nanmax(total):.12f}; "
          f"largest effect per parameter: " + ", ".join(f"{n} {v:.3f}" for n, v in
                                                       zip(space.names, np.nanmax(ds['effect'].values, axis=1))))


def sobol_comparison(space: ParameterSpace, jac, model: keras.Model, label: str, m_outputs: int,
                     args: argparse.Namespace) -> None:
    """The Sobol' comparison with SALib (see the module docstring)."""
    rows = args.n * (len(space) + 2)
    print(f"Sobol' S1/ST with {args.resamples} bootstrap resamples: {label}, d={len(space)}, "
          f"m={m_outputs} outputs, N={args.n} ({rows} evaluations); best of {args.repeats}; "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}, "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")

    ours(space, jac, args.n, 2, args.seed)  # warm-up: trace (and XLA-compile) the values function
    model.predict(np.zeros((64, len(space)), np.float32), verbose=0)  # warm-up: trace Keras predict
    t_ours, t_eval, st_ours = min((ours(space, jac, args.n, args.resamples, args.seed)
                                   for _ in range(args.repeats)), key=lambda r: r[0])
    t_fixed, t_loop, k, m, st_salib = min((salib(space, model, args.n, args.resamples, args.seed,
                                                 args.salib_outputs) for _ in range(args.repeats)),
                                          key=lambda r: r[0] + r[1])
    t_all = t_fixed + t_loop * m / k
    note = "" if k == m else f" (analysis loop timed on {k} of {m} outputs, extrapolated linearly)"
    print(f"  this package (sample + compiled values + one analysis of all outputs): {t_ours:8.3f} s "
          f"(model evaluations {t_eval:.3f} s)")
    print(f"  SALib (sample + Keras predict + analyze per output):                  {t_all:8.3f} s "
          f"(sample + predict {t_fixed:.3f} s){note}")
    print(f"  ratio SALib / this package: {t_all / t_ours:.1f}x; analyses alone (without sampling and model "
          f"evaluations): {t_loop * m / k:.3f} s / {t_ours - t_eval:.3f} s = {t_loop * m / k / (t_ours - t_eval):.1f}x")
    print(f"  agreement: max |ST difference| over the {k} outputs compared: "
          f"{np.nanmax(np.abs(st_ours[:, :k] - st_salib)):.2e} (float32 model evaluations on the same design)")

if __name__ == "__main__":
    sys.exit(main())
