"""A Lotka-Volterra predator-prey model as a TF function, and synthetic observations of it (issue 58's case).

``dH/dt = alpha H - beta H L``, ``dL/dt = delta H L - gamma L`` (hares ``H``, lynx ``L``, in thousands), from
fixed initial populations :data:`INITIAL` over days 0..30, integrated by the classical fourth-order Runge-Kutta
method with :data:`SUBSTEPS` steps a day (Hairer, Norsett & Wanner 1993, II.1): outputs ``[B, 2, 31]`` on the dims
``(species, day)``; day 0 is the initial condition itself. Four rates, each in ``day-1`` (``beta``, ``delta``
per thousand animals).

Hairer, E., Norsett, S. P. & Wanner, G. (1993). Solving Ordinary Differential Equations I, 2nd ed. Springer.
https://doi.org/10.1007/978-3-540-78862-1
"""
from __future__ import annotations

import numpy as np
import tensorflow as tf

from sensitivity.inputs.space import ParameterSpace

NAMES = ("alpha", "beta", "gamma", "delta")
#: The rates the synthetic observations are drawn at [day-1].
TRUE_RATES = np.array([0.55, 0.028, 0.80, 0.024])
#: Bounds of the rates [day-1]: a factor of about 4 on either side of the truth.
BOUNDS = np.array([[0.15, 2.0], [0.007, 0.12], [0.2, 3.0], [0.006, 0.1]])
INITIAL = (33.0, 6.2)  # hares, lynx at day 0 [thousand]
DAYS = np.arange(31)
SUBSTEPS = 8  # Runge-Kutta steps per day (h = 1/8 day: the rates times h stay below 0.4)


def space() -> ParameterSpace:
    """The four rates, uniform within :data:`BOUNDS`."""
    return ParameterSpace.from_records([{"name": name, "units": "day-1", "low": float(lo), "high": float(hi)}
                                        for name, (lo, hi) in zip(NAMES, BOUNDS)])


def _derivatives(x: tf.Tensor, state: tf.Tensor, sens: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """``d(H, L)/dt [B, 2]`` and the variational equation ``dS/dt = f_u S + f_x [B, 2, 4]`` of the sensitivities
    ``S = d(H, L)/dx``."""
    h, l = state[:, 0], state[:, 1]
    alpha, beta, gamma, delta = (x[:, j] for j in range(4))
    zero = tf.zeros_like(h)
    f = tf.stack([alpha * h - beta * h * l, delta * h * l - gamma * l], axis=1)
    f_u = tf.stack([tf.stack([alpha - beta * l, -beta * h], 1), tf.stack([delta * l, delta * h - gamma], 1)], 1)
    f_x = tf.stack([tf.stack([h, -h * l, zero, zero], 1), tf.stack([zero, zero, -l, h * l], 1)], 1)
    return f, tf.matmul(f_u, sens) + f_x


def solve(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Populations ``[B, 2, 31]`` of the rates ``x [B, 4]`` and their exact derivatives ``[B, 2, 31, 4]``: the
    same Runge-Kutta steps on the system and its variational equation, which is the derivative of the discrete
    solution itself (Hairer, Norsett & Wanner 1993, II.6)."""
    h = tf.constant(1.0 / SUBSTEPS, x.dtype)
    state0 = tf.broadcast_to(tf.constant(INITIAL, x.dtype), [tf.shape(x)[0], 2])
    sens0 = tf.zeros([tf.shape(x)[0], 2, 4], x.dtype)

    def step(carry, _):
        u, s = carry
        k1, m1 = _derivatives(x, u, s)
        k2, m2 = _derivatives(x, u + 0.5 * h * k1, s + 0.5 * h * m1)
        k3, m3 = _derivatives(x, u + 0.5 * h * k2, s + 0.5 * h * m2)
        k4, m4 = _derivatives(x, u + h * k3, s + h * m3)
        return u + h / 6.0 * (k1 + 2.0 * k2 + 2.0 * k3 + k4), s + h / 6.0 * (m1 + 2.0 * m2 + 2.0 * m3 + m4)

    steps = SUBSTEPS * (len(DAYS) - 1)
    u, s = tf.scan(step, tf.zeros(steps, x.dtype), initializer=(state0, sens0))  # [steps, B, 2], [steps, B, 2, 4]
    u, s = u[SUBSTEPS - 1::SUBSTEPS], s[SUBSTEPS - 1::SUBSTEPS]  # the end of every day
    values = tf.transpose(tf.concat([state0[None], u], axis=0), [1, 2, 0])
    jacobian = tf.transpose(tf.concat([sens0[None], s], axis=0), [1, 2, 0, 3])
    return values, jacobian


@tf.custom_gradient
def lotka_volterra(x: tf.Tensor):
    """Populations ``[B, 2, 31]`` (hares, lynx; days 0..30) of the rates ``x [B, 4]`` (alpha, beta, gamma, delta),
    its gradient from the exact Jacobian of :func:`solve` (no reverse pass through the time steps)."""
    values, jacobian = solve(x)

    def gradient(upstream):
        return tf.einsum("bsd,bsdp->bp", upstream, jacobian)

    return values, gradient


def value_and_jacobian(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Flat values ``[K, 62]`` and Jacobian ``[K, 62, 4]`` in float64 numpy, for :func:`calibrate`."""
    values, jacobian = _solve64(tf.constant(p, tf.float64))
    return values.numpy().reshape(len(p), -1), jacobian.numpy().reshape(len(p), -1, 4)


_solve64 = tf.function(solve, input_signature=[tf.TensorSpec([None, 4], tf.float64)])


def observations(seed: int = 1, relative: float = 0.1, floor: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """Noisy populations ``[2, 31]`` at :data:`TRUE_RATES` and their standard deviations ``relative * value +
    floor``; day 0 (the fixed initial populations) is observed without noise, as a census would start it."""
    clean = solve(tf.constant(TRUE_RATES[None], tf.float64))[0].numpy()[0]
    sigma = relative * clean + floor
    noisy = clean + sigma * np.random.default_rng(seed).standard_normal(clean.shape)
    noisy[:, 0] = clean[:, 0]
    return noisy, sigma


#: The model's output spec (a dict as ``model.output`` takes it): populations on ``(species, day)``.
OUTPUT = {"name": "population", "units": "1e3", "long_name": "animals",
          "dims": [{"name": "species", "values": ["hare", "lynx"]},
                   {"name": "day", "values": [float(d) for d in DAYS], "units": "day", "long_name": "time"}]}


def surrogate(dtype: str = "float64"):
    """:func:`lotka_volterra` loaded as the workflows load a model function, with :data:`OUTPUT`."""
    from sensitivity.surrogates.load import load_surrogate

    s = space()
    return load_surrogate(f"{__name__}:lotka_volterra", input_names=s.names, input_units=s.units, output=OUTPUT,
                          dtype=dtype)
