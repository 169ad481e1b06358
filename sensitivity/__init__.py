"""sensitivity: compiled Jacobians of neural-network surrogates and the analyses they buy.

The engine in three lines::

    model = sensitivity.load_surrogate("data/seir/surrogate.keras")
    jac = sensitivity.compile_jacobian(model, mode="auto")
    values, jacobian = jac(points)          # [N, n_in] -> [N, *out], [N, *out, n_in]

Every name of ``__all__`` is served lazily: the verbs of every study (``calibrate``, ``sample_posterior``,
``propagate``, ``compute_indices``, ``reliability``, ``worth``, ``multifidelity``, the ``verify_*`` checks,
``train_surrogate``, ``sweep_surrogate``, ``run_simulator``: :data:`sensitivity.studies.STUDIES`), their settings,
the input constructors, ``select`` and ``open_result`` import no TensorFlow; the engine's names
(``load_surrogate``, ``compile_jacobian``, ...) import it on first use. So ``import sensitivity`` and the command
line stay fast.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from sensitivity.errors import ConfigError, DataError, ModelError, SensitivityError  # noqa: E402
from sensitivity.inputs.space import Distribution, Parameter, ParameterSpace  # noqa: E402
from sensitivity.studies import face as study_face, resolve  # noqa: E402

__version__ = "0.1.0"

#: Name -> dotted path of the names served lazily: a notebook's ``import sensitivity`` imports none of them. The
#: studies' verbs and settings come from their one declaration (:data:`sensitivity.studies.STUDIES`); beside them,
#: what several studies take.
_LAZY = {
    # results
    "select": "sensitivity.datasets.select", "open_result": "sensitivity.datasets.open_result",
    # the model and the observations several studies take
    "BatchedModel": "sensitivity.analyses.callables.BatchedModel",
    "ObservationModel": "sensitivity.analyses.calibration.ObservationModel",
    "GaussNewton": "sensitivity.analyses.calibration.GaussNewton",
    "LevenbergMarquardt": "sensitivity.analyses.calibration.LevenbergMarquardt",
    "TrustRegion": "sensitivity.analyses.calibration.TrustRegion",
    "read_observations": "sensitivity.analyses.calibration.observations.read_observations",
    "NUTS": "sensitivity.analyses.posterior.NUTS", "Prior": "sensitivity.analyses.posterior.Prior",
    "Unscented": "sensitivity.analyses.propagation.Unscented",
    "MonteCarlo": "sensitivity.analyses.propagation.MonteCarlo",
    "Verdict": "sensitivity.analyses.propagation.Verdict",
    # the inputs and outputs
    "gaussian_inputs": "sensitivity.inputs.uncertainty.gaussian_inputs",
    "truncated_gaussian_inputs": "sensitivity.inputs.uncertainty.truncated_gaussian_inputs",
    "inputs_from_space": "sensitivity.inputs.uncertainty.inputs_from_space",
    "draws_inputs": "sensitivity.inputs.uncertainty.draws_inputs",
    "OutputSpec": "sensitivity.outputs.spec.OutputSpec",
    # the study verbs and their settings
    **study_face(),
}

#: The engine's names: serving one imports TensorFlow first (quietly, once).
_ENGINE = {
    "load_surrogate": "sensitivity.surrogates.load",
    "Surrogate": "sensitivity.surrogates.load",
    "compile_jacobian": "sensitivity.engine.jacobian",
    "CompiledJacobian": "sensitivity.engine.jacobian",
    "compile_ensemble": "sensitivity.engine.ensemble",
    "CompiledEnsemble": "sensitivity.engine.ensemble",
}


def __getattr__(name: str):
    import importlib

    if name in _ENGINE:
        from sensitivity.runtime.tf_import import import_tensorflow

        import_tensorflow()
        return getattr(importlib.import_module(_ENGINE[name]), name)
    if name in _LAZY:
        return resolve(_LAZY[name])
    raise AttributeError(f"module 'sensitivity' has no attribute {name!r}")


__all__ = sorted(["ConfigError", "DataError", "Distribution", "ModelError", "Parameter", "ParameterSpace",
                  "SensitivityError", "__version__", *_LAZY, *_ENGINE])
