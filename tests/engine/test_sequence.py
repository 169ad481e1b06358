"""One compile sequence for one model and an ensemble: the same refusals in one line, the chunk size from the memory
budget by the formula of :func:`~sensitivity.engine.chunks.auto_chunk_size`, and the double-reverse check at the
caller's probe points, by :func:`~sensitivity.compile_jacobian` and
:func:`~sensitivity.engine.ensemble.compile_ensemble` alike."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import tensorflow as tf

import sensitivity
from sensitivity.engine.chunks import auto_chunk_size
from sensitivity.engine.ensemble import compile_ensemble
from sensitivity.errors import ConfigError, ModelError
from sensitivity.simulators import analytic
from tests.helpers.models import cotangent_stopped, ishigami_biased, reservoir_fn

DAYS = {"name": "q", "names": [f"d{t}" for t in range(6)]}


def load(fn, n: int, dtype: str = "float64", **kw):
    return sensitivity.load_surrogate(fn, input_names=[f"x{i}" for i in range(n)], input_units=["1"] * n, dtype=dtype,
                                      **kw)


def ensemble_of(*models):
    """An ensemble surrogate of ``models`` (Python functions, so every member takes the stacked autodiff path): the
    members, and their mean as the ensemble's own function."""
    def mean(x: tf.Tensor) -> tf.Tensor:
        return tf.reduce_mean(tf.stack([m.fn(x) for m in models]), axis=0)

    return dataclasses.replace(models[0], fn=mean, members=tuple(models), source="ensemble")


ENGINES = {"single": (sensitivity.compile_jacobian, lambda *models: models[0]), "ensemble": (compile_ensemble,
                                                                                              ensemble_of)}


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("kwargs, message", [
    ({"mode": "sideways"}, "`mode` must be one of"),
    ({"path": "fast"}, "`path` must be one of"),
    ({"memory_budget_mb": 0.5}, r"`jacobian.memory_budget_mb` must lie in \[1, "),
    ({"memory_budget_mb": float("nan")}, "`jacobian.memory_budget_mb` must be a finite number of MiB, got nan"),
    ({"chunk_size": 0}, "`chunk_size` must be a positive integer, got 0"),
])
def test_both_engines_refuse_a_bad_setting_in_the_same_line(engine, kwargs, message):
    compile_, make = ENGINES[engine]
    model = make(load(analytic.ishigami, 3), load(ishigami_biased, 3))
    with pytest.raises(ConfigError, match=message) as info:
        compile_(model, **{"mode": "forward", **kwargs})
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("engine", ENGINES)
def test_both_engines_refuse_a_compute_dtype_outside_float32_and_float64(engine):
    compile_, make = ENGINES[engine]
    members = [dataclasses.replace(load(f, 3), dtype="float16") for f in (analytic.ishigami, ishigami_biased)]
    with pytest.raises(ConfigError, match=r"`dtype` must be one of \('float32', 'float64'\), got 'float16'"):
        compile_(make(*members))


@pytest.mark.parametrize("engine", ENGINES)
def test_a_memory_budget_shrinks_the_chunks_by_the_formula(engine):
    """On the autodiff path the chunk is the largest power of two whose working memory (forward mode: the activations
    and one tangent copy per input, the Jacobian) fits the budget; an ensemble's activations are every member's,
    read off its traced graph, so its chunk is the formula's for them."""
    compile_, make = ENGINES[engine]
    model = make(load(analytic.ishigami, 3), load(ishigami_biased, 3))
    roomy = compile_(model, "forward", jit_compile=False)
    tight = compile_(model, "forward", jit_compile=False, memory_budget_mb=1.0)
    assert tight.chunk_size == auto_chunk_size(tight.activation_size, 3, 1, "forward", 8, 1.0)
    assert roomy.chunk_size == auto_chunk_size(roomy.activation_size, 3, 1, "forward", 8, 1024.0)
    per_point = 8 * (4 * tight.activation_size + 1 * 4 + 3)  # bytes: (n_in + 1) copies, the Jacobian, the point
    assert tight.chunk_size * per_point <= 2**20 < 2 * tight.chunk_size * per_point < roomy.chunk_size * per_point


def test_an_ensembles_activations_are_its_members():
    """The stacked graph holds each member's tensors once per member: at least twice one member's, less the input."""
    one = load(analytic.ishigami, 3)
    single = sensitivity.compile_jacobian(one, "forward", jit_compile=False)
    pair = compile_ensemble(ensemble_of(one, load(analytic.ishigami, 3)), "forward", jit_compile=False)
    assert pair.activation_size >= 2 * (single.activation_size - 3)


@pytest.mark.parametrize("engine", ENGINES)
def test_the_double_reverse_check_runs_at_the_callers_probe_points(engine, caplog):
    """A reservoir defined for k < 0.3 only, with a gradient that stops its cotangent (double reverse would give wrong
    columns): at the default probe points (k in [0.5, 2]) the check cannot be made and a warning says so; at the
    caller's probe points inside the domain the wrong columns are caught (reverse mode, or for mode forward the one-line
    error naming the fix), by either engine."""
    compile_, make = ENGINES[engine]

    def limited(gain):
        return lambda x: gain * reservoir_fn(x, cotangent_stopped) * tf.sqrt(0.3 - x[:, :1])

    model = make(load(limited(1.0), 2, output=DAYS), load(limited(1.5), 2, output=DAYS))
    with caplog.at_level("WARNING"):
        blind = compile_(model, "auto", jit_compile=False)
    assert blind.forward_form == "double reverse"
    assert "could not be checked against a reverse pass: the model is not finite at the probe points" in caplog.text
    inside = np.array([[0.1, 1.0], [0.2, 2.0]])
    caplog.clear()
    with caplog.at_level("WARNING"):
        checked = compile_(model, "auto", jit_compile=False, probe_points=inside)
    assert checked.mode == "reverse" and "its columns disagree with a reverse pass at probe points" in caplog.text
    refused = (r"forward mode cannot carry the model's tangents \(.*\), nor differentiate its reverse pass "
               r"\(its columns disagree .*\); set jacobian.mode=reverse")
    with pytest.raises(ModelError, match=refused) as info:
        compile_(model, "forward", jit_compile=False, probe_points=inside)
    assert "\n" not in str(info.value)
