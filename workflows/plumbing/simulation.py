"""The simulator of every workflow that runs one (train, verify and its refinement, multifidelity, simulate) and how
its runs are spread: built in one place from the ``simulator`` section and the workflow's own ``*.simulator``.

The simulator is the workflow's own ``package.module:function`` when one is given (``training.simulator``,
``verify.simulator``, ``multifidelity.simulator``, with its ``*_kwargs``), else the program of
``simulator.program`` (the keys of :class:`~sensitivity.simulators.program.ProgramSettings`: a command, its input
templates, its output rules), checked before any run either way. Every run goes through the recorded runner
(:func:`sensitivity.simulators.runner.run_simulator`) with ``simulator.batch_size``, ``simulator.workers`` and the
executor of ``simulator.executor`` (processes of this machine, or a Dask cluster: an existing scheduler, a
``LocalCluster``, a batch system's jobs through dask-jobqueue), so a rerun after a kill runs only what was not
finished, and a program's runs happen in folders under the run directory (``program_runs/`` unless
``simulator.program.run_root`` says otherwise).

:attr:`Simulation.identity` is what the runs depend on (the function's module and its imports by content, or what
the program reads: its templates, files and executable), which every result that runs the simulator folds into its
fingerprint: an edited template reruns, a finished run is never redone.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
from omegaconf import DictConfig

from sensitivity.errors import ConfigError
from sensitivity.simulators.executors import ExecutorSettings
from sensitivity.simulators.runner import RunnerSettings
from workflows.plumbing import build

log = logging.getLogger(__name__)

#: The folder of a program's runs in the run directory, unless ``simulator.program.run_root`` is given.
PROGRAM_RUNS = "program_runs"


@dataclass
class Simulation:
    """A checked simulator and how its runs are spread; close it when done (:meth:`close`, or ``with``).

    Attributes
    ----------
    simulator
        The checked simulator (:class:`~sensitivity.surrogates.simulator.CheckedSimulator`).
    source
        What results record as the simulator: the ``package.module:function``, or the program's label.
    importable
        The ``package.module:function`` (with its kwargs in the config), or ``""`` for a program.
    identity
        The hash of what its runs depend on (module sources, or the program's files).
    runner, executor
        Batches and local workers; where the batches run.
    progress
        Draw a progress bar of the runs.
    """

    simulator: Any
    source: str
    importable: str
    identity: str
    runner: RunnerSettings
    executor: ExecutorSettings
    progress: bool = True

    def run(self, points: np.ndarray, path: Path, desc: str = "simulator"):
        """The simulator's :class:`~sensitivity.simulators.runner.SimulatorRuns` at ``points [N, n]``, recorded in
        the netCDF file ``path`` (its batches in ``<path>.parts/`` until all are there)."""
        from sensitivity.simulators.runner import run_simulator

        return run_simulator(self.simulator, points, path, self.runner, progress=self.progress, desc=desc,
                             executor=self.executor)

    def function(self, directory: Path, desc: str = "simulator") -> Callable[[np.ndarray], np.ndarray]:
        """The simulator as a function ``[M, n] -> [M, *out]`` whose every call goes through :meth:`run`, recorded
        in ``directory/runs-<hash>.nc`` (the hash of :attr:`identity` and the points): a call repeated after a kill
        reuses its finished batches, and an edited simulator runs again."""
        def simulate(points: np.ndarray) -> np.ndarray:
            return self.run(points, directory / f"runs-{self.key(points)[:16]}.nc", desc).values

        return simulate

    def key(self, points: np.ndarray) -> str:
        """SHA-256 (hex) of :attr:`identity` and ``points``: what the simulator's runs at ``points`` depend on."""
        import hashlib

        return hashlib.sha256(self.identity.encode() + np.ascontiguousarray(points, float).tobytes()).hexdigest()

    def close(self) -> None:
        self.simulator.close()

    def __enter__(self) -> Simulation:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def simulation_from(cfg: DictConfig, source: str | None, kwargs: Any, what: str,
                    output_shape: tuple[int, ...] | None = None) -> Simulation | None:
    """The simulator of a workflow, checked before any run: ``source`` (its own ``package.module:function``, with
    ``kwargs``, named ``what`` in errors) when given, else the program of ``cfg.simulator.program``; None when
    neither is set (the workflow says what it needs).

    Raises
    ------
    ConfigError
        A bad key or value of the ``simulator`` section, one line naming it (``simulator.executor.kind``,
        ``simulator.program.command``); kwargs the function does not take.
    ModelError
        The function cannot be imported.
    """
    s = cfg.simulator
    runner, executor = runner_settings(cfg)
    if not source and s.program is None:
        return None
    from sensitivity.surrogates.simulator import SimulatorSettings, simulator_from

    timeout = _checked("simulator.", lambda: build.settings(SimulatorSettings, s))
    if source:
        from workflows.plumbing.model_inputs import simulator_hash

        build.tensorflow()  # the user's module may import it (a program needs none)

        checked = simulator_from(source, build.plain(kwargs), what=what, output_shape=output_shape, settings=timeout)
        return Simulation(checked, source, source, simulator_hash(source), runner, executor, bool(cfg.progress))
    if build.plain(kwargs):
        raise ConfigError(f"{_kwargs_key(what)} is set but the simulator is `simulator.program`, which takes none")
    program = program_of(cfg, output_shape)
    checked = simulator_from(program, what="`simulator.program`", output_shape=output_shape, settings=timeout)
    return Simulation(checked, program.label, "", program.fingerprint(), runner, executor, bool(cfg.progress))


def runner_settings(cfg: DictConfig) -> tuple[RunnerSettings, ExecutorSettings]:
    """The checked runner and executor settings of ``cfg.simulator`` (no TensorFlow, no simulator imported)."""
    s = cfg.simulator
    return (_checked("simulator.", lambda: build.settings(RunnerSettings, s).check()),
            _checked("simulator.", lambda: build.settings(ExecutorSettings, s.executor)))


def program_of(cfg: DictConfig, output_shape: tuple[int, ...] | None = None):
    """The program of ``cfg.simulator.program`` (:func:`sensitivity.simulators.program.program_from`): a mapping of
    its settings, or the path of a YAML file holding them (its relative paths then from that file's folder, e.g.
    ``examples/legacy_program/beam.yaml``); the paths of a mapping relative to the working directory (the study
    folder). Its runs' folders go in ``<run directory>/program_runs`` unless ``run_root`` is given, and its outputs
    are laid onto ``output_shape`` (or ``model.output``'s) unless its own ``output_shape`` is given."""
    from sensitivity.simulators.program import program_from

    mapping = build.plain(cfg.simulator.program)
    if isinstance(mapping, str):
        mapping = _program_file(build.repo_path(mapping))
    if not isinstance(mapping, dict):
        raise ConfigError(f"`simulator.program` must be a mapping of a program's settings (command, parameters, "
                          f"outputs, templates, ...) or the path of a YAML file of them, got {mapping!r}")
    mapping.setdefault("run_root", str((build.output_dir(cfg) / PROGRAM_RUNS).resolve()))
    shape = output_shape or _declared_shape(cfg)
    if mapping.get("output_shape") is None and shape is not None:
        mapping["output_shape"] = list(shape)
    program = _checked("simulator.program.", lambda: program_from(mapping))
    names = build.space_from(cfg).names
    if list(program.settings.parameters) != list(names):
        raise ConfigError(f"`simulator.program.parameters` {list(program.settings.parameters)} must be the space's "
                          f"parameters in its order, {list(names)}: the program reads each point's columns by them")
    return program


def _program_file(path: Path) -> dict:
    """The settings of the program YAML file ``path``, its ``base_dir`` from the file's folder."""
    import yaml

    try:
        mapping = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise ConfigError(f"`simulator.program`: {path} cannot be read as YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(mapping, dict):
        raise ConfigError(f"`simulator.program`: {path} holds no mapping of a program's settings")
    mapping["base_dir"] = str(path.resolve().parent / str(mapping.get("base_dir", ".")))
    return mapping


def _declared_shape(cfg: DictConfig) -> tuple[int, ...] | None:
    from omegaconf import OmegaConf

    from sensitivity.outputs.spec import OutputSpec

    output = OmegaConf.select(cfg, "model.output", default=None)
    return OutputSpec.from_dict(build.plain(output)).shape if output is not None else None


def _checked(prefix: str, make):
    """``make()``, its one-line :class:`ConfigError` naming the key under ``prefix`` (``simulator.``)."""
    try:
        return make()
    except ConfigError as err:
        text = str(err)
        named = re.sub(r"^`", f"`{prefix}", text) if text.startswith("`") else f"`{prefix.rstrip('.')}`: {text}"
        raise ConfigError(named) from None


def _kwargs_key(what: str) -> str:
    """``training.simulator_kwargs`` of ``what`` = ```training.simulator```."""
    return f"{what[:-1]}_kwargs`"
