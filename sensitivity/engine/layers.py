"""Layer reading: a Keras model as the named steps of a chain, for the engine's layer paths.

:func:`layer_steps` reads a Keras model whose layers are only ``InputLayer``, ``Dense``, ``Conv1D/2D/3D``, the linear
reshaping and pooling layers (:data:`LINEAR_LAYERS`), max pooling, elementwise activations, batch normalisation, the
scaling layers (this package's, Keras' ``Rescaling`` and ``Normalization``), inference no-ops (dropout, noise) and
nested Keras models of such layers, applied in sequence, as a list of steps (:mod:`sensitivity.engine.steps`):
:class:`AffineStep` (a Dense layer, ``h W + b``), :class:`LinearStep` (a linear map of each point plus a bias: a
convolution, a reshape...), :class:`ElementwiseStep` (an activation, batch normalisation in inference, a scaling) and
:class:`MaxPoolStep`. A config's scaling around the model (``model.scaling``) adds its steps before and after; the
diagonal affine maps are then folded into the Dense kernels they touch (:mod:`sensitivity.engine.affine_fold`). The
dense path (:mod:`sensitivity.engine.dense_path`), the reverse path (:mod:`sensitivity.engine.reverse_path`) and the
member path (:mod:`sensitivity.engine.member_path`) build their chains from them.
"""
from __future__ import annotations

import functools
import itertools
from typing import Any, Callable

import numpy as np
import tensorflow as tf

from sensitivity.engine.affine_fold import fold_affine, input_steps, output_steps, scaling_layer_steps
from sensitivity.engine.steps import AffineStep, ElementwiseStep, LinearStep, MaxPoolStep, Step, dense_step

#: Keras layers the fast path understands: elementwise ones (batch normalisation in inference is a per-channel
#: scale and shift), and no-ops (in inference).
_ELEMENTWISE = ("Activation", "ReLU", "LeakyReLU", "ELU", "PReLU", "BatchNormalization")
#: Scaling layers: a diagonal affine map, after a log transform of some inputs or before an exponential
#: (:func:`sensitivity.engine.affine_fold.scaling_layer_steps`).
_AFFINE = ("InputScaling", "OutputScaling", "Rescaling", "Normalization")
_NO_OP = ("InputLayer", "Dropout", "SpatialDropout1D", "SpatialDropout2D", "SpatialDropout3D", "GaussianDropout",
          "GaussianNoise", "AlphaDropout", "ActivityRegularization")
#: Layers that are linear maps of each point (applied as they are, to values and to folded tangents alike).
LINEAR_LAYERS = tuple(f"{kind}{rank}D" for kind in ("UpSampling", "ZeroPadding", "Cropping", "AveragePooling",
                                               "GlobalAveragePooling") for rank in (1, 2, 3)) + (
    "Reshape", "Flatten", "Permute")
_CONV = ("Conv1D", "Conv2D", "Conv3D")
#: Max pooling: piecewise linear, with a reverse mode only (:mod:`sensitivity.engine.reverse_path`).
_MAX_POOL = tuple(f"{kind}{rank}D" for kind in ("MaxPooling", "GlobalMaxPooling") for rank in (1, 2, 3))
#: Activations that are not elementwise (their derivative is not a diagonal).
_NOT_ELEMENTWISE = ("softmax", "log_softmax")




def layer_steps(fn: Callable[[tf.Tensor], tf.Tensor], dtype: str) -> list[Step] | str:
    """The steps of the Keras model that ``fn`` is (or calls), in application order, or why there are none.

    A config's scaling around the model (:class:`~sensitivity.surrogates.scaling.ScaledModel`) adds its steps
    before and after the model's; a nested Keras model (a functional or sequential sub-model used as a layer)
    adds its own layers' steps in their place.

    Returns
    -------
    The steps (:class:`AffineStep`, :class:`LinearStep`, :class:`ElementwiseStep`, :class:`MaxPoolStep`) in
    application order, diagonal affine maps (scaling, ``Rescaling``, ``Normalization``) folded into the Dense
    kernels they touch (:func:`sensitivity.engine.affine_fold.fold_affine`); or a sentence naming what is not
    supported: the first layer that is not, by its path of names and its class. A batch normalisation right
    after a Dense or convolution without activation is folded into its kernel and bias (inference statistics).
    """
    from sensitivity.surrogates.scaling import ScaledModel

    before, after = [], []
    if isinstance(fn, ScaledModel):
        before, after = input_steps(fn.input_offset, fn.input_scale, fn.input_log, dtype), \
            output_steps(fn.output_offset, fn.output_scale, fn.output_log, dtype)
        fn = fn.model
    model = keras_model(fn)
    if model is None:
        return "the surrogate is not a Keras model (nor a function calling exactly one)"
    steps = _model_steps(model, dtype, "")
    if isinstance(steps, str):
        return steps
    if all(isinstance(step, ElementwiseStep) for step in steps):
        return "the model has no Dense, convolution, pooling or reshaping layer"
    return fold_affine(before + steps + after, dtype)


def _model_steps(model: Any, dtype: str, prefix: str) -> list[Step] | str:
    """The steps of the layers of the Keras ``model`` (nested models read in place), or why there are none;
    ``prefix`` names the models around it (``"outer/"``)."""
    import keras

    steps: list[Step] = []
    foldable = None  # (layer, kernel, bias) of a last step that is a Dense or conv without activation
    for layer in model.layers:
        name = type(layer).__name__
        if name in _NO_OP:
            continue
        if isinstance(layer, keras.Model):
            inner = _model_steps(layer, dtype, f"{prefix}{layer.name}/")
            if isinstance(inner, str):
                return inner
            steps += inner
            foldable = None
            continue
        activation = getattr(layer, "activation", None)
        if activation is not None and activation.__name__ in _NOT_ELEMENTWISE:
            return f"layer {prefix + layer.name!r} has the activation {activation.__name__!r}, which is not elementwise"
        if name == "BatchNormalization" and foldable is not None and _normalises_last_axis(layer, foldable[0]):
            steps[-1] = _kernel_step(*_fold_normalisation(layer, *foldable), dtype)
            foldable = None
            continue
        foldable = None
        if name == "Dense" or name in _CONV:
            kernel = np.asarray(layer.kernel)
            bias = np.asarray(layer.bias) if layer.use_bias else None
            steps.append(_kernel_step(layer, kernel, bias, dtype))
            foldable = (layer, kernel, bias) if activation is None or activation.__name__ == "linear" else None
        elif name in LINEAR_LAYERS:
            steps.append(LinearStep(layer, None, layer))
        elif name in _MAX_POOL:
            steps.append(MaxPoolStep(layer))
        elif name in _AFFINE:
            steps += scaling_layer_steps(layer, functools.partial(_call_inference, layer), dtype)
            continue
        elif name in _ELEMENTWISE:
            steps.append(ElementwiseStep(functools.partial(_call_inference, layer)))
            continue
        else:
            return f"layer {prefix + layer.name!r} ({name}) is not on the fast path"
        if activation is not None and activation.__name__ != "linear":
            steps.append(ElementwiseStep(functools.partial(_call_activation, activation)))
    return steps


def _kernel_step(layer: Any, kernel: np.ndarray, bias: np.ndarray | None, dtype: str) -> AffineStep | LinearStep:
    """The step of a Keras ``Dense`` (affine) or ``Conv*D`` (linear) layer with ``kernel`` and ``bias``."""
    if type(layer).__name__ == "Dense":
        return dense_step(kernel, bias, dtype)
    tf_bias = None
    if bias is not None:  # broadcast against the output's channel axis
        shape = [-1] if layer.data_format == "channels_last" else [-1] + [1] * layer.rank
        tf_bias = tf.constant(bias.reshape(shape), dtype)
    if _single_filter(layer):
        matrix = tf.constant(np.moveaxis(kernel[..., 0], -1, 0).reshape(kernel.shape[-2], -1), dtype)
        conv = functools.partial(_shift_add, matrix, kernel.shape[:-2], layer.padding)
    else:
        conv = functools.partial(_convolve, layer, tf.constant(kernel, dtype))
    return LinearStep(conv, tf_bias, layer, kernel)


def _normalises_last_axis(norm: Any, layer: Any) -> bool:
    """Does the batch normalisation ``norm`` scale the output channels of the Dense/conv ``layer``?"""
    rank = len(layer.output.shape)
    axes = [a % rank for a in np.atleast_1d(norm.axis)]
    return axes == [rank - 1] and getattr(layer, "data_format", "channels_last") == "channels_last"


def _fold_normalisation(norm: Any, layer: Any, kernel: np.ndarray, bias: np.ndarray | None
                        ) -> tuple[Any, np.ndarray, np.ndarray]:
    """``layer``'s kernel and bias with the inference batch normalisation ``norm`` that follows it folded in:
    ``gamma (z - mean) / sqrt(var + eps) + beta = z s + (beta - mean s)``, ``s`` scaling each output channel."""
    variance, mean = np.asarray(norm.moving_variance, np.float64), np.asarray(norm.moving_mean, np.float64)
    scale = 1 / np.sqrt(variance + norm.epsilon)
    if norm.scale:
        scale = scale * np.asarray(norm.gamma, np.float64)
    shift = -mean * scale + (np.asarray(norm.beta, np.float64) if norm.center else 0)
    folded_bias = shift if bias is None else bias * scale + shift
    return layer, kernel * scale, folded_bias


def keras_model(fn: Any) -> Any:
    """The Keras model ``fn`` is, or the one it refers to (closure or global name), else ``None``."""
    import keras

    if isinstance(fn, keras.Model):
        return fn
    referenced = [c.cell_contents for c in (getattr(fn, "__closure__", None) or ()) if _filled(c)]
    code, scope = getattr(fn, "__code__", None), getattr(fn, "__globals__", {})
    referenced += [scope[name] for name in (code.co_names if code else ()) if name in scope]
    models = {id(c): c for c in referenced if isinstance(c, keras.Model)}
    return next(iter(models.values())) if len(models) == 1 else None


def _filled(cell: Any) -> bool:
    try:
        cell.cell_contents
    except ValueError:  # an empty closure cell
        return False
    return True


def _call_activation(activation: Callable, x: tf.Tensor) -> tf.Tensor:
    return activation(x)


def _call_inference(layer: Any, x: tf.Tensor) -> tf.Tensor:
    """An elementwise Keras layer in inference (batch normalisation with its moving statistics)."""
    return layer(x, training=False)


def _convolve(layer: Any, kernel: tf.Tensor, x: tf.Tensor) -> tf.Tensor:
    """The convolution of a Keras ``Conv*D`` layer with ``kernel``, without its bias and activation."""
    return layer.convolution_op(x, kernel)


def _single_filter(layer: Any) -> bool:
    """Is ``layer`` a one-filter, unit-stride, undilated, ungrouped channels-last 'same'/'valid' convolution?"""
    return (layer.filters == 1 and layer.groups == 1 and layer.data_format == "channels_last"
            and layer.padding in ("same", "valid") and set(layer.strides) == {1} and set(layer.dilation_rate) == {1})


def _shift_add(matrix: tf.Tensor, window: tuple[int, ...], padding: str, x: tf.Tensor) -> tf.Tensor:
    """A one-filter convolution as one matmul and a sum of shifted slices.

    ``x [N, *spatial, c]`` times ``matrix [c, prod(window)]`` (the kernel, one column per window offset) gives
    every offset's contribution at every position; output position ``p`` sums offset ``o``'s contribution at
    ``p + o`` (input padded as Keras/TF 'same' pads at unit stride, ``(k - 1) // 2`` before). A plain
    convolution with one output channel uses the machine poorly: this form is faster than TF's (XLA) convolution
    there, slower from two filters on (docs/performance.md).
    """
    spatial = x.shape[1:-1]
    y = tf.reshape(tf.matmul(tf.reshape(x, [-1, x.shape[-1]]), matrix), [-1, *spatial, matrix.shape[-1]])
    if padding == "same":
        y = tf.pad(y, [[0, 0], *[[(k - 1) // 2, k - 1 - (k - 1) // 2] for k in window], [0, 0]])
    size = [n if padding == "same" else n - k + 1 for n, k in zip(spatial, window)]
    terms = [y[(slice(None), *[slice(o, o + n) for o, n in zip(offset, size)], column)]
             for column, offset in enumerate(itertools.product(*map(range, window)))]
    return tf.add_n(terms)[..., None]
