"""Workflow `train`: fit a Keras MLP surrogate -> surrogate.keras and training.nc (samples + validation report).

The samples come from a simulator run on the ``grid`` design (``training.simulator``,
a batched ``package.module:function`` mapping ``[N, n]`` parameters to ``[N, *out]``
outputs with numpy) or from a file (``training.data``: netCDF ``x(sample, parameter)``
plus the output variable, or CSV). The saved model carries its normalisation, log
transforms, names and units. The report compares the saved model's values on held-out
samples and, when a simulator is given, its Jacobians with float64 central differences
of the simulator.
"""
from __future__ import annotations

import functools
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import numpy as np
from omegaconf import DictConfig

from sensitivity.errors import ConfigError, DataError, ModelError
from sensitivity.samples import read_samples
from workflows import build
from sensitivity.settings import Thresholds, TrainSettings
from workflows.schema import GridConf, JacobianConf, ModelConf, SpaceConf, schema_of

log = logging.getLogger(__name__)


NetworkConf = schema_of(TrainSettings, "NetworkConf", keys=("hidden", "activation", "learning_rate", "batch_size",
                                                         "epochs", "patience", "log_output"))
WarnConf = schema_of(Thresholds, "WarnConf", keys=("warn_r2", "warn_jacobian"),
                     rename={"warn_r2": "r2", "warn_jacobian": "jacobian"})


@dataclass
class TrainingConf(NetworkConf, WarnConf):
    simulator: Optional[str] = None          # "package.module:function": points [N, n] -> outputs [N, *out] (numpy)
    simulator_kwargs: Dict[str, Any] = field(default_factory=dict)
    data: Optional[str] = None               # .nc or .csv of samples: trained on instead of simulating the grid
    log_inputs: Optional[List[str]] = None   # null: the parameters with scale: log
    validation_fraction: float = 0.15        # stops training early
    test_fraction: float = 0.1               # held out for the report
    derivative_points: int = 64              # test samples whose Jacobians are checked against the simulator
    fd_step: float = 1.0e-3                  # central-difference step, as a fraction of each parameter's range
    log_every: int = 100                     # one progress line every this many epochs


@dataclass
class TrainConf:
    model: ModelConf = field(default_factory=ModelConf)
    space: SpaceConf = field(default_factory=SpaceConf)
    grid: GridConf = field(default_factory=GridConf)
    training: TrainingConf = field(default_factory=TrainingConf)
    jacobian: JacobianConf = field(default_factory=JacobianConf)
    seed: int = 0
    export_dir: Optional[str] = None
    output_dir: str = "???"
    progress: bool = True


SCHEMA = TrainConf


def run(cfg: DictConfig) -> Path:
    """Train, save, validate and report; return the path of ``surrogate.keras``."""
    t = cfg.training
    space = build.space_from(cfg)
    simulator = simulator_from(t.simulator, build.plain(t.simulator_kwargs)) if t.simulator else None
    x, y, inputs = _samples(cfg, space, simulator)
    output = _output_spec(cfg, y.shape[1:])

    build.tensorflow()  # after the inputs are known to be good
    from sensitivity import training
    from sensitivity.datasets import provenance, write_atomic
    from sensitivity.surrogate import load_surrogate

    settings = TrainSettings(
        hidden=tuple(t.hidden), activation=t.activation, learning_rate=t.learning_rate, batch_size=t.batch_size,
        epochs=t.epochs, patience=t.patience, log_output=t.log_output,
        log_inputs=tuple(t.log_inputs if t.log_inputs is not None else
                         [p.name for p in space.parameters if p.scale == "log"]),
    )
    split = training.split_samples(len(x), t.validation_fraction, t.test_fraction, cfg.seed)
    log.info("train: %d samples (%d train, %d validation, %d test), MLP %s %s, up to %d epochs", len(x),
             len(split.train), len(split.validation), len(split.test), list(settings.hidden), settings.activation,
             settings.epochs)
    result = training.fit(x, y, split, names=space.names, units=space.units, output=output, settings=settings,
                          seed=cfg.seed, log_every=t.log_every if cfg.progress else None)
    log.info("trained in %.1f s: best validation loss %.3e at epoch %d of %d", result.seconds,
             result.history["val_loss"][result.best_epoch - 1], result.best_epoch, len(result.history["loss"]))
    out_dir = build.output_dir(cfg)
    model_path = _save_model(result.model, out_dir / "surrogate.keras")
    surrogate = load_surrogate(model_path, input_names=space.names, input_units=space.units, output=output,
                               dtype=cfg.jacobian.dtype)
    jac = build.engine_from(cfg, surrogate)
    values = training.value_errors(y[split.test], jac.values(x[split.test]))
    derivatives, checked = None, None
    if simulator is not None:
        checked = split.test[: t.derivative_points]
        scale = training.unit_cube_scale(space, x[checked])
        reference = training.central_differences(simulator, x[checked], t.fd_step * scale)
        derivatives = training.derivative_errors(jac(x[checked])[1], reference, scale)
    else:
        log.info("no training.simulator: derivative fidelity not checked (give one to difference)")
    report = training.report_dataset(
        x, y, split, names=space.names, units=space.units, output=output, values=values, history=result.history,
        derivatives=derivatives, check_samples=checked, parameter_long_names=[p.long_name for p in space.parameters])
    lines = training.summary_lines(values, derivatives, space.names)
    attrs = provenance(title=f"Training samples and validation of the surrogate {model_path.name}", workflow="train",
                       config_yaml=build.config_yaml(cfg), surrogate_source=str(model_path),
                       surrogate_hash=surrogate.content_hash, seed=cfg.seed, inputs=inputs)
    attrs.update(simulator=t.simulator or "", validation="\n".join(lines), training_seconds=f"{result.seconds:.1f}",
                 best_epoch=str(result.best_epoch))
    report_path = write_atomic(report.assign_attrs(attrs), out_dir / "training.nc")
    for line in lines:
        log.info(line)
    thresholds = Thresholds(r2=t.warn_r2, jacobian=t.warn_jacobian)
    for message in training.fidelity_warnings(values, derivatives, space.names, thresholds):
        log.warning(message)
    log.info("surrogate: %s\nreport: %s", model_path, report_path)
    if cfg.export_dir:
        _export([model_path, report_path], Path(cfg.export_dir))
    return model_path


def simulator_from(source: str, kwargs: dict[str, Any]) -> Callable[[np.ndarray], np.ndarray]:
    """The batched simulator ``"package.module:function"`` as a float64 numpy map ``[N, n] -> [N, *out]`` (a simulator
    of one scalar may return ``[N]``: one named output, as for a surrogate function)."""
    from sensitivity.surrogate import import_callable

    build.tensorflow()  # before the user's module, which may import it
    bound = functools.partial(import_callable(source, what="`training.simulator`"), **kwargs)

    def simulate(points: np.ndarray) -> np.ndarray:
        values = np.asarray(bound(np.asarray(points, dtype=np.float64)), dtype=np.float64)
        if values.ndim == 1 and values.shape[0] == len(points):  # one scalar per point: one named output
            values = values[:, None]
        if values.ndim < 2 or values.shape[0] != len(points):
            raise ModelError(f"simulator {source}: expected outputs [N, ...] for {len(points)} points, "
                             f"got shape {list(values.shape)}")
        return values

    return simulate


def _samples(cfg: DictConfig, space, simulator) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``(x, y, input files)``: read from ``training.data`` or simulated on the grid."""
    if cfg.training.data:
        path = build.repo_path(cfg.training.data)
        x, y = read_samples(path, space.names, _declared_output(cfg))
        space.check_points(x, what=f"training.data {path}")
        log.info("train: read %d samples from %s", len(x), path)
        return x, y, [str(path)]
    if simulator is None:
        raise ConfigError("`training.simulator` ('package.module:function') or `training.data` (.nc/.csv samples) "
                          "is required")
    x = build.grid_from(cfg, space).points()
    start = time.perf_counter()
    y = simulator(x)
    log.info("train: simulated %d points of the %s grid in %.1f s", len(x), cfg.grid.kind, time.perf_counter() - start)
    return x, y, []


def _declared_output(cfg: DictConfig):
    from sensitivity.outputs import OutputSpec

    return OutputSpec.from_dict(build.plain(cfg.model.output)) if cfg.model.output is not None else None


def _output_spec(cfg: DictConfig, shape: tuple[int, ...]):
    """``model.output``, checked against the samples' per-point shape (generic labels when not given)."""
    from sensitivity.outputs import OutputSpec

    spec = _declared_output(cfg)
    if spec is None:
        log.warning("train: no model.output given; the surrogate's outputs get generic labels and units '1'")
        return OutputSpec.generic(shape)
    if spec.shape != tuple(shape):
        raise DataError(f"the samples have {list(shape)} outputs per point but model.output declares "
                        f"{list(spec.shape)} (dims {list(spec.dim_names)})")
    return spec


def _save_model(model: Any, path: Path) -> Path:
    """Save the Keras model through a temporary file renamed into place."""
    tmp = path.with_name(f".{path.stem}.tmp.keras")
    model.save(tmp)
    os.replace(tmp, path)
    return path


def _export(paths: list[Path], directory: Path) -> None:
    """Copy ``paths`` into ``directory``, each atomically: a failed copy leaves no partial file there."""
    from sensitivity.datasets import copy_atomic

    for p in paths:
        copy_atomic(p, directory / p.name)
    log.info("exported %s to %s", ", ".join(p.name for p in paths), directory)
