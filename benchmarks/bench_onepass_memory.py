"""The one-pass Sobol' analysis on the demo: peak memory of the whole command, throughput, equality.

Three measurements, each in fresh processes:

* ``rss``: ``/usr/bin/time -v sensitivity indices experiment=seir 'methods=[sobol]' sobol.n=N plots=false``
  from 2^12 to 2^20 base rows (``--sizes``; 8 points per base row on the 6-parameter demo): the whole process's
  maximum resident set size, its wall and user CPU time. Flat means the ratio to the smallest size stays near 1.
* ``rate``: in one child, the compiled demo surrogate's own values rate on the design's points (the same rows,
  generated beforehand, evaluated ``sobol.block`` base rows per call: what the engine does alone) against the
  one-pass analysis (:func:`sensitivity.analyses.indices.sobol_onepass.analyze_model`: the rows generated,
  evaluated and reduced), alternating round by round; the ratio engine time / analysis time is the analysis's
  throughput as a share of the engine's, in wall time and in the process's CPU time (all threads: the share on
  a machine with no idle core).
* ``parts``: the one-pass analysis's work taken apart, one step after the other on the same rows, in CPU seconds:
  the design's points, the engine's values, the statistics' updates, the heavy-tail check, the estimates and
  dataset.
* ``equal``: the one-pass indices against the in-memory estimator (:func:`sensitivity.analyses.indices.sobol.analyze`
  of the held design's values) on the same rows and seed: the largest absolute difference of every variable.

Usage: python benchmarks/bench_onepass_memory.py [--sizes 12 13 15 18 20] [--rate 16 18] [--parts 16]
       [--equal 13] [--rounds 3] [--dir /tmp]
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import child_process

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "data" / "seir" / "surrogate.keras"


def _model():
    """The demo surrogate's values function as the indices command sees it, and its space."""
    import sensitivity
    from sensitivity.analyses.indices import FlatModel
    from sensitivity.simulators import seir

    space = seir.space()
    surrogate = sensitivity.load_surrogate(str(DEMO), input_names=space.names, input_units=space.units)
    return FlatModel(sensitivity.compile_jacobian(surrogate)), space


def child_rate(n: int, rounds: int) -> dict:
    """``rounds`` pairs (engine alone on the design's points, one-pass analysis of them)."""
    from sensitivity.analyses.indices import design, sobol, sobol_onepass

    model, space = _model()
    block, r = sobol_onepass.BLOCK_ROWS, 8
    base = design.SobolBase(2 * len(space), n, 0, r)
    points = [sobol.sample_rows(space, base, a, min(n, a + block)) for a in range(0, n, block)]
    sobol_onepass.analyze_model(model.values, space, block, seed=1)  # warm-up: traces the model, imports xarray

    def engine() -> None:
        for p in points:
            model.values(p)

    def onepass() -> None:
        sobol_onepass.analyze_model(model.values, space, n, seed=0, block=block)

    def timed(f) -> tuple[float, float]:
        t0, c0 = time.perf_counter(), time.process_time()
        f()
        return time.perf_counter() - t0, time.process_time() - c0

    pairs = []
    for k in range(rounds):
        first, second = (engine, onepass) if k % 2 == 0 else (onepass, engine)
        a, b = timed(first), timed(second)
        pairs.append({"engine": a, "onepass": b} if first is engine else {"onepass": a, "engine": b})
    return {"pairs": pairs, "points": sum(len(p) for p in points)}


def child_parts(n: int) -> dict:
    """CPU seconds of each step of the one-pass analysis of ``n`` base rows, one after the other."""
    from sensitivity.analyses.indices import design, pickfreeze, sobol, sobol_onepass, tails
    from sensitivity.inputs.uncertainty import inputs_from_space

    model, space = _model()
    block, g = sobol_onepass.BLOCK_ROWS, len(space)
    plan = sobol_onepass.RQMC.check()
    base, inputs = design.SobolBase(2 * g, n, 0, plan.check_rows(n)), inputs_from_space(space)
    sobol_onepass.analyze_model(model.values, space, block, seed=1)  # warm-up: traces the model, imports xarray
    out, clock = {}, time.process_time
    c0 = clock()
    points = [sobol.sample_rows(space, base, a, a + block, inputs=inputs) for a in range(0, n, block)]
    out["design points"], c0 = clock() - c0, clock()
    values = [model.values(p) for p in points]
    out["engine values"], c0 = clock() - c0, clock()
    acc = pickfreeze.Accumulator(n, g, False, values[0].shape[1], replicates=len(base.engines),
                                 sizes=sobol.convergence_sizes(64, n))
    for y in values:
        acc.update(y.reshape(block, g + 2, -1))
    out["statistics"], c0 = clock() - c0, clock()
    acc.tail_check = tails.tail_variables(acc.tail_values())
    out["heavy-tail check"], c0 = clock() - c0, clock()
    sobol_onepass.analyze_statistics(acc, space)
    out["estimates, dataset"] = clock() - c0
    return out


def child_equal(n: int) -> dict:
    """The largest absolute difference of each variable, one pass against the held design."""
    import numpy as np

    from sensitivity.analyses.indices import sobol, sobol_onepass

    model, space = _model()
    held = sobol.analyze(model.values(sobol.sample(space, n, seed=0)), space)
    streamed = sobol_onepass.analyze_model(model.values, space, n, seed=0)
    scale = {"variance": float(np.abs(held["variance"].values).max())}
    return {name: float(np.nanmax(np.abs(streamed[name].values - var.values))) / scale.get(name, 1.0)
            for name, var in held.data_vars.items() if var.dtype.kind == "f"}


CHILDREN = {"rate": child_rate, "parts": child_parts, "equal": child_equal}


def rss(n: int, folder: Path) -> dict:
    """Maximum RSS [GB], wall and user CPU [s] of the indices command at ``sobol.n = n``."""
    command = ["/usr/bin/time", "-v", sys.executable, "-m", "workflows", "indices", "experiment=seir",
               "methods=[sobol]", f"sobol.n={n}", "plots=false", "progress=false", f"hydra.run.dir={folder / str(n)}"]
    out = subprocess.run(command, capture_output=True, text=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    if out.returncode != 0:
        raise SystemExit(f"sobol.n={n} failed:\n{out.stderr[-3000:]}")
    field = {key: re.search(rf"{pattern}: (\S+)", out.stderr).group(1) for key, pattern in (
        ("rss", r"Maximum resident set size \(kbytes\)"), ("user", r"User time \(seconds\)"),
        ("wall", r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\)"))}
    wall = sum(float(x) * 60**i for i, x in enumerate(reversed(field["wall"].split(":"))))
    return {"rss": int(field["rss"]) / 1e6 * 1.024, "wall": wall, "user": float(field["user"])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[12, 13, 15, 18, 20], help="log2 sobol.n for rss")
    parser.add_argument("--rate", type=int, nargs="*", default=[16, 18], help="log2 n for the rate")
    parser.add_argument("--parts", type=int, nargs="*", default=[16], help="log2 n for the steps' CPU time")
    parser.add_argument("--equal", type=int, nargs="*", default=[13], help="log2 n for the equality check")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where the commands' run folders go (a temporary one)")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if child_process.serve(args.child, CHILDREN):
        return
    script = str(Path(__file__).resolve())
    print(f"load average {os.getloadavg()[0]:.1f}, {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        runs = {k: rss(2**k, Path(tmp)) for k in args.sizes}
    if runs:
        first = runs[min(runs)]
        print("sobol.n  max RSS   x smallest  wall    user CPU")
        for k, r in runs.items():
            print(f"2^{k:<6} {r['rss']:.2f} GB  {r['rss'] / first['rss']:.2f}x       {r['wall']:6.0f} s {r['user']:6.1f} s")
    for k in args.rate:
        out = child_process.run(script, "rate", 2**k, args.rounds)
        for i, clock in enumerate(("wall", "CPU")):
            ratios = sorted(p["engine"][i] / p["onepass"][i] for p in out["pairs"])
            engine = min(p["engine"][i] for p in out["pairs"])
            print(f"rate 2^{k} ({clock} time): {out['points']} points, engine alone {out['points'] / engine:,.0f} "
                  f"values/s, one pass {ratios[len(ratios) // 2]:.2f}x the engine's rate "
                  f"(rounds {', '.join(f'{x:.2f}' for x in ratios)})")
    for k in args.parts:
        parts = child_process.run(script, "parts", 2**k)
        print(f"parts 2^{k} (CPU s): " + ", ".join(f"{name} {value:.2f}" for name, value in parts.items()))
    for k in args.equal:
        diff = child_process.run(script, "equal", 2**k)
        worst = max(diff, key=diff.get)
        print(f"equal 2^{k}: largest |one pass - in memory| {diff[worst]:.1e} ({worst}; variance relative); "
              + ", ".join(f"{name} {value:.1e}" for name, value in diff.items()))


if __name__ == "__main__":
    main()
