"""The documented routes to the fast paths (issue 48 item 4): a user's own ``.keras`` loaded with the config's
``model.scaling``, a nested functional sub-model, Keras' ``Rescaling`` and ``Normalization`` layers; each against
float64 central differences of the same model. On an unsupported layer the log names it."""
from __future__ import annotations

import keras
import numpy as np
import pytest
from keras import layers as L

import sensitivity
from sensitivity.engine.layers import layer_steps
from tests.helpers.references import central_differences

RNG = np.random.default_rng(48)
MODES = ["forward", "reverse"]
#: float64 engine against float64 central differences (the engine tests' tolerance).
FD = dict(rtol=1e-6, atol=1e-8)
SCALING = {"input": {"offset": [0.0, 1.0, 2.0, 0.5, 1.0, 1.5, 0.0, 1.0], "scale": 0.5, "log": ["k0", "k3"]},
           "output": {"offset": [10.0, -20.0, 30.0], "scale": [2.0, 3.0, 0.25]}}
OUTPUT = {"name": "head", "units": "m", "names": ["w1", "w2", "w3"]}


def load(source, n, **options):
    return sensitivity.load_surrogate(source, input_names=[f"k{i}" for i in range(n)], input_units=["1"] * n,
                                      dtype="float64", **options)


def saved(net: keras.Model, tmp_path) -> str:
    """``net`` saved as a user's ``.keras`` file (loaded in float64 by :func:`load`)."""
    path = tmp_path / "model.keras"
    net.save(path)
    return str(path)


def check(surrogate, mode, x):
    """The engine's Jacobian in ``mode`` on the dense path, equal to central differences of ``surrogate``."""
    engine = sensitivity.compile_jacobian(surrogate, mode)
    assert engine.path == "dense", engine.path_reason
    values, jacobian = engine(x)
    np.testing.assert_allclose(values, surrogate(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(jacobian, central_differences(surrogate, x), **FD)
    return engine


def user_cnn(pool: bool) -> keras.Model:
    """A user's Conv1D network on a field of 8 cells -> 3 outputs, in normalised units (no package layer)."""
    inputs = keras.Input((8,))
    h = L.Reshape((8, 1))(inputs)
    h = L.Conv1D(4, 3, padding="same", activation="tanh")(h)
    h = L.MaxPooling1D(2)(h) if pool else L.Conv1D(2, 3, activation="softplus")(h)
    h = L.Dense(6, activation="tanh")(L.Flatten()(h))
    return keras.Model(inputs, L.Dense(3)(h))


@pytest.mark.parametrize("mode", MODES)
def test_users_keras_cnn_with_config_scaling(tmp_path, mode):
    """A ``.keras`` CNN with ``model.scaling``, as docs/tutorials/surrogates.md says, takes the dense path (forward
    mode through the convolutions; reverse mode through the max pool too), the scaling in physical units."""
    keras.utils.set_random_seed(1)
    path = tmp_path / "cnn.keras"
    user_cnn(pool=mode == "reverse").save(path)
    surrogate = load(str(path), 8, scaling=SCALING, output=OUTPUT)
    check(surrogate, mode, RNG.uniform(0.5, 2.0, (12, 8)))


def test_config_scaling_folds_into_the_first_and_last_dense_kernels(tmp_path):
    """An MLP in a config's scaling reads as the MLP's own steps: the input and output affine maps are part of the
    first and last kernels (the log of two inputs stays an elementwise step before them)."""
    keras.utils.set_random_seed(2)
    net = keras.Sequential([keras.Input((8,)), L.Dense(5, activation="tanh"), L.Dense(3)])
    surrogate = load(saved(net, tmp_path), 8, scaling=SCALING, output=OUTPUT)
    assert [step.kind for step in layer_steps(surrogate.fn, "float64")] == ["elementwise", "affine", "elementwise",
                                                                            "affine"]
    for mode in MODES:
        check(surrogate, mode, RNG.uniform(0.5, 2.0, (12, 8)))


def sub_models() -> keras.Model:
    """A functional model with a nested functional sub-model and a nested sequential one."""
    inner_in = keras.Input((6,))
    inner = keras.Model(inner_in, L.Dense(4)(L.Dense(6, activation="sigmoid")(inner_in)), name="trunk")
    head = keras.Sequential([keras.Input((4,)), L.Dense(5, activation="elu"), L.Dense(2)], name="head")
    inputs = keras.Input((3,))
    return keras.Model(inputs, head(inner(L.Dense(6, activation="tanh")(inputs))))


@pytest.mark.parametrize("mode", MODES)
def test_nested_sub_models(tmp_path, mode):
    keras.utils.set_random_seed(3)
    engine = check(load(saved(sub_models(), tmp_path), 3), mode, RNG.normal(size=(10, 3)))
    assert "Dense x5" in engine.path_reason, engine.path_reason


def scaled_layers() -> keras.Model:
    """Keras' ``Normalization`` (and its inverse) and ``Rescaling`` around and inside an MLP."""
    return keras.Sequential([
        keras.Input((3,)), L.Normalization(mean=[1.0, -2.0, 0.5], variance=[4.0, 0.25, 9.0]),
        L.Dense(6, activation="tanh"), L.Rescaling(0.5, offset=0.1), L.Dense(2),
        L.Normalization(mean=[3.0, -1.0], variance=[2.0, 0.5], invert=True), L.Rescaling([2.0, -3.0], offset=1.0)])


@pytest.mark.parametrize("mode", MODES)
def test_rescaling_and_normalization_layers(tmp_path, mode):
    keras.utils.set_random_seed(4)
    net = scaled_layers()
    kinds = [step.kind for step in layer_steps(net, "float64")]
    assert kinds == ["affine", "elementwise", "affine"]  # every scaling folded into a kernel
    check(load(saved(net, tmp_path), 3), mode, RNG.normal(size=(10, 3)))


@keras.saving.register_keras_serializable(package="tests")
class Twice(keras.layers.Layer):
    """A user's own layer, which the fast path does not know."""

    def call(self, x):
        return 2.0 * x


def test_unsupported_layer_named_as_the_reason(tmp_path, caplog):
    """A user's model in a config's scaling with a custom layer in a sub-model: the autodiff path, and the log
    says which layer (its path of names and its class), not that the model is not a Keras model."""
    inner_in = keras.Input((4,))
    inner = keras.Model(inner_in, L.Dense(3)(Twice(name="twice")(inner_in)), name="block")
    inputs = keras.Input((8,))
    net = keras.Model(inputs, inner(L.Dense(4, activation="tanh")(inputs)))
    surrogate = load(saved(net, tmp_path), 8, scaling=SCALING, output=OUTPUT)
    with caplog.at_level("INFO", logger="sensitivity.engine.jacobian"):
        engine = sensitivity.compile_jacobian(surrogate, "reverse")
    assert engine.path == "autodiff"
    assert "layer 'block/twice' (Twice) is not on the fast path" in engine.path_reason
    assert any("autodiff path" in r.getMessage() and "'block/twice' (Twice)" in r.getMessage() for r in caplog.records)
