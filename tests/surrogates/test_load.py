"""Surrogate loading: Keras files with embedded scaling and metadata, SavedModels, functions, and errors."""
from __future__ import annotations

import keras
import numpy as np
import pytest

import sensitivity
from sensitivity.errors import ModelError
from sensitivity.outputs.spec import OutputSpec
from sensitivity.surrogates.scaling import InputScaling, OutputScaling
from tests.helpers.references import central_differences

RNG = np.random.default_rng(3)
OUTPUT = OutputSpec.from_dict({"name": "cases", "units": "day-1", "long_name": "new cases",
                               "dims": [{"name": "day", "values": [1, 2, 3, 4], "units": "day"}]})


def scaled_network(path, seed=0):
    """A tiny network in normalised units wrapped by the scaling layers (log on the first input and output)."""
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((2,))
    z = InputScaling(offset=[-2.0, 5.0], scale=[1.5, 2.0], log=[True, False], names=["k", "t"],
                     units=["day-1", "day"])(inputs)
    h = keras.layers.Dense(16, activation="tanh")(z)
    h = keras.layers.Dense(4)(h)
    y = OutputScaling(offset=[-3.0] * 4, scale=[0.5] * 4, log=True, output_spec=OUTPUT.to_dict())(h)
    keras.Model(inputs, y).save(path)


def test_keras_file_is_self_describing_and_jacobian_is_physical(tmp_path):
    path = tmp_path / "s.keras"
    scaled_network(path)
    model = sensitivity.load_surrogate(path, dtype="float64")
    assert model.input_names == ("k", "t") and model.input_units == ("day-1", "day")
    assert model.output == OUTPUT and model.content_hash.startswith("sha256:")
    x = np.column_stack([RNG.uniform(0.05, 2.0, 30), RNG.uniform(0, 10, 30)])
    values, jacobian = sensitivity.compile_jacobian(model, "forward")(x)
    assert np.all(values > 0)  # the log output transform is undone inside the model
    np.testing.assert_allclose(jacobian, central_differences(model, x), rtol=1e-6, atol=1e-10)


def test_saved_model_matches_keras(tmp_path):
    path = tmp_path / "s.keras"
    scaled_network(path)
    keras_model = sensitivity.load_surrogate(path)
    keras.saving.load_model(path).export(tmp_path / "saved", verbose=False)
    with pytest.raises(ModelError, match=r"is a TF SavedModel: loading it runs its graph.*model.trusted=true"):
        sensitivity.load_surrogate(tmp_path / "saved", input_names=["k", "t"], input_units=["day-1", "day"])
    saved = sensitivity.load_surrogate(tmp_path / "saved", input_names=["k", "t"], input_units=["day-1", "day"],
                                       output=OUTPUT, trusted=True)
    x = np.column_stack([RNG.uniform(0.05, 2.0, 10), RNG.uniform(0, 10, 10)])
    a, b = sensitivity.compile_jacobian(keras_model)(x), sensitivity.compile_jacobian(saved)(x)
    np.testing.assert_allclose(a[0], b[0], rtol=1e-6)
    np.testing.assert_allclose(a[1], b[1], rtol=1e-5, atol=1e-7)


def test_a_users_own_keras_file_names_every_missing_argument_at_once(tmp_path):
    """A plain Keras model stores no names or units: one line names both (was: `input_names` alone, then, once
    given, `input_units`)."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((2,))
    keras.Model(inputs, keras.layers.Dense(3)(keras.layers.Dense(8, activation="tanh")(inputs))).save(
        tmp_path / "own.keras")
    with pytest.raises(ModelError) as raised:
        sensitivity.load_surrogate(tmp_path / "own.keras")
    assert "\n" not in str(raised.value)
    assert "`input_names` and `input_units` are required (the model does not store them)" in str(raised.value)
    with pytest.raises(ModelError, match=r"own.keras: `input_units` is required \(the model does not store it\)$"):
        sensitivity.load_surrogate(tmp_path / "own.keras", input_names=["a", "b"])
    model = sensitivity.load_surrogate(tmp_path / "own.keras", input_names=["a", "b"], input_units=["m", "1"])
    assert model.input_names == ("a", "b")


def test_declared_names_and_shapes_are_checked(tmp_path):
    path = tmp_path / "s.keras"
    scaled_network(path)
    with pytest.raises(ModelError, match=r"`input_names` \['a', 'b'\] disagree with those stored in the model"):
        sensitivity.load_surrogate(path, input_names=["a", "b"])
    with pytest.raises(ModelError, match=r"returns shape \[4\] per point but `output` declares \[3\]"):
        sensitivity.load_surrogate(path, output={"name": "y", "names": ["a", "b", "c"]})
    with pytest.raises(ModelError, match="`input_names` and `input_units` are required"):
        sensitivity.load_surrogate("sensitivity.simulators.analytic:ishigami")
    with pytest.raises(ModelError, match="cannot be imported"):
        sensitivity.load_surrogate("sensitivity.simulators.analytic:nope", input_names=["a"], input_units=["1"])
    with pytest.raises(ModelError, match="surrogate file not found"):
        sensitivity.load_surrogate(tmp_path / "missing.keras")
    (tmp_path / "corrupt.keras").write_bytes(b"not a zip")
    with pytest.raises(ModelError, match="is not a valid .keras archive"):
        sensitivity.load_surrogate(tmp_path / "corrupt.keras")


def test_a_truncated_keras_file_is_named_as_such(tmp_path):
    path = tmp_path / "s.keras"
    scaled_network(path)
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(ModelError, match=r"s.keras is not a valid .keras archive \(truncated or damaged"):
        sensitivity.load_surrogate(path)


def test_a_scalar_output_is_one_output_named_after_the_model():
    import tensorflow as tf

    from sensitivity.engine.jacobian import compile_jacobian
    from sensitivity.surrogates.load import load_surrogate

    def height(x, k=2.0):
        return x[:, 0] * tf.exp(k * x[:, 1])  # y [B]

    s = load_surrogate(height, input_names=["a", "b"], input_units=["m", "1"], kwargs={"k": 3.0}, dtype="float64")
    assert s.output.shape == (1,) and s.output.flat_names() == ["height"]
    x = np.array([[1.0, 0.5], [2.0, -0.1]])
    values, jacobian = compile_jacobian(s, "auto")(x)
    e = np.exp(3.0 * x[:, 1])
    np.testing.assert_allclose(values[:, 0], x[:, 0] * e, rtol=1e-12)
    np.testing.assert_allclose(jacobian[:, 0, :], np.stack([e, 3.0 * x[:, 0] * e], axis=1), rtol=1e-12)
    named = load_surrogate(height, input_names=["a", "b"], input_units=["m", "1"], output={"name": "H", "units": "m"})
    assert named.output.flat_names() == ["H"] and named.output.units == "m"


def test_a_float64_model_under_the_float32_engine_is_cast_at_its_boundary(caplog):
    """A user's function computing in float64 under the float32 engine: the Hessian's chain raised TypeError
    (TensorFlow never promotes dtypes); its outputs are now cast once, at the surrogate, and said in the log."""
    import logging

    import tensorflow as tf

    from sensitivity.engine.hessian import compile_hessian
    from sensitivity.engine.jacobian import compile_jacobian
    from sensitivity.surrogates.load import load_surrogate

    def response(x):
        a, b, c = tf.unstack(tf.cast(x, tf.float64), axis=1)
        return a + b**2 * c

    with caplog.at_level(logging.INFO, logger="sensitivity.surrogates.load"):
        s = load_surrogate(response, input_names=["a", "b", "c"], input_units=["1"] * 3)
    assert [r.getMessage() for r in caplog.records if "cast" in r.getMessage()] == [
        "surrogate test_a_float64_model_under_the_float32_engine_is_cast_at_its_boundary.<locals>.response returns "
        "float64; its outputs are cast to the engine's float32"]
    x = np.array([[0.5, 1.5, 2.0], [-1.0, 0.25, 3.0]], np.float32)
    a, b, c = x.T.astype(float)
    assert s(x).dtype == np.float32
    values, jacobian = compile_jacobian(s, "auto")(x)
    np.testing.assert_allclose(values[:, 0], a + b**2 * c, rtol=1e-6)
    np.testing.assert_allclose(jacobian[:, 0], np.stack([np.ones(2), 2 * b * c, b**2], axis=1), rtol=1e-6)
    hessian = np.asarray(compile_hessian(s.fn, 3, output_size=1, dtype="float32")(x)).reshape(2, 3, 3)
    expected = np.zeros((2, 3, 3))
    expected[:, 1, 1], expected[:, 1, 2], expected[:, 2, 1] = 2 * c, 2 * b, 2 * b
    np.testing.assert_allclose(hessian, expected, rtol=1e-6, atol=1e-6)


def test_a_model_returning_integers_is_refused_in_one_line():
    import tensorflow as tf

    from sensitivity.surrogates.load import load_surrogate

    def counts(x):
        return tf.cast(x[:, 0] > 0, tf.int32)

    with pytest.raises(ModelError, match=r"^surrogate .*counts returns int32 values; a model must return floats"):
        load_surrogate(counts, input_names=["a"], input_units=["1"])


def _with_activation(source, target, activation):
    """``source`` (a .keras archive) with its first Dense layer's activation replaced in ``config.json``."""
    import json
    import zipfile

    with zipfile.ZipFile(source) as archive:
        files = {name: archive.read(name) for name in archive.namelist()}
    config = json.loads(files["config.json"])
    dense = next(layer for layer in config["config"]["layers"] if layer["class_name"] == "Dense")
    dense["config"]["activation"] = activation
    files["config.json"] = json.dumps(config).encode()
    with zipfile.ZipFile(target, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return target


def test_code_in_a_keras_file_is_refused_in_one_line_and_never_run(tmp_path):
    """A Lambda layer and an activation naming os.system: Keras' safe mode refuses them in a message of 4 to 10
    lines that repeats every enclosing layer's config; the refusal is one line naming the file and the reason."""
    from sensitivity.surrogates.load import load_surrogate

    keras.utils.set_random_seed(0)
    plain = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, activation="tanh"), keras.layers.Dense(1)])
    plain.save(tmp_path / "plain.keras")
    keras.Sequential([keras.Input((3,)), keras.layers.Lambda(lambda x: x * 2.0), keras.layers.Dense(1)]).save(
        tmp_path / "lambda.keras")
    cases = {
        tmp_path / "lambda.keras": "Requested the deserialization of a `Lambda` layer whose `function` is a Python "
                                   "lambda.",
        _with_activation(tmp_path / "plain.keras", tmp_path / "system.keras", "os.system"):
            "Could not interpret activation function identifier: os.system",
        _with_activation(tmp_path / "plain.keras", tmp_path / "registered.keras",
                         {"module": "os", "class_name": "function", "config": "system", "registered_name": "system"}):
            "Could not locate function 'system'.",
    }
    for path, reason in cases.items():
        with pytest.raises(ModelError) as caught:
            load_surrogate(path, input_names=["a", "b", "c"], input_units=["1"] * 3)
        assert str(caught.value) == (f"surrogate file {path} cannot be loaded by Keras (safe mode: no code of the "
                                     f"file is run): {reason}")
