"""The compiled engine: closed forms and float64 finite differences, in every mode and dtype."""
from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf

import sensitivity
from sensitivity.errors import ConfigError
from sensitivity.engine.chunks import auto_chunk_size
from sensitivity.simulators import analytic
from tests.helpers.functions import ishigami_jacobian
from tests.helpers.models import RAIN, cotangent_stopped, reservoir_fn, reservoir_numpy, sequential
from tests.helpers.references import central_differences

RNG = np.random.default_rng(42)
MODES = ["forward", "reverse"]
DTYPES = ["float32", "float64"]
# float64 engine vs closed form: a few ulps of the function scale; float32: ~1e-6 relative x condition.
TOL = {"float64": dict(rtol=1e-10, atol=1e-10), "float32": dict(rtol=2e-5, atol=2e-5)}


def load(fn, n, dtype, names=None, **kw):
    return sensitivity.load_surrogate(fn, input_names=names or [f"x{i}" for i in range(n)], input_units=["1"] * n,
                                      dtype=dtype, **kw)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dtype", DTYPES)
def test_closed_forms(mode, dtype):
    x = RNG.uniform(-np.pi, np.pi, (300, 3))
    jac = sensitivity.compile_jacobian(load(analytic.ishigami, 3, dtype), mode, chunk_size=128)
    values, jacobian = jac(x)
    assert values.shape == (300, 1) and jacobian.shape == (300, 1, 3) and jacobian.dtype == dtype
    np.testing.assert_allclose(jacobian, ishigami_jacobian(x), **TOL[dtype])

    w = RNG.normal(size=(4, 3))
    lin = sensitivity.compile_jacobian(load(analytic.linear, 3, dtype, kwargs={"weights": w.tolist()}), mode)
    np.testing.assert_allclose(lin(x)[1], np.broadcast_to(w, (300, 4, 3)), **TOL[dtype])

    quad = sensitivity.compile_jacobian(load(analytic.quadratic, 3, dtype), mode)
    expected = np.stack([2 * x, np.stack([x[:, 1], x[:, 0] + 2 * x[:, 2], 2 * x[:, 1]], axis=1)], axis=1)
    np.testing.assert_allclose(quad(x)[1], expected, **TOL[dtype])


@pytest.mark.parametrize("mode", MODES)
def test_field_model_against_finite_differences(mode):
    """A 2-D field output keeps its dims: jacobian [N, lat, lon, n_in]."""
    model = load(analytic.gaussian_plume, 4, "float64", names=["amplitude", "x0", "y0", "width"],
                 kwargs={"size": 8})
    x = np.column_stack([RNG.uniform(0.5, 2, 20), RNG.uniform(0.2, 0.8, 20), RNG.uniform(0.2, 0.8, 20),
                         RNG.uniform(0.1, 0.4, 20)])
    values, jacobian = sensitivity.compile_jacobian(model, mode)(x)
    assert values.shape == (20, 8, 8) and jacobian.shape == (20, 8, 8, 4)
    np.testing.assert_allclose(jacobian, central_differences(model, x), rtol=1e-6, atol=1e-8)


def small_cnn(seed=0):
    """A small CNN mapping 3 parameters to a 12 x 12 field (the 'deep convolutional network' case)."""
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((3,))
    h = keras.layers.Dense(3 * 3 * 8, activation="tanh")(inputs)
    h = keras.layers.Reshape((3, 3, 8))(h)
    h = keras.layers.Conv2DTranspose(8, 3, strides=2, padding="same", activation="tanh")(h)
    h = keras.layers.Conv2DTranspose(4, 3, strides=2, padding="same", activation="tanh")(h)
    h = keras.layers.Conv2D(1, 3, padding="same")(h)
    return keras.Model(inputs, keras.layers.Reshape((12, 12))(h))


@pytest.mark.parametrize("mode", MODES)
def test_keras_cnn_field_float64_against_finite_differences(tmp_path, mode):
    path = tmp_path / "cnn.keras"
    small_cnn().save(path)
    output = {"name": "field", "units": "K", "dims": [
        {"name": "lat", "values": list(np.linspace(-10, 10, 12)), "units": "degrees_north"},
        {"name": "lon", "values": list(np.linspace(0, 20, 12)), "units": "degrees_east"}]}
    model = sensitivity.load_surrogate(path, input_names=["a", "b", "c"], input_units=["1", "m", "s"],
                                       output=output, dtype="float64")
    x = RNG.normal(size=(16, 3))
    values, jacobian = sensitivity.compile_jacobian(model, mode)(x)
    assert jacobian.shape == (16, 12, 12, 3)
    np.testing.assert_allclose(jacobian, central_differences(model, x), rtol=1e-6, atol=1e-9)
    # the float32 engine on the same network stays within float32 round-off of the float64 one
    model32 = sensitivity.load_surrogate(path, input_names=["a", "b", "c"], input_units=["1", "m", "s"], output=output)
    np.testing.assert_allclose(sensitivity.compile_jacobian(model32, mode)(x)[1], jacobian, rtol=1e-4, atol=1e-5)


def test_forward_equals_reverse_on_an_mlp():
    keras.utils.set_random_seed(1)
    net = keras.Sequential([keras.Input((5,)), keras.layers.Dense(32, activation="tanh"), keras.layers.Dense(7)])
    model = load(lambda x: net(x), 5, "float32")
    x = RNG.normal(size=(100, 5))
    fwd, rev = sensitivity.compile_jacobian(model, "forward")(x), sensitivity.compile_jacobian(model, "reverse")(x)
    np.testing.assert_allclose(fwd[0], rev[0], rtol=1e-6)
    np.testing.assert_allclose(fwd[1], rev[1], rtol=1e-5, atol=1e-6)


def test_auto_mode_follows_shape():
    wide = load(analytic.linear, 3, "float32", kwargs={"weights": [[1.0, 2.0, 3.0]]})  # 3 in, 1 out
    tall = load(analytic.linear, 2, "float32", kwargs={"weights": np.ones((5, 2)).tolist()})  # 2 in, 5 out
    assert sensitivity.compile_jacobian(wide, "auto").mode == "reverse"
    assert sensitivity.compile_jacobian(tall, "auto").mode == "forward"


def test_traced_once_whatever_the_number_of_points():
    jac = sensitivity.compile_jacobian(load(analytic.ishigami, 3, "float32"), "forward", chunk_size=64)
    for n in (1, 63, 64, 65, 1000, 7):
        values, jacobian = jac(RNG.uniform(-3, 3, (n, 3)))
        assert values.shape == (n, 1) and jacobian.shape == (n, 1, 3)
    jac.values(RNG.uniform(-3, 3, (100, 3)))
    # once with XLA for full chunks of 64, once without for the shorter ones
    assert jac.jit_compile and jac.trace_count == 2 and jac.value_trace_count == 2


def test_chunks_are_exact_and_memory_follows_the_budget():
    model = load(analytic.ishigami, 3, "float64")
    x = RNG.uniform(-3, 3, (257, 3))
    whole = sensitivity.compile_jacobian(model, "forward", chunk_size=1024, jit_compile=False)(x)
    chunked = sensitivity.compile_jacobian(model, "forward", chunk_size=64, jit_compile=False)(x)
    np.testing.assert_array_equal(whole[1], chunked[1])
    # with XLA the full chunks and the last one run different kernels: equal to round-off
    xla = sensitivity.compile_jacobian(model, "forward", chunk_size=64, jit_compile=True)(x)
    np.testing.assert_allclose(xla[1], whole[1], rtol=1e-13, atol=1e-13)
    # per point: (n_in + 1) tangents of 1000 numbers, float32 -> 4 * (4 * 1000 + ...) ~ 16 kB; 16 MiB -> 1024
    assert auto_chunk_size(1000, 3, 1, "forward", 4, 16) == 1024
    assert auto_chunk_size(1000, 3, 1, "reverse", 4, 16) == 2048  # 2 copies for one output
    assert auto_chunk_size(10**7, 100, 1, "forward", 4, 1) == 64  # clamped to the minimum


def test_config_scaling_is_folded_in():
    """A network in normalised units, wrapped with an affine + log map, differentiates in physical units."""
    def normalised(z):
        return tf.stack([tf.sin(z[:, 0]) * z[:, 1], z[:, 0] ** 2], axis=1)

    scaling = {"input": {"offset": [1.0, 0.5], "scale": [2.0, 0.25], "log": ["k"]},
               "output": {"offset": [3.0, -1.0], "scale": [10.0, 0.1]}}
    model = sensitivity.load_surrogate(normalised, input_names=["k", "v"], input_units=["s-1", "m"],
                                       scaling=scaling, dtype="float64")
    x = np.column_stack([RNG.uniform(0.1, 5, 50), RNG.uniform(-1, 1, 50)])

    def physical(p):
        z0, z1 = (np.log(p[:, 0]) - 1.0) / 2.0, (p[:, 1] - 0.5) / 0.25
        return np.column_stack([np.sin(z0) * z1 * 10 + 3, z0**2 * 0.1 - 1])

    values, jacobian = sensitivity.compile_jacobian(model, "reverse")(x)
    np.testing.assert_allclose(values, physical(x), rtol=1e-12)
    np.testing.assert_allclose(jacobian, central_differences(physical, x), rtol=1e-6, atol=1e-8)


def test_bad_engine_inputs():
    model = load(analytic.ishigami, 3, "float32")
    with pytest.raises(ConfigError, match="`mode` must be one of"):
        sensitivity.compile_jacobian(model, "sideways")
    with pytest.raises(ConfigError, match="`chunk_size` must be a positive integer, got 0"):
        sensitivity.compile_jacobian(model, chunk_size=0)
    with pytest.raises(ConfigError, match=r"points must have shape \[N, 3\], got \[4, 2\]"):
        sensitivity.compile_jacobian(model)(np.zeros((4, 2)))


def scaled_mlp(dtype, activation="tanh"):
    """A trained-model-like Keras MLP: log-scaled inputs, two hidden layers, exponentiated output scaling."""
    from sensitivity.surrogates.scaling import InputScaling, OutputScaling

    keras.utils.set_random_seed(3)
    return keras.Sequential([
        keras.Input((3,), dtype=dtype), InputScaling([0.1, 0.0, 1.0], [2.0, 0.5, 4.0], [True, False, True], dtype=dtype),
        keras.layers.Dense(24, activation=activation, dtype=dtype), keras.layers.Dense(16, dtype=dtype),
        keras.layers.Activation("sigmoid", dtype=dtype), keras.layers.Dense(5, dtype=dtype),
        OutputScaling([0.5] * 5, [0.2, 1.0, 3.0, 0.1, 2.0], log=True, dtype=dtype)])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("activation", ["tanh", "softplus"])
def test_dense_path_against_float64_finite_differences(mode, activation):
    net = scaled_mlp("float64", activation)
    model = load(lambda x: net(x), 3, "float64")
    x = RNG.uniform(0.2, 3.0, (70, 3))
    jac = sensitivity.compile_jacobian(model, mode, chunk_size=64)
    values, jacobian = jac(x)
    assert jac.path == "dense" and jacobian.shape == (70, 5, 3)
    np.testing.assert_allclose(values, net(x).numpy(), rtol=1e-13)
    np.testing.assert_allclose(jacobian, central_differences(model, x), rtol=1e-6, atol=1e-9)
    generic = sensitivity.compile_jacobian(model, mode, path="autodiff")
    assert generic.path == "autodiff"
    np.testing.assert_allclose(jacobian, generic(x)[1], rtol=1e-12, atol=1e-14)


def test_dense_path_folds_only_small_kernel_pairs():
    """The first and last kernel pairs of an MLP are folded (their Jacobians are checked above against float64
    finite differences); a pair whose folded kernel exceeds FOLD_BYTES is not."""
    from sensitivity.engine.dense_path import FOLD_BYTES, dense_chain

    net = scaled_mlp("float64")
    chain = dense_chain(net, 3, "float64")
    assert chain.fold_forward.shape == (24, 3, 16) and chain.fold_reverse.shape == (16, 5, 24)
    keras.utils.set_random_seed(5)
    width = 64
    wide = keras.Sequential([keras.Input((FOLD_BYTES // (4 * width * width) + 1,)),
                             keras.layers.Dense(width, activation="tanh"), keras.layers.Dense(width, activation="tanh"),
                             keras.layers.Dense(2)])
    chain = dense_chain(wide, wide.input_shape[-1], "float32")
    assert chain.fold_forward is None and chain.fold_reverse.shape == (width, 2, width)


@pytest.mark.parametrize("mode", MODES)
def test_dense_path_float32_matches_float64(mode):
    net32, net64 = scaled_mlp("float32"), scaled_mlp("float64")
    net64.set_weights([w.astype("float64") for w in net32.get_weights()])  # initialisers draw per dtype
    x = RNG.uniform(0.2, 3.0, (100, 3))
    jac32 = sensitivity.compile_jacobian(load(lambda x: net32(x), 3, "float32"), mode)
    jac64 = sensitivity.compile_jacobian(load(lambda x: net64(x), 3, "float64"), mode)
    assert jac32.path == jac64.path == "dense" and jac32.jit_compile
    scale = np.abs(jac64(x)[1]).max()
    np.testing.assert_allclose(jac32(x)[1], jac64(x)[1], rtol=1e-4, atol=1e-5 * scale)


def test_dense_path_only_for_what_it_reproduces():
    """A wrapper that does more than call the MLP, or a non-dense layer, keeps the autodiff path (and is right)."""
    keras.utils.set_random_seed(1)
    net = keras.Sequential([keras.Input((4,), dtype="float64"), keras.layers.Dense(8, activation="tanh", dtype="float64"),
                            keras.layers.Dense(2, dtype="float64")])
    doubled = load(lambda x: 2.0 * net(x), 4, "float64")
    x = RNG.normal(size=(10, 4))
    jac = sensitivity.compile_jacobian(doubled, "forward")
    assert jac.path == "autodiff"
    np.testing.assert_allclose(jac(x)[1], central_differences(doubled, x), rtol=1e-6, atol=1e-9)
    cnn = sensitivity.load_surrogate(small_cnn(), input_names=["a", "b", "c"], input_units=["1"] * 3)
    assert sensitivity.compile_jacobian(cnn).path == "autodiff"
    with pytest.raises(ConfigError, match="`path` 'dense' needs a Keras model"):
        sensitivity.compile_jacobian(doubled, path="dense")
    with pytest.raises(ConfigError, match="`path` must be one of"):
        sensitivity.compile_jacobian(doubled, path="fast")


def test_dense_path_traced_once():
    keras.utils.set_random_seed(2)
    net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(8, activation="relu"), keras.layers.Dense(4)])
    jac = sensitivity.compile_jacobian(load(net, 3, "float32"), chunk_size=64)
    for n in (1, 64, 65, 300):
        assert jac(RNG.normal(size=(n, 3)))[1].shape == (n, 4, 3)
    # once with XLA for full chunks of 64, once without for the shorter ones
    assert jac.path == "dense" and jac.jit_compile and jac.trace_count == 2


def conv_chain(kind, dtype="float64", seed=4):
    """3 parameters -> a field through convolutions: 2-D ('same', upsampling, 'valid', a one-filter 'same' with an
    even window, Flatten, Dense) or 1-D ('valid', upsampling, zero padding, a bias-free 'same', a one-filter
    'valid', a separate activation; field output)."""
    keras.utils.set_random_seed(seed)
    layers = keras.layers
    if kind == "conv2d":
        body = [layers.Dense(6 * 6 * 4, activation="tanh"), layers.Reshape((6, 6, 4)),
                layers.Conv2D(5, 3, padding="same", activation="tanh"), layers.UpSampling2D(2),
                layers.Conv2D(3, 3, padding="valid", activation="softplus"), layers.Conv2D(1, (2, 3), padding="same"),
                layers.Flatten(), layers.Dense(7)]
    else:
        body = [layers.Dense(10 * 4, activation="tanh"), layers.Reshape((10, 4)),
                layers.Conv1D(4, 3, padding="valid", activation="tanh"), layers.UpSampling1D(2),
                layers.ZeroPadding1D(1), layers.Conv1D(2, 3, padding="same", use_bias=False),
                layers.Conv1D(1, 3, padding="valid", use_bias=False), layers.Activation("sigmoid")]
    return sequential(body, dtype)


@pytest.mark.parametrize("kind, out_shape", [("conv2d", (7,)), ("conv1d", (16, 1))])
def test_dense_path_conv_against_float64_finite_differences(kind, out_shape):
    """Forward mode through convolutions, upsampling, padding and reshapes on the folded tangent block."""
    net = conv_chain(kind)
    model = load(net, 3, "float64")
    x = RNG.normal(size=(40, 3))
    jac = sensitivity.compile_jacobian(model, "forward", chunk_size=16)
    values, jacobian = jac(x)
    assert jac.path == "dense" and jacobian.shape == (40, *out_shape, 3)
    np.testing.assert_allclose(values, net(x).numpy(), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(jacobian, central_differences(model, x), rtol=1e-6, atol=1e-9)
    generic = sensitivity.compile_jacobian(model, "forward", path="autodiff")
    np.testing.assert_allclose(jacobian, generic(x)[1], rtol=1e-12, atol=1e-14)
    # reverse mode through the same convolutions: each layer's transpose (sensitivity.engine.reverse_path)
    reverse = sensitivity.compile_jacobian(model, "reverse")
    assert reverse.path == "dense" and "cotangents" in reverse.path_reason
    np.testing.assert_allclose(reverse(x)[1], jacobian, rtol=1e-12, atol=1e-14)


def test_dense_path_forward_through_batch_normalisation():
    """Batch normalisation in inference is elementwise (a per-channel scale and shift): forward mode takes it."""
    keras.utils.set_random_seed(5)
    net = sequential([keras.layers.Dense(4 * 4 * 2, activation="tanh"), keras.layers.Reshape((4, 4, 2)),
                      keras.layers.Conv2D(2, 3, padding="same"), keras.layers.BatchNormalization(),
                      keras.layers.Activation("gelu"), keras.layers.Flatten()], "float64")
    net.layers[3].set_weights([RNG.uniform(0.5, 2, 2), RNG.normal(size=2), RNG.normal(size=2), RNG.uniform(0.5, 2, 2)])
    model = load(net, 3, "float64")
    x = RNG.normal(size=(12, 3))
    jac = sensitivity.compile_jacobian(model, "forward")
    assert jac.path == "dense" and "BatchNormalization" not in jac.path_reason  # elementwise: not listed
    np.testing.assert_allclose(jac(x)[1], central_differences(model, x), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("layer", [keras.layers.MaxPooling2D(2, padding="same"), keras.layers.LayerNormalization(),
                                   keras.layers.Activation("softmax")])
def test_dense_path_conv_falls_back_for_other_layers(layer):
    """A layer forward mode cannot take (max pooling, layer normalisation, softmax) keeps the autodiff path."""
    keras.utils.set_random_seed(5)
    net = sequential([keras.layers.Dense(4 * 4 * 2, activation="tanh"), keras.layers.Reshape((4, 4, 2)),
                      keras.layers.Conv2D(2, 3, padding="same", activation="tanh"), layer, keras.layers.Flatten()],
                     "float64")
    model = load(net, 3, "float64")
    x = RNG.normal(size=(12, 3))
    jac = sensitivity.compile_jacobian(model, "forward")
    assert jac.path == "autodiff" and jac.path_reason
    np.testing.assert_allclose(jac(x)[1], central_differences(model, x), rtol=1e-6, atol=1e-9)


def test_out_receives_every_chunk_in_the_callers_layout():
    """``out=``: the caller's arrays (here big-endian fields of a record buffer, strided) hold exactly what
    a plain call returns, whatever the number of chunks."""
    jac = sensitivity.compile_jacobian(load(analytic.ishigami, 3, "float64"), "forward", chunk_size=64)
    x = RNG.uniform(-3, 3, (200, 3))
    records = np.zeros(200, [("y", ">f8", (1,)), ("jacobian", ">f8", (1, 3)), ("pad", "i4")])
    values, jacobian = jac(x, out=(records["y"], records["jacobian"]))
    assert values.base is not None and np.shares_memory(jacobian, records)
    np.testing.assert_array_equal(records["jacobian"], jac(x)[1])
    np.testing.assert_allclose(records["jacobian"], ishigami_jacobian(x), **TOL["float64"])
    with pytest.raises(ConfigError, match=r"`out` must be arrays of shapes \[\[200, 1\], \[200, 1, 3\]\]"):
        jac(x, out=(records["y"], records["jacobian"][:100]))


def test_a_python_model_with_tensor_dependent_control_flow_keeps_autograph():
    """The engine traces its own layer chains without AutoGraph, but a user's model function on the autodiff path
    keeps it: a Python ``if`` on a tensor (here, a guard that never fires) would fail to trace without it. (Reverse
    mode without XLA: neither XLA nor forward mode's ``vectorized_map`` of ``ForwardAccumulator`` takes the
    ``tf.cond`` that AutoGraph makes of it.)"""
    def guarded(x):
        if tf.reduce_max(tf.abs(x)) > 1e6:  # AutoGraph turns this into tf.cond
            return tf.zeros_like(x)
        return tf.sin(x) * x[:, :1]

    jac = sensitivity.compile_jacobian(load(guarded, 2, "float64"), "reverse", chunk_size=4, jit_compile=False)
    assert jac.path == "autodiff"
    x = np.random.default_rng(0).uniform(-1, 1, (6, 2))  # a full chunk and a short one
    values, jacobian = jac(x)
    expected = np.zeros((6, 2, 2))  # d(sin(x_j) x_0)/dx_k
    expected[:, 0, 0] = np.cos(x[:, 0]) * x[:, 0] + np.sin(x[:, 0])
    expected[:, 1, 0] = np.sin(x[:, 1])
    expected[:, 1, 1] = np.cos(x[:, 1]) * x[:, 0]
    np.testing.assert_allclose(values, np.sin(x) * x[:, :1], rtol=1e-12)
    np.testing.assert_allclose(jacobian, expected, rtol=1e-12, atol=1e-14)


def _guarded(x):
    """sin(x) x_0 on [B, 2] -> [B, 3] (n_in < n_out: auto picks forward), behind a guard that never fires: AutoGraph
    makes a tf.cond of the Python ``if``, which neither XLA nor forward mode's vectorized_map takes."""
    if tf.reduce_max(tf.abs(x)) > 1e6:
        return tf.zeros_like(tf.concat([x, x[:, :1]], axis=1))
    return tf.concat([tf.sin(x) * x[:, :1], x[:, 1:] ** 2], axis=1)


def _guarded_jacobian(x):
    expected = np.zeros((len(x), 3, 2))  # d(sin(x_j) x_0)/dx_k, d(x_1^2)/dx_1
    expected[:, 0, 0] = np.cos(x[:, 0]) * x[:, 0] + np.sin(x[:, 0])
    expected[:, 1, 0] = np.sin(x[:, 1])
    expected[:, 1, 1] = np.cos(x[:, 1]) * x[:, 0]
    expected[:, 2, 1] = 2 * x[:, 1]
    return expected


def test_a_model_whose_control_flow_forward_mode_cannot_vectorise_takes_forward_mode_by_double_reverse(caplog):
    """mode auto and forward: forward mode by double reverse, with a warning that says why, under XLA."""
    model = load(_guarded, 2, "float64", output={"name": "y", "names": ["a", "b", "c"]})
    x = np.random.default_rng(0).uniform(-1, 1, (10, 2))  # two full chunks and a short one
    for mode in ("auto", "forward"):
        with caplog.at_level("WARNING", logger="sensitivity.engine.jacobian"):
            jac = sensitivity.compile_jacobian(model, mode, chunk_size=4, jit_compile=True)
            values, jacobian = jac(x)
        assert (jac.mode, jac.forward_form) == ("forward", "double reverse")
        assert "forward mode cannot carry the model's tangents" in caplog.text
        assert "forward mode by double reverse instead" in caplog.text and "mode=forward (double reverse)" in jac.settings
        np.testing.assert_allclose(jacobian, _guarded_jacobian(x), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(values[:, 2], x[:, 1] ** 2, rtol=1e-12)
        caplog.clear()


#: float64 central differences hold ~1e-9 of the scale (round-off eps/h with h = 1e-6)
FD_TOL = {"float64": dict(rtol=1e-7, atol=1e-8), "float32": TOL["float32"]}


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_time_stepping_model_in_tf_scan_gets_forward_mode_by_double_reverse(dtype, caplog):
    """A hydrologist's bucket model as tf.scan over days: forward mode's tangents cannot go through its loop, so
    the columns come by double reverse (2 inputs, 6 outputs: forward mode is the cheaper one), checked against
    float64 central differences of the same model in numpy."""
    model = load(reservoir_fn, 2, dtype, output={"name": "q", "names": [f"d{t}" for t in range(6)]})
    with caplog.at_level("WARNING", logger="sensitivity.engine.jacobian"):
        jac = sensitivity.compile_jacobian(model, "auto", chunk_size=8, jit_compile=False)
    assert (jac.mode, jac.forward_form) == ("forward", "double reverse") and "`dtype` <dtype: 'variant'>" in caplog.text
    x = np.random.default_rng(3).uniform([0.05, 0.5], [0.3, 4.0], (11, 2))
    values, jacobian = jac(x)
    np.testing.assert_allclose(values, reservoir_numpy(x), **TOL[dtype])
    np.testing.assert_allclose(jacobian, central_differences(reservoir_numpy, x), **FD_TOL[dtype])
    assert jac.trace_count == 1  # the probe's trace is the one every later call reuses


def test_a_model_whose_reverse_pass_double_reverse_cannot_differentiate_takes_reverse_mode_or_a_clear_error(caplog):
    """The probe catches columns that would be silently wrong: mode auto takes reverse mode, with a warning that
    says why; mode forward is a one-line error naming the fix. And XLA, which cannot compile the reverse pass
    through the loop at the first full chunk, gives way to the plain function with a warning instead of failing
    the call."""
    from sensitivity.errors import ModelError

    model = load(lambda x: reservoir_fn(x, cotangent_stopped), 2, "float64",
                 output={"name": "q", "names": [f"d{t}" for t in range(6)]})
    with caplog.at_level("WARNING", logger="sensitivity.engine.jacobian"):
        jac = sensitivity.compile_jacobian(model, "auto", chunk_size=4, jit_compile=True)
    assert jac.mode == "reverse" and "its columns disagree with a reverse pass at probe points" in caplog.text
    assert "reverse mode instead" in caplog.text
    x = np.random.default_rng(3).uniform([0.05, 0.5], [0.3, 4.0], (11, 2))  # two full chunks and a short one
    with caplog.at_level("WARNING", logger="sensitivity.engine.jacobian"):
        jacobian = jac(x)[1]
    assert "XLA failed on the first full chunk of 4 points" in caplog.text
    np.testing.assert_allclose(jacobian, central_differences(reservoir_numpy, x), **FD_TOL["float64"])
    with pytest.raises(ModelError, match=r"forward mode cannot carry the model's tangents \(.*\), nor differentiate "
                                         r"its reverse pass \(.*\); set jacobian.mode=reverse") as info:
        sensitivity.compile_jacobian(model, "forward", chunk_size=8, jit_compile=False)
    assert "\n" not in str(info.value)


def test_the_activation_of_a_scan_counts_every_step_so_the_chunk_keeps_to_the_memory_budget():
    """Reverse mode (and double reverse) keeps every iteration's tensors of a tf.scan: the measured activation
    grows by at least the step's own tensors per step (s, s^2, k s^2, 1 + s, q, s - q, s - q + r: 7 numbers per
    point), exactly linearly in the number of steps; the loop-blind count grew by 3 per step (the stacked outputs)."""
    sizes = {}
    for steps in (6, 12, 18):
        names = [f"d{t}" for t in range(steps)]
        model = load(lambda x, rain=np.resize(RAIN, steps): reservoir_fn(x, rain=rain), 2, "float64",
                     output={"name": "q", "names": names})
        sizes[steps] = sensitivity.compile_jacobian(model, "reverse").activation_size
    assert sizes[12] - sizes[6] == sizes[18] - sizes[12] >= 6 * 7


def test_the_double_reverse_check_needs_points_where_the_model_is_defined(caplog):
    """A reservoir defined for k < 0.3 only (sqrt(0.3 - k)), with the cotangent-stopping gradient: at the default
    probe points (k in [0.5, 2]) the model is NaN, the check cannot be made and a warning says so; at probe points
    inside its domain (a space's nominal point, as the workflows pass) the wrong columns are caught."""
    def limited(x):
        return reservoir_fn(x, cotangent_stopped) * tf.sqrt(0.3 - x[:, :1])

    model = load(limited, 2, "float64", output={"name": "q", "names": [f"d{t}" for t in range(6)]})
    with caplog.at_level("WARNING", logger="sensitivity.engine.jacobian"):
        blind = sensitivity.compile_jacobian(model, "auto", jit_compile=False)
    assert blind.forward_form == "double reverse"
    assert "could not be checked against a reverse pass: the model is not finite at the probe points (pass " \
           "probe_points inside its domain)" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="sensitivity.engine.jacobian"):
        checked = sensitivity.compile_jacobian(model, "auto", jit_compile=False,
                                               probe_points=np.array([[0.1, 1.0], [0.2, 2.0]]))
    assert checked.mode == "reverse" and "its columns disagree with a reverse pass" in caplog.text
