"""Train a Keras MLP surrogate of a simulator, and judge its values AND its derivatives.

The verb is :func:`train_surrogate` (:mod:`.driver`): split, fit, save, reload, validate, report. Its parts:

* :mod:`.fit` — the split of the samples, the network with its scaling layers, the training loop (values, or
  values and Jacobians: Sobolev training, :func:`normalised_jacobian`);
* :mod:`.validation` — value errors on held-out samples, Jacobian errors against central differences of
  the simulator, warnings and a summary;
* :mod:`.report` — the samples and the validation report as one labeled dataset (``training.nc``).

Settings (TensorFlow-free, in :mod:`sensitivity.settings`): :class:`~sensitivity.settings.TrainSettings`
(network and optimiser), :class:`~sensitivity.settings.TrainingPlan` (split and derivative check) and
:class:`~sensitivity.settings.Thresholds` (when to warn).
"""
from __future__ import annotations

from sensitivity.settings import Thresholds, TrainingPlan, TrainSettings
from sensitivity.training.driver import TrainedSurrogate, save_model, train_surrogate
from sensitivity.training.report import SUBSETS, report_dataset
from sensitivity.training.validation import (DerivativeErrors, ValueErrors, central_differences, derivative_errors,
                                             fidelity_warnings, summary_lines, unit_cube_scale, value_errors)

#: The names of :mod:`.fit`, which imports TensorFlow: served on first use (PEP 562), so that the verb and the
#: settings here import none.
_FIT = ("FitResult", "Split", "build_network", "deterministic_ops", "fit", "input_normalisation",
        "normalised_jacobian", "split_samples", "tangent_scale")


def __getattr__(name: str):
    if name in _FIT:
        import importlib

        module = importlib.import_module("sensitivity.training.fit")
        globals().update({served: getattr(module, served) for served in _FIT})  # `fit`: the function, as before
        return globals()[name]
    raise AttributeError(f"module 'sensitivity.training' has no attribute {name!r}")


__all__ = [
    "SUBSETS", "DerivativeErrors", "FitResult", "Split", "Thresholds", "TrainSettings", "TrainedSurrogate",
    "TrainingPlan", "ValueErrors", "build_network", "central_differences", "derivative_errors", "deterministic_ops",
    "fidelity_warnings", "fit", "input_normalisation", "normalised_jacobian", "report_dataset", "save_model", "split_samples", "summary_lines", "tangent_scale",
    "train_surrogate", "unit_cube_scale", "value_errors",
]
