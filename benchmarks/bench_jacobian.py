"""Jacobians/s of the compiled engine against JAX and the usual TF ways, measured side by side in one run.

Shapes (float32, random weights, the same weights for every contender):
  A   8 -> [256]x3 tanh -> 64    (forward mode)
  B  32 -> [512]x3 tanh -> 512   (forward mode)
  C 256 -> [256]x3 tanh -> 4     (reverse mode)
  conv  4 -> Dense -> 8x8x16 -> Conv2D -> UpSampling2D -> Conv2D -> 16x16 field (dense path, forward)
  cnn   784 -> Reshape(28, 28, 1) -> Conv2D(16, 3, tanh) -> MaxPool(2) -> Conv2D(32, 3, tanh) -> MaxPool(2)
        -> Flatten -> Dense(64, tanh) -> Dense(10)    (a field input, reverse mode; issue 29)
  deep  4096 -> Reshape(64, 64, 1) -> 3 x [Conv2D(c, 3, same) -> BatchNorm -> swish -> MaxPool(2)] (c = 8, 16,
        32) -> Conv2D(32, 3, same) -> BatchNorm -> swish -> GlobalAveragePooling2D -> Dense(1)   (reverse mode)
Contenders, interleaved round by round (best of --rounds passes over --points points each, the rule of
``timeit`` on a shared machine):
  engine            ``compile_jacobian(surrogate)(x)``, numpy out (dense path for A, B, C, cnn, deep)
  engine autodiff   the same with ``path="autodiff"`` (ForwardAccumulator in vectorized_map / batch_jacobian, XLA)
  JAX jacfwd/jacrev ``jit(vmap(jacfwd|jacrev(f)))`` of the same network written in jax.numpy, numpy out, on
                    the whole batch and in chunks (the engine's, and 256, 1024, 4096 points; cnn and deep also
                    32, 64, 128); the best counts
  TF forward        a hand-written forward mode in one XLA ``tf.function``: the batch repeated n_in times with
                    one-hot tangents through one ``ForwardAccumulator`` (forward shapes only)
  batch_jacobian    ``tape.batch_jacobian`` in one ``tf.function``, without and with XLA
  naive loop        a fresh eager ``GradientTape().jacobian`` per point
Every contender computes the same Jacobians, so they share one nominal cost per Jacobian, printed beside
each rate: FLOPs 2 x MACs x (1 + tangents) (a primal pass and one tangent pass per tangent through every
Dense and convolution), as % of the machine's matmul peak (best of TF, TF-XLA and numpy float32 square
matmuls of sizes 1024-4096), and bytes moved, 4 x (1 + tangents) x (numbers per point of the input and of
every layer's output) + the Jacobian (each block written once: a lower bound), as % of the memory bandwidth
(best of a numpy copy and an XLA scaling of 256 MiB, read + write); both measured in the same run.
The closing lines name each target of issues 15 and 29 met or missed, with the engine's and the best JAX
variant's % of the peak: a speedup r over a JAX variant at p % of the peak needs r * p % with the same
FLOPs, so a target that would need more than 100 % is unreachable on this machine, and the output says so.

``--first`` measures time to first result in fresh processes: load a small model (8 -> [64]x2 -> 16),
then compile and evaluate 1,000 Jacobians, for the engine (one chunk, which runs without XLA), the engine in
two full chunks of 500 (which pay the XLA compile), the autodiff path,
an eager (non-compiled) ``batch_jacobian``, and JAX ``jit(vmap(jacfwd))``.
``--chunks`` sweeps the dense path's chunk size on the chosen shapes instead. ``--steps`` times, on cnn and
deep, each step of the engine's reverse chain alone (its primal pass and its pullback, XLA, one chunk), with
its nominal GFLOP/s (Dense and convolutions) and the GB/s of the blocks it reads and writes: what bounds
the engine.

Usage: python benchmarks/bench_jacobian.py [--shapes A B C conv cnn deep] [--points 8192] [--rounds 5] [--first]
       [--chunks] [--steps]
(needs the ``bench`` extra for JAX: pip install -e ".[bench]")
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from typing import Callable

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

from sensitivity.runtime.tf_import import import_tensorflow  # noqa: E402

import_tensorflow()  # TensorFlow without the CUDA-probe lines of its wheel on a machine with no GPU

import numpy as np  # noqa: E402

SHAPES = {"A": (8, [256] * 3, 64), "B": (32, [512] * 3, 512), "C": (256, [256] * 3, 4)}
CONV_IN, CONV_FIELD = 4, 16
#: The field-input CNNs of issue 29 (reverse mode).
FIELD_NETS = ("cnn", "deep")
#: Chunk sizes JAX is also fed (besides the whole batch and the engine's chunk), so its best variant counts;
#: the CNNs' blocks are larger per point, so smaller chunks too.
JAX_CHUNKS, FIELD_JAX_CHUNKS = (256, 1024, 4096), (32, 64, 128)
#: Largest fraction of points at which a contender's Jacobian may differ from JAX's on a model with max pooling
#: (near-ties: see :func:`contenders`).
NEAR_TIES = 0.01
#: Issue 15's targets: engine / best JAX per shape, % of the matmul peak on A and B, engine / naive loop on A,
#: seconds from a loaded small model to its first 1,000 Jacobians. Issue 29's: engine / best JAX and engine /
#: best batch_jacobian on the CNNs.
SPEEDUP_TARGET = {"A": 1.3, "B": 1.3, "C": 1.0, "conv": None, "cnn": 6.0, "deep": 6.0}
BATCH_JACOBIAN_TARGET = {"cnn": 6.0, "deep": 6.0}
PEAK_TARGET, PEAK_SHAPES = 65.0, ("A", "B")
NAIVE_TARGET, NAIVE_SHAPES = 5000.0, ("A",)
FIRST_TARGET_S = 1.0


def mlp(n_in: int, hidden: list[int], n_out: int, seed: int = 0):
    import keras

    keras.utils.set_random_seed(seed)
    layers = [keras.Input((n_in,))] + [keras.layers.Dense(h, activation="tanh") for h in hidden]
    return keras.Sequential(layers + [keras.layers.Dense(n_out)])


def conv_net(seed: int = 0):
    """4 parameters -> a 16 x 16 field through two 3x3 convolutions (a small conv surrogate)."""
    import keras

    keras.utils.set_random_seed(seed)
    half = CONV_FIELD // 2
    return keras.Sequential([
        keras.Input((CONV_IN,)), keras.layers.Dense(half * half * 16, activation="tanh"),
        keras.layers.Reshape((half, half, 16)), keras.layers.Conv2D(16, 3, padding="same", activation="tanh"),
        keras.layers.UpSampling2D(2), keras.layers.Conv2D(8, 3, padding="same", activation="tanh"),
        keras.layers.Conv2D(1, 3, padding="same"), keras.layers.Reshape((CONV_FIELD, CONV_FIELD))])


def cnn_net(seed: int = 0):
    """Issue 29's CNN: a 28 x 28 field -> 10 outputs through two conv + max-pool blocks and a Dense head."""
    import keras

    keras.utils.set_random_seed(seed)
    layers = keras.layers
    return keras.Sequential([
        keras.Input((784,)), layers.Reshape((28, 28, 1)), layers.Conv2D(16, 3, activation="tanh"),
        layers.MaxPooling2D(2), layers.Conv2D(32, 3, activation="tanh"), layers.MaxPooling2D(2), layers.Flatten(),
        layers.Dense(64, activation="tanh"), layers.Dense(10)])


def deep_net(seed: int = 0):
    """A deeper field-input model: a 64 x 64 field -> 1 output through four conv + batch-norm + swish blocks."""
    import keras

    keras.utils.set_random_seed(seed)
    layers = keras.layers
    body = [keras.Input((64 * 64,)), layers.Reshape((64, 64, 1))]
    for i, filters in enumerate((8, 16, 32, 32)):
        body += [layers.Conv2D(filters, 3, padding="same"), layers.BatchNormalization(), layers.Activation("swish")]
        body += [layers.MaxPooling2D(2)] if i < 3 else [layers.GlobalAveragePooling2D()]
    model = keras.Sequential(body + [layers.Dense(1)])
    rng = np.random.default_rng(seed)
    for layer in model.layers:  # inference statistics as after training, not the identity of a fresh layer
        if isinstance(layer, layers.BatchNormalization):
            c = layer.gamma.shape[0]
            layer.set_weights([rng.uniform(0.5, 2, c), rng.normal(0, 0.1, c), rng.normal(0, 0.1, c),
                               rng.uniform(0.5, 2, c)])
    return model


def jax_function(model) -> Callable:
    """The Keras model ``model`` (an MLP, :func:`conv_net`, :func:`cnn_net` or :func:`deep_net`) in jax.numpy,
    same weights, one point at a time: its layers as :mod:`jax_layers` lists them."""
    import jax.numpy as jnp

    import jax_layers

    network = []
    for layer in model.layers:
        name, weights = type(layer).__name__, [jnp.asarray(w) for w in layer.get_weights()]
        activation = getattr(getattr(layer, "activation", None), "__name__", "linear")
        if name == "Dense":
            network.append(("dense", (*weights, activation)))
        elif name == "Conv2D":
            network.append(("conv2d", (*weights, layer.padding.upper(), activation)))
        elif name == "UpSampling2D":
            network.append(("upsample", layer.size[0]))
        elif name == "Reshape":
            network.append(("reshape", layer.target_shape))
        elif name == "Flatten":
            network.append(("reshape", (-1,)))
        elif name == "MaxPooling2D":
            network.append(("max_pool", layer.pool_size[0]))
        elif name == "GlobalAveragePooling2D":
            network.append(("global_average", None))
        elif name == "BatchNormalization":
            gamma, beta, mean, var = weights
            scale = gamma / jnp.sqrt(var + layer.epsilon)
            network.append(("batch_norm", (scale, beta - mean * scale)))
        elif name == "Activation":
            network.append(("activation", activation))
        else:
            raise ValueError(f"no JAX twin for layer {name}")
    return jax_layers.function(network)


def best_rate(fn: Callable[[], object], points: int) -> Callable[[], float]:
    """A closure timing one call of ``fn``; the caller keeps the best [points/s] of several."""
    def once() -> float:
        t0 = time.perf_counter()
        fn()
        return points / (time.perf_counter() - t0)
    return once


def matmul_peak(rounds: int) -> tuple[float, str]:
    """Float32 matmul throughput [GFLOP/s]: the best of TF, TF-XLA and numpy square matmuls."""
    import tensorflow as tf

    best, where = 0.0, ""
    for size in (1024, 2048, 4096):
        a = np.random.default_rng(0).normal(size=(size, size)).astype("float32")
        at = tf.constant(a)
        candidates = {"numpy": lambda: a @ a}
        for jit in (False, True):
            mm = tf.function(lambda m: tf.matmul(m, m), jit_compile=jit)
            candidates[f"TF{'-XLA' if jit else ''}"] = lambda mm=mm: mm(at).numpy()
        for name, fn in candidates.items():
            fn()
            for _ in range(rounds):
                t0 = time.perf_counter()
                fn()
                gflops = 2 * size**3 / (time.perf_counter() - t0) / 1e9
                if gflops > best:
                    best, where = gflops, f"{name} {size}^2"
    return best, where


def memory_bandwidth(rounds: int) -> tuple[float, str]:
    """Memory bandwidth [GB/s, read + write]: the best of a numpy copy and an XLA scaling of 256 MiB."""
    import tensorflow as tf

    a = np.random.default_rng(0).random(2**26, dtype=np.float32)
    out, at = np.empty_like(a), tf.constant(a)
    scale = tf.function(lambda v: v * 1.5, jit_compile=True)
    candidates = {"numpy copy": lambda: np.copyto(out, a), "TF-XLA scale": lambda: scale(at).numpy()}
    best, where = 0.0, ""
    for name, fn in candidates.items():
        fn()
        for _ in range(rounds):
            t0 = time.perf_counter()
            fn()
            rate = 2 * a.nbytes / (time.perf_counter() - t0) / 1e9
            if rate > best:
                best, where = rate, name
    return best, where


def macs_per_point(n_in: int, hidden: list[int], n_out: int) -> int:
    widths = [n_in, *hidden, n_out]
    return sum(a * b for a, b in zip(widths, widths[1:]))


def layer_macs(layer) -> int:
    """MACs per point of a Dense or convolution layer (per output number: the kernel's fan-in), else 0."""
    if not hasattr(layer, "kernel"):
        return 0
    return int(np.prod(layer.output.shape[1:])) * int(np.prod(layer.kernel.shape[:-1]))


def model_cost(model) -> tuple[int, int]:
    """MACs per point of every Dense and convolution of ``model``, and the numbers per point of its input
    and of every layer's output."""
    widths = [int(np.prod(model.input_shape[1:]))] + [int(np.prod(layer.output.shape[1:])) for layer in model.layers]
    return sum(layer_macs(layer) for layer in model.layers), sum(widths)


def contenders(model, n_in: int, n_out: int, x: np.ndarray, forward: bool) -> dict[str, Callable[[], object]]:
    """Every way to compute the Jacobians of ``model`` at ``x``, each returning numpy arrays."""
    import jax
    import jax.numpy as jnp
    import tensorflow as tf

    import sensitivity

    surrogate = sensitivity.load_surrogate(model, input_names=[f"p{i}" for i in range(n_in)],
                                           input_units=["1"] * n_in,
                                           output={"name": "y", "names": [f"y{i}" for i in range(n_out)]}
                                           if len(model.output_shape) == 2 else None)
    engine = sensitivity.compile_jacobian(surrogate)
    autodiff = sensitivity.compile_jacobian(surrogate, path="autodiff")
    f = jax_function(model)
    xj = jnp.asarray(x)
    fwd, rev = jax.jit(jax.vmap(jax.jacfwd(f))), jax.jit(jax.vmap(jax.jacrev(f)))
    xt = tf.constant(x)

    @tf.function(jit_compile=True)
    def tf_forward(xb):
        batch = tf.shape(xb)[0]
        x_rep = tf.repeat(xb, n_in, axis=0)
        with tf.autodiff.ForwardAccumulator(x_rep, tf.tile(tf.eye(n_in), [batch, 1])) as acc:
            y = tf.reshape(model(x_rep), [batch * n_in, -1])
        return tf.transpose(tf.reshape(acc.jvp(y), [batch, n_in, -1]), [0, 2, 1])

    def batch_jacobian(xb):
        with tf.GradientTape() as tape:
            tape.watch(xb)
            y = tf.reshape(model(xb), [tf.shape(xb)[0], -1])
        return tape.batch_jacobian(y, xb)
    plain_bj, xla_bj = tf.function(batch_jacobian), tf.function(batch_jacobian, jit_compile=True)

    label = lambda jac: f"engine ({jac.path}, {jac.mode}, chunk {jac.chunk_size}{', XLA' if jac.jit_compile else ''})"
    out = {label(engine): lambda: engine(x), label(autodiff): lambda: autodiff(x)}
    if n_in <= 16 * n_out:  # the wrong direction is skipped where it costs more than 16x
        out["JAX jit(vmap(jacfwd))"] = lambda: np.asarray(fwd(xj))
    if n_out <= 16 * n_in:
        out["JAX jit(vmap(jacrev))"] = lambda: np.asarray(rev(xj))
    natural = fwd if forward else rev
    more = FIELD_JAX_CHUNKS if len(model.input_shape) == 2 and model.input_shape[-1] > 512 else ()
    for chunk in sorted({engine.chunk_size, *JAX_CHUNKS, *more}):  # JAX fed the engine's chunks and a few more,
        if chunk >= len(x):                                 # in case cache-sized blocks are what wins
            continue

        def jax_chunked(chunk=chunk):
            jac = np.empty((len(x), *natural(xj[:chunk]).shape[1:]), "float32")
            for start in range(0, len(x), chunk):
                jac[start : start + chunk] = natural(xj[start : start + chunk])
            return jac
        out[f"JAX jit(vmap({'jacfwd' if forward else 'jacrev'})), chunks of {chunk}"] = jax_chunked
    if forward:
        out["TF forward by hand (XLA)"] = lambda: tf_forward(xt).numpy()
    out["batch_jacobian in tf.function"] = lambda: plain_bj(xt).numpy()
    out["batch_jacobian in tf.function (XLA)"] = lambda: xla_bj(xt).numpy()
    reference = np.asarray((fwd if forward else rev)(xj)).reshape(len(x), -1, n_in)
    scale = np.abs(reference).max()
    # every contender computes the same Jacobian; with max pooling, up to NEAR_TIES of the points may differ:
    # where a window's two largest values are within a few ulps, each implementation's rounding picks its own
    # argmax, and the derivative jumps there
    pooled = any("MaxPooling" in type(layer).__name__ for layer in model.layers)
    for name, fn in out.items():
        got = np.asarray(fn()[1] if name.startswith("engine") else fn()).reshape(reference.shape)
        close = np.isclose(got, reference, rtol=1e-3, atol=1e-4 * scale).all(axis=(1, 2))
        if (~close).sum() > (NEAR_TIES * len(x) if pooled else 0):
            raise RuntimeError(f"{name} disagrees with JAX at {(~close).sum()} of {len(x)} points: max |diff| "
                               f"{np.abs(got - reference).max():.3g}")
        if not close.all():
            print(f"  note: {name} differs from JAX at {(~close).sum()} of {len(x)} points (near-ties of a max pool)")
    return out


def naive_rate(model, n_in: int, seconds: float = 2.0, point: np.ndarray | None = None) -> float:
    """Jacobians/s of a fresh eager ``GradientTape().jacobian`` per point (at ``point``, default the origin), at
    least one call and at least ``seconds`` of them."""
    import tensorflow as tf

    point = np.zeros(n_in) if point is None else point
    point, calls, t0 = tf.constant(np.asarray(point, "float32")[None]), 0, time.perf_counter()
    while calls == 0 or time.perf_counter() - t0 < seconds:
        with tf.GradientTape() as tape:
            tape.watch(point)
            y = model(point)
        tape.jacobian(y, point).numpy()
        calls += 1
    return calls / (time.perf_counter() - t0)


def bench_shape(name: str, points: int, rounds: int, peak: float, bandwidth: float) -> dict:
    """Print the table of one shape, each rate also as % of the matmul ``peak`` [GFLOP/s] and of the memory
    ``bandwidth`` [GB/s] at the nominal cost; return its rates, the engine's and the best JAX and
    batch_jacobian contenders' names, the nominal FLOPs per Jacobian (None for the conv net) and the engine /
    naive loop ratio."""
    widths = None
    if name == "conv":
        model, n_in, n_out, macs = conv_net(), CONV_IN, CONV_FIELD**2, None
    elif name in FIELD_NETS:
        model = cnn_net() if name == "cnn" else deep_net()
        n_in, n_out = model.input_shape[-1], int(np.prod(model.output_shape[1:]))
        macs, widths = model_cost(model)
    else:
        n_in, hidden, n_out = SHAPES[name]
        model, macs = mlp(n_in, hidden, n_out), macs_per_point(n_in, hidden, n_out)
        widths = n_in + sum(hidden) + n_out
    forward = n_in <= n_out
    n = points if name in ("A", "C") else max(points // 8, 256)  # B and the conv nets cost ~10x more per point
    x = np.random.default_rng(0).normal(size=(n, n_in)).astype("float32")
    timers = {k: best_rate(fn, n) for k, fn in contenders(model, n_in, n_out, x, forward).items()}
    rates = dict.fromkeys(timers, 0.0)
    for _ in range(rounds):  # interleaved: every contender sees the same machine load
        for k, timer in timers.items():
            rates[k] = max(rates[k], timer())
    naive = "naive loop (eager tape.jacobian per point)"
    rates[naive] = naive_rate(model, n_in)
    engine_name = next(iter(rates))
    engine = rates[engine_name]
    best_jax = max((k for k in rates if k.startswith("JAX")), key=rates.get)
    best_bj = max((k for k in rates if k.startswith("batch_jacobian")), key=rates.get)
    # nominal cost, the same for every contender: the primal pass and one tangent pass per tangent
    tangents = n_in if forward else n_out
    flops = None if macs is None else 2 * macs * (1 + tangents)
    moved = None if widths is None else 4 * ((1 + tangents) * widths + n_in * n_out)
    print(f"\n{name}: {n_in} -> {n_out} ({'forward' if forward else 'reverse'}), {n} points, best of {rounds}"
          + ("" if flops is None else f"; {flops / 1e6:,.1f} MFLOP and {moved / 1e6:,.2f} MB per Jacobian"))
    print(f"  {'':<48} {'Jacobians/s':>12}  {'engine /':>9}" + ("" if flops is None else
                                                               f"  {'% peak':>7} {'% bandwidth':>11}"))
    for k, v in rates.items():
        line = f"  {k:<48} {v:>12,.0f}  {engine / v:>9,.2f}x"
        if flops is not None:
            line += f"  {100 * v * flops / 1e9 / peak:>6.1f}% {100 * v * moved / 1e9 / bandwidth:>10.1f}%"
        print(line)
    print(f"  engine / best JAX {engine / rates[best_jax]:.2f}x, engine / best batch_jacobian "
          f"{engine / rates[best_bj]:.2f}x" + ("" if flops is None else f"; engine {engine * flops / 1e9:,.0f} "
                                                                      f"GFLOP/s, {engine * moved / 1e9:,.2f} GB/s"))
    return {"rates": rates, "engine": engine_name, "jax": best_jax, "bj": best_bj, "flops": flops,
            "naive": engine / rates[naive]}


def verdict(value: float, target: float) -> str:
    return "met" if value >= target else "MISSED"


def report_targets(results: dict[str, dict], peak: float) -> None:
    """Each target of issue 15 met or missed, and whether it is reachable at all on this machine.

    The engine and JAX compute the same Jacobians with the same nominal FLOPs, so a speedup ``r`` over a JAX
    variant that runs at ``p`` % of the matmul peak needs ``r * p`` % of it: above 100 %, no implementation of
    the same FLOPs can reach the target on this machine.
    """
    print(f"\ntargets (issues 15 and 29), against the matmul peak {peak:,.0f} GFLOP/s and nominal FLOPs "
          "(2 x MACs x (1 + tangents) per Jacobian, the same for every contender):")
    for name, r in results.items():
        engine, jax_rate, target = r["rates"][r["engine"]], r["rates"][r["jax"]], SPEEDUP_TARGET[name]
        line = f"  {name}: engine / best JAX ({r['jax']}) {engine / jax_rate:.2f}x"
        if target is not None:
            line += f", target >= {target}x: {verdict(engine / jax_rate, target)}"
        print(line)
        if name in BATCH_JACOBIAN_TARGET:
            ratio, target_bj = engine / r["rates"][r["bj"]], BATCH_JACOBIAN_TARGET[name]
            print(f"     engine / best batch_jacobian ({r['bj']}) {ratio:.2f}x, target >= {target_bj}x: "
                  f"{verdict(ratio, target_bj)}")
        if r["flops"] is None:
            continue
        engine_pct, jax_pct = (100 * rate * r["flops"] / 1e9 / peak for rate in (engine, jax_rate))
        print(f"     % of peak: engine {engine_pct:.0f} %, best JAX {jax_pct:.0f} %", end="")
        if target is not None:
            need = target * jax_pct
            print(f"; {target}x that JAX needs {need:.0f} % of peak"
                  + (": unreachable with the same FLOPs" if need > 100 else ": within the peak"), end="")
        print()
        if name in PEAK_SHAPES:
            print(f"     engine >= {PEAK_TARGET:.0f} % of peak: {verdict(engine_pct, PEAK_TARGET)}")
        line = f"     engine / naive loop {r['naive']:,.0f}x"
        print(line + (f", target >= {NAIVE_TARGET:,.0f}x: {verdict(r['naive'], NAIVE_TARGET)}"
                      if name in NAIVE_SHAPES else ""))


def chunk_sweep(name: str, points: int, rounds: int) -> None:
    """Jacobians/s of the dense path for chunk sizes 64 .. 8192 (interleaved, best of ``rounds``)."""
    import sensitivity

    if name == "conv":
        model, n_in = conv_net(), CONV_IN
    elif name in FIELD_NETS:
        model = cnn_net() if name == "cnn" else deep_net()
        n_in = model.input_shape[-1]
    else:
        n_in, hidden, n_out = SHAPES[name]
        model = mlp(n_in, hidden, n_out)
    s = sensitivity.load_surrogate(model, input_names=[f"p{i}" for i in range(n_in)], input_units=["1"] * n_in)
    x = np.random.default_rng(0).normal(size=(points, n_in)).astype("float32")
    auto = sensitivity.compile_jacobian(s).chunk_size
    timers = {}
    smallest = 8 if name in FIELD_NETS else 64
    for chunk in (c for c in (8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192) if smallest <= c <= points):
        for jit in (False, True):
            jac = sensitivity.compile_jacobian(s, chunk_size=chunk, jit_compile=jit)
            jac(x)
            timers[(chunk, jit)] = best_rate(lambda jac=jac: jac(x), points)
    rates = dict.fromkeys(timers, 0.0)
    for _ in range(rounds):
        for k, timer in timers.items():
            rates[k] = max(rates[k], timer())
    print(f"\n{name}: dense path, {points} points; automatic chunk {auto}")
    for (chunk, jit), v in rates.items():
        print(f"  chunk {chunk:>5} {'XLA   ' if jit else 'no XLA'} {v:>12,.0f} Jacobians/s")


def step_profile(name: str, rounds: int) -> None:
    """Each step of the engine's reverse chain on ``name`` (cnn or deep) alone: primal pass and pullback under
    XLA on one chunk (best of ``rounds`` x 5 calls), beside the whole chain's call."""
    import tensorflow as tf

    import sensitivity
    from sensitivity.engine.layers import layer_steps
    from sensitivity.engine.reverse_path import conv_chain

    model = cnn_net() if name == "cnn" else deep_net()
    n_in = model.input_shape[-1]
    chain = conv_chain(layer_steps(model, "float32"), model, n_in, "float32")
    s = sensitivity.load_surrogate(model, input_names=[f"p{i}" for i in range(n_in)], input_units=["1"] * n_in)
    chunk, t = sensitivity.compile_jacobian(s).chunk_size, chain.n_out
    x = tf.constant(np.random.default_rng(0).normal(size=(chunk, n_in)).astype("float32"))

    def best_ms(fn: Callable, *args) -> float:
        fn(*args)
        times = []
        for _ in range(5 * rounds):
            t0 = time.perf_counter()
            tf.nest.map_structure(lambda r: None if r is None else r.numpy(), fn(*args))
            times.append(time.perf_counter() - t0)
        return 1e3 * min(times)

    whole = best_ms(tf.function(chain.reverse, jit_compile=True), x)
    rows, h = [], x
    for i, step in enumerate(chain.steps):
        primal = tf.function(step.primal, jit_compile=True)
        out, saved = primal(h)
        rows.append((i, step, "primal", best_ms(primal, h), 1, h.shape[1:], out.shape[1:]))
        if i < chain.tail:
            block = tf.random.normal([chunk, t, *step.out_shape])
            rows.append((i, step, "pullback", best_ms(tf.function(step.pullback, jit_compile=True), block, saved), t,
                         step.out_shape, step.in_shape))
        h = out
    total = sum(r[3] for r in rows)
    print(f"\n{name}: the engine's reverse chain, chunk {chunk}, {t} cotangents: whole call {whole:.2f} ms, "
          f"its steps alone {total:.2f} ms (XLA fuses across steps in the whole call)")
    print(f"  {'step':<34} {'pass':<9} {'form':<33} {'ms':>7} {'share':>6} {'GFLOP/s':>8} {'GB/s':>6}")
    for i, step, kind, ms, copies, shape_in, shape_out in rows:
        layer = model.get_layer(step.name.split("+")[0]) if step.name in [lay.name for lay in model.layers] \
            or "+" in step.name else None
        macs = (layer_macs(layer) if layer is not None else 0) * chunk * copies
        moved = 4 * chunk * copies * (int(np.prod(shape_in)) + int(np.prod(shape_out)))
        gflops = f"{2 * macs / ms / 1e6:8.1f}" if macs else f"{'':8}"
        print(f"  {i:>2} {step.name:<31} {kind:<9} {step.form if kind == 'pullback' else '':<33} {ms:7.2f} "
              f"{100 * ms / total:5.1f}% {gflops} {moved / ms / 1e6:6.1f}")


FIRST_SCRIPT = r"""
import os, sys, time
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0"); os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, {bench_dir!r})
from bench_jacobian import mlp, jax_function
import numpy as np, tensorflow as tf
model = mlp(8, [64, 64], 16)
x = np.random.default_rng(0).normal(size=(1000, 8)).astype("float32")
model(x[:2])
kind = {kind!r}
t0 = time.perf_counter()
if kind.startswith("engine"):
    import sensitivity
    s = sensitivity.load_surrogate(model, input_names=[f"p{{i}}" for i in range(8)], input_units=["1"] * 8,
                                   output={{"name": "y", "names": [f"y{{i}}" for i in range(16)]}})
    opts = {{"engine": {{}}, "engine XLA": {{"chunk_size": 500}}, "engine autodiff": {{"path": "autodiff"}}}}[kind]
    t0 = time.perf_counter()
    sensitivity.compile_jacobian(s, **opts)(x)
elif kind == "eager":
    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y = model(xt)
    tape.batch_jacobian(y, xt).numpy()
else:
    import jax, jax.numpy as jnp
    f = jax_function(model)
    t0 = time.perf_counter()
    np.asarray(jax.jit(jax.vmap(jax.jacfwd(f)))(jnp.asarray(x)))
print(time.perf_counter() - t0)
"""


def first_result() -> None:
    """Seconds from a loaded model to its first 1,000 Jacobians, each in a fresh process (median of 3)."""
    print("\ntime to first 1,000 Jacobians after load (8 -> [64]x2 tanh -> 16, fresh process, median of 3):")
    bench_dir = os.path.dirname(os.path.abspath(__file__))
    for kind, label in [("engine", "engine (dense path; 1,000 points < 1 chunk)"),
                        ("engine XLA", "engine, chunks of 500 (pays the XLA compile)"),
                        ("engine autodiff", "engine, autodiff path (XLA)"), ("eager", "eager batch_jacobian"),
                        ("jax", "JAX jit(vmap(jacfwd)) incl. compile")]:
        times = []
        for _ in range(3):
            out = subprocess.run([sys.executable, "-c", FIRST_SCRIPT.format(bench_dir=bench_dir, kind=kind)],
                                 capture_output=True, text=True, check=True)
            times.append(float(out.stdout.split()[-1]))
        median = sorted(times)[1]
        met = "met" if median <= FIRST_TARGET_S else "MISSED"
        print(f"  {label:<46} {median:6.2f} s" + (f"  (target <= {FIRST_TARGET_S:g} s: {met})" if kind == "engine" else ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shapes", nargs="*", default=["A", "B", "C", "conv", *FIELD_NETS],
                        choices=[*SHAPES, "conv", *FIELD_NETS])
    parser.add_argument("--points", type=int, default=8192, help="points per timed pass (B and conv: an eighth)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved passes; the best counts")
    parser.add_argument("--first", action="store_true", help="also time load-to-first-1,000-Jacobians")
    parser.add_argument("--chunks", action="store_true", help="sweep the dense path's chunk size instead")
    parser.add_argument("--steps", action="store_true", help="time each step of the reverse chain (cnn, deep)")
    args = parser.parse_args()
    import jax
    import tensorflow as tf

    print(f"TensorFlow {tf.__version__}, JAX {jax.__version__}, {os.cpu_count()} CPUs, "
          f"TF_ENABLE_ONEDNN_OPTS={os.environ['TF_ENABLE_ONEDNN_OPTS']}")
    if args.chunks:
        for name in args.shapes:
            chunk_sweep(name, args.points if name in ("A", "C") else args.points // 8, args.rounds)
        return
    if args.steps:
        for name in (n for n in args.shapes if n in FIELD_NETS):
            step_profile(name, args.rounds)
        return
    peak, bandwidth = matmul_peak(args.rounds), memory_bandwidth(args.rounds)
    print(f"matmul peak {peak[0]:,.0f} GFLOP/s ({peak[1]}), memory bandwidth {bandwidth[0]:,.1f} GB/s "
          f"({bandwidth[1]}); the tables' % use these")
    results = {name: bench_shape(name, args.points, args.rounds, peak[0], bandwidth[0]) for name in args.shapes}
    peak = max(peak, matmul_peak(args.rounds))  # before and after the shapes: the load may change
    bandwidth = max(bandwidth, memory_bandwidth(args.rounds))
    print(f"\nmatmul peak {peak[0]:,.0f} GFLOP/s ({peak[1]}), memory bandwidth {bandwidth[0]:,.1f} GB/s "
          f"({bandwidth[1]}), best of before and after")
    report_targets(results, peak[0])
    if args.first:
        first_result()


if __name__ == "__main__":
    main()
