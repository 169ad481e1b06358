"""The GPU bar for issues 15 and 29: JAX ``jit(vmap(jacfwd|jacrev))`` on the MLPs A, B, C and the field-input CNNs
cnn and deep, on whatever GPU JAX sees.

The engine is TensorFlow; a GPU machine whose image has no TensorFlow (and no way to install the CUDA 12 build
of it: no package registry, and the wheel plus its CUDA libraries are ~2.3 GB) can still measure the peer the
engine is judged against. This script needs only JAX and numpy (and ``jax_layers.py`` beside it), so it runs on
such a machine as it is:
  - Jacobians/s of ``jit(vmap(jacfwd))`` (A, B) and ``jit(vmap(jacrev))`` (C, cnn, deep) in float32, the same
    architectures as ``bench_jacobian.py`` (random weights; the rate does not depend on them), result left on
    the device and copied to numpy. The MLPs at several batch sizes (each batch's Jacobians at most 4 GiB); the
    CNNs over --field-points points as one batch and in chunks of 256 .. 16,384 (a batch whose intermediates
    exceed the device's memory is reported as such), the best counting, as ``bench_jacobian.py`` feeds JAX;
  - both at JAX's default float32 matmul precision (TF32 tensor cores on Ampere and later) and at ``highest``
    (true float32, the precision the engine computes in);
  - the device's float32 matmul peak at the same two precisions (best of square 4096 and 8192 products) and its
    memory bandwidth (read + write of an XLA scaling of 1 GiB), and each Jacobian rate as % of them: FLOPs
    2 x MACs x (1 + tangents) and bytes 4 x (1 + tangents) x (numbers of the input and of every layer's output)
    + the Jacobian per Jacobian, as ``bench_jacobian.py`` counts them.
It also records whether TensorFlow is importable there. ``--members K`` (issue 24) times instead, on the MLPs, the
Jacobians of a K-member ensemble (K networks of the shape, their weights stacked on a member axis, one
``jit(vmap(vmap(jacfwd|jacrev)))`` over members and points) beside one member's on the same points, on the device:
whether the hardware leaves one member's work room for K at under 2x its time.

Usage: python benchmarks/gpu_peer.py [--shapes A B C cnn deep] [--points 65536 1048576] [--field-points 65536]
       [--rounds 5] [--matmul 4096 8192] [--members 5]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import jax_layers

#: Largest Jacobian batch held at once (bytes); larger --points are cut down to it (B at 1M points would be 64 GiB).
MAX_OUTPUT_BYTES = 4 * 2 ** 30
SHAPES = {"A": (8, [256] * 3, 64, "jacfwd"), "B": (32, [512] * 3, 512, "jacfwd"), "C": (256, [256] * 3, 4, "jacrev")}
#: The field-input CNNs of issue 29 (``bench_jacobian.py``'s cnn and deep): input numbers, reverse mode.
FIELD_NETS = {"cnn": 784, "deep": 64 * 64}
FIELD_CHUNKS = (256, 1024, 4096, 16384)


def glorot(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int, fan_out: int):
    import jax.numpy as jnp

    limit = np.sqrt(6.0 / (fan_in + fan_out))
    return jnp.asarray(rng.uniform(-limit, limit, shape), jnp.float32)


def network(n_in: int, hidden: list[int], n_out: int, seed: int = 0) -> list:
    """An MLP ``n_in -> hidden (tanh) -> n_out`` with Glorot-uniform weights, as a :mod:`jax_layers` list."""
    import jax.numpy as jnp

    rng = np.random.default_rng(seed)
    sizes = [n_in, *hidden, n_out]
    return [("dense", (glorot(rng, (a, b), a, b), jnp.zeros(b, jnp.float32), "tanh" if i < len(hidden) else "linear"))
            for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:]))]


def field_network(name: str, seed: int = 0) -> list:
    """``bench_jacobian.py``'s cnn (28 x 28 -> 2 x [Conv2D tanh, MaxPool 2] -> Dense 64 tanh -> 10) or deep
    (64 x 64 -> 3 x [Conv2D same, BatchNorm, swish, MaxPool 2] -> Conv2D, BatchNorm, swish, global average ->
    Dense 1) with Glorot-uniform kernels and batch-norm statistics as after training, as a :mod:`jax_layers` list."""
    import jax.numpy as jnp

    rng = np.random.default_rng(seed)
    zeros = lambda c: jnp.zeros(c, jnp.float32)

    def conv(c_in: int, c_out: int, padding: str, activation: str):
        return ("conv2d", (glorot(rng, (3, 3, c_in, c_out), 9 * c_in, 9 * c_out), zeros(c_out), padding, activation))

    def dense(a: int, b: int, activation: str):
        return ("dense", (glorot(rng, (a, b), a, b), zeros(b), activation))

    if name == "cnn":
        return [("reshape", (28, 28, 1)), conv(1, 16, "VALID", "tanh"), ("max_pool", 2),
                conv(16, 32, "VALID", "tanh"), ("max_pool", 2), ("reshape", (-1,)), dense(5 * 5 * 32, 64, "tanh"),
                dense(64, 10, "linear")]
    layers, c_in = [("reshape", (64, 64, 1))], 1
    for i, c in enumerate((8, 16, 32, 32)):
        gamma, beta, mean, var = rng.uniform(0.5, 2, c), rng.normal(0, 0.1, c), rng.normal(0, 0.1, c), \
            rng.uniform(0.5, 2, c)
        scale = gamma / np.sqrt(var + 1e-3)
        layers += [conv(c_in, c, "SAME", "linear"),
                   ("batch_norm", (jnp.asarray(scale, jnp.float32), jnp.asarray(beta - mean * scale, jnp.float32))),
                   ("activation", "swish"), ("max_pool", 2) if i < 3 else ("global_average", None)]
        c_in = c
    return layers + [dense(32, 1, "linear")]


def ensemble_ratio(name: str, members: int, points: int, rounds: int) -> None:
    """Print Jacobians/s of one member of MLP ``name`` and of ``members`` members at once (weights stacked on a
    member axis, one jitted call), on the device, and the time ratio: all members / one member."""
    import jax
    import jax.numpy as jnp

    n_in, hidden, n_out, mode = SHAPES[name]
    nets = [network(n_in, hidden, n_out, seed=k) for k in range(members)]
    names = [params[2] for _, params in nets[0]]
    stacked = [(jnp.stack([net[i][1][0] for net in nets]), jnp.stack([net[i][1][1] for net in nets]))
               for i in range(len(names))]
    act = jax_layers.activations()

    def apply(params, x):  # one member at one point
        for (kernel, bias), activation in zip(params, names):
            x = act[activation](x @ kernel + bias)
        return x

    derivative = getattr(jax, mode)
    one = jax.jit(jax.vmap(derivative(lambda x: apply([(w[0], b[0]) for w, b in stacked], x))))
    every = jax.jit(jax.vmap(lambda params, x: jax.vmap(derivative(lambda p: apply(params, p)))(x), in_axes=(0, None)))
    points = min(points, MAX_OUTPUT_BYTES // (4 * n_in * n_out * members))
    x = jax.random.uniform(jax.random.PRNGKey(1), (points, n_in), jnp.float32)
    for k in (0, members - 1):  # the stacked call computes each member's own Jacobians
        alone = jax.vmap(derivative(jax_layers.function(nets[k])))(x[:8])
        if not np.allclose(every(stacked, x[:8])[k], alone, rtol=1e-3, atol=1e-5):
            raise RuntimeError(f"{name}: member {k} of the stacked call differs from the member alone")
    t_one = best_seconds(lambda: one(x).block_until_ready(), rounds)
    t_all = best_seconds(lambda: every(stacked, x).block_until_ready(), rounds)
    print(f"  {name} {mode} {points:>8} points: one member {points / t_one:>14,.0f} Jacobians/s, {members} members "
          f"{members * points / t_all:>14,.0f}/s: {members} members take {t_all / t_one:.2f}x one member's time")


def numbers_per_point(net: list, n_in: int) -> int:
    """Numbers per point of the input and of every layer's output: the blocks a pass reads and writes."""
    import jax
    import jax.numpy as jnp

    total, shape = n_in, jax.ShapeDtypeStruct((n_in,), jnp.float32)
    for kind, params in net:
        shape = jax.eval_shape(jax_layers.layer(kind, params), shape)
        total += int(np.prod(shape.shape))
    return total


def best_seconds(fn, rounds: int) -> float:
    fn()  # compile and warm up
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def out_of_memory(error: Exception) -> bool:
    return "RESOURCE_EXHAUSTED" in str(error) or "out of memory" in str(error).lower()


def chunked_rates(jac, x, chunk: int, rounds: int) -> tuple[float, float]:
    """Jacobians/s of ``jac`` over ``x`` in chunks of ``chunk`` points: left on the device, and copied into one
    preallocated numpy array chunk by chunk (best of ``rounds``)."""
    import jax

    pieces = [x[start : start + chunk] for start in range(0, len(x), chunk)]
    out = np.empty((len(x), *jax.eval_shape(jac, pieces[0]).shape[1:]), np.float32) if len(pieces) > 1 else None

    def into_numpy():
        if len(pieces) == 1:  # one batch: the copy numpy makes is the result
            return np.asarray(jac(x))
        for start, piece in zip(range(0, len(x), chunk), pieces):
            out[start : start + chunk] = np.asarray(jac(piece))

    on_device = best_seconds(lambda: jax.block_until_ready([jac(piece) for piece in pieces]), rounds)
    return len(x) / on_device, len(x) / best_seconds(into_numpy, rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=[*SHAPES, *FIELD_NETS], choices=[*SHAPES, *FIELD_NETS])
    parser.add_argument("--points", type=int, nargs="+", default=[65536, 1048576], help="MLP batch sizes")
    parser.add_argument("--field-points", type=int, default=65536, help="points per timed pass of cnn and deep")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--matmul", type=int, nargs="+", default=[4096, 8192], help="square matmul sizes for the peak")
    parser.add_argument("--members", type=int, default=0, help="time a K-member ensemble against one member instead")
    args = parser.parse_args()

    import jax
    import jax.numpy as jnp

    try:
        import tensorflow  # noqa: F401
        print(f"tensorflow {tensorflow.__version__} importable")
    except ImportError as error:
        print(f"tensorflow not importable here: {error}")
    print(f"jax {jax.__version__}, devices {jax.devices()}")
    if args.members:
        for precision in ("default", "highest"):
            with jax.default_matmul_precision(precision):
                print(f"[{precision}] {args.members}-member ensembles against one member:")
                for name in (s for s in args.shapes if s in SHAPES):
                    for points in args.points:
                        ensemble_ratio(name, args.members, points, args.rounds)
        return
    block = jnp.ones(2 ** 28, jnp.float32)
    scale = jax.jit(lambda v: v * 1.5)
    bandwidth = 2 * block.nbytes / best_seconds(lambda: scale(block).block_until_ready(), args.rounds) / 1e9
    del block
    print(f"memory bandwidth {bandwidth:,.0f} GB/s (read + write, XLA scaling of 1 GiB)")

    for precision in ("default", "highest"):
        with jax.default_matmul_precision(precision):
            peak = 0.0
            for n in args.matmul:
                a = jax.random.normal(jax.random.PRNGKey(0), (n, n), jnp.float32)
                mm = jax.jit(lambda x: x @ x)
                peak = max(peak, 2 * n ** 3 / best_seconds(lambda: mm(a).block_until_ready(), args.rounds) / 1e9)
            print(f"[{precision}] float32 matmul peak {peak:,.0f} GFLOP/s")
            for name in args.shapes:
                if name in SHAPES:
                    n_in, hidden, n_out, mode = SHAPES[name]
                    net = network(n_in, hidden, n_out)
                    sizes = sorted({min(p, MAX_OUTPUT_BYTES // (4 * n_in * n_out)) for p in args.points})
                    variants = [(points, None) for points in sizes]
                else:
                    n_in, mode, net = FIELD_NETS[name], "jacrev", field_network(name)
                    points = args.field_points
                    variants = [(points, None)] + [(points, c) for c in FIELD_CHUNKS if c < points]
                f = jax_layers.function(net)
                n_out = jax.eval_shape(f, jax.ShapeDtypeStruct((n_in,), jnp.float32)).shape[0]
                jac = jax.jit(jax.vmap(getattr(jax, mode)(f)))
                tangents = n_in if mode == "jacfwd" else n_out
                flops = 2 * jax_layers.macs(net, n_in) * (1 + tangents)
                moved = 4 * ((1 + tangents) * numbers_per_point(net, n_in) + n_in * n_out)
                for points, chunk in variants:
                    x = jax.random.uniform(jax.random.PRNGKey(1), (points, n_in), jnp.float32)
                    what = f"{name} {mode} {points:>8} points" + (f" in chunks of {chunk:>5}" if chunk else "")
                    try:
                        on_device, to_numpy = chunked_rates(jac, x, chunk or points, args.rounds)
                    except Exception as error:  # a whole batch of CNN intermediates can exceed the device
                        if not out_of_memory(error):
                            raise
                        print(f"[{precision}] {what}: out of device memory")
                        continue
                    print(f"[{precision}] {what}: {on_device:>14,.0f} Jacobians/s on the device "
                          f"({flops * on_device / 1e9 / peak:.0%} of peak, {moved * on_device / 1e9 / bandwidth:.0%} "
                          f"of bandwidth), {to_numpy:>12,.0f}/s into numpy")


if __name__ == "__main__":
    main()
