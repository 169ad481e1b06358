"""Reverse mode through convolutional chains: every layer kind alone and in chains, against float64 autodiff."""
from __future__ import annotations

import logging
import math

import keras
import numpy as np
import pytest
import tensorflow as tf

import sensitivity
from sensitivity.engine import reverse_path
from sensitivity.engine.layers import layer_steps
from sensitivity.errors import ConfigError
from sensitivity.engine.reverse_path import BLOCK_BYTES, MAX_CHUNK, MIN_CHUNK, conv_chain
from tests.helpers.models import sequential
from tests.helpers.references import central_differences

L = keras.layers
RNG = np.random.default_rng(29)
#: float64 fast path vs float64 autodiff of the same model: the same products summed in another order.
EXACT = 1e-12
#: TF has no float64 3-D max pooling: those cases run in float32 against float32 autodiff of the same model.
FLOAT32_ONLY = ("maxpool3d", "cnn3d")
#: float32 fast path (XLA) vs float64 autodiff: max |J32 - J64| <= F32_TOL * max |J64| (measured 2.6e-7 on the
#: cnn and 6.2e-7 on the deep shape of benchmarks/bench_jacobian.py, 64 points).
F32_TOL = 2e-5

#: One layer between a Reshape of the flat input to the field and a Flatten: (field, layer).
LAYERS = {
    "conv1d": ((10, 3), L.Conv1D(4, 3)),
    "conv1d_field": ((12, 1), L.Conv1D(3, 3, padding="same")),
    "conv1d_strided_same": ((11, 5), L.Conv1D(3, 3, strides=2, padding="same")),
    "conv1d_dilated": ((12, 2), L.Conv1D(3, 3, dilation_rate=2, activation="tanh")),
    "conv2d_field": ((7, 6, 1), L.Conv2D(3, 3)),
    "conv2d_two_channels": ((7, 6, 2), L.Conv2D(3, 3)),
    "conv2d_same_even_window": ((6, 5, 1), L.Conv2D(3, (2, 3), padding="same")),
    "conv2d_backprop_form": ((6, 6, 6), L.Conv2D(4, 3, padding="same", use_bias=False)),
    "conv2d_strided": ((7, 7, 3), L.Conv2D(2, 3, strides=2, padding="same")),
    "conv2d_dilated": ((8, 8, 2), L.Conv2D(2, 3, dilation_rate=2)),
    "conv2d_one_filter": ((6, 6, 3), L.Conv2D(1, 3, padding="same")),
    "conv3d": ((4, 5, 4, 2), L.Conv3D(2, 2)),
    "conv3d_field": ((4, 5, 4, 1), L.Conv3D(2, 2)),
    "conv3d_same": ((4, 4, 3, 5), L.Conv3D(2, 3, padding="same")),
    "maxpool1d": ((9, 3), L.MaxPooling1D(2)),
    "maxpool2d_remainder": ((7, 6, 2), L.MaxPooling2D(2)),
    "maxpool2d_same": ((7, 5, 2), L.MaxPooling2D(3, padding="same")),
    "maxpool2d_overlapping": ((7, 7, 2), L.MaxPooling2D(3, strides=2)),
    "maxpool3d": ((4, 4, 5, 2), L.MaxPooling3D(2)),
    "global_maxpool2d": ((5, 4, 3), L.GlobalMaxPooling2D()),
    "global_maxpool1d_keepdims": ((6, 3), L.GlobalMaxPooling1D(keepdims=True)),
    "avgpool2d": ((6, 6, 2), L.AveragePooling2D(2)),
    "avgpool1d_overlapping": ((8, 2), L.AveragePooling1D(3, strides=1)),
    "global_avgpool2d": ((5, 4, 3), L.GlobalAveragePooling2D()),
    "batchnorm": ((5, 4, 3), L.BatchNormalization()),
    "dropout": ((5, 4, 3), L.SpatialDropout2D(0.5)),
    "upsampling2d": ((3, 4, 2), L.UpSampling2D(2)),
    "zeropadding2d": ((3, 4, 2), L.ZeroPadding2D(1)),
    "cropping2d": ((5, 6, 2), L.Cropping2D(1)),
    "permute": ((3, 4, 2), L.Permute((2, 1, 3))),
    "dense_on_field": ((4, 3, 5), L.Dense(2, activation="tanh")),
    **{name: ((5, 4, 3), L.Activation(name)) for name in ("relu", "gelu", "swish", "tanh", "softplus", "sigmoid")},
    "leaky_relu": ((5, 4, 3), L.LeakyReLU(0.1)),
    "elu": ((5, 4, 3), L.ELU()),
}


def field_model(field, layers, dtype="float64", seed=0):
    """Flat ``prod(field)`` inputs -> Reshape(field) -> ``layers``, with random batch-normalisation statistics."""
    keras.utils.set_random_seed(seed)
    model = sequential([L.Reshape(field), *layers], dtype, n_in=math.prod(field))
    for layer in model.layers:
        if isinstance(layer, L.BatchNormalization):
            c = layer.gamma.shape[0]
            layer.set_weights([RNG.uniform(0.5, 2, c), RNG.normal(size=c), RNG.normal(size=c), RNG.uniform(0.5, 2, c)])
    return model


def load(net, dtype="float64"):
    n_in = net.input_shape[-1]
    return sensitivity.load_surrogate(net, input_names=[f"x{i}" for i in range(n_in)], input_units=["1"] * n_in,
                                      dtype=dtype)


def autodiff_jacobian(net, x, dtype="float64"):
    """The oracle: TF's own reverse mode of the Keras model (``GradientTape.batch_jacobian``)."""
    xt = tf.constant(x, dtype)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y = tf.reshape(net(xt), [len(x), -1])
    return tape.batch_jacobian(y, xt).numpy()


def check_exact(net, x, dtype="float64", chunk=8):
    """The fast reverse path (XLA on full chunks, plain TF on the rest) against autodiff in the same dtype."""
    jac = sensitivity.compile_jacobian(load(net, dtype), "reverse", chunk_size=chunk)
    values, jacobian = jac.flat_value_and_jacobian(x)
    assert jac.path == "dense", jac.path_reason
    expected = autodiff_jacobian(net, x, dtype)
    tol = EXACT if dtype == "float64" else 1e-6
    np.testing.assert_allclose(values, net(x.astype(dtype)).numpy().reshape(len(x), -1), rtol=tol, atol=tol)
    np.testing.assert_allclose(jacobian, expected, rtol=tol, atol=tol * np.abs(expected).max())
    return jac


@pytest.mark.parametrize("name", LAYERS)
def test_each_layer_alone_against_float64_autodiff(name):
    field, layer = LAYERS[name]
    dtype = "float32" if name in FLOAT32_ONLY else "float64"
    net = field_model(field, [layer, L.Flatten()], dtype)
    check_exact(net, RNG.normal(size=(20, math.prod(field))), dtype)


@pytest.mark.parametrize("pool", [L.MaxPooling2D(2), L.MaxPooling2D(2, padding="same"), L.MaxPooling1D(3)])
def test_max_pool_ties_go_to_the_first_maximum_as_in_tf(pool):
    """Fields of small integers tie within most windows: the fast path's cotangent goes where TF's gradient puts
    it (the first maximum in row-major order), exactly."""
    field = (5, 5, 2) if "2D" in type(pool).__name__ else (7, 2)
    net = field_model(field, [pool, L.Flatten()])
    x = RNG.integers(0, 2, size=(16, math.prod(field))).astype(float)
    jac = check_exact(net, x)
    assert np.all(np.abs(jac.flat_value_and_jacobian(x)[1]).sum(-1) == 1)  # one input per pooled output


CHAINS = {
    # the CNN in small: the input conv and its pool fused into one per-point operator, a 'same' conv
    # with batch normalisation, a Dense head folded
    "cnn2d": ((12, 12, 1), [L.Conv2D(4, 3, activation="tanh"), L.MaxPooling2D(2),
                            L.Conv2D(6, 3, padding="same"), L.BatchNormalization(), L.Activation("gelu"),
                            L.MaxPooling2D(2), L.Flatten(), L.Dense(8, activation="swish"), L.Dense(5)]),
    "cnn1d": ((20, 2), [L.Conv1D(3, 3, padding="same", activation="softplus"), L.MaxPooling1D(2),
                        L.Conv1D(4, 3, strides=2, activation="relu"), L.Dropout(0.3),
                        L.GlobalAveragePooling1D(), L.Dense(2)]),
    "cnn3d": ((6, 6, 5, 1), [L.Conv3D(2, 3, activation="sigmoid"), L.MaxPooling3D(2), L.Flatten(), L.Dense(8)]),
    "same_conv_fused_pool_remainder": ((9, 9, 1), [L.Conv2D(3, 3, padding="same", activation="tanh"),
                                                   L.MaxPooling2D(2), L.Flatten(), L.Dense(4)]),
    "overlapping_pools": ((9, 9, 2), [L.Conv2D(3, 3, activation="elu"), L.MaxPooling2D(3, strides=2),
                                      L.GlobalMaxPooling2D(), L.Dense(2, activation="tanh")]),
    "field_output": ((8, 8, 1), [L.Conv2D(3, 3, padding="same", activation="tanh"), L.Conv2D(1, 3, padding="same"),
                                 L.Reshape((8, 8)), L.Activation("sigmoid")]),
}
FUSED = ("cnn2d", "cnn3d", "same_conv_fused_pool_remainder")


@pytest.mark.parametrize("name", CHAINS)
def test_chains_against_float64_autodiff(name):
    field, layers = CHAINS[name]
    dtype = "float32" if name in FLOAT32_ONLY else "float64"
    net = field_model(field, layers, dtype)
    jac = check_exact(net, RNG.normal(size=(20, math.prod(field))), dtype)
    assert ("per-point operator at the argmax" in jac.path_reason) == (name in FUSED), jac.path_reason
    assert jac.jit_compile and jac.trace_count == 2  # once with XLA for full chunks, once for the rest


def test_batch_normalisation_folded_into_the_kernel_before_it():
    """Right after a convolution or Dense without activation, batch normalisation becomes part of its kernel and
    bias (no step of its own); after an activation it stays an elementwise step. Exactness: the chain tests."""
    net = field_model((6, 6, 1), [L.Conv2D(3, 3), L.BatchNormalization(), L.Activation("tanh"),
                                  L.BatchNormalization(), L.Flatten(), L.Dense(4), L.BatchNormalization()])
    kinds = [step.kind for step in layer_steps(net, "float64")]
    assert kinds == ["linear", "linear", "elementwise", "elementwise", "linear", "affine"]
    check_exact(net, RNG.normal(size=(12, 36)))


def test_chain_against_float64_finite_differences():
    field, layers = CHAINS["cnn2d"]
    net = field_model(field, layers)
    model = load(net)
    x = RNG.normal(size=(6, math.prod(field)))
    jacobian = sensitivity.compile_jacobian(model, "reverse")(x)[1]
    np.testing.assert_allclose(jacobian, central_differences(model, x), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("name", ["cnn2d", "cnn1d"])
def test_float32_within_documented_tolerance(name):
    field, layers = CHAINS[name]
    net32, net64 = field_model(field, layers, "float32"), field_model(field, layers)
    net64.set_weights(net32.get_weights())
    x = RNG.normal(size=(40, math.prod(field)))
    jac = sensitivity.compile_jacobian(load(net32, "float32"), chunk_size=16)
    assert jac.path == "dense" and jac.mode == "reverse" and jac.jit_compile
    expected = autodiff_jacobian(net64, x)
    assert np.abs(jac(x)[1] - expected).max() <= F32_TOL * np.abs(expected).max()


def test_reports_path_and_reason(caplog):
    field, layers = CHAINS["cnn2d"]
    with caplog.at_level(logging.INFO, logger="sensitivity.engine.jacobian"):
        jac = sensitivity.compile_jacobian(load(field_model(field, layers)))
    assert jac.mode == "reverse" and jac.path == "dense"
    assert "dense path, reverse mode: the 5 cotangents as one block through" in caplog.text
    for form in ("folded matmul", "argmax mask", "TF conv backprop", "per-point operator at the argmax"):
        assert form in jac.path_reason
    field_out = sensitivity.compile_jacobian(load(field_model(*CHAINS["field_output"])), "reverse")
    assert "matmul and shifted sums" in field_out.path_reason
    autodiff = sensitivity.compile_jacobian(load(field_model(field, layers)), path="autodiff")
    assert autodiff.path == "autodiff" and autodiff.path_reason == "path 'autodiff' was asked for"


@pytest.mark.parametrize("layer, reason", [
    (L.LayerNormalization(name="norm"), "layer 'norm' (LayerNormalization) is not on the fast path"),
    (L.Conv2D(2, 3, activation="softmax", name="last"), "layer 'last' has the activation 'softmax', which is not "
                                                        "elementwise")])
def test_other_layers_take_the_autodiff_path_and_say_why(layer, reason):
    net = field_model((6, 6, 2), [L.Conv2D(3, 3), layer, L.Flatten(), L.Dense(2)])
    x = RNG.normal(size=(5, 72))
    jac = sensitivity.compile_jacobian(load(net))
    assert jac.path == "autodiff" and reason in jac.path_reason
    np.testing.assert_allclose(jac(x)[1], autodiff_jacobian(net, x), rtol=EXACT, atol=EXACT)
    with pytest.raises(ConfigError, match="`path` 'dense' needs a Keras model"):
        sensitivity.compile_jacobian(load(net), path="dense")


def test_a_wrapper_with_other_derivatives_is_caught():
    """Values that reproduce the model's are not enough: the Jacobian is checked against the model's autodiff."""
    field, layers = CHAINS["cnn1d"]
    net = field_model(field, layers)
    frozen = sensitivity.load_surrogate(lambda x: tf.stop_gradient(net(x)), input_names=[f"x{i}" for i in range(40)],
                                        input_units=["1"] * 40, dtype="float64")
    jac = sensitivity.compile_jacobian(frozen, "reverse")
    assert jac.path == "autodiff" and "does not match the model's autodiff" in jac.path_reason
    assert np.all(jac(RNG.normal(size=(3, 40)))[1] == 0)


def test_chunk_from_block_and_memory_budget(monkeypatch):
    """The largest cotangent block and the kept tensors of a chunk fit BLOCK_BYTES (twice the chunk would not, below
    MAX_CHUNK), and a small memory budget lowers the chunk to the bound."""
    field, layers = CHAINS["cnn2d"]
    net = field_model(field, layers, "float32")
    chain = conv_chain(layer_steps(net, "float32"), net, 144, "float32")
    # widest cotangent block: 5 cotangents of the fused first conv and pool's patches, 5 x 5 sites x 4 x 4
    # window positions x 1 channel (the conv's own 10 x 10 x 4 output block is never built); kept: that
    # operator for 4 channels, the second pool's mask (5 x 5 x 6, times gelu's derivative) and swish's
    # derivative (8)
    per_point = 4 * (5 * 5 * 5 * 4 * 4 + 5 * 5 * 4 * 4 * 4 + 5 * 5 * 6 + 8)
    chunk = chain.chunk_size(4, 1024.0)
    assert chunk == min(MAX_CHUNK, 1 << (BLOCK_BYTES // per_point).bit_length() - 1)
    assert chain.chunk_size(4, 0.001) == MIN_CHUNK
    assert sensitivity.compile_jacobian(load(net, "float32")).chunk_size == chunk
    monkeypatch.setattr(reverse_path, "BLOCK_BYTES", 2**20)  # a block that binds below MAX_CHUNK
    small = chain.chunk_size(4, 1024.0)
    assert small < MAX_CHUNK and small * per_point <= 2**20 < 2 * small * per_point
