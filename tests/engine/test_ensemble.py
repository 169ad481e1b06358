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
    with pytest.raises(sensitivity.ConfigError, match="`path` 'dense' needs members that are Keras MLPs of one"):
        compile_ensemble(model, path="dense")
