"""Workflow `run`: the default study, a chain of workflows run in one process.

The stages come from ``conf/run.yaml``: each names a workflow, the overrides that set it up,
and which earlier stage's result feeds which of its config keys. Every stage writes into its
own subdirectory of the run dir, so each result file stands alone with its own provenance
and records the files it was computed from. The study's report (:func:`sensitivity.report.render_report`) is
written last, into the run dir.
"""
from __future__ import annotations

import logging
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List

from omegaconf import DictConfig

from sensitivity.errors import ConfigError
from workflows import build

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
    stages: List[StageConf] = field(default_factory=list)
    output_dir: str = "???"
    progress: bool = True
    plots: bool = True


SCHEMA = RunConf


def run(cfg: DictConfig) -> Path:
    """Run every stage in order, then write the study's report (``report.html``); return the run directory."""
    from hydra import compose

    from sensitivity.report import render_report
    from workflows.registry import WORKFLOWS
    from workflows.runner import run_workflow

    root = build.output_dir(cfg)
    results: dict[str, Path] = {}
    commands: dict[str, str] = {}
    for stage in cfg.stages:
        if stage.workflow not in WORKFLOWS or stage.workflow == "run":
            raise ConfigError(f"stages: unknown workflow {stage.workflow!r} in stage {stage.name!r}")
        missing = [s for s in stage.inputs.values() if s not in results]
        if missing:
            raise ConfigError(f"stage {stage.name!r} takes the result of {missing}, which no earlier stage made")
        overrides = [*stage.overrides, f"output_dir={root / stage.name}", f"progress={cfg.progress}",
                     f"plots={cfg.plots}", *(f"{key}={results[source]}" for key, source in stage.inputs.items())]
        stage_cfg = compose(config_name=stage.workflow, overrides=overrides)
        log.info("stage %s: sensitivity %s %s", stage.name, stage.workflow, " ".join(stage.overrides))
        commands[stage.name] = shlex.join(["sensitivity", stage.workflow, *overrides])
        results[stage.name] = run_workflow(stage.workflow, stage_cfg)
    log.info("study done; results:")
    for name, path in results.items():
        log.info("  %-10s %s", name, path)
    log.info("report: %s", render_report(root, commands=commands))
    return root
