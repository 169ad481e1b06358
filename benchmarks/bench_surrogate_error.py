"""Coverage of the combined (sampling + surrogate) 95 % intervals of Sobol' indices of an ensemble, over seeds.

For each seed and training size, an ensemble of ``--members`` MLPs is trained on i.i.d. runs of a simulator, its
first and total Sobol' indices are computed with ``sensitivity.analyses.indices.compute_ensemble`` (``--sobol`` base
rows, randomised-QMC intervals), and each index is checked against the simulator's own: inside its combined
interval, inside its sampling interval alone. ``--model``:

* ``ishigami`` (default): the Ishigami function (a = 7, b = 0.1), here in numpy, against its closed-form indices
  (Ishigami & Homma 1990, doi:10.1109/ISUMA.1990.151285; Sobol' & Levitan 1999): 6 indices per seed.
* ``seir``: the demo's SEIR simulator (``sensitivity.simulators.seir.simulate``: 6 parameters -> 100 days) with
  the demo surrogate's architecture and log output (``conf/train/seir.yaml``), against the simulator's indices on
  ``--reference`` Saltelli base rows (the simulator itself, 8 runs per row; their own 95 % half-width is printed,
  and should be far below the intervals checked): 1,200 indices per seed (S1 and ST of 6 parameters on 100 days).

Printed per training size: both coverages over all seeds and indices, the mean width of the combined intervals (it
should shrink with more runs), the median spread/RMSE ratio of the ensembles on their test samples, and the training
time.

The target of issue 24: coverage of the combined 95 % intervals >= 0.85 across seeds on the Ishigami test.

Usage: python benchmarks/bench_surrogate_error.py [--model ishigami|seir] [--seeds 10] [--sizes 256 1024]
       [--members 5] [--sobol 4096] [--reference 32768]
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

from sensitivity.runtime.tf_import import import_tensorflow  # noqa: E402

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


def ishigami_study(reference: int):
    """``(space, output, simulate, network, truth)`` of the Ishigami test (``truth``: ``{S1, ST}: [d, 1]``)."""
    from sensitivity.outputs.spec import OutputSpec
    from sensitivity.settings import TrainSettings
    from sensitivity.inputs.space import ParameterSpace

    space = ParameterSpace.from_records([{"name": f"x{i}", "units": "1", "low": -np.pi, "high": np.pi}
                                         for i in (1, 2, 3)])
    output = OutputSpec.from_dict({"name": "y", "units": "1", "names": ["ishigami"]})
    network = TrainSettings(hidden=(64, 64), learning_rate=3e-3, batch_size=32, epochs=1000, patience=100)
    truth = {key: value[:, None] for key, value in true_indices().items()}
    return space, output, ishigami, network, truth


def seir_study(reference: int):
    """The same for the SEIR simulator; ``truth`` from the simulator on ``reference`` Saltelli base rows."""
    from sensitivity.analyses.indices import sobol
    from sensitivity.analyses.indices.intervals import IntervalPlan
    from sensitivity.settings import TrainSettings
    from sensitivity.simulators import seir

    space = seir.space()
    t0 = time.perf_counter()
    design = sobol.sample(space, reference, seed=12345)
    ds = sobol.analyze(seir.simulate(design), space, intervals=IntervalPlan("rqmc", seed=12345))
    truth = {key: ds[key].values for key in ("S1", "ST")}
    half = max(float(np.nanmax(np.diff(ds[f"{key}_interval"].values, axis=-1))) / 2 for key in ("S1", "ST"))
    print(f"reference: the simulator's indices on {reference} base rows ({len(design)} runs, "
          f"{time.perf_counter() - t0:.0f} s), largest 95 % half-width {half:.4f}", flush=True)
    network = TrainSettings(hidden=(128, 128, 128), activation="gelu", learning_rate=3e-3, batch_size=128,
                            epochs=1000, patience=200, log_output=True)
    return space, seir.output_spec(), seir.simulate, network, truth


STUDIES = {"ishigami": ishigami_study, "seir": seir_study}


def one_run(study, n: int, seed: int, members: int, sobol_n: int, directory: Path) -> dict[str, float]:
    from sensitivity import training
    from sensitivity.analyses import indices
    from sensitivity.engine.ensemble import compile_ensemble
    from sensitivity.sweep.designs import make_grid
    from sensitivity.settings import TrainingPlan

    space, output, simulate, network, truth = study
    x = make_grid(space, "random", n=n, seed=1000 + seed).points()
    t0 = time.perf_counter()
    trained = training.train_surrogate(
        x, simulate(x).reshape(n, *output.shape), directory / f"{n}_{seed}", space=space, output=output,
        network=network, plan=TrainingPlan(members=members, derivative_points=0), seed=seed)
    seconds = time.perf_counter() - t0
    ds = indices.compute_ensemble(compile_ensemble(trained.surrogate), space, {"sobol": indices.Sobol(n=sobol_n)},
                                  seed=seed)
    varies = np.isfinite(truth["ST"]).all(axis=0)  # [m]: outputs whose simulator indices exist (all, here)
    combined = sampling = width = 0.0
    for key, exact in truth.items():
        c, s = (ds[f"sobol_{key}_{kind}"].transpose("parameter", ..., "bound").values.reshape(len(space), -1, 2)
                [:, varies] for kind in ("combined_interval", "interval"))
        exact = exact[:, varies]
        combined += float(((c[..., 0] <= exact) & (exact <= c[..., 1])).sum())
        sampling += float(((s[..., 0] <= exact) & (exact <= s[..., 1])).sum())
        width += float((c[..., 1] - c[..., 0]).sum())
    count = 2 * exact.size
    report = trained.report
    return {"combined": combined / count, "sampling": sampling / count, "width": width / count,
            "count": count, "seconds": seconds,
            "spread_ratio": float(np.median(report["member_spread"].values / report["rmse"].values)),
            "r2": float(report["r2"].values.min())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=sorted(STUDIES), default="ishigami")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--sizes", type=int, nargs="+", default=[256, 1024])
    parser.add_argument("--members", type=int, default=5)
    parser.add_argument("--sobol", type=int, default=4096)
    parser.add_argument("--reference", type=int, default=32768, help="SEIR: base rows of the simulator's indices")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    study = STUDIES[args.model](args.reference)
    pooled = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            runs = []
            for seed in range(args.seeds):
                runs.append(one_run(study, n, seed, args.members, args.sobol, Path(tmp)))
                r = runs[-1]
                print(f"  n={n} seed={seed}: combined {r['combined']:.3f}, sampling only {r['sampling']:.3f} of "
                      f"{r['count']} indices, mean width {r['width']:.3f}, test R^2 {r['r2']:.4f}, spread/RMSE "
                      f"{r['spread_ratio']:.2f}, trained in {r['seconds']:.0f} s", flush=True)
            coverage = float(np.mean([r["combined"] for r in runs]))
            pooled.append(coverage)
            print(f"n={n}: {len(runs)} seeds x {runs[0]['count']} indices: combined 95 % interval coverage "
                  f"{coverage:.3f}, sampling interval alone {np.mean([r['sampling'] for r in runs]):.3f}; mean "
                  f"combined width {np.mean([r['width'] for r in runs]):.4f}; median spread/RMSE "
                  f"{np.median([r['spread_ratio'] for r in runs]):.2f}; training {np.mean([r['seconds'] for r in runs]):.0f} "
                  f"s per ensemble", flush=True)
    worst = min(pooled)
    print(f"{args.model}: coverage of the combined 95 % intervals at every training size: lowest {worst:.3f} "
          f"(target >= {TARGET} on ishigami: {'met' if worst >= TARGET else 'missed'})")


if __name__ == "__main__":
    main()
