"""Workflow `verify`: run the simulator where an analysis depends on the surrogate and judge the surrogate there
-> verify.nc.

Given the results of analyses of a surrogate (``verify.calibration``: calibration.nc, ``verify.posterior``:
posterior.nc, ``verify.indices``: indices.nc, ``verify.reliability``: reliability.nc, ``verify.propagation``:
propagation.nc, any of them) and the simulator
(``verify.simulator``, a batched ``package.module:function`` as for ``train``; left null, the one the surrogate's
training.nc records), the
simulator is run at the points each result depends on: the calibration's best fit and distinct minima, an evenly
spaced subset of the posterior draws (``verify.draws``), the first base rows of the Sobol' design
(``verify.sobol_rows``, redrawn from the indices' recorded settings), a reliability analysis's design points and
its importance samples redrawn from its recorded proposal (``verify.failure_runs`` among those the surrogate fails,
``verify.safe_runs`` among the others, per event: :mod:`sensitivity.analyses.verify.reliability`), the first
``verify.propagation_runs`` points of a propagation's Monte Carlo sample, redrawn from its recorded settings and seed
(the surrogate on all of it: the simulator's mean and std of every output by control variates, judged against the
propagation's own intervals: :mod:`sensitivity.analyses.verify.propagation`). Reliability is
verified here, as a mode of verify, not as a section of the reliability workflow: like every other analysis it is a
published result verified against the simulator in its own run, so the simulator's cost and configuration stay out
of the analysis and a reliability.nc can be verified (and refined) after the fact. The surrogate's error there is
compared with the analysis's own uncertainty (:mod:`sensitivity.analyses.verify`), with a verdict each: the surrogate error below
the sampling error, or not. On an ensemble surrogate the members' spread at the same points is reported beside the
error. Every consumed result is verified first and must have been computed with this run's surrogate, space and
observations (:mod:`workflows.plumbing.chain`).

With ``refine.rounds`` > 0 an ensemble surrogate is refined (:func:`sensitivity.analyses.verify.refine`): each round
adds ``refine.runs_per_round`` simulator runs among those points, where the members disagree most (with a
reliability result: among its design points and draws of its proposal too, where the U-function of AK-MCS, the
members' ``|mean g| / sd g``, is lowest), to the samples
the surrogate was trained on (``refine.training``, default the training.nc beside ``model.source``) and retrains it
with the settings recorded there (:func:`sensitivity.training.train_surrogate`), until every verdict holds or the
rounds are spent. Every round goes into verify.nc (``refine_*`` on ``round``); the last retrained ensemble and its
training.nc into ``refined/``. The verdicts of the analyses' own variables are the given surrogate's; the same
checks of the last retrained ensemble are beside them, every variable prefixed ``refined_`` (``refined_sobol_verdict``,
``refined_calibration_shift_ratio``, ...). A propagation's candidates are its verified runs; a retrained ensemble's
mean and std are its own on the same sample, judged with the half-widths the given propagation reports (its members'
spread, not the retrained ones': propagate again with the refined ensemble for its own).

A kill loses no finished work: the simulator's runs and every member each round retrains are kept in ``verify.parts/``
of the run directory (:class:`sensitivity.store.checkpoints.Checkpoints`, fingerprinted by the run's settings and
inputs and by each member's training data), so a rerun of the same command takes the finished rounds from there
("refinement round r: reused from an interrupted run"), continues at the first unfinished one and publishes what an
uninterrupted run does; ``verify.parts/`` goes once the result set is published.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Dict, Optional

import numpy as np
from omegaconf import DictConfig, OmegaConf, open_dict

from sensitivity.analyses.agreement import HOLDS, WORDS, overall
from sensitivity.analyses.verify import RefinePlan, VerdictSettings, VerifyPlan
from sensitivity.analyses.verify.summary import summary
from workflows.plumbing import build, chain
from workflows.plumbing.reliability_settings import reliability_events
from workflows.plumbing.verify_checks import Checks, Kept, parameter_coords, recorded_propagation
from workflows.plumbing.schema import ObservationsConf, SimulatorConf, SurrogateStudyConf, schema_of
from workflows.plumbing.simulation import simulation_from

log = logging.getLogger(__name__)


PlanConf = schema_of(VerifyPlan, "VerifyPlanConf")
VerdictConf = schema_of(VerdictSettings, "VerdictConf")
RefineConf = schema_of(RefinePlan, "RefineConf", extra=[
    ("training", Optional[str], None)])  # the surrogate's training.nc (null: the one beside model.source)

#: Result kinds verify reads, in the order it checks them.
RESULTS = ("calibration", "posterior", "indices", "reliability", "propagation")
#: The run directory's unfinished work of ``verify``: the simulator's runs and the members of each refinement round.
PARTS = "verify.parts"


@dataclass
class VerifySectionConf(PlanConf, VerdictConf):
    """What is verified against which simulator, and when a value is flagged."""

    simulator: Optional[str] = None  # "package.module:function": points [N, n] -> outputs [N, *out] (numpy); null:
    # the simulator the surrogate's training.nc records (refine.training, or beside model.source)
    simulator_kwargs: Dict[str, Any] = field(default_factory=dict)
    calibration: Optional[str] = None  # a calibration.nc: its best fit and distinct minima
    posterior: Optional[str] = None  # a posterior.nc: a subset of its draws
    indices: Optional[str] = None  # an indices.nc: the first base rows of its Sobol' design
    reliability: Optional[str] = None  # a reliability.nc (importance sampling among its methods): its design points
    # and a subsample of its importance samples, redrawn (verify.failure_runs, verify.safe_runs per event)
    propagation: Optional[str] = None  # a propagation.nc (monte_carlo among its methods): its sample redrawn, the
    # simulator on its first verify.propagation_runs points; the simulator's mean and std by control variates
    strict: bool = False  # a verdict that fails ends the run with exit code 1 (after verify.nc is published)


@dataclass
class VerifyConf(SurrogateStudyConf):
    verify: VerifySectionConf = field(default_factory=VerifySectionConf)
    refine: RefineConf = field(default_factory=RefineConf)
    simulator: SimulatorConf = field(default_factory=SimulatorConf)  # a program, and how the simulator runs
    observations: ObservationsConf = field(default_factory=ObservationsConf)  # of the calibration / posterior
    seed: int = 0
    output_dir: str = "???"
    progress: bool = True


SCHEMA = VerifyConf


def run(cfg: DictConfig) -> Path:
    """Verify the analyses named in ``cfg.verify``; return the path of ``verify.nc``."""
    from sensitivity.errors import ConfigError
    from sensitivity.analyses.calibration.observations import check_path

    v = cfg.verify
    chosen = {key: build.repo_path(v[key]) for key in RESULTS if v[key]}
    if not chosen:
        raise ConfigError("nothing to verify: give `verify.calibration`, `verify.posterior`, `verify.indices`, "
                          "`verify.reliability` and/or `verify.propagation` (result files of analyses of this "
                          "surrogate)")
    if not v.simulator and cfg.simulator.program is None:
        _simulator_of_training(cfg)
    plan = build.settings(VerifyPlan, v)
    refining = build.settings(RefinePlan, cfg.refine)
    training = _training_path(cfg) if refining.rounds else None
    space = build.space_from(cfg)
    needs_obs = any(key in chosen for key in ("calibration", "posterior"))
    if needs_obs and OmegaConf.is_missing(cfg.observations, "path"):
        raise ConfigError("verifying a calibration or a posterior needs its `observations.path`")
    obs_path = check_path(build.repo_path(cfg.observations.path)) if needs_obs else None
    chosen = {key: chain.consumed(cfg, path, f"verify.{key}", space=space,
                                  observations=obs_path if key in ("calibration", "posterior") else None)
              for key, path in chosen.items()}
    if "indices" in chosen:
        _check_sobol_intervals(chosen["indices"])
    if "reliability" in chosen:
        reliability_events(chosen["reliability"], "verify.reliability")  # one-line errors before any simulator run
    if "propagation" in chosen:
        recorded_propagation(chosen["propagation"])
    verdict = build.settings(VerdictSettings, v)
    simulation = simulation_from(cfg, v.simulator, v.simulator_kwargs, "`verify.simulator`")  # kwargs checked
    try:
        with build.result_set(cfg, "verify", [*chosen.values(), obs_path, training],
                              simulator=simulation.identity) as results:
            if results.complete:
                build.announce_complete(results, "verify")
            else:
                import shutil

                from sensitivity.store.checkpoints import Checkpoints

                kept = Kept(Checkpoints(results.path(PARTS)), build.fingerprint(results.fingerprint, simulation.identity))
                _verify(cfg, space, plan, chosen, obs_path, results.staging, refining, training, simulation, verdict,
                        kept)
                results.publish()
                shutil.rmtree(kept.store.directory, ignore_errors=True)  # the finished work is published
    finally:
        simulation.close()
    path = results.path("verify.nc")
    if v.strict:
        _strict(path)
    return path


def _strict(path: Path) -> None:
    """``verify.strict``: a published verdict that does not hold (fails or is inconclusive) is a
    :class:`~sensitivity.errors.VerificationFailed`."""
    from sensitivity.datasets import open_result
    from sensitivity.errors import VerificationFailed

    with open_result(path) as ds:
        verdict, verdicts = ds.attrs.get("verdict"), ds.attrs.get("verdicts", "")
    if verdict != "holds":
        raise VerificationFailed(f"verify.strict: the verdict {verdict} ({verdicts}); the checks are in {path}")


def _check_sobol_intervals(path: Path) -> None:
    """Refuse, before any simulator run, an indices.nc without the Sobol' intervals its check compares with."""
    from sensitivity.datasets import open_result
    from sensitivity.errors import ConfigError

    with open_result(path) as ds:
        if "sobol_S1_interval" in ds and "sobol_ST_interval" in ds:
            return
        listed = ", ".join(str(ds.attrs.get("methods", "")).split())
    raise ConfigError(f"`verify.indices`: {path} holds no Sobol' indices with sampling intervals (`sobol_S1_interval`, "
                      f"`sobol_ST_interval`; its methods: {listed}): verify checks the classic Sobol' indices on "
                      "their design; run indices with `sobol` among its methods, or leave `verify.indices` unset")


def _simulator_of_training(cfg: DictConfig) -> None:
    """``verify.simulator`` left null: set it (and its kwargs) to the simulator the surrogate was trained on, as
    its ``training.nc`` (:func:`_training_path`) records it; a one-line error when none is recorded."""
    import xarray as xr

    from sensitivity.errors import ConfigError

    path = _training_path(cfg)
    name, config = None, "{}"
    if path.is_file():
        with xr.open_dataset(path) as ds:
            name, config = ds.attrs.get("simulator"), ds.attrs.get("config", "{}")
    if not name:
        raise ConfigError("`verify.simulator` ('package.module:function') is required: the model the surrogate "
                          f"stands for (left null, the one the surrogate's training.nc records: "
                          f"{f'{path} records none' if path.is_file() else 'no training.nc beside model.source'})")
    kwargs = OmegaConf.select(OmegaConf.create(config), "training.simulator_kwargs", default={})
    with open_dict(cfg):
        cfg.verify.simulator, cfg.verify.simulator_kwargs = name, kwargs
    log.info("verify: the simulator the surrogate was trained on, %s (recorded by %s); verify.simulator chooses "
             "another", name, path)


def _training_path(cfg: DictConfig) -> Path:
    """The training samples refinement starts from: ``refine.training``, or the training.nc beside ``model.source``."""
    if cfg.refine.training:
        return build.repo_path(cfg.refine.training)
    return build.repo_path(cfg.model.source).parent / "training.nc"


def _verify(cfg: DictConfig, space, plan: VerifyPlan, chosen: dict[str, Path], obs_path: Path | None,
            out_dir: Path, refining: RefinePlan, training: Path | None, simulation, verdict: VerdictSettings,
            kept: "Kept") -> Path:
    """Run every check (and the refinement) -> ``out_dir/verify.nc`` (and ``out_dir/refined/``), keeping the
    finished work in ``kept``."""
    from sensitivity.datasets import provenance, write_atomic

    surrogate = build.surrogate_from(cfg, space)
    simulation.simulator.output_shape = tuple(surrogate.output.shape)  # every call returns the surrogate's outputs
    for key, path in chosen.items():
        chain.consumed(cfg, path, f"verify.{key}", surrogate_hash=surrogate.content_hash)
    simulator = simulation.function(kept.store.directory, "verify: simulator")  # recorded runs, on the executor
    checks = Checks(cfg, space, surrogate, simulator, plan, obs_path, verdict, kept)
    ds = _checks_dataset([getattr(checks, key)(path) for key, path in chosen.items()], space)
    verdicts = {key: int(ds[_verdict_variable(key)]) for key in chosen}
    refined = _refine(cfg, space, checks, chosen, refining, training, out_dir, kept) if refining.rounds else None
    ds.attrs.update(provenance(title=f"Verification of {', '.join(chosen)} of {surrogate.source} against the simulator",
                               workflow="verify", config_yaml=build.config_yaml(cfg), surrogate_source=surrogate.source,
                               surrogate_hash=surrogate.content_hash, seed=cfg.seed,
                               inputs=[*chosen.values(), *([obs_path] if obs_path else [])]),
                    simulator=simulation.source, verdict=WORDS[overall(verdicts.values())],
                    verdicts=" ".join(f"{k}={WORDS[v]}" for k, v in verdicts.items()))
    if refined is not None:
        ds = ds.merge(refined.drop_vars("parameter", errors="ignore"), compat="equals", combine_attrs="drop_conflicts")
        ds.attrs.update(refined.attrs)
    out = write_atomic(ds, out_dir / "verify.nc")
    build.log_summary(log, summary(ds), "verify: ")
    if overall(verdicts.values()) != HOLDS and not cfg.verify.strict:
        log.warning("verify: the verdict %s (%s); the exit code stays 0: verify.strict=true makes it 1",
                    ds.attrs["verdict"].upper(), ds.attrs["verdicts"])
    return out


def _checks_dataset(parts: list, space):
    """The checks' datasets (each on the model's own output dims) as one, on labeled parameters."""
    import xarray as xr

    return xr.merge(parts, combine_attrs="override").assign_coords(parameter_coords(space))


def _verdict_variable(key: str) -> str:
    return f"{'sobol' if key == 'indices' else key}_verdict"


def _refine(cfg: DictConfig, space, checks: "Checks", chosen: dict[str, Path], refining: RefinePlan, training: Path,
            out_dir: Path, kept: "Kept"):
    """Refine the ensemble on the analyses' points, retraining from ``training`` with its recorded settings (each
    round's members kept in ``kept``); the last ensemble (and its training.nc) -> ``out_dir/refined/``. Returns the
    rounds' dataset."""
    import shutil

    from sensitivity.analyses.verify import refine
    from sensitivity.datasets import open_result, provenance, settings_of, write_atomic
    from sensitivity.errors import ConfigError
    from sensitivity.sweep.from_file import read_samples
    from sensitivity.settings import EngineSettings, Thresholds, TrainingPlan, TrainSettings
    from sensitivity.store.checkpoints import Checkpoints
    from sensitivity.training import train_surrogate

    if checks.ensemble is None:
        raise ConfigError("`refine.rounds` > 0 needs an ensemble surrogate (its members' disagreement chooses the "
                          f"runs): {cfg.model.source} is one model")
    training = chain.consumed(cfg, training, "refine.training", surrogate_hash=checks.surrogate.content_hash)
    with open_result(training) as recorded:  # the network, plan and thresholds the ensemble was trained with
        network, training_plan, thresholds = (settings_of(recorded, cls, where=training)
                                              for cls in (TrainSettings, TrainingPlan, Thresholds))
        seed = int(recorded.attrs["seed"])
    output = checks.surrogate.output
    x, y = read_samples(training, space.names, output, key="refine.training")
    # a round's simulator runs are its refine.runs_per_round: train's derivative check (2 n runs per checked point)
    # is left out, and the verdicts judge each round's ensemble
    training_plan = replace(training_plan, derivative_points=0)
    engine = build.settings(EngineSettings, cfg.jacobian)
    candidates = np.vstack([checks.points(key, path) for key, path in chosen.items()])
    state: dict[str, Any] = {"checks": checks, "trained": None, "round": 0}

    def fit(x_new: np.ndarray, y_new: np.ndarray):
        state["round"] += 1
        directory = out_dir / f"refine_round{state['round']}"
        trained = train_surrogate(x_new, y_new.reshape(len(x_new), *output.shape), directory, space=space,
                                  output=output, network=network, plan=training_plan, engine=engine,
                                  thresholds=thresholds, seed=seed,
                                  simulator=checks.simulator,
                                  checkpoints=Checkpoints(kept.store.directory / f"round-{state['round']}"))
        if state["trained"] is not None:
            shutil.rmtree(state["trained"][0])
        state["trained"] = (directory, trained)
        state["checks"] = Checks(cfg, space, trained.surrogate, checks.simulator, checks.plan, checks.obs_path,
                                 checks.verdict, kept, checks.cache)
        how = "reused from an interrupted run" if len(trained.reused) == training_plan.members else "retrained"
        log.info("verify: refinement round %d: %s on %d samples", state["round"], how, len(x_new))
        return state["checks"].members

    def check(members) -> bool:
        current = state["checks"]
        state["parts"] = [getattr(current, key)(path) for key, path in chosen.items()]
        return overall(int(part[_verdict_variable(key)]) for key, part in zip(chosen, state["parts"])) == HOLDS

    priority = checks.u_priority(chosen["reliability"]) if "reliability" in chosen else None  # AK-MCS's U
    ds = refine(checks._simulate, fit, check, x, y.reshape(len(x), -1), candidates, rounds=refining.rounds,
                points_per_round=refining.runs_per_round, initial=checks.members, priority=priority)
    ds.attrs["refined_surrogate"] = ""
    if state["trained"] is not None:
        directory, trained = state["trained"]
        refined_dir = out_dir / "refined"
        directory.rename(refined_dir)
        attrs = provenance(title=f"Training samples and validation of the refined surrogate {trained.path.name}",
                           workflow="verify", config_yaml=build.config_yaml(cfg),
                           surrogate_source=f"refined/{trained.path.name}",
                           surrogate_hash=trained.surrogate.content_hash, seed=seed, inputs=[training],
                           settings=(network, training_plan, thresholds))
        attrs.update(simulator=cfg.verify.simulator or "", simulator_jacobian="")
        write_atomic(trained.report.assign_attrs(attrs), refined_dir / "training.nc")
        ds.attrs.update(refined_surrogate=f"refined/{trained.path.name}",
                        refined_surrogate_hash=trained.surrogate.content_hash)
        ds = ds.merge(_refined_checks(state["parts"], space))
    return ds


def _refined_checks(parts: list, space):
    """The last round's checks (the refined ensemble's), every variable prefixed ``refined_``."""
    ds = _checks_dataset(parts, space)
    for name, variable in ds.data_vars.items():
        variable.attrs["long_name"] = f"refined ensemble: {variable.attrs.get('long_name', name)}"
    return ds.rename({name: f"refined_{name}" for name in ds.data_vars})


