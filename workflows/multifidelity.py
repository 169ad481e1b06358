"""Workflow `multifidelity`: the simulator's own mean, variance and Sobol' indices of every output from a few of its
runs, the surrogate as control variate -> multifidelity.nc.

The simulator (``multifidelity.simulator``, a batched ``package.module:function`` as for ``train`` and ``verify``,
with ``multifidelity.simulator_kwargs``, or the program of ``simulator.program``; run as the ``simulator`` section
says: :mod:`workflows.plumbing.simulation`) runs at most
``multifidelity.budget`` times: a pilot (``multifidelity.pilot`` runs) measures its cost and its correlation with
the surrogate, the allocation splits the budget, and the rest of its runs go to the first rows of the pick-freeze
design the surrogate runs on whole (:func:`sensitivity.analyses.multifidelity.multifidelity`). Its runs are spread
over ``simulator.workers`` spawned processes (or ``simulator.executor``'s Dask cluster) in batches of
``simulator.batch_size``, every finished batch
recorded in the run directory (``simulator_pilot.nc``, ``simulator_runs_<first>_<last>.nc`` by row block, and
their ``.parts/`` while unfinished: :func:`sensitivity.simulators.runner.run_simulator`), so a rerun after a kill
runs only the missing batches. ``multifidelity.cost_ratio`` fixes the allocation's cost ratio (else measured: a
rerun whose measured ratio moves the allocation runs its new rows into a file of their own). ``plots`` draws
``multifidelity_indices.png`` (:func:`sensitivity.plots.multifidelity.multifidelity_figure`), which the report
shows.

``multifidelity.reliability`` (a reliability.nc of this surrogate, importance sampling among its methods) adds the
simulator's failure probability of each of its events beside the surrogate's
(:func:`sensitivity.analyses.verify.anchored_pf.failure_probabilities`: the analysis's importance-sampling proposal,
redrawn, is the biasing density; the simulator runs on ``multifidelity.failure_runs`` of the draws the surrogate
fails and ``multifidelity.safe_runs`` of the others, per event, recorded as ``simulator_reliability_<k>.nc``),
outside the budget of the indices.

Every bad setting (no simulator, a budget that does not pay for the pilot, a dependent space) is one line before
the model loads (:func:`check`, which ``sensitivity run`` calls for a multifidelity stage before its first stage).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional

from omegaconf import DictConfig

from sensitivity.analyses import multifidelity as mf
from sensitivity.analyses.verify import anchored_pf
from workflows.plumbing import build
from workflows.plumbing.schema import SimulatorConf, SurrogateStudyConf, schema_of
from workflows.plumbing.simulation import runner_settings, simulation_from

log = logging.getLogger(__name__)

StudyConf = schema_of(mf.MultifidelityStudy, "MultifidelityStudyConf")
ReliabilityConf = schema_of(anchored_pf.MFReliability, "MFReliabilityConf", keys=("failure_runs", "safe_runs"))


@dataclass
class MultifidelitySectionConf(StudyConf, ReliabilityConf):
    """The simulator and its budget (how its runs are spread: the ``simulator`` section)."""

    simulator: Optional[str] = None  # "package.module:function": points [N, n] -> outputs [N, *out] (numpy), required
    simulator_kwargs: Dict[str, Any] = field(default_factory=dict)
    reliability: Optional[str] = None  # a reliability.nc (importance sampling among its methods): the simulator's Pf
    # of its events on its proposal (multifidelity.failure_runs + multifidelity.safe_runs simulator runs per event)


@dataclass
class MultifidelityConf(SurrogateStudyConf):
    multifidelity: MultifidelitySectionConf = field(default_factory=MultifidelitySectionConf)
    simulator: SimulatorConf = field(default_factory=SimulatorConf)  # a program, and how the simulator runs
    seed: int = 0
    output_dir: str = "???"
    progress: bool = True
    plots: bool = True  # multifidelity_indices.png: the anchored and the surrogate-only indices side by side


SCHEMA = MultifidelityConf

#: What the errors call the simulator.
WHAT = "`multifidelity.simulator`"


def check(cfg: DictConfig) -> tuple[Any, mf.MultifidelityStudy]:
    """Check every setting before any model loads; return ``(space, study settings)``."""
    from sensitivity.analyses.indices import design, sobol
    from sensitivity.errors import ConfigError

    m = cfg.multifidelity
    if not m.simulator and cfg.simulator.program is None:
        raise ConfigError(f"{WHAT} ('package.module:function') or `simulator.program` is required: the model the "
                          "surrogate stands for, whose own answer the study estimates")
    space = build.space_from(cfg)
    settings = build.settings(mf.MultifidelityStudy, m).check(len(space))
    runner_settings(cfg)
    design.require_independent(space, method="the multifidelity Sobol' indices", instead=sobol.DEPENDENT)
    if m.reliability:
        _reliability_settings(m, settings)
    return space, settings


def _reliability_of(cfg: DictConfig, space) -> Optional[Path]:
    """The reliability.nc ``multifidelity.reliability`` (verified, of this space, with importance sampling), or
    None; read when the study runs (an earlier stage of ``sensitivity run`` may write it)."""
    from workflows.plumbing import chain
    from workflows.plumbing.reliability_settings import reliability_events

    if not cfg.multifidelity.reliability:
        return None
    path = chain.consumed(cfg, cfg.multifidelity.reliability, "multifidelity.reliability", space=space)
    reliability_events(path, "multifidelity.reliability")
    return path


def _reliability_settings(m: DictConfig, study: mf.MultifidelityStudy) -> anchored_pf.MFReliability:
    """The :class:`~sensitivity.analyses.verify.anchored_pf.MFReliability` of ``multifidelity``, at the study's level."""
    return anchored_pf.MFReliability(failure_runs=m.failure_runs, safe_runs=m.safe_runs, level=study.level).check()


def run(cfg: DictConfig) -> Path:
    """Run the multifidelity study of ``cfg``; return the path of ``multifidelity.nc``."""
    space, settings = check(cfg)
    reliability = _reliability_of(cfg, space)
    m = cfg.multifidelity
    simulation = simulation_from(cfg, m.simulator, m.simulator_kwargs, WHAT)  # kwargs checked before any run
    try:
        with build.result_set(cfg, "multifidelity", [reliability], simulator=simulation.identity) as results:
            if results.complete:
                build.announce_complete(results, "multifidelity")
                return results.path("multifidelity.nc")
            runs = _compute(cfg, space, settings, simulation, reliability, results.directory, results.staging)
            for name in runs:
                results.adopt(name)
            results.publish()
    finally:
        simulation.close()
    return results.path("multifidelity.nc")


def _compute(cfg: DictConfig, space, settings, simulation, reliability: Optional[Path], run_dir: Path,
             out_dir: Path) -> list[str]:
    """The study (and the failure probabilities of ``reliability``'s events) -> ``out_dir/multifidelity.nc``;
    return the names of the simulator's run files in ``run_dir``."""
    from sensitivity.datasets import provenance, write_atomic

    surrogate = build.surrogate_from(cfg, space)
    simulation.simulator.output_shape = tuple(surrogate.output.shape)  # every call returns the surrogate's outputs
    engine = build.any_engine(cfg, surrogate, space)  # an ensemble's members: the study handles them
    block = len(space) + 2
    files: list[str] = []

    def staged(points, stage: str):
        first = settings.pilot_blocks(len(space))
        name = "simulator_pilot.nc" if stage == "pilot" else \
            f"simulator_runs_{first}_{first + len(points) // block}.nc"
        files.append(name)
        return simulation.run(points, run_dir / name, f"simulator {stage}")

    log.info("multifidelity: %s anchored on %s, a budget of %d simulator runs (%d the pilot), %d worker(s)",
             surrogate.source, simulation.source, settings.budget,
             settings.pilot_blocks(len(space)) * block, simulation.runner.workers)
    ds = mf.multifidelity(engine, space, settings, simulator=staged, seed=cfg.seed)
    if reliability is not None:
        ds = _failure_probabilities(cfg, ds, space, surrogate, engine, settings, reliability, simulation, run_dir,
                                    files)
    ds.attrs.update(provenance(title=f"Multifidelity estimates of {simulation.source} with {surrogate.source}",
                               workflow="multifidelity", config_yaml=build.config_yaml(cfg),
                               surrogate_source=surrogate.source, surrogate_hash=surrogate.content_hash,
                               seed=cfg.seed, inputs=[reliability] if reliability is not None else []),
                    simulator=simulation.source)
    write_atomic(ds, out_dir / "multifidelity.nc")
    build.log_summary(log, mf.summary(ds), "multifidelity: ")
    if cfg.plots:
        build.file_backend()
        from sensitivity.plots.multifidelity import multifidelity_figure

        log.info("figure: %s", multifidelity_figure(ds, out_dir / "multifidelity_indices.png").name)
    return files


def _failure_probabilities(cfg: DictConfig, ds, space, surrogate, engine, settings, path: Path, simulation,
                           run_dir: Path, files: list[str]):
    """``ds`` with the simulator-anchored failure probabilities of the events of the reliability.nc ``path``; the
    simulator's runs recorded as ``simulator_reliability_<k>.nc`` (named in ``files``)."""
    from sensitivity.analyses.reliability import plan
    from sensitivity.outputs.members import flat_mean_values
    from workflows.plumbing.reliability_settings import reliability_events

    recorded, read = reliability_events(path, "multifidelity.reliability")
    picked = plan(space, surrogate.output, recorded)
    found = read(picked.indices)

    def simulate(points):
        name = f"simulator_reliability_{len([f for f in files if f.startswith('simulator_reliability_')])}.nc"
        files.append(name)
        return simulation.run(points, run_dir / name, "simulator reliability").values

    log.info("multifidelity: reliability %s: the simulator at the design points and %d + %d importance samples of "
             "each of %d events", path, cfg.multifidelity.failure_runs, cfg.multifidelity.safe_runs,
             len(found.design_beta))
    pf = anchored_pf.failure_probabilities(simulate, flat_mean_values(engine), picked.nataf.to_physical, found,
                                           _reliability_settings(cfg.multifidelity, settings), seed=cfg.seed)
    return ds.assign(pf.data_vars).assign_coords(pf.coords).assign_attrs(pf.attrs)
