"""Fit one Keras MLP surrogate to simulator samples: the split, the network, the training loop.

The network learns normalised outputs from normalised inputs; the normalisation
(and log transforms of chosen inputs and of the outputs) lives in the
:class:`~sensitivity.scaling.InputScaling` / :class:`~sensitivity.scaling.OutputScaling`
layers of the saved model, together with the parameter and output names and
units, so ``load_surrogate(path)`` needs nothing else and autodiff returns
Jacobians in physical units.
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
from sensitivity.outputs import OutputSpec
from sensitivity.scaling import InputScaling, OutputScaling
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
    per-epoch ``loss`` and ``val_loss`` (mean squared error of normalised outputs) and ``learning_rate``.
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
        output: OutputSpec, settings: TrainSettings, seed: int, log_every: int | None = 100) -> FitResult:
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

    Returns
    -------
    FitResult
    """
    x, y = _check_samples(x, y, names, output, settings)
    keras.utils.set_random_seed(seed)
    with deterministic_ops():
        z = _normalised_targets(y.reshape(len(y), -1), split.train, settings.log_output)
        model, core = build_network(x[split.train], z.offset, z.scale, names=names, units=units, output=output,
                                    settings=settings)
        optimizer = keras.optimizers.Adam(settings.learning_rate)
        optimizer.build(core.trainable_variables)
        epoch_step = _epoch_function(core, optimizer, settings.batch_size)
        x_train, z_train = (tf.constant(a[split.train], tf.float32) for a in (x, z.values))
        x_val, z_val = (tf.constant(a[split.validation], tf.float32) for a in (x, z.values))
        order = np.random.default_rng(seed)
        stopper = _Plateau(settings)
        history: dict[str, list[float]] = {"loss": [], "val_loss": [], "learning_rate": []}
        start = time.perf_counter()
        for epoch in range(1, settings.epochs + 1):
            permutation = tf.constant(order.permutation(len(split.train)), tf.int32)
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
    (``InputScaling -> Dense... -> OutputScaling [-> Reshape]``); ``core`` stops before
    ``OutputScaling`` and is what the loss sees (normalised outputs).
    """
    log_mask = np.array([name in settings.log_inputs for name in names])
    t = np.where(log_mask, np.log(np.where(log_mask, x_train, 1.0)), x_train)
    in_scale = t.std(axis=0)
    inputs = keras.Input((len(names),), name="parameters")
    h = InputScaling(t.mean(axis=0), np.where(in_scale > 0, in_scale, 1.0), log_mask, names=names, units=units,
                     name="input_scaling")(inputs)
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
