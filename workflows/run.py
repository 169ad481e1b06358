"""Workflow `run`: a study's stages, a chain of workflows run in one process, cached by content.

The stages come from the study's experiment file (``stages:``; the SEIR demo's is the default): each names a
workflow, the overrides that set it up, and which earlier stage's result feeds which of its config keys. Every
stage writes into its own subdirectory of the run dir (``outputs/run/<study>/<stage>``) through the
run-directory protocol (:mod:`sensitivity.datasets.publish`), so each result stands alone with its provenance and
manifest, and a rerun skips every stage whose settings, inputs (by checksum), model and package version are
unchanged. The study's report (:func:`workflows.report.render_report`) is written last, into the run dir.
"""
from __future__ import annotations

import logging
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from omegaconf import DictConfig

from sensitivity.errors import ConfigError
from workflows.plumbing import build

log = logging.getLogger(__name__)


@dataclass
class StageConf:
    name: str
    workflow: str
    overrides: List[str] = field(default_factory=list)
    # config key of this stage -> name of the earlier stage whose result file it takes
    inputs: Dict[str, str] = field(default_factory=dict)


@dataclass
class RunConf:
    stages: List[StageConf] = field(default_factory=list)  # the study's, from its experiment file
    study: Optional[str] = None  # the experiment every stage composes; null: the one this run was given
    force: Any = False  # true: recompute every stage; a list of stage names: those (and what they feed)
    output_dir: str = "???"
    progress: bool = True
    plots: bool = True


SCHEMA = RunConf

#: Overrides of the run's own command line that are not passed on to its stages.
NOT_PASSED_ON = ("experiment", "hydra", "output_dir", "study", "stages", "force")


def run(cfg: DictConfig) -> Path:
    """Run every stage in order, then write the study's report (``report.html``); return the run directory.

    Each stage composes its workflow with the study's experiment (``study``, default: this run's; a stage whose
    overrides name an experiment of its own takes that one), its own overrides, then this run's command-line
    overrides, into ``<run dir>/<stage>``. A stage whose settings and
    inputs are unchanged finds its complete result there and is skipped (logged); a stage they changed replaces
    its result, and so do the stages fed by it (their inputs changed).
    """
    from hydra import compose

    from workflows.plumbing.naming import override
    from workflows.report import render_report
    from workflows.plumbing.registry import WORKFLOWS
    from workflows.plumbing.runner import check_workflow, run_workflow
    from workflows.plumbing.schema import register

    if not cfg.stages:
        raise ConfigError("`stages` is empty: the study's experiment file lists the stages (see "
                          "conf/experiment/seir.yaml), e.g. sensitivity run experiment=seir")
    study, passed_on = _study_and_overrides(cfg)
    forced = _forced(cfg)
    root = build.output_dir(cfg)

    def overrides_of(stage, inputs: list[str]) -> list[str]:
        own_experiment = any(o.lstrip("+~").split("=")[0] == "experiment" for o in stage.overrides)
        return [*([f"experiment={study}"] if study and not own_experiment else []), *stage.overrides, *passed_on,
                override("output_dir", root / stage.name), f"progress={cfg.progress}", f"plots={cfg.plots}",
                "replace_other_settings=true", *(["recompute=true"] if forced(stage.name) else []), *inputs]

    made: set[str] = set()
    for stage in cfg.stages:  # every stage's settings, before the first one runs
        if stage.workflow not in WORKFLOWS or stage.workflow == "run":
            raise ConfigError(f"stages: unknown workflow {stage.workflow!r} in stage {stage.name!r}")
        missing = [s for s in stage.inputs.values() if s not in made]
        if missing:
            raise ConfigError(f"stage {stage.name!r} takes the result of {missing}, which no earlier stage made")
        made.add(stage.name)
        register(stage.workflow)  # its `<workflow>_schema` (the command line stores only this run's)
        try:
            check_workflow(stage.workflow, compose(config_name=stage.workflow, overrides=overrides_of(stage, [])))
        except ConfigError as error:
            raise ConfigError(f"stage {stage.name!r}: {error}") from error
    results: dict[str, Path] = {}
    commands: dict[str, str] = {}
    for stage in cfg.stages:
        overrides = overrides_of(stage, [override(key, results[source]) for key, source in stage.inputs.items()])
        stage_cfg = compose(config_name=stage.workflow, overrides=overrides)
        log.info("stage %s: sensitivity %s %s", stage.name, stage.workflow,
                 " ".join([*stage.overrides, *passed_on]))
        commands[stage.name] = shlex.join(["sensitivity", stage.workflow, *overrides])
        results[stage.name] = run_workflow(stage.workflow, stage_cfg)
    log.info("study done; results:")
    for name, path in results.items():
        log.info("  %-10s %s", name, path)
    log.info("report: %s", render_report(root, commands=commands))
    return root


def _forced(cfg: DictConfig) -> Callable[[str], bool]:
    """Which stages ``force`` recomputes: every one (true), none (false), or the named ones (a list)."""
    force = build.plain(cfg.force)
    if isinstance(force, bool):
        return lambda name: force
    names = [force] if isinstance(force, str) else force
    stages = [s.name for s in cfg.stages]
    if not isinstance(names, list) or any(n not in stages for n in names):
        raise ConfigError(f"force: {force!r} is not true, false or a list of stage names (the stages: {stages})")
    return lambda name: name in names


def _study_and_overrides(cfg: DictConfig) -> tuple[str | None, list[str]]:
    """The experiment of the stages, and this run's command-line overrides they all take (none in process)."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return cfg.study, []
    hydra = HydraConfig.get()
    passed_on = [o for o in hydra.overrides.task if o.lstrip("+~").split("=")[0].split(".")[0] not in NOT_PASSED_ON]
    return cfg.study or hydra.runtime.choices.get("experiment"), passed_on
