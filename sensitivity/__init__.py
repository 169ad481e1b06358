"""sensitivity: compiled Jacobians of neural-network surrogates and the analyses they buy.

The engine in three lines::

    model = sensitivity.load_surrogate("data/seir/surrogate.keras")
    jac = sensitivity.compile_jacobian(model, mode="auto")
    values, jacobian = jac(points)          # [N, n_in] -> [N, *out], [N, *out, n_in]

TensorFlow is imported lazily, on first use of the engine, so that ``import
sensitivity`` and the command line stay fast.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from sensitivity.errors import ConfigError, DataError, ModelError, SensitivityError  # noqa: E402
from sensitivity.inputs.space import Distribution, Parameter, ParameterSpace  # noqa: E402

__version__ = "0.1.0"

_LAZY = {
    "load_surrogate": "sensitivity.surrogates.load",
    "Surrogate": "sensitivity.surrogates.load",
    "OutputSpec": "sensitivity.surrogates.load",
    "compile_jacobian": "sensitivity.engine.jacobian",
    "CompiledJacobian": "sensitivity.engine.jacobian",
    "select": "sensitivity.datasets",
    "open_result": "sensitivity.datasets",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        from sensitivity.runtime.tf_import import import_tensorflow

        import_tensorflow()

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'sensitivity' has no attribute {name!r}")


__all__ = [
    "CompiledJacobian",
    "ConfigError",
    "DataError",
    "Distribution",
    "ModelError",
    "OutputSpec",
    "Parameter",
    "ParameterSpace",
    "SensitivityError",
    "Surrogate",
    "compile_jacobian",
    "load_surrogate",
    "__version__",
]
