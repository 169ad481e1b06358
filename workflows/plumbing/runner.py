"""Run one workflow on a composed config: its own keys, TensorFlow when needed, and what to do next.

The command line (:mod:`workflows.cli`) and the study chain (:mod:`workflows.run`) both run a
workflow through :func:`run_workflow`, so the rules hold for every entry point: the keys of other
workflows (one experiment file for a whole study) are checked and dropped
(:func:`workflows.plumbing.schema.own_config`), TensorFlow is imported only where a workflow first needs a model, after
its checks (:func:`workflows.plumbing.build.tensorflow`), and a
finished run names its result, points ``outputs/<workflow>/latest`` at its run directory and
prints the command that takes the result further.
"""
from __future__ import annotations

import importlib
import logging
import os
from pathlib import Path
from typing import Any

from workflows.plumbing.registry import WORKFLOWS

log = logging.getLogger("sensitivity")

#: Workflow -> the next workflow and the config key its result feeds (``{result}`` is the result's path).
NEXT: dict[str, str] = {
    "train": "sweep model=keras model.source={result}",
    "sweep": "indices dgsm.sweep={result}",
    "simulate": "train training.data={result}",
    "merge": "indices dgsm.sweep={result}",
    "calibrate": "posterior calibration={result} observations.path={observations}",
    "posterior": "propagate propagate=posterior uncertainty.path={result}",
    "propagate": "indices",
}

#: The stable name of a workflow's last run directory, beside the run directories.
LATEST = "latest"


def run_workflow(name: str, cfg: Any, overrides: list[str] | None = None) -> Path:
    """Run workflow ``name`` on the composed ``cfg``; return its result path.

    Parameters
    ----------
    name
        A workflow of :data:`workflows.plumbing.registry.WORKFLOWS`.
    cfg
        Its composed config (Hydra's job config), possibly holding other workflows' keys.
    overrides
        The command-line overrides, to repeat ``experiment=`` in the suggested next command; None: no
        announcement (a stage of ``sensitivity run``).
    """
    from workflows.plumbing.build import with_space_file
    from workflows.plumbing.schema import own_config, register

    register(name)  # a launcher's job process (submitit) runs the task without the command line's set-up
    module = importlib.import_module(WORKFLOWS[name])
    own = with_space_file(own_config(cfg, name))
    result = Path(module.run(own))
    if overrides is not None:
        study = [o for o in overrides if o.split("=")[0] in STUDY_KEYS]
        if not study and hasattr(module, "study_of"):  # merge: the study its shards were run with
            study = module.study_of(own)
        announce(name, cfg, result, study)
    return result


def check_workflow(name: str, cfg: Any) -> None:
    """Check workflow ``name``'s settings in the composed ``cfg`` without running it: what every study checks
    (:func:`workflows.plumbing.build.check_study`), then its own ``check``, where it has one (``sensitivity run`` checks
    every stage so before its first stage runs)."""
    from workflows.plumbing.build import check_study, with_space_file
    from workflows.plumbing.schema import own_config, register

    register(name)
    module = importlib.import_module(WORKFLOWS[name])
    own = with_space_file(own_config(cfg, name))
    check_study(own)
    if hasattr(module, "check"):
        module.check(own)


#: The overrides that choose the study, repeated in the suggested next command.
STUDY_KEYS = ("experiment", "model", "space")


def announce(name: str, cfg: Any, result: Path, study: list[str]) -> None:
    """Log the result's path (relative to the working directory when inside it) and the next command, with the
    overrides ``study`` that chose the study."""
    shown = _shown(result)
    log.info("result: %s", shown)
    run_dir = Path(str(cfg.output_dir))
    latest = _point_latest(run_dir, name)
    if latest is not None and result.resolve().is_relative_to(run_dir.resolve()):
        log.info("latest %s result: %s", name, _shown(latest / result.resolve().relative_to(run_dir.resolve())))
    template = NEXT.get(name)
    if template is None:
        return
    from omegaconf import OmegaConf

    given = OmegaConf.select(cfg, "observations.path", default=None, throw_on_missing=False) if \
        OmegaConf.is_config(cfg) else None
    observations = given or "<observations.nc>"
    step = template.format(result=shown, observations=observations)
    log.info("next: sensitivity %s", " ".join([step.split()[0], *study, *step.split()[1:]]))


def _shown(path: Path) -> str:
    """``path`` relative to the working directory when inside it (links kept, not resolved)."""
    absolute = Path(os.path.abspath(path))
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)


def _point_latest(run_dir: Path, name: str) -> Path | None:
    """Point ``outputs/<name>/latest`` at ``run_dir`` when it sits in the default layout ``outputs/<name>/<run>``
    of ``conf/base.yaml`` (``hydra.run.dir``).

    The link is relative and replaced atomically (a new link renamed over the old), so a reader sees the
    previous run or this one. Returns the link, or None where the layout is another (a multirun job, an
    explicit ``hydra.run.dir``, a stage of ``sensitivity run``) or links cannot be made.
    """
    run_dir = run_dir.resolve()
    if run_dir.parent != (Path.cwd() / "outputs" / name).resolve() or run_dir.name == LATEST:
        return None
    link = run_dir.parent / LATEST
    tmp = run_dir.parent / f".{LATEST}.{os.getpid()}"
    try:
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(run_dir.name, target_is_directory=True)
        os.replace(tmp, link)
    except OSError:
        tmp.unlink(missing_ok=True)
        return None
    return link
