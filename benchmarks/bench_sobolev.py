"""Sobolev training (issue 24): Jacobian error of plain vs derivative-aware training, side by side.

For Ishigami (a = 7, b = 0.1, closed-form gradient) and the SEIR demo simulator (sensitivity.simulators.seir,
6 parameters -> 100 daily values, learned as log outputs), one MLP per row is trained with
``sensitivity.training.fit`` on a Sobol' design and judged on fresh random points by the median relative Jacobian
error (``sensitivity.training.derivative_errors``, unit-cube scaling) against the exact gradient (Ishigami) or
float64 central differences of the simulator (SEIR, step 1e-4 of each range). Rows:

* ``plain N``: values only, N samples (N simulator runs);
* ``sobolev exact N``: values + the exact Jacobian (Ishigami's closed form; for SEIR, which has none, central
  differences handed over as if free, i.e. an adjoint's Jacobian): equal N;
* ``sobolev FD N``: values + central-difference Jacobians (step ``fd_step`` = 1e-3 of each range), N (1 + 2n) runs;
* ``plain N (1 + 2n)``: values only, at the simulator budget of the FD row (equal budget).

Every row uses the same network, optimiser, seed and split fractions; ``jacobian_weight`` = 1.

Usage: python benchmarks/bench_sobolev.py [--seeds 0] [--ishigami-n 64] [--seir-n 48] [--epochs 1500]
"""
from __future__ import annotations

import argparse
import math
import os
import time

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from sensitivity.runtime.tf_import import import_tensorflow  # noqa: E402

tf = import_tensorflow()

import numpy as np  # noqa: E402

from sensitivity import training  # noqa: E402
from sensitivity.sweep.designs import make_grid  # noqa: E402
from sensitivity.outputs.spec import OutputSpec  # noqa: E402
from sensitivity.simulators import seir  # noqa: E402
from sensitivity.inputs.space import ParameterSpace  # noqa: E402

A, B, FD_STEP = 7.0, 0.1, 1e-3


def ishigami(x: np.ndarray) -> np.ndarray:
    return (np.sin(x[:, 0]) + A * np.sin(x[:, 1]) ** 2 + B * x[:, 2] ** 4 * np.sin(x[:, 0]))[:, None]


def ishigami_jacobian(x: np.ndarray) -> np.ndarray:
    return np.stack([np.cos(x[:, 0]) * (1 + B * x[:, 2] ** 4), A * np.sin(2 * x[:, 1]),
                     4 * B * x[:, 2] ** 3 * np.sin(x[:, 0])], axis=1)[:, None, :]


def fd(simulate, space: ParameterSpace, x: np.ndarray, step: float) -> np.ndarray:
    return training.central_differences(simulate, x, step * training.unit_cube_scale(space, x))


def run_one(problem: dict, n: int, weight: float, jacobian_of, seed: int, epochs: int) -> tuple[float, float, float]:
    """(median relative Jacobian error, median relative value RMSE, seconds) of one trained network."""
    space, simulate = problem["space"], problem["simulate"]
    x = make_grid(space, "sobol", n=n, seed=seed + 1).points()
    y = simulate(x)
    jac = jacobian_of(x) if weight > 0 else None
    settings = training.TrainSettings(hidden=(64, 64), learning_rate=problem["learning_rate"], batch_size=32,
                                      epochs=epochs, patience=epochs // 5, jacobian_weight=weight,
                                      log_inputs=problem["log_inputs"], log_output=problem["log_output"])
    start = time.perf_counter()
    result = training.fit(x, y, training.split_samples(n, 0.15, 0.05, seed), names=space.names, units=space.units,
                          output=problem["output"], settings=settings, seed=seed, log_every=None, jacobian=jac)
    seconds = time.perf_counter() - start
    fresh, reference, y_fresh = problem["fresh"]
    points = tf.constant(fresh, tf.float32)
    with tf.GradientTape() as tape:
        tape.watch(points)
        values = tf.reshape(result.model(points), [len(fresh), -1])
    jacobian = tape.batch_jacobian(values, points).numpy().reshape(reference.shape)
    error = training.derivative_errors(jacobian, reference, training.unit_cube_scale(space, fresh)).per_point
    rms = np.sqrt(((values.numpy().reshape(y_fresh.shape) - y_fresh) ** 2).mean()) / np.sqrt((y_fresh**2).mean())
    return float(np.median(error)), float(rms), seconds


def problems(seed: int) -> dict[str, dict]:
    ishigami_space = ParameterSpace.from_records(
        [{"name": f"x{i}", "units": "1", "low": -math.pi, "high": math.pi} for i in (1, 2, 3)])
    seir_space = seir.space()
    out = {}
    fresh = make_grid(ishigami_space, "random", n=500, seed=100 + seed).points()
    out["ishigami"] = dict(space=ishigami_space, simulate=ishigami, exact=ishigami_jacobian,
                           output=OutputSpec.from_dict({"name": "y", "units": "1"}), learning_rate=1e-2,
                           log_inputs=(), log_output=False, fresh=(fresh, ishigami_jacobian(fresh), ishigami(fresh)))
    fresh = make_grid(seir_space, "random", n=200, seed=100 + seed).points()
    out["seir"] = dict(space=seir_space, simulate=seir.simulate,
                       exact=lambda x: fd(seir.simulate, seir_space, x, FD_STEP), output=seir.output_spec(),
                       learning_rate=3e-3, log_inputs=("initial_infected",), log_output=True,
                       fresh=(fresh, fd(seir.simulate, seir_space, fresh, 1e-4), seir.simulate(fresh)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--ishigami-n", type=int, default=64)
    parser.add_argument("--seir-n", type=int, default=48)
    parser.add_argument("--epochs", type=int, default=1500)
    args = parser.parse_args()
    print(f"{'problem':9} {'row':22} {'N':>5} {'sim runs':>9} {'median rel J err':>17} {'value rel RMS':>14} "
          f"{'fit s':>6}  (median over seeds {args.seeds})")
    for name, n in (("ishigami", args.ishigami_n), ("seir", args.seir_n)):
        results: dict[str, list] = {}
        for seed in args.seeds:
            problem = problems(seed)[name]
            d = len(problem["space"])
            fd_of = lambda x, p=problem: fd(p["simulate"], p["space"], x, FD_STEP)  # noqa: E731
            rows = [("plain N", n, 0.0, None, n), ("sobolev exact N", n, 1.0, problem["exact"], n),
                    ("sobolev FD N", n, 1.0, fd_of, n * (1 + 2 * d)),
                    ("plain N (1 + 2n)", n * (1 + 2 * d), 0.0, None, n * (1 + 2 * d))]
            for label, size, weight, jac, runs in rows:
                results.setdefault(label, []).append((size, runs, *run_one(problem, size, weight, jac, seed,
                                                                            args.epochs)))
        for label, values in results.items():
            size, runs = values[0][:2]
            err, rms, sec = (np.median([v[k] for v in values]) for k in (2, 3, 4))
            print(f"{name:9} {label:22} {size:5d} {runs:9d} {err:17.4f} {rms:14.4f} {sec:6.1f}", flush=True)


if __name__ == "__main__":
    main()
