"""Jacobians/s of the compiled engine against the usual ways, measured side by side in one run.

For each shape (default: 8 -> [256]*3 tanh -> 64, forward mode; 256 -> [256]*3 tanh -> 4, reverse mode):
  (a) the naive loop: a fresh eager ``GradientTape().jacobian`` per point,
  (b) a per-point ``tf.function`` Jacobian,
  (c) ``tape.batch_jacobian`` inside one ``tf.function`` over a batch,
  (d) this engine (``compile_jacobian``, XLA, chunked),
with the ratios (d)/(a) and (d)/(c), the engine's achieved GFLOP/s against a float32 matmul peak
measured in the same run, and the peak RSS of a streamed sweep written to disk.

Usage: python benchmarks/bench_jacobian.py [--sweep-points 1000000] [--seconds 3]
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import sensitivity  # noqa: E402


def mlp(n_in: int, hidden: list[int], n_out: int, seed: int = 0) -> keras.Model:
    keras.utils.set_random_seed(seed)
    layers = [keras.Input((n_in,))] + [keras.layers.Dense(h, activation="tanh") for h in hidden]
    return keras.Sequential(layers + [keras.layers.Dense(n_out)])


def rate(fn, points_per_call: int, seconds: float) -> float:
    """Calls ``fn`` (after one warm-up) until ``seconds`` pass; returns points per second."""
    fn()
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()
        calls += 1
    return calls * points_per_call / (time.perf_counter() - t0)


def matmul_peak(seconds: float) -> float:
    """Float32 matmul throughput [GFLOP/s] of this machine: the best of square matmuls of a few sizes,
    with and without XLA, each timed for ``seconds``."""
    best = 0.0
    for size in (1024, 2048, 4096):
        a = tf.random.normal([size, size])
        for jit in (False, True):
            mm = tf.function(lambda a: tf.matmul(a, a), jit_compile=jit)
            best = max(best, rate(lambda: mm(a).numpy(), 1, seconds / 3) * 2 * size**3 / 1e9)
    return best


def macs_per_point(n_in: int, hidden: list[int], n_out: int) -> int:
    widths = [n_in, *hidden, n_out]
    return sum(a * b for a, b in zip(widths, widths[1:]))


def bench_shape(n_in: int, hidden: list[int], n_out: int, seconds: float, peak: float) -> None:
    model = mlp(n_in, hidden, n_out)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4096, n_in)).astype("float32")
    point = tf.constant(x[:1])

    def naive():
        with tf.GradientTape() as tape:
            tape.watch(point)
            y = model(point)
        return tape.jacobian(y, point).numpy()

    @tf.function(input_signature=[tf.TensorSpec([1, n_in], tf.float32)])
    def per_point(p):
        with tf.GradientTape() as tape:
            tape.watch(p)
            y = model(p)
        return tape.jacobian(y, p)

    @tf.function(input_signature=[tf.TensorSpec([None, n_in], tf.float32)])
    def batch(xb):
        with tf.GradientTape() as tape:
            tape.watch(xb)
            y = model(xb)
        return tape.batch_jacobian(y, xb)

    surrogate = sensitivity.load_surrogate(lambda t: model(t), input_names=[f"p{i}" for i in range(n_in)],
                                           input_units=["1"] * n_in,
                                           output={"name": "y", "names": [f"y{i}" for i in range(n_out)]})
    engine = sensitivity.compile_jacobian(surrogate, "auto")
    xb = tf.constant(x)
    rates = {
        "(a) eager tape.jacobian per point": rate(naive, 1, seconds),
        "(b) tf.function jacobian per point": rate(lambda: per_point(point).numpy(), 1, seconds),
        "(c) tf.function batch_jacobian": rate(lambda: batch(xb).numpy(), len(x), seconds),
        f"(d) engine ({engine.mode}, XLA, chunk {engine.chunk_size})": rate(lambda: engine(x), len(x), seconds),
    }
    tangents = n_in if engine.mode == "forward" else n_out
    flops = 2 * macs_per_point(n_in, hidden, n_out) * (1 + tangents)
    engine_rate = list(rates.values())[-1]
    print(f"\n{n_in} -> {hidden} tanh -> {n_out}:")
    for name, value in rates.items():
        print(f"  {name:<44} {value:>12,.0f} Jacobians/s")
    a, c = rates["(a) eager tape.jacobian per point"], rates["(c) tf.function batch_jacobian"]
    print(f"  engine / naive loop        {engine_rate / a:>10,.0f}x")
    print(f"  engine / batch_jacobian    {engine_rate / c:>10,.1f}x")
    gflops = engine_rate * flops / 1e9
    print(f"  engine {gflops:,.0f} GFLOP/s = {100 * gflops / peak:.0f}% of the measured matmul peak ({peak:,.0f} GFLOP/s)")


SWEEP_SCRIPT = """
import os, resource, sys, time
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0"); os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, {bench_dir!r})
import sensitivity
from bench_jacobian import mlp
from sensitivity.grids import make_grid
from sensitivity.space import ParameterSpace
from sensitivity.sweep import sweep
model = mlp(8, [256, 256, 256], 64)
space = ParameterSpace.from_records([dict(name=f"p{{i}}", units="1", low=-1, high=1) for i in range(8)])
s = sensitivity.load_surrogate(lambda t: model(t), input_names=space.names, input_units=space.units,
                               output={{"name": "y", "names": [f"y{{i}}" for i in range(64)]}})
jac = sensitivity.compile_jacobian(s)
t0 = time.perf_counter()
summary = sweep(jac, make_grid(space, "sobol", n={n}), {path!r}, attrs={{}}, fingerprint="bench", progress=False)
size = os.path.getsize(summary.path)
print(f"{{summary.points}} {{time.perf_counter() - t0:.1f}} {{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}} {{size / 2**30:.2f}}")
"""


def sweep_rss(n: int) -> None:
    """Peak RSS of a streamed sweep of ``n`` points written to disk, in a fresh process."""
    with tempfile.TemporaryDirectory() as tmp:
        script = SWEEP_SCRIPT.format(bench_dir=os.path.dirname(os.path.abspath(__file__)), n=n,
                                     path=os.path.join(tmp, "sweep.nc"))
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    points, seconds, rss, gib = out.stdout.split()
    print(f"\nstreamed sweep of {int(points):,} points (8 -> [256]*3 -> 64, float32, written to netCDF, "
          f"{gib} GiB): {seconds} s, peak RSS {rss} MiB")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="time per measurement [s]")
    parser.add_argument("--sweep-points", type=int, default=1_000_000, help="points of the RSS sweep (0: skip)")
    args = parser.parse_args()
    print(f"TensorFlow {tf.__version__}, devices: {[d.device_type for d in tf.config.list_logical_devices()]}")
    peak = matmul_peak(args.seconds)
    bench_shape(8, [256, 256, 256], 64, args.seconds, peak)
    bench_shape(256, [256, 256, 256], 4, args.seconds, peak)
    if args.sweep_points:
        sweep_rss(args.sweep_points)
    print(f"\nthis process peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
