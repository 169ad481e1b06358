"""The verb :func:`train_surrogate`: split, fit, save, reload, validate and report, in one call.

The sequence a notebook and the ``train`` workflow share: the samples are split (train / validation /
test, :func:`~sensitivity.training.fit.split_samples`), the network is fitted
(:func:`~sensitivity.training.fit.fit`), saved through a temporary file renamed into place, loaded back
exactly as any analysis will load it (:func:`sensitivity.surrogates.load.load_surrogate`), and judged on the
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
from typing import TYPE_CHECKING, Any

import numpy as np

from sensitivity.errors import ConfigError
from sensitivity.runtime.lazy import lazy_import
from sensitivity.outputs.spec import OutputSpec
from sensitivity.settings import EngineSettings, Thresholds, TrainingPlan, TrainSettings
from sensitivity.store.checkpoints import Checkpoints
from sensitivity.surrogates.simulator import Simulator, SimulatorJacobian
from sensitivity.inputs.space import ParameterSpace
from sensitivity.training import validation
from sensitivity.training.report import MemberReport, report_dataset
from sensitivity.outputs.members import predictive_variance

if TYPE_CHECKING:  # the fit imports TensorFlow: deferred to the call, so that serving the verb imports none
    from sensitivity.training.fit import FitResult, Split

xr = lazy_import("xarray")

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainedSurrogate:
    """What :func:`train_surrogate` made.

    Attributes
    ----------
    path
        The saved model: ``surrogate.keras``, or the ensemble directory ``surrogate.ensemble``.
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
    reused
        The members taken from ``checkpoints`` (finished by an interrupted run) instead of trained.
    """

    path: Path
    surrogate: Any
    report: xr.Dataset
    fits: tuple[FitResult, ...]
    summary: tuple[str, ...]
    warnings: tuple[str, ...]
    reused: tuple[int, ...] = ()


def train_surrogate(
    x: np.ndarray,
    y: np.ndarray,
    directory: str | Path,
    *,
    space: ParameterSpace,
    output: OutputSpec,
    network: TrainSettings = TrainSettings(),
    plan: TrainingPlan = TrainingPlan(),
    engine: EngineSettings = EngineSettings(),
    thresholds: Thresholds = Thresholds(),
    simulator: Simulator | None = None,
    simulator_jacobian: SimulatorJacobian | None = None,
    seed: int = 0,
    log_every: int | None = None,
    checkpoints: Checkpoints | None = None,
) -> TrainedSurrogate:
    """Train a surrogate (or an ensemble) of ``y = f(x)``, save it, reload it and report how well it fits.

    Parameters
    ----------
    x
        ``[N, n]`` parameter samples in physical units, in the order of ``space``.
    y
        ``[N, *output.shape]`` simulator outputs in physical units.
    directory
        Where to write ``surrogate.keras`` (``plan.members == 1``) or the ensemble directory
        ``surrogate.ensemble`` (:mod:`sensitivity.surrogates.ensemble`), replaced atomically.
    space
        The parameters: names and units stored in the model; bounds and scales of the derivative check.
    output
        The output description stored in the model.
    network
        Architecture and optimiser of every member.
    plan
        Split, ensemble (``members``, ``bootstrap``) and derivative check.
    engine
        How the validation compiles the reloaded model's Jacobian (its dtype is the reload's).
    thresholds
        When a fit is poor enough to warn.
    simulator
        The batched simulator the samples came from: the test Jacobians are checked against its float64 central
        differences (``plan.derivative_points`` points, ``2 n`` runs each; none with 0). None: values only.
    simulator_jacobian
        ``[M, n] -> [M, *out, n]``: the simulator's Jacobian ``dy/dx``, the targets of Sobolev training
        (``network.jacobian_weight > 0``). None: those targets are float64 central differences of ``simulator``
        (steps ``plan.fd_step`` times each parameter's range, :func:`~sensitivity.training.unit_cube_scale`;
        ``2 n`` runs per training and validation sample).
    seed
        Seeds the split; member ``k`` is trained (and resampled) with seed ``seed + k``.
    log_every
        Log one progress line every this many epochs (None: silent).
    checkpoints
        Where each finished member is kept (its ``.keras`` file and how its training went) under a fingerprint of
        everything that determines it: the samples, the Sobolev targets, ``network``, ``plan``, ``seed``, the
        member's index and the versions of this package, Keras and TensorFlow. A member kept there with the same
        fingerprint is reused instead of trained (a rerun after a kill), and the saved model's member files are
        copies of the kept ones. None: nothing is kept.

    Returns
    -------
    TrainedSurrogate
        The errors reported are the ensemble mean's (the model every analysis uses); for an ensemble the report
        adds each member's test RMSE and the members' spread (:class:`~sensitivity.training.report.MemberReport`).
    """
    from sensitivity.engine.ensemble import compile_ensemble
    from sensitivity.surrogates.load import load_surrogate
    from sensitivity.training.fit import fit, split_samples

    split = split_samples(len(x), plan.validation_fraction, plan.test_fraction, seed)
    splits = [split] if plan.members == 1 or not plan.bootstrap else \
        [_bootstrap(split, seed + k) for k in range(plan.members)]
    splits += [split] * (plan.members - len(splits))  # members without resampling share the split
    log.info("train: %d samples (%d train, %d validation, %d test), %d x MLP %s %s, up to %d epochs", len(x),
             len(split.train), len(split.validation), len(split.test), plan.members, list(network.hidden),
             network.activation, network.epochs)
    jacobian, targets = _jacobian_targets(x, split, space, network, plan, simulator, simulator_jacobian)
    run = _training_run(x, y, seed, network, plan)
    fits, files, reused = [], [], []
    for k, member_split in enumerate(splits):
        key = _member_fingerprint(run, k, jacobian)
        entry = checkpoints.load(f"member-{k}", key) if checkpoints is not None else None
        if entry is not None:
            result = _kept_member(entry, network)
            log.info("member %d: reused from an interrupted run (%s)", k, entry)
            reused.append(k)
        else:
            result = fit(x, y, member_split, names=space.names, units=space.units, output=output, settings=network,
                         seed=seed + k, log_every=log_every, jacobian=jacobian)
            log.info("%strained in %.1f s: best validation loss %.3e at epoch %d of %d",
                     f"member {k}: " if plan.members > 1 else "", result.seconds,
                     result.history["val_loss"][result.best_epoch - 1], result.best_epoch,
                     len(result.history["loss"]))
            if checkpoints is not None:
                entry = checkpoints.save(f"member-{k}", key, lambda tmp, done=result: _keep_member(done, tmp))
        fits.append(result)
        files.append(entry and entry / MEMBER_MODEL)
    scale = _spread_scale(fits, x[split.validation], y[split.validation]) if plan.members > 1 and \
        plan.calibrate_spread else None
    path = _save(fits, Path(directory), seed, plan, scale, run=run, files=files if checkpoints is not None else None)
    surrogate = load_surrogate(path, input_names=space.names, input_units=space.units, output=output,
                               dtype=engine.dtype)
    ensemble = compile_ensemble(surrogate, **{k: v for k, v in dataclasses.asdict(engine).items() if k != "dtype"})
    member_values = ensemble.values(x[split.test])  # [K, T, *out]
    values = validation.value_errors(y[split.test], member_values.mean(axis=0))
    derivatives, checked = None, None
    if simulator is not None and plan.derivative_points:
        checked = split.test[: plan.derivative_points]
        scale = validation.unit_cube_scale(space, x[checked])
        reference = validation.central_differences(simulator, x[checked], plan.fd_step * scale)
        derivatives = validation.derivative_errors(ensemble(x[checked])[1].mean(axis=0), reference, scale)
    elif simulator is None:
        log.info("no simulator: derivative fidelity not checked (give one to difference)")
    else:
        log.info("derivative fidelity not checked: derivative_points=0 (no simulator runs spent on it)")
    members = None if plan.members == 1 else _member_report(y[split.test], member_values, splits, len(x),
                                                             surrogate.spread_scale, split.test, plan.level)
    report = report_dataset(x, y, split, names=space.names, units=space.units, output=output, values=values,
                            history=_histories(fits), derivatives=derivatives, check_samples=checked,
                            parameter_long_names=[p.long_name for p in space.parameters], members=members)
    summary = validation.summary_lines(values, derivatives, space.names)
    constant = validation.constant_outputs_line(values, output.flat_names())
    summary += [constant] if constant else []
    if members is not None:
        summary.append(f"ensemble of {plan.members}: member test RMSE max {np.nanmax(members.rmse):.4g}; predictive "
                       f"spread of the members on the test samples {np.nanmedian(members.spread / values.rmse):.2f} x "
                       f"the mean's RMSE (median over outputs; 1 is calibrated), spread scale "
                       f"{np.nanmedian(members.scale):.2f} (from the validation samples)")
    report.attrs.update(validation="\n".join(summary), training_seconds=f"{sum(f.seconds for f in fits):.1f}",
                        best_epoch=" ".join(str(f.best_epoch) for f in fits), members=str(plan.members),
                        jacobian_weight=f"{network.jacobian_weight:g}", jacobian_targets=targets)
    warnings = validation.fidelity_warnings(values, derivatives, space.names, thresholds)
    return TrainedSurrogate(path, surrogate, report, tuple(fits), tuple(summary), tuple(warnings), tuple(reused))


def _jacobian_targets(x: np.ndarray, split: Split, space: ParameterSpace, network: TrainSettings, plan: TrainingPlan,
                      simulator: Simulator | None, simulator_jacobian: SimulatorJacobian | None
                      ) -> tuple[np.ndarray | None, str]:
    """The Sobolev targets ``[N, *out, n]`` (NaN on the test samples, which the fit never reads) and how they were
    made; ``(None, "none")`` when the values alone are fitted."""
    if not network.jacobian_weight > 0:
        return None, "none"
    rows = np.union1d(split.train, split.validation)
    if simulator_jacobian is not None:
        part, how = np.asarray(simulator_jacobian(x[rows]), float), "simulator_jacobian"
    elif simulator is not None:
        steps = plan.fd_step * validation.unit_cube_scale(space, x[rows])
        part = validation.central_differences(simulator, x[rows], steps)
        how = f"central differences of the simulator, step fd_step={plan.fd_step:g} of each range " \
              f"({2 * len(rows) * x.shape[1]} runs)"
    else:
        raise ConfigError("`jacobian_weight` > 0 (Sobolev training) needs a `simulator_jacobian`, or a `simulator` "
                          "to difference")
    log.info("train: Sobolev targets of %d samples from %s", len(rows), how)
    jacobian = np.full((len(x), *part.shape[1:]), np.nan)
    jacobian[rows] = part
    return jacobian, how


def _bootstrap(split: Split, seed: int) -> Split:
    """``split`` with its training samples replaced by a bootstrap resample of them (with replacement)."""
    from sensitivity.training.fit import Split

    rng = np.random.default_rng(seed)
    return Split(np.sort(rng.choice(split.train, size=len(split.train), replace=True)), split.validation, split.test)


def _training_run(x: np.ndarray, y: np.ndarray, seed: int, network: TrainSettings, plan: TrainingPlan) -> str:
    """The id of a training run: the SHA-256 of its samples, seed and settings (a retraining of the same run has
    the same id; an ensemble's members must share it, :func:`sensitivity.surrogates.ensemble.read_manifest`)."""
    import hashlib

    digest = hashlib.sha256()
    for part in (np.ascontiguousarray(x, float), np.ascontiguousarray(y, float)):
        digest.update(part.tobytes())
    digest.update(repr((seed, network, plan)).encode())
    return digest.hexdigest()


def _member_fingerprint(run: str, k: int, jacobian: np.ndarray | None) -> str:
    """The identity of member ``k`` of the training ``run`` (:func:`_training_run`): with the Sobolev targets and
    the versions of this package, Keras and TensorFlow, everything that determines its weights."""
    import hashlib

    import keras
    import tensorflow as tf

    from sensitivity import __version__

    targets = "none" if jacobian is None else hashlib.sha256(np.ascontiguousarray(jacobian, float).tobytes()).hexdigest()
    return hashlib.sha256(repr((run, k, targets, __version__, keras.__version__, tf.__version__)).encode()).hexdigest()


#: A kept member's model and the record of its training (:func:`_keep_member`).
MEMBER_MODEL, MEMBER_FIT = "model.keras", "fit.json"


def _keep_member(result: FitResult, directory: Path) -> None:
    """Write a trained member into ``directory``: its model and how its training went (JSON floats round-trip)."""
    import json

    result.model.save(directory / MEMBER_MODEL)
    record = {"history": {key: [float(v) for v in values] for key, values in result.history.items()},
              "best_epoch": result.best_epoch, "seconds": result.seconds}
    (directory / MEMBER_FIT).write_text(json.dumps(record))


def _kept_member(directory: Path, network: TrainSettings) -> FitResult:
    """The member kept in ``directory`` by :func:`_keep_member`, as its training returned it."""
    import json

    import keras

    from sensitivity.training.fit import FitResult

    record = json.loads((directory / MEMBER_FIT).read_text())
    model = keras.saving.load_model(directory / MEMBER_MODEL, safe_mode=True, compile=False)
    return FitResult(model, {key: np.asarray(values, float) for key, values in record["history"].items()},
                     int(record["best_epoch"]), float(record["seconds"]), network)


def _save(fits: list[FitResult], directory: Path, seed: int, plan: TrainingPlan, scale: np.ndarray | None, *,
          run: str, files: list[Path] | None = None) -> Path:
    """``surrogate.keras``, or the ensemble directory ``surrogate.ensemble`` with its manifest (its members
    recorded as trainings of ``run``); member ``k`` is a copy of ``files[k]`` when given, else saved from its
    model."""
    import shutil

    from sensitivity.datasets import copy_atomic
    from sensitivity.surrogates.ensemble import write_ensemble

    def save_member(k: int, file: Path) -> None:
        if files is None:
            fits[k].model.save(file)
        else:
            shutil.copyfile(files[k], file)

    if len(fits) == 1:
        target = directory / plan.saved_name
        return copy_atomic(files[0], target) if files is not None else save_model(fits[0].model, target)
    records = [{"seed": seed + k, "bootstrap": plan.bootstrap, "best_epoch": f.best_epoch} for k, f in enumerate(fits)]
    info: dict[str, Any] = {"trained_by": "sensitivity.training.train_surrogate"}
    if scale is not None:
        info.update(spread_scale=[float(v) for v in scale], spread_scale_from="validation samples")
    return write_ensemble(directory / plan.saved_name, save_member, records, info, training_run=run)


def _spread_scale(fits: list[FitResult], x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per flat output, ``sqrt(MSE / ((1 + 1/K) mean s^2))`` on the samples ``(x, y)``: the factor that makes the
    members' predictive variance match the ensemble mean's squared error there (variance scaling, Levi et al.
    2022, doi:10.3390/s22155540; 1 for an output on which the members agree exactly)."""
    members = np.stack([np.asarray(f.model(x.astype(np.float32)), float).reshape(len(x), -1) for f in fits])
    truth = y.reshape(len(y), -1)
    mse = ((members.mean(axis=0) - truth) ** 2).mean(axis=0)
    spread = predictive_variance(members).mean(axis=0)
    return np.sqrt(np.divide(mse, spread, out=np.ones_like(mse), where=spread > 0))


def _histories(fits: list[FitResult]) -> dict[str, np.ndarray]:
    """The training curves: one member's ``[epochs]``, or ``[K, epochs]`` padded with NaN after a member stopped."""
    if len(fits) == 1:
        return fits[0].history
    longest = max(len(f.history["loss"]) for f in fits)
    return {key: np.array([np.pad(f.history[key], (0, longest - len(f.history[key])), constant_values=np.nan)
                           for f in fits]) for key in fits[0].history}


def _member_report(y_test: np.ndarray, member_values: np.ndarray, splits: list[Split], n: int,
                   scale: tuple[float, ...], test: np.ndarray, level: float) -> MemberReport:
    """Each member's test RMSE and predictions, the members' (calibrated) spread on the test samples and the
    bootstrap counts."""
    rmse = np.sqrt(((member_values - y_test[None]) ** 2).mean(axis=1))
    spread = np.sqrt(predictive_variance(member_values).mean(axis=0))
    counts = np.array([np.bincount(s.train, minlength=n) for s in splits])
    return MemberReport(rmse, spread, counts, np.reshape(scale, spread.shape) if scale else np.ones_like(spread),
                        np.asarray(member_values, float), np.asarray(test), level)


def save_model(model: Any, path: Path) -> Path:
    """Save the Keras ``model`` to ``path`` through a temporary file renamed into place.

    The temporary name ends in ``.keras`` too (Keras refuses any other suffix).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp.keras")
    model.save(tmp)
    os.replace(tmp, path)
    return path

