"""Uncertainty propagation on the demo surrogate: Monte Carlo throughput and the cost of each method.

The demo surrogate (data/seir/surrogate.keras: 6 parameters -> 100 daily values) or, when it is
absent or ``--model mlp`` is given, a Keras MLP of the same shape (6 -> 128 -> 128 -> 100, tanh, random
weights) built here. Inputs: a normal around the nominal point with standard deviations of 5 % of each
parameter's range and a 0.3 correlation between neighbours, kept inside the bounds (truncated-normal
marginals, Gaussian copula), a calibration posterior stand-in.

Printed:
  * one forward evaluation of a batch of ``--batch`` points (the reference cost, compiled and warm);
  * each method's wall time and its ratio to that reference: first order (one value-and-Jacobian),
    second order (+ one compiled Hessian), unscented (2n + 1 = 13 points), Monte Carlo with
    ``--samples`` (randomised QMC, 16 scrambled replicates, batches of ``--batch``);
  * Monte Carlo samples/s, next to the raw forward throughput of the engine, so the overhead of
    sampling, copula transform and streaming statistics shows.
Every compiled function is warmed up before it is timed; timings are the best of ``--repeat`` runs
(one run for Monte Carlo). On a machine shared with other jobs, run with ``OPENBLAS_NUM_THREADS=1``:
spinning BLAS threads otherwise slow the replicate covariance (a [100, N_r] x [N_r, 100] product)
by an order of magnitude.

Usage: python benchmarks/bench_propagation.py [--model auto|mlp|PATH.keras] [--samples 1000000]
       [--batch 4096] [--dtype float32] [--repeat 5]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from sensitivity.runtime.tf_import import import_tensorflow  # noqa: E402

import_tensorflow()  # TensorFlow without the CUDA-probe lines of its wheel on a machine with no GPU

import numpy as np  # noqa: E402

from sensitivity.inputs.uncertainty import truncated_gaussian_inputs  # noqa: E402
from sensitivity.analyses.propagation import (  # noqa: E402
    first_order,
    monte_carlo,
    replicate_plan,
    second_order,
    unscented,
)
from sensitivity.engine.hessian import compile_hessian  # noqa: E402
from sensitivity.engine.jacobian import compile_jacobian  # noqa: E402
from sensitivity.inputs.space import Parameter, ParameterSpace  # noqa: E402
from sensitivity.surrogates.load import load_surrogate  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "data" / "seir" / "surrogate.keras"
DAYS = 100


def demo_space() -> ParameterSpace:
    """The SEIR demo space (sensitivity.simulators.seir), or the same six parameters spelled out here."""
    try:
        from sensitivity.simulators.seir import space

        return space()
    except ImportError:
        return ParameterSpace((
            Parameter("beta", "day-1", 0.25, 0.65), Parameter("incubation_period", "day", 2.0, 6.0),
            Parameter("infectious_period", "day", 3.0, 6.0), Parameter("initial_infected", "1", 1e-5, 1e-3),
            Parameter("intervention_day", "day", 10.0, 60.0), Parameter("intervention_strength", "1", 0.0, 0.7),
        ))


def mlp_file(space: ParameterSpace, folder: Path) -> Path:
    """A Keras MLP with the demo surrogate's shape (n -> 128 -> 128 -> 100, tanh), random weights."""
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((len(space),)), keras.layers.Dense(128, activation="tanh"),
                              keras.layers.Dense(128, activation="tanh"), keras.layers.Dense(DAYS)])
    path = folder / "mlp.keras"
    model.save(path)
    return path


def load(choice: str, space: ParameterSpace, dtype: str, folder: Path):
    """The surrogate named by ``--model`` and a label for the printout."""
    if choice == "auto":
        choice = str(DEMO) if DEMO.exists() else "mlp"
    if choice == "mlp":
        output = {"name": "y", "units": "1", "dims": [{"name": "time", "values": list(range(1, DAYS + 1)),
                                                       "units": "day"}]}
        model = load_surrogate(str(mlp_file(space, folder)), input_names=space.names, input_units=space.units,
                               output=output, dtype=dtype)
        return model, "same-shape Keras MLP (random weights)"
    return load_surrogate(choice, dtype=dtype), choice


def posterior(space: ParameterSpace):
    """N(nominal, S) kept inside the bounds: std 5 % of each range, correlation 0.3 between neighbours."""
    std = 0.05 * (space.bounds[:, 1] - space.bounds[:, 0])
    n = len(space)
    corr = np.eye(n) + 0.3 * (np.eye(n, k=1) + np.eye(n, k=-1))
    return truncated_gaussian_inputs(space.nominal, corr * np.outer(std, std), space)


def best_time(fn, repeat: int) -> float:
    """Best wall time of ``repeat`` calls [s] (after one untimed warm-up call)."""
    fn()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="auto",
                        help="auto (the demo file if present, else mlp), mlp, or a .keras path")
    parser.add_argument("--samples", type=int, default=2**20, help="Monte Carlo evaluations (2^20 ~ 10^6)")
    parser.add_argument("--replicates", type=int, default=16)
    parser.add_argument("--batch", type=int, default=4096, help="points per model call (a power of 2)")
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    space = demo_space()
    with tempfile.TemporaryDirectory() as folder:
        model, label = load(args.model, space, args.dtype, Path(folder))
    jac = compile_jacobian(model)
    hessian = compile_hessian(model.fn, model.n_in, output_size=model.output_size, dtype=args.dtype)
    inputs = posterior(space)
    m, n = model.output_size, model.n_in

    def values(x):
        return jac.values(x).reshape(len(x), m)

    def value_and_jacobian(x):
        v, j = jac(x)
        return v.reshape(len(x), m), j.reshape(len(x), m, n)

    batch = inputs.sample(args.batch, seed=1)
    reference = best_time(lambda: values(batch), args.repeat)
    print(f"model: {label}; {n} parameters -> {m} outputs, {args.dtype}, engine {jac.mode} mode, "
          f"chunk {jac.chunk_size}")
    print(f"reference: one forward evaluation of {args.batch} points = {reference * 1e3:.2f} ms "
          f"({args.batch / reference:,.0f} points/s)")

    timings = {
        "first_order": best_time(lambda: first_order(inputs, value_and_jacobian), args.repeat),
        "second_order": best_time(lambda: second_order(inputs, value_and_jacobian, hessian), args.repeat),
        "unscented": best_time(lambda: unscented(inputs, values), args.repeat),
    }
    n_rep, size = replicate_plan(args.samples, args.replicates, m, 2**28, power_of_two=True)
    monte_carlo(inputs, values, n_samples=2 * args.batch, n_replicates=2, block_size=args.batch, seed=0)  # warm
    in_model = [0.0]

    def timed_values(x):
        t = time.perf_counter()
        y = values(x)
        in_model[0] += time.perf_counter() - t
        return y

    t0 = time.perf_counter()
    ds = monte_carlo(inputs, timed_values, n_samples=args.samples, n_replicates=args.replicates,
                     block_size=args.batch, seed=0)
    timings["monte_carlo"] = time.perf_counter() - t0
    total = int(ds.attrs["n_samples"])
    print(f"{'method':<14}{'time':>12}{'x one batch':>14}")
    for name, seconds in timings.items():
        print(f"{name:<14}{seconds * 1e3:>10.2f} ms{seconds / reference:>14.2f}")
    print(f"monte_carlo: {total:,} samples ({n_rep} replicates of {size:,}) in {timings['monte_carlo']:.2f} s = "
          f"{total / timings['monte_carlo']:,.0f} samples/s, of which {in_model[0]:.2f} s in the model "
          f"(forward alone at the reference rate: {total / args.batch * reference:.2f} s) and "
          f"{timings['monte_carlo'] - in_model[0]:.2f} s sampling + statistics; largest relative standard error "
          f"of the std {np.nanmax(ds['output_std_se'].values / ds['output_std'].values):.2e}")


if __name__ == "__main__":
    main()
