"""Jacobians of a K-member ensemble in one compiled call against one member and K separate engines, side by side.

Shapes (float32, random weights, each member its own input/output scaling like a trained member):
  seir  6 -> [128]x3 gelu -> 100   (the demo surrogate's architecture; forward mode)
  A     8 -> [256]x3 tanh -> 64    (forward mode)
  C   256 -> [256]x3 tanh -> 4     (reverse mode)
Contenders, interleaved round by round (best of --rounds passes over --points points each):
  one member        ``compile_jacobian(member)(x)``: the dense path of one network
  ensemble          ``compile_ensemble(ensemble)(x)``: all K members' dense chains in turn, one call per chunk
  K engines         ``compile_jacobian(member_k)(x)`` for k = 1..K, one after the other
  ensemble mean     ``compile_jacobian(ensemble)(x)``: the mean's Jacobian (what every analysis of an ensemble
                    compiles), on the same stacked chain
The target of issue 24: Jacobians of a 5-member ensemble at <= 2x the time of one member. The ensemble does K
times the FLOPs of one member (the members share no arithmetic), so no form of the call can take less than
K x (one member's GFLOP/s) / (the machine's matmul peak) times one member's time: the closing lines print that
arithmetic floor beside the measured ratio at each problem size (--points, and a calibration-sized batch of 64
points), with the nominal cost of bench_jacobian.py (2 x MACs x (1 + tangents) per Jacobian) and the matmul peak
measured in the same run. Beside it they print the ratio of the members' layer matmuls alone (the dense path's
matmuls at that size and nothing else, the K members' 2-D matmuls in turn in one call against one member's,
under XLA, each on its engine's chunk): what the arithmetic costs on this machine's kernels at that size,
before any other work.
Where either exceeds the target, the target is out of this machine's reach.

Usage: python benchmarks/bench_ensemble.py [--shapes seir A C] [--members 5] [--points 8192] [--rounds 5]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from sensitivity.runtime.tf_import import import_tensorflow  # noqa: E402

import_tensorflow()

import numpy as np  # noqa: E402
from bench_jacobian import macs_per_point, matmul_peak  # noqa: E402

SHAPES = {"seir": (6, [128] * 3, 100, "gelu"), "A": (8, [256] * 3, 64, "tanh"), "C": (256, [256] * 3, 4, "tanh")}
TARGET = 2.0
SMALL = 64


def member(shape: str, seed: int):
    """One member: scaling layers with their own offsets, random weights."""
    import keras

    from sensitivity.surrogates.scaling import InputScaling, OutputScaling

    n_in, hidden, n_out, activation = SHAPES[shape]
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    inputs = keras.Input((n_in,))
    h = InputScaling(rng.normal(0, 0.1, n_in), 1 + rng.uniform(0, 0.1, n_in), [False] * n_in,
                     names=[f"p{i}" for i in range(n_in)], units=["1"] * n_in)(inputs)
    for width in hidden:
        h = keras.layers.Dense(width, activation=activation)(h)
    h = keras.layers.Dense(n_out)(h)
    h = OutputScaling(rng.normal(0, 0.1, n_out), 1 + rng.uniform(0, 0.1, n_out), False,
                      output_spec={"name": "y", "units": "1", "names": [f"y{j}" for j in range(n_out)]})(h)
    return keras.Model(inputs, h)


def best_of(fn, x: np.ndarray, rounds: int) -> float:
    fn(x)  # compile
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn(x)
        times.append(time.perf_counter() - t0)
    return min(times)


def bare_matmuls(shape: str, k: int, tangents: int, single_points: int, stacked_points: int, rounds: int) -> float:
    """Time per point of ``k`` members' layer matmuls alone, in one call, over one member's: what the arithmetic
    itself costs on this machine's kernels.

    Each call is nothing but the matmuls of the dense path on one chunk: a block of ``points x (1 + tangents)``
    rows (values and tangents, or cotangents) through every layer, ``[rows, w_i] @ [w_i, w_(i+1)]``, under XLA;
    one member's on ``single_points`` points, the ensemble's ``k`` members' in turn on ``stacked_points`` (what
    the member path runs): the chunk each engine runs at that size. Interleaved, best of ``rounds`` x 10 calls
    each.
    """
    import tensorflow as tf

    n_in, hidden, n_out, _ = SHAPES[shape]
    widths = [n_in, *hidden, n_out]
    rng = np.random.default_rng(0)
    kernels = [tf.constant(rng.normal(size=(k, a, b)).astype("float32")) for a, b in zip(widths, widths[1:])]
    stacked_block = tf.constant(rng.normal(size=(stacked_points * (1 + tangents), n_in)).astype("float32"))
    single_block = tf.constant(rng.normal(size=(single_points * (1 + tangents), n_in)).astype("float32"))

    @tf.function(jit_compile=True)
    def stacked(x):
        outputs = []
        for member in range(k):
            h = x
            for w in kernels:
                h = tf.matmul(h, w[member])
            outputs.append(h)
        return tf.stack(outputs)

    @tf.function(jit_compile=True)
    def single(h):
        for w in kernels:
            h = tf.matmul(h, w[0])
        return h

    calls = {"stacked": lambda: stacked(stacked_block).numpy(), "single": lambda: single(single_block).numpy()}
    best = {name: float("inf") for name in calls}
    for _ in range(rounds * 10):
        for name, call in calls.items():
            t0 = time.perf_counter()
            call()
            best[name] = min(best[name], time.perf_counter() - t0)
    return (best["stacked"] / stacked_points) / (best["single"] / single_points)


def measure(shape: str, k: int, n_points: int, rounds: int,
            directory: Path) -> tuple[dict[str, dict[int, float]], int, dict[int, float]]:
    """Time every contender on ``shape``, interleaved; print the rates; return the best time per contender and
    size, the nominal FLOPs of one member's Jacobian, and per size the ratio of the bare matmuls
    (:func:`bare_matmuls`, at each engine's chunk)."""
    import sensitivity
    from sensitivity.surrogates.ensemble import write_ensemble
    from sensitivity.engine.ensemble import compile_ensemble

    models = [member(shape, seed) for seed in range(k)]
    path = write_ensemble(directory / f"{shape}.ensemble", lambda i, file: models[i].save(file),
                          [{"seed": i} for i in range(k)])
    ensemble = sensitivity.load_surrogate(path)
    engines = {"one member": sensitivity.compile_jacobian(ensemble.members[0]),
               "ensemble": compile_ensemble(ensemble), "ensemble mean": sensitivity.compile_jacobian(ensemble)}
    singles = [sensitivity.compile_jacobian(m) for m in ensemble.members]
    calls = {name: engine for name, engine in engines.items()}
    calls[f"{k} engines"] = lambda x: [e(x) for e in singles]
    x = np.random.default_rng(0).uniform(-1, 1, (n_points, SHAPES[shape][0])).astype(np.float32)
    results: dict[str, dict[int, float]] = {name: {} for name in calls}
    for size in (n_points, SMALL):
        times = {name: [] for name in calls}
        for _ in range(rounds):  # interleaved: every contender once per round
            for name, call in calls.items():
                times[name].append(best_of(call, x[:size], 1))
        for name in calls:
            results[name][size] = min(times[name])
    print(f"\nshape {shape}: {SHAPES[shape][0]} -> {SHAPES[shape][1]} {SHAPES[shape][3]} -> {SHAPES[shape][2]}, "
          f"{k} members, {engines['ensemble'].mode} mode, ensemble chunk {engines['ensemble'].chunk_size}, member "
          f"chunk {engines['one member'].chunk_size}")
    for size in (n_points, SMALL):
        one = results["one member"][size]
        print(f"  {size:>6} points: " + ", ".join(
            f"{name} {size / t:,.0f} Jac/s ({t / one:.2f}x one member's time)" for name, t in
            ((name, results[name][size]) for name in calls)))
    n_in, hidden, n_out, _ = SHAPES[shape]
    tangents = n_in if engines["ensemble"].mode == "forward" else n_out
    bare = {size: bare_matmuls(shape, k, tangents, min(size, engines["one member"].chunk_size),
                               min(size, engines["ensemble"].chunk_size), rounds) for size in (n_points, SMALL)}
    return results, 2 * macs_per_point(n_in, hidden, n_out) * (1 + tangents), bare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--members", type=int, default=5)
    parser.add_argument("--points", type=int, default=8192)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    peak, where = matmul_peak(args.rounds)
    print(f"matmul peak {peak:,.0f} GFLOP/s ({where})")
    with tempfile.TemporaryDirectory() as tmp:
        summary = {shape: measure(shape, args.members, args.points, args.rounds, Path(tmp)) for shape in args.shapes}
    print(f"\ntarget: a {args.members}-member ensemble's Jacobians at <= {TARGET:g}x one member's time")
    for shape, (results, flops, bare_ratios) in summary.items():
        for size in (args.points, SMALL):
            one = results["one member"][size]
            ratio = results["ensemble"][size] / one
            separate = results[f"{args.members} engines"][size] / results["ensemble"][size]
            one_gflops = size * flops / one / 1e9
            floor = args.members * one_gflops / peak
            bare = bare_ratios[size]
            reach = "out of this machine's reach" if max(floor, bare) > TARGET else "not ruled out"
            print(f"  {shape:>5} at {size:>6} points: ensemble / one member {ratio:.2f}x "
                  f"({'met' if ratio <= TARGET else 'missed'}); {args.members} separate engines take {separate:.2f}x "
                  f"the ensemble's time; one member {one_gflops:,.0f} GFLOP/s ({100 * one_gflops / peak:.0f} % of "
                  f"the peak), so the arithmetic floor is {floor:.2f}x; the {args.members} members' layer matmuls "
                  f"alone take {bare:.2f}x one member's: the target is {reach}")


if __name__ == "__main__":
    main()
