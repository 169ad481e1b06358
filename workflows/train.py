"""Workflow `train`: fit a Keras MLP surrogate, or an ensemble of them -> surrogate.keras (or surrogate.ensemble/)
and training.nc (samples + validation report).

With ``training.members`` K > 1 (the default, 5) K networks are trained from seeds ``seed + k`` on bootstrap
resamples of the training samples and saved as one ensemble directory with a manifest of their hashes
(:mod:`sensitivity.surrogates.ensemble`), which every workflow loads as ``model.source`` like one model.

The samples come from a simulator run ``training.runs`` times on the ``grid`` design (``training.simulator``,
a batched ``package.module:function`` mapping ``[N, n]`` parameters to ``[N, *out]``
outputs with numpy) or from a file (``training.data``: netCDF ``x(sample, parameter)``
plus the output variable, or CSV). The saved model carries its normalisation, log
transforms, names and units. The report compares the saved model's values on held-out
samples and, when a simulator is given, its Jacobians with float64 central differences
of the simulator.

With ``training.jacobian_weight`` > 0 the networks fit the Jacobians too (Sobolev training,
:mod:`sensitivity.training.fit`): the targets come from ``training.simulator_jacobian`` (called with the
simulator's ``simulator_kwargs``) when it is given, else from central differences of ``training.simulator``.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np
from omegaconf import DictConfig

from sensitivity.errors import ConfigError, DataError
from sensitivity.sweep.from_file import read_samples
from sensitivity.settings import EngineSettings
from workflows.plumbing import build
from workflows.plumbing.schema import GridConf, JacobianConf, ModelConf, SimulatorConf, SpaceConf
from workflows.plumbing.simulation import simulation_from
from workflows.plumbing.training_design import training_grid
from workflows.plumbing.training_network import ConvConf
from workflows.plumbing.training_settings import NetworkConf, PlanConf, WarnConf, training_settings

log = logging.getLogger(__name__)


@dataclass
class TrainingConf(NetworkConf, WarnConf, PlanConf, ConvConf):
    simulator: Optional[str] = None          # "package.module:function": points [N, n] -> outputs [N, *out] (numpy)
    simulator_kwargs: Dict[str, Any] = field(default_factory=dict)
    simulator_jacobian: Optional[str] = None  # "package.module:function": points [N, n] -> dy/dx [N, *out, n]
    data: Optional[str] = None               # .nc or .csv of samples: trained on instead of simulating the grid
    log_inputs: Optional[List[str]] = None   # null: the parameters with scale: log
    log_every: int = 100                     # one progress line every this many epochs
    runs: Optional[int] = None               # the training size: simulator runs of the `grid` design (workflows.plumbing.training_design)


@dataclass
class TrainConf:
    model: ModelConf = field(default_factory=ModelConf)
    space: SpaceConf = field(default_factory=SpaceConf)
    grid: GridConf = field(default_factory=GridConf)
    training: TrainingConf = field(default_factory=TrainingConf)
    jacobian: JacobianConf = field(default_factory=JacobianConf)
    input_fields: Any = None  # {name: shape}: the field of inputs of training.architecture: conv
    simulator: SimulatorConf = field(default_factory=SimulatorConf)  # a program, and how the simulator runs
    seed: int = 0
    export_dir: Optional[str] = None
    output_dir: str = "???"
    progress: bool = True


SCHEMA = TrainConf


def run(cfg: DictConfig) -> Path:
    """Train, save, validate and report; return the path of ``surrogate.keras`` (``surrogate.ensemble`` for an
    ensemble of ``training.members`` > 1)."""
    t = cfg.training
    space = build.space_from(cfg)
    network, plan, thresholds = training_settings(t, space, cfg.input_fields)
    engine = build.settings(EngineSettings, cfg.jacobian)
    declared = _declared_output(cfg)
    shape = declared.shape if declared is not None else None
    # the simulator and its kwargs checked before any work (a user's simulator must not get another's kwargs)
    simulation = simulation_from(cfg, t.simulator, t.simulator_kwargs, "`training.simulator`", shape)
    try:
        if network.jacobian_weight > 0 and not (simulation or t.simulator_jacobian):
            raise ConfigError("`training.jacobian_weight` > 0 (Sobolev training) needs `training.simulator_jacobian`, "
                              "`training.simulator` or `simulator.program` (to difference)")
        jacobian = _simulator_jacobian(t, shape) if t.simulator_jacobian and network.jacobian_weight > 0 else None
        with build.result_set(cfg, "train", [cfg.training.data and build.repo_path(cfg.training.data)],
                              simulator=simulation and simulation.identity) as results:
            if results.complete:  # the same samples and settings: the published surrogate is this run's
                build.announce_complete(results, "train")
                model_path = results.path(plan.saved_name)
            else:
                model_path = _train(cfg, space, simulation, jacobian, network, plan, thresholds, engine, results)
    finally:
        if simulation is not None:
            simulation.close()
    if cfg.export_dir:
        _export([model_path, results.path("training.nc")], Path(cfg.export_dir))
    return model_path


def _simulator_jacobian(t: DictConfig, shape: tuple[int, ...] | None):
    """``training.simulator_jacobian`` with the simulator's kwargs, checked against its signature."""
    build.tensorflow()  # the user's module may import it
    from sensitivity.surrogates.simulator import simulator_jacobian_from

    return simulator_jacobian_from(t.simulator_jacobian, build.plain(t.simulator_kwargs), output_shape=shape,
                                   what="`training.simulator_jacobian`")


def _train(cfg: DictConfig, space, simulation, jacobian, network, plan, thresholds, engine, results) -> Path:
    """Simulate or read the samples, train, save, validate and report into ``results``' staging; publish them."""
    import shutil

    from sensitivity.store.checkpoints import Checkpoints

    t = cfg.training
    kept = Checkpoints(results.path(PARTS))
    x, y, inputs = _samples(cfg, space, simulation, kept, results.fingerprint)
    # the derivative check's runs go through the runner too (recorded, on the executor)
    simulator = simulation.function(kept.directory, "train: derivative check") if simulation else None
    output = _output_spec(cfg, y.shape[1:])
    build.tensorflow()  # after the inputs are known to be good
    from sensitivity.datasets import provenance, write_atomic
    from sensitivity.training import train_surrogate

    trained = train_surrogate(x, y, results.staging, space=space, output=output, network=network,
                              plan=plan, engine=engine, thresholds=thresholds, simulator=simulator, simulator_jacobian=jacobian,
                              seed=cfg.seed, log_every=t.log_every if cfg.progress else None, checkpoints=kept)
    model_path = results.path(trained.path.name)  # where it is once published
    attrs = provenance(title=f"Training samples and validation of the surrogate {model_path.name}", workflow="train",
                       config_yaml=build.config_yaml(cfg), surrogate_source=str(model_path),
                       surrogate_hash=trained.surrogate.content_hash, seed=cfg.seed, inputs=inputs,
                       settings=(network, plan, thresholds))
    attrs.update(simulator=simulation.importable if simulation else "",  # verify reruns an importable one
                 simulator_program=simulation.source if simulation and not simulation.importable else "",
                 simulator_jacobian=t.simulator_jacobian or "")
    write_atomic(trained.report.assign_attrs(attrs), results.staging / "training.nc")
    for line in trained.summary:
        log.info(line)
    for message in trained.warnings:
        log.warning(message)
    results.publish()
    shutil.rmtree(kept.directory, ignore_errors=True)  # the finished work is published
    log.info("surrogate: %s\nreport: %s", model_path, results.path("training.nc"))
    return model_path


#: The run directory's unfinished work of ``train``: the simulator's runs and the finished members.
PARTS = "train.parts"


def _samples(cfg: DictConfig, space, simulation, kept, fingerprint: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``(x, y, input files)``: read from ``training.data`` or simulated on the grid (the runs kept in ``kept``
    under the run's ``fingerprint`` and the simulator's identity, reused by a rerun after a kill)."""
    if cfg.training.data:
        path = build.repo_path(cfg.training.data)
        x, y = read_samples(path, space.names, _declared_output(cfg))
        space.check_points(x, what=f"training.data {path}")
        log.info("train: read %d samples from %s", len(x), path)
        return x, y, [str(path)]
    if simulation is None:
        raise ConfigError("`training.simulator` ('package.module:function'), `simulator.program` or `training.data` "
                          "(.nc/.csv samples) is required")
    import hashlib

    x = training_grid(cfg, space).points()
    key = hashlib.sha256(fingerprint.encode() + simulation.key(x).encode()).hexdigest()
    entry = kept.load("simulated", key)
    if entry is not None:
        log.info("train: the simulator's %d runs reused from an interrupted run (%s)", len(x), entry)
        return x, np.load(entry / "y.npy"), []
    from sensitivity.datasets.write import checksum_path

    start = time.perf_counter()
    runs = kept.directory / f"runs-{key[:16]}.nc"  # recorded batches with a progress bar; named by the key
    y = simulation.run(x, runs, "train: simulator").values
    log.info("train: simulated %d points of the %s grid in %.1f s", len(x), cfg.grid.kind, time.perf_counter() - start)
    kept.save("simulated", key, lambda tmp: np.save(tmp / "y.npy", y))
    for done in (runs, checksum_path(runs)):  # kept as y.npy
        done.unlink(missing_ok=True)
    return x, y, []


def _declared_output(cfg: DictConfig):
    from sensitivity.outputs.spec import OutputSpec

    return OutputSpec.from_dict(build.plain(cfg.model.output)) if cfg.model.output is not None else None


def _output_spec(cfg: DictConfig, shape: tuple[int, ...]):
    """``model.output``, checked against the samples' per-point shape (generic labels when not given)."""
    from sensitivity.outputs.spec import OutputSpec

    spec = _declared_output(cfg)
    if spec is None:
        log.warning("train: no model.output given; the surrogate's outputs get generic labels and units '1'")
        return OutputSpec.generic(shape)
    if spec.shape != tuple(shape):
        raise DataError(f"the samples have {list(shape)} outputs per point but model.output declares "
                        f"{list(spec.shape)} (dims {list(spec.dim_names)})")
    return spec


def _export(paths: list[Path], directory: Path) -> None:
    """Copy ``paths`` (files, or an ensemble directory) into ``directory``, each atomically: a failed copy leaves
    no partial file there."""
    import shutil

    from sensitivity.datasets import copy_atomic, write_directory_atomic

    for p in paths:
        if p.is_dir():
            write_directory_atomic(directory / p.name, lambda tmp, source=p: shutil.copytree(source, tmp))
        else:
            copy_atomic(p, directory / p.name)
    log.info("exported %s to %s", ", ".join(p.name for p in paths), directory)
