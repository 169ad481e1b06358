"""Fit one Keras MLP surrogate to simulator samples: the split, the network, the training loop.

The network learns normalised outputs from normalised inputs; the normalisation
(and log transforms of chosen inputs and of the outputs) lives in the
:class:`~sensitivity.surrogates.scaling.InputScaling` / :class:`~sensitivity.surrogates.scaling.OutputScaling`
layers of the saved model, together with the parameter and output names and
units, so ``load_surrogate(path)`` needs nothing else and autodiff returns
Jacobians in physical units.

Sobolev training (``TrainSettings.jacobian_weight > 0``; Czarnecki et al. 2017, arXiv:1706.04859) fits the
Jacobians too. The loss sees the network on its normalised scale, ``u = (t_x(x) - a_x) / s_x`` in,
``z = (t_y(y) - a_y) / s_y`` out (``t`` the identity, or ``log`` for log inputs / a log output), so the target
Jacobian is carried to that scale by the chain rule (:func:`normalised_jacobian`):
``dz_o/du_j = (dy_o/dx_j) * (dx_j/du_j) * (dt_y/dy)_o / s_y,o`` with ``dx_j/du_j = s_x,j`` (``x_j s_x,j`` for a log
input) and ``dt_y/dy = 1`` (``1 / y`` for a log output). The loss is then
``mean (z - z_target)^2 + jacobian_weight * mean (dz/du - dz/du_target)^2``, the Jacobian mean over samples,
outputs and parameters; the network's ``dz/du`` is one forward-mode pass per parameter (tangent ``dx/du_j e_j``).
"""
from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import keras
import numpy as np
import tensorflow as tf
from tensorflow.python.framework import config as tf_config

from sensitivity.errors import ConfigError, DataError
from sensitivity.outputs.spec import OutputSpec
from sensitivity.surrogates.scaling import InputScaling, OutputScaling
from sensitivity.settings import TrainSettings

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class Split:
    """Disjoint sample indices: ``train`` fits, ``validation`` stops early, ``test`` is reported."""

    train: np.ndarray
    validation: np.ndarray
    test: np.ndarray

    def labels(self, n: int) -> np.ndarray:
        """Per-sample subset code: 0 train, 1 validation, 2 test."""
        codes = np.zeros(n, dtype=np.int8)
        codes[self.validation], codes[self.test] = 1, 2
        return codes


@dataclass
class FitResult:
    """A trained model and how the training went.

    ``model`` maps physical inputs to physical outputs (scaling layers inside); ``history`` holds the
    per-epoch ``loss`` and ``val_loss`` (mean squared error of normalised outputs, plus ``jacobian_weight`` times
    that of the normalised Jacobians when Sobolev training) and ``learning_rate``; Sobolev training adds the
    Jacobian parts alone as ``jacobian_loss`` and ``val_jacobian_loss``.
    """

    model: Any
    history: dict[str, np.ndarray]
    best_epoch: int
    seconds: float
    settings: TrainSettings = field(repr=False)


def split_samples(n: int, validation_fraction: float, test_fraction: float, seed: int) -> Split:
    """Shuffle ``n`` sample indices with ``seed`` and cut off validation and test subsets."""
    for key, value in (("validation_fraction", validation_fraction), ("test_fraction", test_fraction)):
        if not 0 < value < 1:
            raise ConfigError(f"`{key}` must lie in (0, 1), got {value!r}")
    n_val, n_test = round(n * validation_fraction), round(n * test_fraction)
    if min(n_val, n_test) < 1 or n - n_val - n_test < 2:
        raise ConfigError(f"{n} samples are too few to split {validation_fraction:g} validation and "
                          f"{test_fraction:g} test (need at least 1 of each and 2 to train)")
    order = np.random.default_rng(seed).permutation(n)
    return Split(np.sort(order[n_val + n_test:]), np.sort(order[:n_val]), np.sort(order[n_val:n_val + n_test]))


def fit(x: np.ndarray, y: np.ndarray, split: Split, *, names: Sequence[str], units: Sequence[str],
        output: OutputSpec, settings: TrainSettings, seed: int, log_every: int | None = 100,
        jacobian: np.ndarray | None = None) -> FitResult:
    """Train an MLP surrogate of ``y = f(x)``, deterministically for a given ``seed`` on one machine.

    Parameters
    ----------
    x
        ``[N, n]`` parameter samples in physical units.
    y
        ``[N, *output.shape]`` simulator outputs in physical units.
    split
        Which samples train and which stop early (the test samples are not touched).
    names, units
        Parameter names and UDUNITS-2 units, stored in the model.
    output
        The output description, stored in the model.
    settings
        Architecture and optimiser.
    seed
        Seeds the weights and the batch order (``keras.utils.set_random_seed``); op determinism is
        switched on while the network trains, so the same data, seed and machine give the same weights.
    log_every
        Log one progress line every this many epochs (``None``: silent).
    jacobian
        ``[N, *output.shape, n]`` simulator Jacobians ``dy/dx`` in physical units, for Sobolev training
        (``settings.jacobian_weight > 0``, which needs them); only the training and validation rows are read.

    Returns
    -------
    FitResult
    """
    x, y = _check_samples(x, y, names, output, settings)
    sobolev = settings.jacobian_weight > 0
    if sobolev and jacobian is None:
        raise ConfigError("`jacobian_weight` > 0 needs the simulator's Jacobians of the samples (`jacobian`)")
    keras.utils.set_random_seed(seed)
    with deterministic_ops():
        z = _normalised_targets(y.reshape(len(y), -1), split.train, settings.log_output)
        model, core = build_network(x[split.train], z.offset, z.scale, names=names, units=units, output=output,
                                    settings=settings)
        optimizer = keras.optimizers.Adam(settings.learning_rate)
        optimizer.build(core.trainable_variables)
        x_train, z_train = (tf.constant(a[split.train], tf.float32) for a in (x, z.values))
        x_val, z_val = (tf.constant(a[split.validation], tf.float32) for a in (x, z.values))
        if sobolev:
            _, in_scale, log_mask = input_normalisation(x[split.train], names, settings.log_inputs)
            dxdu = tangent_scale(x, in_scale, log_mask)
            target = normalised_jacobian(_check_jacobian(jacobian, x, output, np.concatenate([split.train, split.validation])), x, y, in_scale=in_scale,
                                         log_mask=log_mask, out_scale=z.scale, log_output=settings.log_output)
            extra = {key: [tf.constant(a[rows], tf.float32) for a in (dxdu, target)]
                     for key, rows in (("train", split.train), ("validation", split.validation))}
            epoch_step = _sobolev_epoch_function(core, optimizer, settings.batch_size, settings.jacobian_weight)
        else:
            epoch_step = _epoch_function(core, optimizer, settings.batch_size)
        order = np.random.default_rng(seed)
        stopper = _Plateau(settings)
        history: dict[str, list[float]] = {"loss": [], "val_loss": [], "learning_rate": []}
        if sobolev:
            history.update(jacobian_loss=[], val_jacobian_loss=[])
        start = time.perf_counter()
        for epoch in range(1, settings.epochs + 1):
            permutation = tf.constant(order.permutation(len(split.train)), tf.int32)
            if sobolev:
                losses = [float(v) for v in epoch_step(x_train, z_train, *extra["train"], x_val, z_val,
                                                       *extra["validation"], permutation)]
                loss, val_loss = losses[0], losses[1]
                history["jacobian_loss"].append(losses[2])
                history["val_jacobian_loss"].append(losses[3])
            else:
                loss, val_loss = (float(v) for v in epoch_step(x_train, z_train, x_val, z_val, permutation))
            history["loss"].append(loss)
            history["val_loss"].append(val_loss)
            history["learning_rate"].append(float(optimizer.learning_rate.numpy()))
            if log_every and (epoch == 1 or epoch % log_every == 0):
                log.info("epoch %d/%d: loss %.3e, val_loss %.3e, learning rate %.1e", epoch, settings.epochs, loss,
                         val_loss, history["learning_rate"][-1])
            if stopper.update(val_loss, core, optimizer):
                break
        seconds = time.perf_counter() - start
        core.set_weights(stopper.best_weights)
        return FitResult(model, {k: np.asarray(v, float) for k, v in history.items()}, stopper.best_epoch, seconds,
                         settings)


@contextlib.contextmanager
def deterministic_ops():
    """Switch TensorFlow's op determinism on for the block and restore the previous state afterwards.

    Determinism must not outlive training: under it XLA refuses some gradients the Jacobian engine needs (the
    gradient of an overlapping max pool has no deterministic XLA kernel), so a process that trains and then
    differentiates would fail. TensorFlow exposes only ``enable_op_determinism`` publicly; the restore uses
    ``tensorflow.python.framework.config``, where both switches live.
    """
    was_enabled = tf_config.is_op_determinism_enabled()
    tf_config.enable_op_determinism()
    try:
        yield
    finally:
        if not was_enabled:
            tf_config.disable_op_determinism()


def _epoch_function(core: Any, optimizer: Any, batch_size: int) -> Callable:
    """One compiled epoch: Adam steps over the shuffled training batches, then the validation loss.

    The whole epoch is one ``tf.function`` call, so Python overhead is per epoch, not per batch.
    """

    @tf.function(reduce_retracing=True)
    def epoch_step(x: tf.Tensor, z: tf.Tensor, x_val: tf.Tensor, z_val: tf.Tensor, permutation: tf.Tensor):
        n = tf.shape(permutation)[0]
        total = tf.constant(0.0)
        for start in tf.range(0, n, batch_size):
            index = permutation[start : start + batch_size]
            xb, zb = tf.gather(x, index), tf.gather(z, index)
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(core(xb, training=True) - zb))
            grads = tape.gradient(loss, core.trainable_variables)
            optimizer.apply_gradients(zip(grads, core.trainable_variables))
            total += loss * tf.cast(tf.shape(index)[0], tf.float32)
        val_loss = tf.reduce_mean(tf.square(core(x_val, training=False) - z_val))
        return total / tf.cast(n, tf.float32), val_loss

    return epoch_step


def _sobolev_epoch_function(core: Any, optimizer: Any, batch_size: int, weight: float) -> Callable:
    """One compiled epoch of Sobolev training: Adam steps on value MSE + ``weight`` x normalised-Jacobian MSE.

    Returns ``(loss, val_loss, jacobian_loss, val_jacobian_loss)`` (training losses averaged over the batches).
    """
    weight = tf.constant(float(weight), tf.float32)

    def losses(x: tf.Tensor, z: tf.Tensor, dxdu: tf.Tensor, target: tf.Tensor, training: bool):
        z_pred, jac = _value_and_normalised_jacobian(core, x, dxdu, training)
        value_mse = tf.reduce_mean(tf.square(z_pred - z))
        jacobian_mse = tf.reduce_mean(tf.square(jac - target))
        return value_mse + weight * jacobian_mse, jacobian_mse

    @tf.function(reduce_retracing=True)
    def epoch_step(x, z, dxdu, target, x_val, z_val, dxdu_val, target_val, permutation):
        n = tf.shape(permutation)[0]
        total, total_jac = tf.constant(0.0), tf.constant(0.0)
        for start in tf.range(0, n, batch_size):
            index = permutation[start : start + batch_size]
            with tf.GradientTape() as tape:
                loss, jacobian_mse = losses(tf.gather(x, index), tf.gather(z, index), tf.gather(dxdu, index),
                                            tf.gather(target, index), True)
            grads = tape.gradient(loss, core.trainable_variables)
            optimizer.apply_gradients(zip(grads, core.trainable_variables))
            size = tf.cast(tf.shape(index)[0], tf.float32)
            total += loss * size
            total_jac += jacobian_mse * size
        val_loss, val_jac = losses(x_val, z_val, dxdu_val, target_val, False)
        count = tf.cast(n, tf.float32)
        return total / count, val_loss, total_jac / count, val_jac

    return epoch_step


def _value_and_normalised_jacobian(core: Any, x: tf.Tensor, dxdu: tf.Tensor, training: bool):
    """``core(x)`` ``[B, m]`` and ``dz/du`` ``[B, m, n]``: one forward-mode pass per parameter ``j`` of the
    points repeated ``n`` times, with the tangents ``dx/du_j e_j`` (so the derivative is in the normalised input)."""
    b, n = tf.shape(x)[0], x.shape[-1]
    eye = tf.eye(n, dtype=x.dtype)
    repeated = tf.tile(x, [n, 1])                                                   # [n B, n], block j
    tangents = tf.reshape(eye[:, None, :] * dxdu[None, :, :], [-1, n])              # block j: dx/du_j e_j
    with tf.autodiff.ForwardAccumulator(repeated, tangents) as accumulator:
        z = core(repeated, training=training)
    jvp = accumulator.jvp(z)                                                        # [n B, m]
    jac = tf.transpose(tf.reshape(jvp, [n, b, -1]), [1, 2, 0])                     # [B, m, n]
    return z[:b], jac


def input_normalisation(x_train: np.ndarray, names: Sequence[str],
                        log_inputs: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(offset, scale, log_mask)`` ``[n]`` of the network's inputs ``u = (t(x) - offset) / scale``: the training
    samples' mean and standard deviation of ``t(x)`` (``log x`` where ``log_mask``; a constant input gets scale 1)."""
    log_mask = np.array([name in log_inputs for name in names])
    t = np.where(log_mask, np.log(np.where(log_mask, x_train, 1.0)), x_train)
    scale = t.std(axis=0)
    return t.mean(axis=0), np.where(scale > 0, scale, 1.0), log_mask


def tangent_scale(x: np.ndarray, in_scale: np.ndarray, log_mask: np.ndarray) -> np.ndarray:
    """``dx/du`` ``[N, n]`` at the points ``x``: ``scale_j``, or ``x_j scale_j`` for a log input."""
    x = np.asarray(x, float)
    return np.where(log_mask, x, 1.0) * np.asarray(in_scale, float)


def normalised_jacobian(jacobian: np.ndarray, x: np.ndarray, y: np.ndarray, *, in_scale: np.ndarray,
                        log_mask: np.ndarray, out_scale: np.ndarray, log_output: bool) -> np.ndarray:
    """Physical Jacobians ``dy/dx`` ``[N, *out, n]`` -> the network's ``dz/du`` ``[N, m, n]`` (outputs flattened).

    With ``u_j = (t_x(x_j) - a_j) / s_x,j`` and ``z_o = (t_y(y_o) - b_o) / s_y,o`` (``t`` the identity or ``log``),
    the chain rule gives ``dz_o/du_j = dy_o/dx_j * dx_j/du_j * dt_y/dy_o / s_y,o`` where ``dx_j/du_j = s_x,j``
    (``x_j s_x,j`` for a log input) and ``dt_y/dy = 1`` (``1 / y_o`` for a log output). The offsets drop out.

    Parameters
    ----------
    jacobian
        ``[N, *out, n]`` in output units per parameter unit.
    x, y
        ``[N, n]`` points and ``[N, *out]`` outputs there (physical units).
    in_scale, log_mask
        ``[n]`` input scales and log flags (:func:`input_normalisation`).
    out_scale, log_output
        ``[m]`` output scales (of ``t_y(y)``, flattened) and whether the network learns ``log y``.
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    n = x.shape[1]
    jac = np.asarray(jacobian, float).reshape(len(x), -1, n)  # [N, m, n]
    dtdy = 1.0 / y.reshape(len(y), -1) if log_output else np.ones((len(y), jac.shape[1]))
    return jac * tangent_scale(x, in_scale, log_mask)[:, None, :] * (dtdy / np.asarray(out_scale, float))[:, :, None]


def _check_jacobian(jacobian: np.ndarray, x: np.ndarray, output: OutputSpec, rows: np.ndarray) -> np.ndarray:
    """The Jacobians as float64, refused in one line unless ``[N, *out, n]`` and finite on ``rows`` (those read)."""
    jac = np.asarray(jacobian, dtype=float)
    expected = [len(x), *output.shape, x.shape[1]]
    if list(jac.shape) != expected:
        raise DataError(f"`simulator_jacobian` must give [N, *out, n] = {expected} (sample, "
                        f"{', '.join(output.dim_names)}, parameter), got {list(jac.shape)}")
    bad = ~np.isfinite(jac[rows])
    if bad.any():
        raise DataError(f"`simulator_jacobian` holds {int(bad.sum())} non-finite value(s), first at sample "
                        f"{int(rows[np.argwhere(bad)[0][0]])}")
    return np.where(np.isfinite(jac), jac, 0.0)  # rows not read (the test samples) may be NaN


class _Plateau:
    """Early stopping with best-weight restore, and learning-rate halving on a stalled validation loss.

    Stops after ``patience`` epochs without improvement; halves the learning rate after ``patience // 4``
    (down to ``learning_rate / 1000``).
    """

    def __init__(self, settings: TrainSettings) -> None:
        self.patience, self.decay_patience = settings.patience, max(1, settings.patience // 4)
        self.min_rate = settings.learning_rate / 1000
        self.best, self.best_epoch, self.best_weights = np.inf, 0, None
        self.epoch = self.since_decay = 0

    def update(self, val_loss: float, core: Any, optimizer: Any) -> bool:
        """Record one epoch; True when training should stop."""
        self.epoch += 1
        if val_loss < self.best:
            self.best, self.best_epoch, self.best_weights = val_loss, self.epoch, core.get_weights()
            self.since_decay = 0
            return False
        self.since_decay += 1
        if self.since_decay >= self.decay_patience:
            rate = float(optimizer.learning_rate.numpy())
            optimizer.learning_rate.assign(max(self.min_rate, 0.5 * rate))
            self.since_decay = 0
        return self.epoch - self.best_epoch >= self.patience


@dataclass(frozen=True)
class _Targets:
    values: np.ndarray
    offset: np.ndarray
    scale: np.ndarray


def _normalised_targets(y: np.ndarray, train: np.ndarray, log_output: bool) -> _Targets:
    """Standardise (log-)outputs with the training samples' mean and standard deviation per output."""
    t = np.log(y) if log_output else y
    offset = t[train].mean(axis=0)
    scale = t[train].std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)  # a constant output: any scale is exact
    return _Targets((t - offset) / scale, offset, scale)


def build_network(x_train: np.ndarray, out_offset: np.ndarray, out_scale: np.ndarray, *, names: Sequence[str],
                  units: Sequence[str], output: OutputSpec, settings: TrainSettings) -> tuple[Any, Any]:
    """The surrogate and its trainable core, sharing their layers.

    Returns ``(model, core)``: ``model`` maps physical inputs to physical outputs
    (``InputScaling [-> convolutional trunk] -> Dense... -> OutputScaling [-> Reshape]``, the trunk of
    ``settings.conv``: :func:`sensitivity.training.conv.conv_trunk`); ``core`` stops before ``OutputScaling`` and is
    what the loss sees (normalised outputs).
    """
    in_offset, in_scale, log_mask = input_normalisation(x_train, names, settings.log_inputs)
    inputs = keras.Input((len(names),), name="parameters")
    h = InputScaling(in_offset, in_scale, log_mask, names=names, units=units, name="input_scaling")(inputs)
    if settings.conv is not None:
        from sensitivity.training.conv import conv_trunk

        h = conv_trunk(h, names, settings.conv, settings.activation)
    for k, width in enumerate(settings.hidden):
        h = keras.layers.Dense(width, activation=settings.activation, name=f"hidden_{k}")(h)
    z = keras.layers.Dense(output.size, name="normalised_output")(h)
    y = OutputScaling(out_offset, out_scale, settings.log_output, output_spec=output.to_dict(),
                      name="output_scaling")(z)
    if len(output.shape) > 1:
        y = keras.layers.Reshape(output.shape, name="output_shape")(y)
    return keras.Model(inputs, y, name="surrogate"), keras.Model(inputs, z, name="core")


def _check_samples(x: np.ndarray, y: np.ndarray, names: Sequence[str], output: OutputSpec,
                   settings: TrainSettings) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.ndim != 2 or x.shape[1] != len(names):
        raise DataError(f"samples `x` must have shape [N, {len(names)}] ({', '.join(names)}), got {list(x.shape)}")
    if y.shape != (len(x), *output.shape):
        raise DataError(f"samples `y` must have shape {[len(x), *output.shape]} (sample, "
                        f"{', '.join(output.dim_names)}), got {list(y.shape)}")
    for what, array in (("x", x), ("y", y)):
        bad = ~np.isfinite(array)
        if bad.any():
            raise DataError(f"samples `{what}` hold {int(bad.sum())} non-finite value(s), first at sample "
                            f"{int(np.argwhere(bad)[0][0])}")
    unknown = [n for n in settings.log_inputs if n not in names]
    if unknown:
        raise ConfigError(f"`log_inputs` names unknown parameter(s) {unknown}; the parameters are {list(names)}")
    for j, name in enumerate(names):
        if name in settings.log_inputs and np.any(x[:, j] <= 0):
            raise DataError(f"`log_inputs` needs {name!r} > 0, got {x[:, j].min()} at sample {int(x[:, j].argmin())}")
    if settings.log_output and np.any(y <= 0):
        i = int(np.argwhere(y <= 0)[0][0])
        raise DataError(f"`log_output` needs every output > 0, got {y.min()} (first at sample {i})")
    return x, y
