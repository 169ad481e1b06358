"""Workflow `merge`: the shards (and swept configs) of a multirun as one dataset -> sweep.nc.

    sensitivity sweep -m 'grid.shard=range(0,8)' grid.num_shards=8 hydra/launcher=local
    sensitivity merge input_dir=multirun/sweep

The merge is refused, with a one-line message naming them, when shards are missing or unfinished
(with the command that reruns them alone), overlap, or differ in anything but the shard keys.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig

from sensitivity.sweep.merge import merge
from sensitivity.sweep.merge_plan import MissingShards, plan_merge
from workflows.plumbing import build
from workflows.plumbing.multirun import find_runs, rerun_command
from workflows.plumbing.schema import schema_of

log = logging.getLogger(__name__)

#: ``sensitivity merge DIR`` means ``sensitivity merge input_dir=DIR``.
POSITIONAL = "input_dir"
FORMATS = ("netcdf", "zarr")


RunsConf = schema_of(find_runs, "RunsConf")  # file: the result file of every job
PlanConf = schema_of(plan_merge, "PlanConf", keys=("shard_key", "num_shards_key", "ignore_keys"))
WriteConf = schema_of(merge, "WriteConf", keys=("format",))  # netcdf | zarr (zarr needs `pip install zarr`)


@dataclass
class MergeConf(RunsConf, PlanConf, WriteConf):
    input_dir: str = "???"  # the multirun directory (hydra.sweep.dir of the sweep)
    chunk: int = 0  # samples per on-disk chunk; 0: about 32 MiB of the largest variable
    output_dir: str = "???"
    progress: bool = True  # accepted like every workflow's; a merge streams chunks without a bar


SCHEMA = MergeConf


def run(cfg: DictConfig) -> Path:
    """Check and merge the runs under ``cfg.input_dir``; return the merged file."""
    from sensitivity.datasets import provenance
    from sensitivity.datasets.write import recorded_checksum
    from sensitivity.sweep.merge import merged_attrs, whole_grid_config

    build.check_choice(cfg.format, FORMATS, "format")
    root = Path(cfg.input_dir).expanduser()
    runs = find_runs(root, cfg.file)
    try:
        plan = plan_merge(runs, root, shard_key=cfg.shard_key, num_shards_key=cfg.num_shards_key,
                          ignore_keys=list(cfg.ignore_keys))
    except MissingShards as err:
        command = rerun_command(err, root)
        raise MissingShards(f"{err}; rerun them alone (finished parts are kept): {command}" if command else str(err),
                            err.missing, err.runs, err.shard_key) from None
    ref = plan.reference.attrs
    log.info("merge: %d shards of %d configuration(s)%s under %s", len(plan.files), len(plan.cells),
             f" swept over {', '.join(plan.keys)}" if plan.keys else "", root)
    attrs = provenance(title=str(ref.get("title", f"merged {cfg.file}")), workflow="merge",
                       config_yaml=whole_grid_config(plan), surrogate_source=str(ref.get("surrogate", "")),
                       surrogate_hash=str(ref.get("surrogate_hash", "")),
                       seed=int(ref["seed"]) if str(ref.get("seed", "")).lstrip("-").isdigit() else None,
                       inputs=plan.files, history=str(ref.get("history", "")) or None)
    attrs.update(merged_attrs(plan), merge_config=build.config_yaml(cfg))
    name = cfg.file if cfg.format == "netcdf" else Path(cfg.file).with_suffix(".zarr").name
    shards = {str(f): recorded_checksum(f) or "unrecorded" for f in plan.files}  # merge() verifies each shard
    with build.result_set(cfg, "merge", recorded=shards) as results:
        if results.complete:
            build.announce_complete(results, "merge")
            return results.path(name)
        merge(plan, results.staging / name, attrs=attrs, chunk=cfg.chunk or None, format=cfg.format)
        results.publish()
    log.info("merged: %s", results.path(name))
    return results.path(name)


def study_of(cfg: DictConfig) -> list[str]:
    """The overrides choosing the study (``experiment=``, ``model=``, ``model.source=``, ``space.path=``, ...) that
    every shard was run with, for the next command's hint."""
    from workflows.plumbing.runner import study_overrides

    runs = find_runs(Path(cfg.input_dir).expanduser(), cfg.file)
    shared = set.intersection(*(set(r.overrides) for r in runs)) if runs else set()
    return study_overrides([o for o in (runs[0].overrides if runs else ()) if o in shared])
