"""The verb :func:`train_surrogate`: split, fit, save, reload, validate and report, in one call.

The sequence a notebook and the ``train`` workflow share: the samples are split (train / validation /
test, :func:`~sensitivity.training.fit.split_samples`), the network is fitted
(:func:`~sensitivity.training.fit.fit`), saved through a temporary file renamed into place, loaded back
exactly as any analysis will load it (:func:`sensitivity.surrogate.load_surrogate`), and judged on the
held-out test samples: values against the samples, and, with a simulator, Jacobians against float64
central differences of the simulator (:mod:`~sensitivity.training.validation`). The result carries the
reloaded surrogate and the report dataset (:func:`~sensitivity.training.report.report_dataset`); the caller
writes it.
"""
from __future__ import annotations

import dataclasses
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

from sensitivity.outputs import OutputSpec
from sensitivity.settings import EngineSettings, Thresholds, TrainingPlan, TrainSettings
from sensitivity.simulation import Simulator
from sensitivity.space import ParameterSpace
from sensitivity.training import validation
from sensitivity.training.fit import FitResult, fit, split_samples
from sensitivity.training.report import report_dataset

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainedSurrogate:
    """What :func:`train_surrogate` made.

    Attributes
    ----------
    path
        The saved model file.
    surrogate
        The model loaded back from ``path`` (what every analysis of it sees).
    report
        The samples and the validation report (``training.nc`` without its provenance attributes).
    fits
        How each training went (one per network).
    summary
        The validation in a few human-readable lines.
    warnings
        One-line warnings about a poor fit (values, or derivatives that look worse than the values).
    """

    path: Path
    surrogate: Any
    report: xr.Dataset
    fits: tuple[FitResult, ...]
    summary: tuple[str, ...]
    warnings: tuple[str, ...]


def train_surrogate(
    x: np.ndarray,
    y: np.ndarray,
    path: str | Path,
    *,
    space: ParameterSpace,
    output: OutputSpec,
    network: TrainSettings = TrainSettings(),
    plan: TrainingPlan = TrainingPlan(),
    engine: EngineSettings = EngineSettings(),
    thresholds: Thresholds = Thresholds(),
    simulator: Simulator | None = None,
    seed: int = 0,
    log_every: int | None = None,
) -> TrainedSurrogate:
    """Train a surrogate of ``y = f(x)``, save it to ``path``, reload it and report how well it fits.

    Parameters
    ----------
    x
        ``[N, n]`` parameter samples in physical units, in the order of ``space``.
    y
        ``[N, *output.shape]`` simulator outputs in physical units.
    path
        The ``.keras`` file to write (replaced atomically).
    space
        The parameters: names and units stored in the model; bounds and scales of the derivative check.
    output
        The output description stored in the model.
    network
        Architecture and optimiser.
    plan
        Split and derivative check.
    engine
        How the validation compiles the reloaded model's Jacobian (its dtype is the reload's).
    thresholds
        When a fit is poor enough to warn.
    simulator
        The batched simulator the samples came from: the test Jacobians are checked against its float64 central
        differences (``plan.derivative_points`` points, ``2 n`` runs each). None: values only.
    seed
        Seeds the split, the weights and the batch order.
    log_every
        Log one progress line every this many epochs (None: silent).

    Returns
    -------
    TrainedSurrogate
    """
    from sensitivity.jacobian import compile_jacobian
    from sensitivity.surrogate import load_surrogate

    split = split_samples(len(x), plan.validation_fraction, plan.test_fraction, seed)
    log.info("train: %d samples (%d train, %d validation, %d test), MLP %s %s, up to %d epochs", len(x),
             len(split.train), len(split.validation), len(split.test), list(network.hidden), network.activation,
             network.epochs)
    result = fit(x, y, split, names=space.names, units=space.units, output=output, settings=network, seed=seed,
                 log_every=log_every)
    log.info("trained in %.1f s: best validation loss %.3e at epoch %d of %d", result.seconds,
             result.history["val_loss"][result.best_epoch - 1], result.best_epoch, len(result.history["loss"]))
    path = save_model(result.model, Path(path))
    surrogate = load_surrogate(path, input_names=space.names, input_units=space.units, output=output,
                               dtype=engine.dtype)
    jac = compile_jacobian(surrogate, **{k: v for k, v in dataclasses.asdict(engine).items() if k != "dtype"})
    values = validation.value_errors(y[split.test], jac.values(x[split.test]))
    derivatives, checked = None, None
    if simulator is not None and plan.derivative_points:
        checked = split.test[: plan.derivative_points]
        scale = validation.unit_cube_scale(space, x[checked])
        reference = validation.central_differences(simulator, x[checked], plan.fd_step * scale)
        derivatives = validation.derivative_errors(jac(x[checked])[1], reference, scale)
    else:
        log.info("no simulator: derivative fidelity not checked (give one to difference)")
    report = report_dataset(x, y, split, names=space.names, units=space.units, output=output, values=values,
                            history=result.history, derivatives=derivatives, check_samples=checked,
                            parameter_long_names=[p.long_name for p in space.parameters])
    summary = validation.summary_lines(values, derivatives, space.names)
    report.attrs.update(validation="\n".join(summary), training_seconds=f"{result.seconds:.1f}",
                        best_epoch=str(result.best_epoch))
    warnings = validation.fidelity_warnings(values, derivatives, space.names, thresholds)
    return TrainedSurrogate(path, surrogate, report, (result,), tuple(summary), tuple(warnings))


def save_model(model: Any, path: Path) -> Path:
    """Save the Keras ``model`` to ``path`` through a temporary file renamed into place.

    The temporary name ends in ``.keras`` too (Keras refuses any other suffix).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp.keras")
    model.save(tmp)
    os.replace(tmp, path)
    return path

