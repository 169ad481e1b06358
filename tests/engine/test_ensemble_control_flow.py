"""Ensembles of models with control flow on tensors (a ``tf.scan`` over time steps, a ``tf.cond``): every member's
Jacobian in one compiled call, by the one chunking core the single engine uses (forward mode by double reverse where
TensorFlow cannot carry tangents, the plain graph where XLA cannot compile), against float64 central differences of
each member's numpy twin."""
from __future__ import annotations

import numpy as np
import pytest

import sensitivity
from sensitivity.engine.ensemble import compile_ensemble
from sensitivity.surrogates.ensemble import write_ensemble
from tests.helpers.models import Guarded, Reservoir, guarded_numpy, one_layer_model, reservoir_numpy
from tests.helpers.references import central_differences

GAINS = (1.0, 0.8, 1.3)
#: float64 central differences hold ~1e-9 of the scale (round-off eps/h with h = 1e-6)
FD_TOL = dict(rtol=1e-7, atol=1e-8)
DAYS = {"name": "q", "names": [f"d{t}" for t in range(6)]}
CASES = {
    "scan": (Reservoir, reservoir_numpy, DAYS, ([0.05, 0.5], [0.3, 4.0])),
    "cond": (Guarded, guarded_numpy, {"name": "y", "names": ["a", "b", "c"]}, ([-1.0, -1.0], [1.0, 1.0])),
}


def ensemble(tmp_path, layer, output):
    models = [one_layer_model(layer(gain=g)) for g in GAINS]
    path = write_ensemble(tmp_path / "e.ensemble", lambda k, file: models[k].save(file),
                          [{"seed": k} for k in range(len(models))])
    return sensitivity.load_surrogate(path, input_names=["k", "a"], input_units=["1", "1"], output=output,
                                      dtype="float64")


@pytest.mark.parametrize("case", CASES)
def test_an_ensemble_whose_tangents_forward_mode_cannot_carry_gets_forward_mode_by_double_reverse(tmp_path, case,
                                                                                                 caplog):
    """2 inputs and 3 or 6 outputs: forward mode is the cheaper one, its tangents cannot go through the loop or the
    branch, so the columns come by double reverse (said once in the log); XLA, which cannot compile the branch or the
    loop's reverse pass, gives way to the plain graph at the first full chunk; chunks of 4 over 11 points (two full
    chunks and a short one) never retrace."""
    layer, twin, output, (low, high) = CASES[case]
    model = ensemble(tmp_path, layer, output)
    with caplog.at_level("WARNING"):
        engine = compile_ensemble(model, "auto", chunk_size=4, jit_compile=True)
        x = np.random.default_rng(3).uniform(low, high, (11, 2))
        values, jacobian = engine(x)
    assert (engine.path, engine.mode, engine.forward_form) == ("stacked", "forward", "double reverse")
    assert "mode=forward (double reverse)" in engine.settings
    assert caplog.text.count("forward mode by double reverse instead") == 1
    assert values.shape == (3, 11, len(output["names"])) and jacobian.shape == (3, 11, len(output["names"]), 2)
    for k, gain in enumerate(GAINS):
        np.testing.assert_allclose(values[k], twin(x, gain), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(jacobian[k], central_differences(lambda p: twin(p, gain), x), **FD_TOL)
    traces = engine.trace_count
    engine(x)
    assert engine.trace_count == traces


@pytest.mark.parametrize("case", CASES)
def test_an_ensemble_with_control_flow_in_reverse_mode(tmp_path, case):
    """Reverse mode takes the loop and the branch; stacked members' values against each numpy twin."""
    layer, twin, output, (low, high) = CASES[case]
    model = ensemble(tmp_path, layer, output)
    engine = compile_ensemble(model, "reverse", chunk_size=4, jit_compile=False)
    x = np.random.default_rng(4).uniform(low, high, (6, 2))
    flat_values, flat_jacobian = engine.stacked_value_and_jacobian(x)
    m = len(output["names"])
    for k, gain in enumerate(GAINS):
        np.testing.assert_allclose(flat_values[:, k * m:(k + 1) * m], twin(x, gain), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(flat_jacobian[:, k * m:(k + 1) * m],
                                   central_differences(lambda p: twin(p, gain), x), **FD_TOL)
