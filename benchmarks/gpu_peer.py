"""The GPU bar for issue 15: JAX ``jit(vmap(jacfwd|jacrev))`` on shapes A, B, C on whatever GPU JAX sees.

The engine is TensorFlow; a GPU machine whose image has no TensorFlow (and no way to install the CUDA 12 build
of it: no package registry, and the wheel plus its CUDA libraries are ~2.3 GB) can still measure the peer the
engine is judged against. This script needs only JAX and numpy, so it runs on such a machine as it is:
  - Jacobians/s of ``jit(vmap(jacfwd))`` (A, B) and ``jit(vmap(jacrev))`` (C) in float32, the same networks as
    ``bench_jacobian.py`` (random weights), at several batch sizes (each
    batch's Jacobians at most 4 GiB), result left on the device and copied to numpy;
  - both at JAX's default float32 matmul precision (TF32 tensor cores on Ampere and later) and at ``highest``
    (true float32, the precision the engine computes in);
  - the device's float32 matmul peak at the same two precisions (best of square 4096 and 8192 products), and the
    Jacobian throughput as % of it (2 x MACs x (1 + tangents) FLOPs per Jacobian, as bench_jacobian.py counts).
It also records whether TensorFlow is importable there.

Usage: python benchmarks/gpu_peer.py [--points 65536 1048576] [--rounds 5] [--matmul 4096 8192]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

#: Largest Jacobian batch held at once (bytes); larger --points are cut down to it (B at 1M points would be 64 GiB).
MAX_OUTPUT_BYTES = 4 * 2 ** 30
SHAPES = {"A": (8, [256] * 3, 64, "jacfwd"), "B": (32, [512] * 3, 512, "jacfwd"), "C": (256, [256] * 3, 4, "jacrev")}


def network(n_in: int, hidden: list[int], n_out: int, seed: int = 0):
    """An MLP ``n_in -> hidden (tanh) -> n_out`` with Glorot-uniform weights, one point at a time."""
    import jax.numpy as jnp

    rng = np.random.default_rng(seed)
    sizes = [n_in, *hidden, n_out]
    weights = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        limit = np.sqrt(6.0 / (a + b))
        weights.append((jnp.asarray(rng.uniform(-limit, limit, (a, b)), jnp.float32), jnp.zeros(b, jnp.float32)))

    def f(x):
        for w, b in weights[:-1]:
            x = jnp.tanh(x @ w + b)
        w, b = weights[-1]
        return x @ w + b

    macs = sum(a * b for a, b in zip(sizes[:-1], sizes[1:]))
    return f, macs


def best_seconds(fn, rounds: int) -> float:
    fn()  # compile and warm up
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, nargs="+", default=[65536, 1048576])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--matmul", type=int, nargs="+", default=[4096, 8192], help="square matmul sizes for the peak")
    args = parser.parse_args()

    import jax
    import jax.numpy as jnp

    try:
        import tensorflow  # noqa: F401
        print(f"tensorflow {tensorflow.__version__} importable")
    except ImportError as error:
        print(f"tensorflow not importable here: {error}")
    print(f"jax {jax.__version__}, devices {jax.devices()}")

    for precision in ("default", "highest"):
        with jax.default_matmul_precision(precision):
            peak = 0.0
            for n in args.matmul:
                a = jax.random.normal(jax.random.PRNGKey(0), (n, n), jnp.float32)
                mm = jax.jit(lambda x: x @ x)
                peak = max(peak, 2 * n ** 3 / best_seconds(lambda: mm(a).block_until_ready(), args.rounds) / 1e9)
            print(f"[{precision}] float32 matmul peak {peak:,.0f} GFLOP/s")
            for name, (n_in, hidden, n_out, mode) in SHAPES.items():
                f, macs = network(n_in, hidden, n_out)
                jac = jax.jit(jax.vmap(getattr(jax, mode)(f)))
                tangents = n_in if mode == "jacfwd" else n_out
                for points in sorted({min(p, MAX_OUTPUT_BYTES // (4 * n_in * n_out)) for p in args.points}):
                    x = jax.random.uniform(jax.random.PRNGKey(1), (points, n_in), jnp.float32)
                    on_device = points / best_seconds(lambda: jac(x).block_until_ready(), args.rounds)
                    to_numpy = points / best_seconds(lambda: np.asarray(jac(x)), args.rounds)
                    gflops = 2 * macs * (1 + tangents) * on_device / 1e9
                    print(f"[{precision}] {name} {mode} {points:>8} points: {on_device:>14,.0f} Jacobians/s on the "
                          f"device ({gflops / peak:.0%} of peak), {to_numpy:>12,.0f}/s into numpy")


if __name__ == "__main__":
    main()
