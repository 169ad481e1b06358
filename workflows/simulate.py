"""Workflow `simulate`: the simulator itself over a parameter grid -> simulate.nc.

A parameter study of the real model: the simulator (``simulate.simulator``, a batched ``package.module:function``
with ``simulate.simulator_kwargs``, or the program of ``simulator.program``: :mod:`workflows.plumbing.simulation`)
runs at every point of any of the sweep's grids (``grid``: sobol, halton, lhs, random, factorial, oat, file), or
at the slice ``grid.shard`` of ``grid.num_shards`` of it (a multirun's job, merged by
``sensitivity merge file=simulate.nc``). Its runs go through the recorded runner on ``simulator.executor``
(processes of this machine, or a Dask cluster), in batches of ``simulator.batch_size`` kept in ``simulate.parts/``
until all are there, so a rerun after a kill runs only the batches that were not finished.

``simulate.nc`` has the sweep's layout without Jacobians (:func:`sensitivity.datasets.samples_dataset`): the
points ``x(sample, parameter)`` with the parameters' names and units, and the values on the model's output dims
and labels (``model.output``; generic labels when none is given), with the run's provenance.
``sensitivity train training.data=<simulate.nc>`` trains a surrogate on it.
"""
from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional

from omegaconf import DictConfig

from sensitivity.errors import ConfigError
from workflows.plumbing import build
from workflows.plumbing.schema import GridConf, ModelConf, SimulatorConf, SpaceConf
from workflows.plumbing.simulation import simulation_from

log = logging.getLogger(__name__)

#: The run directory's unfinished work of ``simulate``: the simulator's recorded batches.
PARTS = "simulate.parts"
#: What the errors call the simulator.
WHAT = "`simulate.simulator`"


@dataclass
class SimulateSectionConf:
    simulator: Optional[str] = None  # "package.module:function": points [N, n] -> outputs [N, *out] (numpy); null:
    # the program of `simulator.program`
    simulator_kwargs: Dict[str, Any] = field(default_factory=dict)


@dataclass
class SimulateConf:
    model: ModelConf = field(default_factory=ModelConf)  # model.output: the simulator's output dims and labels
    space: SpaceConf = field(default_factory=SpaceConf)
    grid: GridConf = field(default_factory=GridConf)
    simulate: SimulateSectionConf = field(default_factory=SimulateSectionConf)
    simulator: SimulatorConf = field(default_factory=SimulatorConf)  # a program, and how the simulator runs
    space_file: Optional[str] = None  # a SALib problem file (JSON/YAML) used as the space instead of `space`
    replace_other_settings: bool = False  # replace a result of other settings in the run directory
    recompute: bool = False  # recompute even when the run directory holds this computation's complete result
    output_dir: str = "???"
    progress: bool = True


SCHEMA = SimulateConf


def run(cfg: DictConfig) -> Path:
    """Run the simulator over the grid (this job's shard of it); return the path of ``simulate.nc``."""
    from sensitivity.sweep.designs import shard_bounds

    space = build.space_from(cfg)
    grid = build.grid_from(cfg, space)
    start, stop = shard_bounds(grid.size, cfg.grid.shard, cfg.grid.num_shards)
    output = _output(cfg)
    s = cfg.simulate
    simulation = simulation_from(cfg, s.simulator, s.simulator_kwargs, WHAT, output.shape if output else None)
    if simulation is None:
        raise ConfigError(f"{WHAT} ('package.module:function') or `simulator.program` is required: the model to "
                          "run over the grid")
    with simulation, build.result_set(_without_surrogate(cfg), "simulate",
                                      [cfg.grid.path if cfg.grid.kind == "file" else None],
                                      simulator=simulation.identity) as results:
        if results.complete:
            build.announce_complete(results, "simulate")
            return results.path("simulate.nc")
        parts = results.path(PARTS)
        log.info("simulate: %s at %d points of the %s grid (%d to %d of %d), batches of %d on %s", simulation.source,
                 stop - start, cfg.grid.kind, start, stop, grid.size, simulation.runner.batch_size,
                 simulation.executor.kind)
        points = grid.block(start, stop)
        runs = simulation.run(points, parts / f"runs-{simulation.key(points)[:16]}.nc", "simulate")
        _write(cfg, space, grid.size, (start, stop), points, runs, output, simulation, results.staging)
        results.publish()
        shutil.rmtree(parts, ignore_errors=True)  # the finished work is published
    return results.path("simulate.nc")


def _without_surrogate(cfg: DictConfig) -> DictConfig:
    """``cfg`` with only ``model.output`` of its model: the surrogate (``model.source``, its kwargs and files) is no
    input of the simulator's runs, so training one after ``simulate`` leaves its result's fingerprint as it was."""
    keyed = cfg.copy()
    keyed.model = ModelConf(output=build.plain(cfg.model.output))
    return keyed


def _output(cfg: DictConfig):
    """``model.output`` (None when not given)."""
    from sensitivity.outputs.spec import OutputSpec

    return OutputSpec.from_dict(build.plain(cfg.model.output)) if cfg.model.output is not None else None


def _write(cfg: DictConfig, space, size: int, bounds: tuple[int, int], points, runs, output, simulation,
           out_dir: Path) -> Path:
    """The points and the simulator's values, labeled, with provenance -> ``out_dir/simulate.nc``."""
    import numpy as np

    from sensitivity.datasets import provenance, samples_dataset, write_atomic
    from sensitivity.outputs.spec import OutputSpec

    values = runs.values
    if output is None:
        log.warning("simulate: no model.output given; the simulator's outputs get generic labels and units '1'")
        output = OutputSpec.generic(values.shape[1:])
    values = values.reshape(len(values), *output.shape)
    ds = samples_dataset(np.arange(*bounds), points, values, parameter_names=space.names,
                         parameter_units=space.units, parameter_long_names=[p.long_name for p in space.parameters],
                         output=output, grid_size=size)
    ds.attrs.update(provenance(title=f"Runs of {simulation.source} over a {cfg.grid.kind} grid", workflow="simulate",
                               config_yaml=build.config_yaml(cfg), seed=cfg.grid.seed,
                               inputs=[cfg.grid.path] if cfg.grid.kind == "file" else []),
                    simulator=simulation.source, shard=f"{cfg.grid.shard} of {cfg.grid.num_shards}",
                    sample_range=f"{bounds[0]} {bounds[1]}", simulator_seconds=f"{runs.seconds:.6g}")
    out = write_atomic(ds, out_dir / "simulate.nc")
    log.info("simulate: %d runs, %.3g s of the simulator's own time -> simulate.nc", len(points), runs.seconds)
    return out
