"""Fit a Keras MLP surrogate to simulator samples, and judge its values AND its derivatives.

The network learns normalised outputs from normalised inputs; the normalisation
(and log transforms of chosen inputs and of the outputs) lives in the
:class:`~sensitivity.scaling.InputScaling` / :class:`~sensitivity.scaling.OutputScaling`
layers of the saved model, together with the parameter and output names and
units, so ``load_surrogate(path)`` needs nothing else and autodiff returns
Jacobians in physical units.

A surrogate that matches values can still have wrong slopes, and every Jacobian
analysis inherits them. :func:`derivative_errors` therefore compares the
surrogate's Jacobians with float64 central finite differences of the simulator
at held-out points, in the unit-cube coordinates of the design (``dx/du`` is the
bound width, or ``x log(high/low)`` for log-scaled parameters), so the error
measure does not depend on the parameters' units.

References
----------
Czarnecki, W. M. et al. (2017), Sobolev training for neural networks, arXiv:1706.04859
(value fit does not imply derivative fit).
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
import xarray as xr
from tensorflow.python.framework import config as tf_config

from sensitivity.output_axes import own_coords
from sensitivity.errors import ConfigError, DataError
from sensitivity.labels import parameter_coords, units_attrs
from sensitivity.outputs import OutputSpec
from sensitivity.scaling import InputScaling, OutputScaling
from sensitivity.settings import Thresholds, TrainSettings
from sensitivity.space import ParameterSpace

log = logging.getLogger(__name__)

#: Split labels stored in the ``subset`` variable (CF flag values 0, 1, 2).
SUBSETS = ("train", "validation", "test")


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


# ----------------------------------------------------------------------------- validation


@dataclass(frozen=True)
class ValueErrors:
    """Per-output value errors over a set of samples, in output units (``r2`` dimensionless)."""

    rmse: np.ndarray
    max_error: np.ndarray
    r2: np.ndarray


def value_errors(y_true: np.ndarray, y_pred: np.ndarray) -> ValueErrors:
    """Root-mean-square error, maximum absolute error and coefficient of determination per output.

    ``r2 = 1 - sum (y - y_hat)^2 / sum (y - mean y)^2`` over the samples (NaN for a constant output).
    Arrays are ``[K, *out]``; results ``[*out]``.
    """
    y_true, y_pred = np.asarray(y_true, float), np.asarray(y_pred, float)
    if y_true.shape != y_pred.shape or y_true.ndim < 2:
        raise DataError(f"`y_true` {list(y_true.shape)} and `y_pred` {list(y_pred.shape)} must have one shape [K, ...]")
    residual = y_pred - y_true
    total = ((y_true - y_true.mean(axis=0)) ** 2).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        r2 = np.where(total > 0, 1.0 - (residual**2).sum(axis=0) / total, np.nan)
    return ValueErrors(np.sqrt((residual**2).mean(axis=0)), np.abs(residual).max(axis=0), r2)


def unit_cube_scale(space: ParameterSpace, points: np.ndarray) -> np.ndarray:
    """``dx/du`` at ``points`` for the design's unit-cube coordinates ``u``: ``[K, n]``.

    The bound width for linear parameters and ``x log(high / low)`` for ``scale="log"`` ones,
    i.e. the derivative of :func:`sensitivity.grids.to_bounds`.
    """
    x = np.asarray(points, float)
    low, high = space.bounds.T
    is_log = np.array([p.scale == "log" for p in space.parameters])
    return np.where(is_log, x * np.log(np.where(is_log, high, 1.0) / np.where(is_log, low, 1.0)), high - low)


def central_differences(simulate: Callable[[np.ndarray], np.ndarray], points: np.ndarray,
                        steps: np.ndarray) -> np.ndarray:
    """Float64 central finite-difference Jacobians ``(f(x + h e_j) - f(x - h e_j)) / 2h``.

    Parameters
    ----------
    simulate
        Batched model ``[M, n] -> [M, *out]``; called once on all ``2 K n`` shifted points.
    points
        ``[K, n]`` points.
    steps
        ``[K, n]`` steps ``h`` in parameter units (> 0).

    Returns
    -------
    numpy.ndarray
        ``[K, *out, n]`` Jacobians; the error is ``O(h^2)`` plus the model's noise divided by ``h``.
    """
    x = np.asarray(points, float)
    h = np.broadcast_to(np.asarray(steps, float), x.shape)
    if np.any(~(h > 0)):
        raise ConfigError(f"finite-difference `steps` must be > 0, got min {h.min()}")
    k, n = x.shape
    shifts = h[:, :, None] * np.eye(n)  # [K, n, n]: row j shifts parameter j
    shifted = np.concatenate([x[:, None] + shifts, x[:, None] - shifts], axis=1).reshape(-1, n)
    f = np.asarray(simulate(shifted), float)
    out_shape = f.shape[1:]
    f = f.reshape(k, 2, n, -1)
    jac = (f[:, 0] - f[:, 1]) / (2.0 * h[:, :, None])  # [K, n, m]
    return np.moveaxis(jac, 1, -1).reshape(k, *out_shape, n)


@dataclass(frozen=True)
class DerivativeErrors:
    """Relative Jacobian errors in unit-cube coordinates.

    ``per_point [K]``: ``||J - J_ref||_F / ||J_ref||_F`` at each point; ``per_column [K, n]``: the same
    per parameter column; ``per_parameter [n]``: per column over all points together.
    """

    per_point: np.ndarray
    per_column: np.ndarray
    per_parameter: np.ndarray


def derivative_errors(jacobian: np.ndarray, reference: np.ndarray, scale: np.ndarray) -> DerivativeErrors:
    """Compare Jacobians ``[K, *out, n]`` with reference ones after scaling column ``j`` by ``scale[:, j]``.

    Scaling by ``dx/du`` (see :func:`unit_cube_scale`) makes the Frobenius norm independent of the
    parameters' units.
    """
    jac, ref = np.asarray(jacobian, float), np.asarray(reference, float)
    if jac.shape != ref.shape:
        raise DataError(f"`jacobian` {list(jac.shape)} and `reference` {list(ref.shape)} must have one shape")
    k, n = jac.shape[0], jac.shape[-1]
    s = np.asarray(scale, float).reshape(k, 1, n)
    diff, ref = (jac - ref).reshape(k, -1, n) * s, ref.reshape(k, -1, n) * s
    col_diff, col_ref = (diff**2).sum(axis=1), (ref**2).sum(axis=1)  # [K, n]
    with np.errstate(divide="ignore", invalid="ignore"):
        return DerivativeErrors(
            per_point=np.sqrt(col_diff.sum(axis=1) / col_ref.sum(axis=1)),
            per_column=np.sqrt(col_diff / col_ref),
            per_parameter=np.sqrt(col_diff.sum(axis=0) / col_ref.sum(axis=0)),
        )


def fidelity_warnings(values: ValueErrors, derivatives: DerivativeErrors | None, names: Sequence[str],
                      thresholds: Thresholds = Thresholds()) -> list[str]:
    """One-line warnings about a poor fit; the derivative warning says so when the values look fine."""
    messages = []
    r2_min = float(np.nanmin(values.r2))
    if r2_min < thresholds.r2:
        messages.append(f"values fit poorly: lowest test R^2 {r2_min:.4f} < {thresholds.r2}")
    if derivatives is not None:
        median = float(np.nanmedian(derivatives.per_point))
        if median > thresholds.jacobian:
            worst = int(np.nanargmax(derivatives.per_parameter))
            although = " although the values fit well" if r2_min >= thresholds.r2 else ""
            messages.append(
                f"derivatives are poor{although}: median relative Jacobian error {median:.3f} > {thresholds.jacobian} "
                f"(worst parameter {names[worst]!r}: {derivatives.per_parameter[worst]:.3f}); every Jacobian-based "
                f"analysis inherits this error — train on more samples, a smooth activation or a smaller learning rate"
            )
    return messages


def report_dataset(x: np.ndarray, y: np.ndarray, split: Split, *, names: Sequence[str], units: Sequence[str],
                   output: OutputSpec, values: ValueErrors, history: dict[str, np.ndarray],
                   derivatives: DerivativeErrors | None = None, check_samples: np.ndarray | None = None,
                   parameter_long_names: Sequence[str] | None = None) -> xr.Dataset:
    """The training samples and the validation report as one labeled dataset.

    Variables: ``x(sample, parameter)``, ``<output.name>(sample, *out)``, ``subset(sample)``,
    ``rmse``/``max_error``/``r2`` over the test samples ``(*out)``, the training curves over ``epoch``
    and, when derivatives were checked, ``jacobian_error(check)``, ``jacobian_column_error(check, parameter)``
    and ``jacobian_parameter_error(parameter)`` with ``check_sample(check)`` the samples checked.
    """
    out_dims = list(output.dim_names)
    unit_attrs = units_attrs(output.units, "output_units")
    n_epochs = len(history["loss"])
    coords: dict[str, Any] = {
        "sample": xr.Variable("sample", np.arange(len(x), dtype=np.int32), {"long_name": "sample index", "units": "1"}),
        "epoch": xr.Variable("epoch", np.arange(1, n_epochs + 1, dtype=np.int32), {"long_name": "training epoch",
                                                                                   "units": "1"}),
        **parameter_coords(names, units),
        **own_coords(output),
    }
    if parameter_long_names:
        coords["parameter_long_name"] = xr.Variable("parameter", np.asarray(parameter_long_names, dtype=object),
                                                    {"long_name": "parameter description"})
    data: dict[str, Any] = {
        "x": (("sample", "parameter"), np.asarray(x, float), {"long_name": "parameter value of the sample",
                                                              **units_attrs(units, "parameter_units")}),
        output.name: (("sample", *out_dims), np.asarray(y, float), {"long_name": f"simulated {output.long_name}",
                                                                   **unit_attrs}),
        "subset": ("sample", split.labels(len(x)), {"long_name": "use of the sample in training", "units": "1",
                                                    "flag_values": np.arange(3, dtype=np.int8),
                                                    "flag_meanings": " ".join(SUBSETS)}),
        "rmse": (out_dims, values.rmse, {"long_name": "root-mean-square error of the surrogate on the test samples",
                                         **unit_attrs}),
        "max_error": (out_dims, values.max_error, {"long_name": "largest absolute error on the test samples",
                                                   **unit_attrs}),
        "r2": (out_dims, values.r2, {"long_name": "coefficient of determination on the test samples", "units": "1"}),
    }
    for key, long_name in (("loss", "training loss (mean squared error of normalised outputs)"),
                           ("val_loss", "validation loss (mean squared error of normalised outputs)"),
                           ("learning_rate", "learning rate")):
        if key in history:
            data[key] = ("epoch", history[key], {"long_name": long_name, "units": "1"})
    if derivatives is not None:
        coords["check"] = xr.Variable("check", np.arange(len(derivatives.per_point), dtype=np.int32),
                                      {"long_name": "index of a derivative check point", "units": "1"})
        note = "relative Frobenius error of the surrogate Jacobian against float64 central differences of the simulator"
        data.update(
            check_sample=("check", np.asarray(check_samples, np.int32), {"long_name": "sample checked", "units": "1"}),
            jacobian_error=("check", derivatives.per_point, {"long_name": note, "units": "1"}),
            jacobian_column_error=(("check", "parameter"), derivatives.per_column,
                                   {"long_name": f"{note}, per parameter", "units": "1"}),
            jacobian_parameter_error=("parameter", derivatives.per_parameter,
                                      {"long_name": f"{note}, per parameter over all check points", "units": "1"}),
        )
    return xr.Dataset(data, coords=coords)


def summary_lines(values: ValueErrors, derivatives: DerivativeErrors | None, names: Sequence[str]) -> list[str]:
    """A short human-readable validation report (one line each)."""
    lines = [f"test values: R^2 min {np.nanmin(values.r2):.5f}, median {np.nanmedian(values.r2):.5f}; "
             f"RMSE max {np.nanmax(values.rmse):.4g}; largest error {np.nanmax(values.max_error):.4g}"]
    if derivatives is not None:
        p = derivatives.per_point
        lines.append(f"test Jacobians vs finite differences of the simulator: relative error median "
                     f"{np.nanmedian(p):.4f}, 90th percentile {np.nanpercentile(p, 90):.4f}, max {np.nanmax(p):.4f}")
        lines.append("per parameter: " + ", ".join(f"{n} {e:.4f}" for n, e in zip(names, derivatives.per_parameter)))
    return lines
