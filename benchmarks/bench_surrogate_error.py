"""Coverage of the combined (sampling + surrogate) 95 % intervals of Sobol' indices of an ensemble, over seeds.

For each seed and training size, an ensemble of ``--members`` MLPs is trained on i.i.d. runs of the Ishigami
function (a = 7, b = 0.1; sensitivity.simulators.analytic.ishigami, here in numpy), its first and total Sobol'
indices are computed with ``sensitivity.analyses.indices.compute_ensemble`` (``--sobol`` base rows, randomised-QMC
intervals), and each of the six indices is checked against the closed form (Ishigami & Homma 1990,
doi:10.1109/ISUMA.1990.151285; Sobol' & Levitan 1999): inside its combined interval, inside its sampling
interval alone. Printed per training size: both coverages over all seeds and indices, the mean width of the
combined intervals (it should shrink with more runs), the median spread/RMSE ratio of the ensembles on their
test samples, and the training time.

The target of issue 24: coverage of the combined 95 % intervals >= 0.85 across seeds.

Usage: python benchmarks/bench_surrogate_error.py [--seeds 10] [--sizes 256 1024] [--members 5] [--sobol 4096]
"""
from __future__ import annotations

import argparse
import logging
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from sensitivity.tf_runtime import import_tensorflow  # noqa: E402

import_tensorflow()

import numpy as np  # noqa: E402

A, B = 7.0, 0.1
TARGET = 0.85


def ishigami(x: np.ndarray) -> np.ndarray:
    return (np.sin(x[:, 0]) + A * np.sin(x[:, 1]) ** 2 + B * x[:, 2] ** 4 * np.sin(x[:, 0]))[:, None]


def true_indices() -> dict[str, np.ndarray]:
    """Closed-form first and total indices of the Ishigami function."""
    pi4 = np.pi**4
    v1, v2, v13 = 0.5 * (1 + B * pi4 / 5) ** 2, A**2 / 8, B**2 * pi4**2 * (1 / 18 - 1 / 50)
    v = A**2 / 8 + B * pi4 / 5 + B**2 * pi4**2 / 18 + 0.5
    return {"S1": np.array([v1, v2, 0.0]) / v, "ST": np.array([v1 + v13, v2, v13]) / v}


def one_run(n: int, seed: int, members: int, sobol_n: int, directory: Path) -> dict[str, float]:
    from sensitivity import training
    from sensitivity.analyses import indices
    from sensitivity.ensemble_engine import compile_ensemble
    from sensitivity.grids import make_grid
    from sensitivity.outputs import OutputSpec
    from sensitivity.settings import TrainingPlan, TrainSettings
    from sensitivity.space import ParameterSpace

    space = ParameterSpace.from_records([{"name": f"x{i}", "units": "1", "low": -np.pi, "high": np.pi}
                                         for i in (1, 2, 3)])
    output = OutputSpec.from_dict({"name": "y", "units": "1", "names": ["ishigami"]})
    x = make_grid(space, "random", n=n, seed=1000 + seed).points()
    t0 = time.perf_counter()
    trained = training.train_surrogate(
        x, ishigami(x), directory / f"{n}_{seed}", space=space, output=output,
        network=TrainSettings(hidden=(64, 64), learning_rate=3e-3, batch_size=32, epochs=1000, patience=100),
        plan=TrainingPlan(members=members, derivative_points=0), seed=seed)
    seconds = time.perf_counter() - t0
    ds = indices.compute_ensemble(compile_ensemble(trained.surrogate), space, {"sobol": indices.Sobol(n=sobol_n)},
                                  seed=seed)
    combined = sampling = width = 0.0
    for key, truth in true_indices().items():
        c = ds[f"sobol_{key}_combined_interval"].values[:, 0]
        s = ds[f"sobol_{key}_interval"].values[:, 0]
        combined += float(((c[:, 0] <= truth) & (truth <= c[:, 1])).sum())
        sampling += float(((s[:, 0] <= truth) & (truth <= s[:, 1])).sum())
        width += float((c[:, 1] - c[:, 0]).sum())
    report = trained.report
    return {"combined": combined, "sampling": sampling, "width": width / 6, "seconds": seconds,
            "spread_ratio": float(np.median(report["member_spread"].values / report["rmse"].values)),
            "r2": float(report["r2"].values.min())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--members", type=int, default=5)
    parser.add_argument("--sobol", type=int, default=4096)
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    pooled = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            runs = []
            for seed in range(args.seeds):
                runs.append(one_run(n, seed, args.members, args.sobol, Path(tmp)))
                r = runs[-1]
                print(f"  n={n} seed={seed}: combined {r['combined']:.0f}/6, sampling only {r['sampling']:.0f}/6, "
                      f"mean width {r['width']:.3f}, test R^2 {r['r2']:.4f}, spread/RMSE {r['spread_ratio']:.2f}, "
                      f"trained in {r['seconds']:.0f} s", flush=True)
            total = 6 * len(runs)
            coverage = sum(r["combined"] for r in runs) / total
            pooled.append(coverage)
            print(f"n={n}: {len(runs)} seeds x 6 indices: combined 95 % interval coverage {coverage:.3f}, sampling "
                  f"interval alone {sum(r['sampling'] for r in runs) / total:.3f}; mean combined width "
                  f"{np.mean([r['width'] for r in runs]):.4f}; median spread/RMSE "
                  f"{np.median([r['spread_ratio'] for r in runs]):.2f}; training {np.mean([r['seconds'] for r in runs]):.0f} "
                  f"s per ensemble", flush=True)
    worst = min(pooled)
    print(f"target: coverage of the combined 95 % intervals >= {TARGET} at every training size: lowest {worst:.3f} "
          f"({'met' if worst >= TARGET else 'missed'})")


if __name__ == "__main__":
    main()
