"""Networks in jax.numpy from a list of layers, one point at a time: the peer's side of the Jacobian benchmarks.

A network is a list of ``(kind, params)`` layers, applied in order to one point (channels last):

  ("dense", (kernel, bias, activation))         ``activation(h @ kernel + bias)``
  ("conv2d", (kernel, bias, padding, activation)) a stride-1 2-D convolution, kernel HWIO, padding VALID or SAME
  ("max_pool", p)                               non-overlapping p x p max pooling (rows and columns cut to p's multiple)
  ("upsample", p)                               nearest-neighbour p x p upsampling
  ("global_average", None)                      the mean over the spatial axes
  ("batch_norm", (scale, shift))                inference batch normalisation, ``h * scale + shift``
  ("activation", name)                          one of :data:`ACTIVATIONS`
  ("reshape", shape)                            the point reshaped (``(-1,)`` flattens)

Only JAX and numpy are imported, so ``gpu_peer.py`` runs on a machine without TensorFlow;
``bench_jacobian.py`` translates a Keras model into the same list, so the two scripts time the same code.
"""
from __future__ import annotations

from typing import Callable

import numpy as np


def activations() -> dict[str, Callable]:
    """The activations by Keras name."""
    import jax
    import jax.numpy as jnp

    return {"tanh": jnp.tanh, "swish": jax.nn.silu, "silu": jax.nn.silu, "relu": jax.nn.relu,
            "sigmoid": jax.nn.sigmoid, "softplus": jax.nn.softplus, "linear": lambda h: h,
            "gelu": lambda h: jax.nn.gelu(h, approximate=False)}


def layer(kind: str, params) -> Callable:
    """One layer of the list as a function of one point's block (see the module docstring).

    Max pooling is a reshape and a max, whose reverse mode is an argmax: in one scratch run on the cnn and deep
    shapes of ``bench_jacobian.py``, JAX ran 1.6-2.8x faster so than with ``lax.reduce_window`` (whose reverse
    mode is XLA's select-and-scatter), so the bar is the faster one.
    """
    import jax
    import jax.numpy as jnp

    act = activations()
    if kind == "dense":
        kernel, bias, name = params
        return lambda h: act[name](h @ kernel + bias)
    if kind == "conv2d":
        kernel, bias, padding, name = params
        return lambda h: act[name](jax.lax.conv_general_dilated(
            h[None], kernel, (1, 1), padding, dimension_numbers=("NHWC", "HWIO", "NHWC"))[0] + bias)
    if kind == "max_pool":
        def pool(h, p=params):
            rows, cols, c = h.shape[0] // p, h.shape[1] // p, h.shape[2]
            return h[: rows * p, : cols * p].reshape(rows, p, cols, p, c).max(axis=(1, 3))
        return pool
    if kind == "upsample":
        return lambda h: jnp.repeat(jnp.repeat(h, params, axis=0), params, axis=1)
    if kind == "global_average":
        return lambda h: h.mean(axis=(0, 1))
    if kind == "batch_norm":
        scale, shift = params
        return lambda h: h * scale + shift
    if kind == "activation":
        return act[params]
    if kind == "reshape":
        return lambda h: h.reshape(params)
    raise ValueError(f"no JAX layer of kind {kind!r}")


def function(network: list[tuple[str, object]]) -> Callable:
    """The network as a function of one point, returning its output flattened."""
    ops = [layer(kind, params) for kind, params in network]

    def f(x):
        for op in ops:
            x = op(x)
        return x.reshape(-1)

    return f


def macs(network: list[tuple[str, object]], n_in: int) -> int:
    """Multiply-accumulates per point of the network's Dense and convolution layers (per output number: the
    kernel's fan-in), from the shapes the layers produce."""
    import jax
    import jax.numpy as jnp

    total, shape = 0, jax.ShapeDtypeStruct((n_in,), jnp.float32)
    for kind, params in network:
        shape = jax.eval_shape(layer(kind, params), shape)
        if kind in ("dense", "conv2d"):
            total += int(np.prod(shape.shape)) * int(np.prod(params[0].shape[:-1]))
    return total
