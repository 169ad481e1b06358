"""Hydra's multirun on disk: its job directories as :class:`~sensitivity.sweep.merge_plan.Run` objects, and the command that
reruns missing shards.

A multirun (``sensitivity sweep -m grid.shard=range(0,8) grid.num_shards=8``) leaves one job directory per
shard, ``<multirun>/<job>/sweep.nc``, with the job's overrides in ``.hydra/overrides.yaml`` and the
workflow it ran in ``.hydra/hydra.yaml``. That layout is Hydra's, so it is read here, in the application;
the library (:mod:`sensitivity.sweep.merge`) checks and merges the runs whatever launched them.
"""
from __future__ import annotations

import os
import shlex
from pathlib import Path

import yaml

from sensitivity.errors import DataError
from sensitivity.sweep.merge_plan import MissingShards, Run, split_override

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def find_runs(root: str | Path, file: str = "sweep.nc") -> list[Run]:
    """The job directories under ``root``: those holding ``file``, its ``.parts/`` or ``.hydra/overrides.yaml``.

    Hidden directories (``.hydra``, ``.submitit``) and part directories are not searched. Job
    directories may be nested (an override value with a ``/`` makes a sub-directory).
    """
    root = Path(root)
    if not root.is_dir():
        raise DataError(f"input_dir: not a directory: {root}")
    runs = []
    for here, subdirs, _ in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith(".") and not d.endswith(".parts"))
        here = Path(here)
        result, parts, overrides = here / file, here / f"{file}.parts", here / ".hydra" / "overrides.yaml"
        if here == root or not (result.is_file() or parts.is_dir() or overrides.is_file()):
            continue
        listed = _yaml(overrides) if overrides.is_file() else []
        runs.append(Run(here, result if result.is_file() else None, tuple(str(o) for o in listed or []),
                        len(list(parts.glob("part-*.nc"))) if parts.is_dir() else 0))
    return runs


def _yaml(path: Path):
    """A job's YAML record (safe loader: a ``!!python`` tag is refused, never run), or a one-line DataError."""
    try:
        return yaml.load(path.read_text(), Loader=_Loader)
    except yaml.YAMLError as err:
        raise DataError(f"{path}: not a Hydra record ({type(err).__name__}: {str(err).splitlines()[0]})") from None


def rerun_command(error: MissingShards, root: Path, workflow: str | None = None) -> str:
    """The command that reruns only the missing shards of ``error`` (their finished parts are kept), or ``""``.

    The workflow is ``workflow``, else the one the runs recorded (``hydra.job.config_name``).
    """
    template = next((r for r in error.runs if r.overrides), None)
    if template is None:
        return ""
    workflow = workflow or _workflow_of(template)
    if not workflow:
        return ""
    overrides = [f"{error.shard_key}={','.join(map(str, error.missing))}" if split_override(o)[0] == error.shard_key
                 else o for o in template.overrides]
    return shlex.join(["sensitivity", workflow, "-m", *overrides, f"hydra.sweep.dir={root}"])


def _workflow_of(run: Run) -> str | None:
    """The workflow that ran a job (``hydra.job.config_name`` in its ``.hydra/hydra.yaml``), if recorded."""
    try:
        hydra = _yaml(run.directory / ".hydra" / "hydra.yaml")
        return str(hydra["hydra"]["job"]["config_name"])
    except (OSError, KeyError, TypeError, DataError):
        return None
