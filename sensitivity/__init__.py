"""sensitivity: compiled Jacobians of neural-network surrogates and the analyses they buy.

The engine in three lines::

    model = sensitivity.load_surrogate("data/seir/surrogate.keras")
    jac = sensitivity.compile_jacobian(model, mode="auto")
    values, jacobian = jac(points)          # [N, n_in] -> [N, *out], [N, *out, n_in]

Every name of ``__all__`` is served lazily: the study verbs (``calibrate``, ``sample_posterior``, ``propagate``,
``compute_indices``), their settings, the input constructors, ``select`` and ``open_result`` import no
TensorFlow; the engine's names (``load_surrogate``, ``compile_jacobian``, ...) import it on first use. So
``import sensitivity`` and the command line stay fast.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from sensitivity.errors import ConfigError, DataError, ModelError, SensitivityError  # noqa: E402
from sensitivity.inputs.space import Distribution, Parameter, ParameterSpace  # noqa: E402

__version__ = "0.1.0"

#: Name -> module of the names served lazily: a notebook's ``import sensitivity`` imports none of them.
_LAZY = {
    # results
    "select": "sensitivity.datasets", "open_result": "sensitivity.datasets",
    # the study verbs and their settings
    "BatchedModel": "sensitivity.analyses.callables",
    "calibrate": "sensitivity.analyses.calibration", "Fit": "sensitivity.analyses.calibration",
    "ObservationModel": "sensitivity.analyses.calibration",
    "GaussNewton": "sensitivity.analyses.calibration", "LevenbergMarquardt": "sensitivity.analyses.calibration",
    "TrustRegion": "sensitivity.analyses.calibration", "read_observations": "sensitivity.analyses.calibration.observations",
    "sample_posterior": "sensitivity.analyses.posterior", "Sampling": "sensitivity.analyses.posterior",
    "NUTS": "sensitivity.analyses.posterior",
    "Prior": "sensitivity.analyses.posterior",
    "propagate": "sensitivity.analyses.propagation", "Propagation": "sensitivity.analyses.propagation",
    "Unscented": "sensitivity.analyses.propagation", "MonteCarlo": "sensitivity.analyses.propagation",
    "Verdict": "sensitivity.analyses.propagation",
    "compute_indices": ("sensitivity.analyses.indices", "compute"), "LocalDerivatives": "sensitivity.analyses.indices",
    "Dgsm": "sensitivity.analyses.indices", "Sobol": "sensitivity.analyses.indices", "Morris": "sensitivity.analyses.indices",
    "ActiveSubspaces": "sensitivity.analyses.indices", "Shapley": "sensitivity.analyses.indices",
    "SobolDependent": "sensitivity.analyses.indices", "Aggregated": "sensitivity.analyses.indices",
    "GivenData": "sensitivity.analyses.indices", "Intervals": "sensitivity.analyses.indices",
    # the inputs
    "gaussian_inputs": "sensitivity.inputs.uncertainty", "truncated_gaussian_inputs": "sensitivity.inputs.uncertainty",
    "inputs_from_space": "sensitivity.inputs.uncertainty", "draws_inputs": "sensitivity.inputs.uncertainty",
    "OutputSpec": "sensitivity.outputs.spec",
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
        module, attribute = _LAZY[name] if isinstance(_LAZY[name], tuple) else (_LAZY[name], name)
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module 'sensitivity' has no attribute {name!r}")


__all__ = sorted(["ConfigError", "DataError", "Distribution", "ModelError", "Parameter", "ParameterSpace",
                  "SensitivityError", "__version__", *_LAZY, *_ENGINE])
