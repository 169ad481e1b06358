"""Ensembles: one artifact with a verified manifest, loaded like one model; every member's values and Jacobians in
one compiled call, against each member's own engine and float64 central differences."""
from __future__ import annotations

import json

import keras
import numpy as np
import pytest

import sensitivity
from sensitivity.surrogates.ensemble import MANIFEST, read_manifest, write_ensemble
from sensitivity.engine.ensemble import compile_ensemble
from sensitivity.errors import ModelError
from sensitivity.outputs.spec import OutputSpec
from sensitivity.surrogates.scaling import InputScaling, OutputScaling
from tests.helpers.references import central_differences

OUTPUT = OutputSpec.from_dict({"name": "cases", "units": "day-1", "long_name": "new cases",
                               "dims": [{"name": "day", "values": [1, 2, 3, 4], "units": "day"}]})
FIELD = OutputSpec.from_dict({"name": "h", "units": "m", "dims": [
    {"name": "row", "values": [0.0, 1.0], "units": "m"}, {"name": "col", "values": [0.0, 1.0, 2.0], "units": "m"}]})
RNG = np.random.default_rng(5)


def member(seed: int, hidden=(16, 12), output: OutputSpec = OUTPUT) -> keras.Model:
    """A scaled MLP like a trained member: its own input/output normalisation, random weights."""
    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    inputs = keras.Input((2,))
    h = InputScaling(offset=[-2.0 + 0.1 * seed, 5.0], scale=[1.5, 2.0 + 0.2 * seed], log=[True, False],
                     names=["k", "t"], units=["day-1", "day"])(inputs)
    for width in hidden:
        h = keras.layers.Dense(width, activation="tanh")(h)
    h = keras.layers.Dense(output.size)(h)
    h = OutputScaling(offset=list(rng.normal(-3, 0.1, output.size)), scale=[0.5] * output.size, log=True,
                      output_spec=output.to_dict())(h)
    if len(output.shape) > 1:
        h = keras.layers.Reshape(output.shape)(h)
    return keras.Model(inputs, h)


def ensemble_dir(tmp_path, models, name="e.ensemble"):
    return write_ensemble(tmp_path / name, lambda k, file: models[k].save(file), [{"seed": k} for k in range(len(models))])


def points(n: int) -> np.ndarray:
    return np.column_stack([RNG.uniform(0.05, 2.0, n), RNG.uniform(0, 10, n)])


def test_an_ensemble_loads_like_one_model_with_one_hash(tmp_path):
    path = ensemble_dir(tmp_path, [member(k) for k in range(3)])
    model = sensitivity.load_surrogate(path, dtype="float64")
    assert model.n_members == 3 and model.input_names == ("k", "t") and model.output == OUTPUT
    assert model.content_hash == read_manifest(path).content_hash and model.content_hash.startswith("sha256:")
    x = points(20)
    members = [sensitivity.load_surrogate(path / f"member_{k}.keras", dtype="float64") for k in range(3)]
    np.testing.assert_allclose(model(x), np.mean([m(x) for m in members], axis=0), rtol=1e-12)
    manifest = json.loads((path / MANIFEST).read_text())
    assert [m["file"] for m in manifest["members"]] == [f"member_{k}.keras" for k in range(3)]


def test_one_member_file_listed_three_times_is_refused(tmp_path):
    """The manifest lists member_0 three times (its hash right each time): a spread of one network's three copies
    is zero, so the ensemble is refused in one line, naming the two members that are the same file."""
    path = ensemble_dir(tmp_path, [member(k) for k in range(3)])
    manifest = json.loads((path / MANIFEST).read_text())
    manifest["members"] = [dict(manifest["members"][0], seed=k) for k in range(3)]
    (path / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ModelError, match=r"members 0 and 1 are the same file \(sha256:.*distinct trainings"):
        sensitivity.load_surrogate(path)


def test_a_member_of_another_training_is_refused_even_with_its_hash_updated(tmp_path):
    """Member 1 of another ensemble copied over member 1, and the manifest's hash updated to it: its archive says
    which training it comes from, and that is not this ensemble's."""
    from sensitivity.datasets import content_hash

    path = ensemble_dir(tmp_path, [member(k) for k in range(2)])
    other = ensemble_dir(tmp_path, [member(k + 5) for k in range(2)], name="other.ensemble")
    (path / "member_1.keras").write_bytes((other / "member_1.keras").read_bytes())
    manifest = json.loads((path / MANIFEST).read_text())
    manifest["members"][1]["sha256"] = content_hash(path / "member_1.keras")
    (path / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(ModelError, match=r"member 1 \(member_1.keras\) comes from training run .* the ensemble "
                                         r"from .*trainings of one run"):
        sensitivity.load_surrogate(path)
    assert read_manifest(other).info["training_run"] == read_manifest(other).records[0]["training_run"]


def test_an_ensemble_written_before_runs_were_recorded_still_loads():
    """The shipped SEIR ensemble records no training run: it is checked for duplicate members only."""
    from tests.helpers import ROOT

    assert read_manifest(ROOT / "data" / "seir" / "surrogate.ensemble").size == 5


def test_a_changed_member_is_refused(tmp_path):
    path = ensemble_dir(tmp_path, [member(k) for k in range(2)])
    member(7).save(path / "member_1.keras")  # retrained behind the manifest's back
    with pytest.raises(ModelError, match=r"member 1 \(member_1.keras\) has sha256:.* the manifest records"):
        sensitivity.load_surrogate(path)
    (path / "member_1.keras").unlink()
    with pytest.raises(ModelError, match="member 1 file 'member_1.keras' not found"):
        sensitivity.load_surrogate(path)


def test_members_must_agree_on_inputs_and_outputs(tmp_path):
    other = OutputSpec.from_dict({"name": "cases", "units": "day-1", "names": ["a", "b", "c", "d"]})
    path = ensemble_dir(tmp_path, [member(0), member(1, output=other)])
    with pytest.raises(ModelError, match="member 1 has output"):
        sensitivity.load_surrogate(path)


@pytest.mark.parametrize("mode", ["forward", "reverse"])
@pytest.mark.parametrize("output", [OUTPUT, FIELD], ids=["series", "field"])
def test_every_member_in_one_call_matches_its_own_engine_and_finite_differences(tmp_path, mode, output):
    path = ensemble_dir(tmp_path, [member(k, output=output) for k in range(3)])
    model = sensitivity.load_surrogate(path, dtype="float64")
    engine = compile_ensemble(model, mode, chunk_size=16)
    assert engine.path == "member" and engine.members == 3
    x = points(40)  # two full chunks (XLA) and a short one
    values, jacobian = engine(x)
    assert values.shape == (3, 40, *output.shape) and jacobian.shape == (3, 40, *output.shape, 2)
    for k, m in enumerate(model.members):
        own_values, own_jacobian = sensitivity.compile_jacobian(m, mode, jit_compile=False)(x)
        np.testing.assert_allclose(values[k], own_values, rtol=1e-12)
        np.testing.assert_allclose(jacobian[k], own_jacobian, rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(jacobian[k], central_differences(m, x), rtol=1e-6, atol=1e-9)
    assert engine.trace_count == 2  # full chunks with XLA, the short one without: never retraced
    engine(points(16))
    assert engine.trace_count == 2
    flat_values, flat_jacobian = engine.stacked_value_and_jacobian(x)
    m_out = output.size
    np.testing.assert_array_equal(flat_values[:, m_out:2 * m_out], values[1].reshape(40, -1))
    np.testing.assert_array_equal(flat_jacobian[:, 2 * m_out:], jacobian[2].reshape(40, m_out, 2))
    mean = sensitivity.compile_jacobian(model, mode)
    assert mean.path == "dense" and "mean of 3 members" in mean.path_reason
    mean_values, mean_jacobian = mean(x)
    np.testing.assert_allclose(mean_values, values.mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(mean_jacobian, central_differences(model, x), rtol=1e-6, atol=1e-9)


def test_many_engines_in_one_process_trace_without_a_retracing_warning(tmp_path, caplog):
    """A study compiles engines stage after stage in one process, each tracing once per chunk kind: TensorFlow's own
    frequent-tracing detector (the oracle here; it counts traces per code object, so it fires without the switch)
    stays silent, and no engine retraces."""
    path = ensemble_dir(tmp_path, [member(k) for k in range(2)])
    model = sensitivity.load_surrogate(path, dtype="float64")
    with caplog.at_level("WARNING", logger="tensorflow"):
        for _ in range(4):
            ensemble = compile_ensemble(model, "forward", chunk_size=8)
            mean = sensitivity.compile_jacobian(model, "forward", chunk_size=8)
            for engine in (ensemble, mean):
                engine(points(12))  # a full chunk (XLA) and a short one
                engine(points(12))
                assert engine.trace_count == 2
            ensemble.stacked_values(points(12))
    assert not [r for r in caplog.records if "retracing" in r.getMessage()]


def test_members_of_different_architectures_share_one_call_without_stacking(tmp_path):
    path = ensemble_dir(tmp_path, [member(0), member(1, hidden=(8,))])
    model = sensitivity.load_surrogate(path, dtype="float64")
    engine = compile_ensemble(model)
    assert engine.path == "stacked" and "another architecture" in engine.path_reason
    x = points(10)
    values, jacobian = engine(x)
    for k, m in enumerate(model.members):
        np.testing.assert_allclose(jacobian[k], central_differences(m, x), rtol=1e-6, atol=1e-9)
    with pytest.raises(sensitivity.ConfigError, match="`path` 'dense' needs members that are Keras networks of one"):
        compile_ensemble(model, path="dense")


FIELD_NAMES = [f"logk_{i}" for i in range(8)] + ["recharge"]
WELLS = OutputSpec.from_dict({"name": "head", "units": "m", "names": ["w1", "w2", "w3"]})


def trained_conv_member(seed: int) -> keras.Model:
    """A conv member as ``train`` builds it for ``input_fields={logk: [8]}`` and one more input: InputScaling (log
    of the field), the fixed field layout, Reshape, two Conv1D, Flatten, Dense, OutputScaling; random weights."""
    from sensitivity.settings import ConvTrunk, TrainSettings
    from sensitivity.training.fit import build_network

    keras.utils.set_random_seed(seed)
    rng = np.random.default_rng(seed)
    settings = TrainSettings(hidden=(12,), conv=ConvTrunk("logk", (8,), filters=(4, 3)),
                             log_inputs=tuple(FIELD_NAMES[:8]))
    return build_network(field_points(64, rng), rng.normal(size=3), rng.uniform(0.5, 1.5, 3), names=FIELD_NAMES,
                         units=["m s-1"] * 8 + ["mm"], output=WELLS, settings=settings)[0]


def pooled_conv_member(seed: int) -> keras.Model:
    """A user's 2-D conv member: InputScaling, Reshape(3, 3, 1), Conv2D, MaxPooling2D, Conv2D,
    GlobalAveragePooling2D, Dense, OutputScaling (the ninth input, ``recharge``, is a cell of the field here)."""
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((9,))
    h = InputScaling(offset=[0.1 * seed] * 9, scale=[0.8] * 9, log=[True] * 9, names=FIELD_NAMES,
                     units=["m s-1"] * 9)(inputs)
    h = keras.layers.Reshape((3, 3, 1))(h)
    h = keras.layers.Conv2D(4, 2, padding="same", activation="tanh")(h)
    h = keras.layers.MaxPooling2D(2, padding="same")(h)
    h = keras.layers.Conv2D(5, 2, padding="same", activation="tanh")(h)
    h = keras.layers.GlobalAveragePooling2D()(h)
    h = keras.layers.Dense(3)(keras.layers.Dense(8, activation="tanh")(h))
    h = OutputScaling(offset=[10.0, 11.0, 12.0], scale=[0.5, 0.7, 0.9], log=False, output_spec=WELLS.to_dict())(h)
    return keras.Model(inputs, h)


def field_points(n: int, rng: np.random.Generator = RNG) -> np.ndarray:
    return np.exp(rng.uniform(np.log(0.2), np.log(5.0), (n, 9)))  # steps of central differences ~1e-6 of x


@pytest.mark.parametrize("build", [trained_conv_member, pooled_conv_member], ids=["trained-1d", "pooled-2d"])
def test_conv_members_take_the_member_path_and_match_finite_differences(tmp_path, build):
    """Issue 48: conv members (as ``train`` builds them, or with pooling) take the member path in reverse mode: every
    member's reverse conv chain in one compiled call, each member's Jacobian that of float64 central differences."""
    path = ensemble_dir(tmp_path, [build(k) for k in range(2)])
    model = sensitivity.load_surrogate(path, dtype="float64")
    engine = compile_ensemble(model, chunk_size=16)
    assert (engine.path, engine.mode, engine.members) == ("member", "reverse", 2)
    assert engine.path_reason == "2 members' reverse conv chains in turn, in one call"
    x = field_points(40, np.random.default_rng(3))  # two full chunks (XLA) and a short one
    values, jacobian = engine(x)
    assert jacobian.shape == (2, 40, 3, 9)

    def close_to_differences(got, f):  # absolute tolerance: 1e-8 of the largest entry (entries near 0)
        expected = central_differences(f, x)
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-8 * np.abs(expected).max())

    for k, m in enumerate(model.members):
        np.testing.assert_allclose(values[k], m(x), rtol=1e-12)
        close_to_differences(jacobian[k], m)
    assert engine.trace_count == 2
    mean = sensitivity.compile_jacobian(model)
    assert mean.path == "dense" and "mean of 2 members" in mean.path_reason and "reverse conv chain" in mean.path_reason
    close_to_differences(mean(x)[1], model)


def test_conv_members_off_the_member_path_say_which_layer(tmp_path):
    """Forward mode has no pass through max pooling: the ensemble is stacked, and its reason names the member and
    the layer kind, not "MLPs only"."""
    path = ensemble_dir(tmp_path, [pooled_conv_member(k) for k in range(2)])
    engine = compile_ensemble(sensitivity.load_surrogate(path, dtype="float64"), "forward")
    assert engine.path == "stacked"
    assert "member 0: max pooling has no forward mode on the fast path" in engine.path_reason
