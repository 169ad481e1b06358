"""The training size against the input dimension: R^2 and Jacobian error of a trained surrogate, measured.

Three functions of 3, 10 and 30 inputs, each trained by :func:`sensitivity.training.train_surrogate` on random runs
of several sizes with the library's default network (:class:`~sensitivity.settings.TrainSettings`: [128, 128] gelu,
batch 64; ``--epochs`` caps the 2,000 default epochs to keep the run small, early stopping usually ends sooner) and
judged on ``--check`` fresh points (never seen by the fit):

* R^2 of the values;
* the Jacobian error against the exact derivatives (complex-step differentiation of the numpy function, exact to
  rounding; Squire & Trapp 1998, doi:10.1137/S003614459631241X): per point ``||J - J_ref|| / ||J_ref||`` in
  unit-cube coordinates (:func:`sensitivity.training.derivative_errors`), median and 90th percentile over points.

The functions:

* ``ishigami`` (3): ``sin x1 + 7 sin^2 x2 + 0.1 x3^4 sin x1`` on ``[-pi, pi]^3`` (Ishigami & Homma 1990,
  doi:10.1109/ISUMA.1990.151285);
* ``wing_weight`` (10): the light aircraft wing weight (Forrester, Sobester & Keane 2008,
  doi:10.1002/9780470770801, section 1.3; the ranges of Surjanovic & Bingham's library);
* ``smooth30`` (30): ``sum_j 2^(-j/10) sin(2 x_j) + 0.3 sum_j x_j x_(j+1)`` on ``[-2, 2]^30``, a sum of smooth
  terms of decaying importance with neighbour interactions.

Usage: python benchmarks/bench_training_size.py [--functions ishigami wing_weight smooth30] [--sizes-per-input
       32 128 512] [--members 1] [--epochs 500] [--check 4096] [--seed 0]
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

import_tensorflow()

import numpy as np  # noqa: E402


def ishigami(x: np.ndarray) -> np.ndarray:
    return np.sin(x[:, 0]) + 7.0 * np.sin(x[:, 1]) ** 2 + 0.1 * x[:, 2] ** 4 * np.sin(x[:, 0])


def wing_weight(x: np.ndarray) -> np.ndarray:
    sw, wfw, a, sweep, q, taper, tc, nz, wdg, wp = x.T
    lam = sweep * (np.pi / 180)
    return (0.036 * sw**0.758 * wfw**0.0035 * (a / np.cos(lam) ** 2) ** 0.6 * q**0.006 * taper**0.04
            * (100 * tc / np.cos(lam)) ** -0.3 * (nz * wdg) ** 0.49 + sw * wp)


def smooth30(x: np.ndarray) -> np.ndarray:
    weights = 2.0 ** (-np.arange(x.shape[1]) / 10)
    return (weights * np.sin(2 * x)).sum(axis=1) + 0.3 * (x[:, :-1] * x[:, 1:]).sum(axis=1)


WING = [("sw", 150, 200), ("wfw", 220, 300), ("a", 6, 10), ("sweep", -10, 10), ("q", 16, 45), ("taper", 0.5, 1),
        ("tc", 0.08, 0.18), ("nz", 2.5, 6), ("wdg", 1700, 2500), ("wp", 0.025, 0.08)]
FUNCTIONS = {
    "ishigami": (ishigami, [(f"x{i}", -np.pi, np.pi) for i in (1, 2, 3)]),
    "wing_weight": (wing_weight, WING),
    "smooth30": (smooth30, [(f"x{i}", -2.0, 2.0) for i in range(1, 31)]),
}


def exact_jacobian(f, x: np.ndarray) -> np.ndarray:
    """``[K, 1, n]``: complex-step derivatives ``Im f(x + i h e_j) / h`` (no cancellation: exact to rounding)."""
    h = 1e-30
    columns = []
    for j in range(x.shape[1]):
        z = x.astype(complex)
        z[:, j] += 1j * h
        columns.append(f(z).imag / h)
    return np.stack(columns, axis=-1)[:, None, :]


def one_run(name: str, n: int, args, directory: Path) -> dict[str, float]:
    from sensitivity import training
    from sensitivity.engine.ensemble import compile_ensemble
    from sensitivity.inputs.space import ParameterSpace
    from sensitivity.outputs.spec import OutputSpec
    from sensitivity.settings import TrainingPlan, TrainSettings
    from sensitivity.sweep.designs import make_grid

    f, ranges = FUNCTIONS[name]
    space = ParameterSpace.from_records([{"name": p, "units": "1", "low": lo, "high": hi} for p, lo, hi in ranges])
    output = OutputSpec.from_dict({"name": "y", "units": "1", "names": [name]})
    x = make_grid(space, "random", n=n, seed=args.seed).points()
    t0 = time.perf_counter()
    trained = training.train_surrogate(
        x, f(x)[:, None], directory / f"{name}_{n}", space=space, output=output,
        network=TrainSettings(epochs=args.epochs), plan=TrainingPlan(members=args.members, derivative_points=0),
        seed=args.seed)
    seconds = time.perf_counter() - t0
    check = make_grid(space, "random", n=args.check, seed=args.seed + 99).points()
    values, jacobians = compile_ensemble(trained.surrogate)(check)
    r2 = float(training.value_errors(f(check)[:, None], values.mean(axis=0)).r2[0])
    errors = training.derivative_errors(jacobians.mean(axis=0), exact_jacobian(f, check),
                                        training.unit_cube_scale(space, check)).per_point
    return {"d": len(space), "n": n, "r2": r2, "jac_median": float(np.median(errors)),
            "jac_p90": float(np.quantile(errors, 0.9)), "seconds": seconds,
            "epochs": max(f.best_epoch for f in trained.fits)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--functions", nargs="+", default=list(FUNCTIONS), choices=list(FUNCTIONS))
    parser.add_argument("--sizes-per-input", nargs="+", type=int, default=[32, 128, 512],
                        help="training runs per input: N = this x d, rounded up to a multiple of 64")
    parser.add_argument("--members", type=int, default=1)
    parser.add_argument("--epochs", type=int, default=500)
    parser.add_argument("--check", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"members {args.members}, epochs <= {args.epochs}, network: the library default otherwise; "
          f"{args.check} check points", flush=True)
    print("| function | inputs d | runs N | N / d | R^2 | Jacobian error median | 90 % | best epoch | seconds |")
    print("|---|---|---|---|---|---|---|---|---|", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.functions:
            d = len(FUNCTIONS[name][1])
            for per_input in args.sizes_per_input:
                n = -(-per_input * d // 64) * 64
                r = one_run(name, n, args, Path(tmp))
                print(f"| {name} | {d} | {n:,} | {n / d:.0f} | {r['r2']:.4f} | {r['jac_median']:.3f} | "
                      f"{r['jac_p90']:.3f} | {r['epochs']} | {r['seconds']:.0f} |", flush=True)


if __name__ == "__main__":
    main()
