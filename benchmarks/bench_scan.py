"""Jacobians/s of a time-stepping model written as ``tf.scan``: the engine's forward mode by double reverse against
reverse mode, JAX and the naive loop, measured side by side in one run.

The model is a hydrologist's two-store bucket model (5 inputs -> discharge at 3 stations over 365 days, 1,095
outputs), written as a user would: ``tf.scan`` over the days in TensorFlow, ``lax.scan`` in JAX, the same random
forcing. TensorFlow's ``ForwardAccumulator`` cannot carry tangents through ``tf.scan`` (its TensorList state has no
forward-mode rule), so before forward mode by double reverse the engine fell back to reverse mode: one reverse
pass per output, 1,095 of them against 5 inputs. Contenders, interleaved round by round (best of --rounds):
  engine            ``compile_jacobian(surrogate)`` (auto: forward mode by double reverse, XLA)
  engine reverse    ``compile_jacobian(surrogate, "reverse")`` (``batch_jacobian``, what auto fell back to)
  JAX jacfwd        ``jit(vmap(jacfwd(f)))`` of the ``lax.scan`` twin, numpy out (its ``jacrev``, the wrong
                    direction for 5 inputs and 1,095 outputs, ran at 9/s in a first run and is left out)
  naive loop        a fresh eager ``GradientTape().jacobian`` per point (one call takes seconds)
Every contender's Jacobian is checked against the engine's before timing.

Usage: python benchmarks/bench_scan.py [--points 1024] [--rounds 3]
(needs the ``bench`` extra for JAX: pip install -e ".[bench]")
"""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

from sensitivity.runtime.tf_import import import_tensorflow  # noqa: E402

import_tensorflow()

import numpy as np  # noqa: E402

from bench_jacobian import naive_rate  # noqa: E402

DAYS, STATIONS, N_IN = 365, 3, 5
#: A plausible parameter point (smax mm, k_fast day-1, k_slow day-1, split, pet_factor) and the spread around it.
CENTRE = np.array([180.0, 0.45, 0.03, 0.6, 1.05])


def forcing(seed: int = 2021) -> tuple[np.ndarray, np.ndarray]:
    """Daily rain [day, station] and potential evapotranspiration [day], in mm day-1."""
    rng = np.random.default_rng(seed)
    wet = rng.random((DAYS, STATIONS)) < 0.4
    rain = np.where(wet, rng.gamma(0.8, 9.0, (DAYS, STATIONS)), 0.0)
    return rain, 2.5 + 2.0 * np.sin(2 * np.pi * (np.arange(DAYS) - 100) / DAYS)


def step(xp, x, state, rain, pet):
    """One day of the bucket model for either array library ``xp`` (numpy-like: tf.math or jax.numpy)."""
    smax, k_fast, k_slow, split, pet_factor = (x[:, i : i + 1] for i in range(N_IN))
    s, g = state
    s = s + rain
    over = xp.maximum(s - smax, 0.0)
    s = s - over
    s = s - pet_factor * pet * s / smax
    drain = k_fast * s * s / smax
    s = s - drain
    slow = k_slow * g
    return (s, g + (1 - split) * drain - slow), over + split * drain + slow


def tf_model(rain: np.ndarray, pet: np.ndarray):
    import tensorflow as tf

    def response(x):
        def body(carry, forcing_t):
            state, q = step(tf.math, x, carry[:2], *forcing_t)
            return (*state, q)

        ones = tf.ones_like(x[:, :1]) * tf.ones([1, STATIONS], x.dtype)
        init = (0.5 * x[:, :1] * ones, 10.0 * ones, 0.0 * ones)
        q = tf.scan(body, (tf.constant(rain, x.dtype), tf.constant(pet, x.dtype)), initializer=init)[2]
        return tf.transpose(q, [1, 2, 0])
    return response


def jax_model(rain: np.ndarray, pet: np.ndarray):
    """The same model for one point, ``lax.scan`` over the days: [5] -> [3 x 365] flattened."""
    import jax
    import jax.numpy as jnp

    def f(x):
        x = x[None]

        def body(state, forcing_t):
            return step(jnp, x, state, *forcing_t)

        ones = jnp.ones((1, STATIONS), x.dtype)
        _, q = jax.lax.scan(body, (0.5 * x[:, :1] * ones, 10.0 * ones),
                            (jnp.asarray(rain, x.dtype), jnp.asarray(pet, x.dtype)))
        return q[:, 0, :].T.reshape(-1)
    return f


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import jax
    import jax.numpy as jnp

    import sensitivity

    rain, pet = forcing()
    response = tf_model(rain, pet)
    surrogate = sensitivity.load_surrogate(
        response, input_names=["smax", "k_fast", "k_slow", "split", "pet_factor"],
        input_units=["mm", "day-1", "day-1", "1", "1"],
        output={"name": "discharge", "units": "mm day-1", "dims": [
            {"name": "station", "values": ["upper", "middle", "lower"]},
            {"name": "day", "values": {"start": 0, "stop": DAYS}, "units": "day"}]})
    x = (CENTRE * np.random.default_rng(0).uniform(0.8, 1.2, (args.points, N_IN))).astype("float32")
    engine, reverse = sensitivity.compile_jacobian(surrogate), sensitivity.compile_jacobian(surrogate, "reverse")
    f, xj = jax_model(rain, pet), jnp.asarray(x)
    fwd = jax.jit(jax.vmap(jax.jacfwd(f)))
    contenders = {
        f"engine ({engine.mode}, {engine.forward_form}, chunk {engine.chunk_size}, XLA)": lambda: engine(x)[1],
        f"engine reverse (batch_jacobian, chunk {reverse.chunk_size})": lambda: reverse(x)[1],
        "JAX jit(vmap(jacfwd)) of lax.scan": lambda: np.asarray(fwd(xj)),
    }
    reference = engine(x)[1].reshape(args.points, -1, N_IN)
    scale = np.abs(reference).max()
    for name, fn in contenders.items():  # every contender computes the same Jacobian (and is warmed up here)
        got = np.asarray(fn()).reshape(reference.shape)
        if not np.allclose(got, reference, rtol=1e-3, atol=1e-4 * scale):
            raise RuntimeError(f"{name} disagrees with the engine: max |diff| {np.abs(got - reference).max():.3g}")
    rates = dict.fromkeys(contenders, 0.0)
    for _ in range(args.rounds):
        for name, fn in contenders.items():
            t0 = time.perf_counter()
            fn()
            rates[name] = max(rates[name], args.points / (time.perf_counter() - t0))
    rates["naive loop (eager tape.jacobian per point)"] = naive_rate(response, N_IN, point=CENTRE)
    first = next(iter(rates))
    print(f"\nbucket model as tf.scan: {N_IN} -> {STATIONS} x {DAYS} outputs, {args.points} points, float32, best of "
          f"{args.rounds}")
    print(f"  {'':<58} {'Jacobians/s':>12}  {'engine /':>9}")
    for name, rate in rates.items():
        print(f"  {name:<58} {rate:>12,.{0 if rate >= 10 else 3}f}  {rates[first] / rate:>8,.2f}x")


if __name__ == "__main__":
    main()
