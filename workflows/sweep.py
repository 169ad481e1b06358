"""Workflow `sweep`: values and Jacobians of a surrogate over a parameter grid -> sweep.nc.

The sweep store writes ``sweep.nc`` in place in the run directory (resumable, locked, fingerprinted, its
checksum recorded as it is written: :mod:`sensitivity.store.parts`); the run's result set
(:mod:`sensitivity.datasets.publish`) then adopts it with the figure under one manifest, so a rerun with the same
settings does no work.
"""
from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import DictConfig

from workflows.plumbing import build
from workflows.plumbing.schema import SweepConf

log = logging.getLogger(__name__)

SCHEMA = SweepConf


def run(cfg: DictConfig) -> Path:
    """Run the sweep described by ``cfg``; return the path of ``sweep.nc``."""
    from sensitivity.datasets.write import recorded_checksum
    from sensitivity.sweep.designs import shard_bounds

    space = build.space_from(cfg)
    grid = build.grid_from(cfg, space)
    shard_bounds(grid.size, cfg.grid.shard, cfg.grid.num_shards)  # fail before loading the model
    with build.result_set(cfg, "sweep", [cfg.grid.path if cfg.grid.kind == "file" else None]) as results:
        if results.complete:
            build.announce_complete(results, "sweep")
            return results.path("sweep.nc")
        out = _sweep(cfg, space, grid, results.path("sweep.nc"))
        results.adopt(out.name, recorded_checksum(out))
        if cfg.plots:
            build.file_backend()
            from sensitivity.plots.sweep import sweep_figure

            log.info("figure: %s", results.path(sweep_figure(out, results.staging / "sweep.png").name))
        results.publish()
    return out


def _sweep(cfg: DictConfig, space, grid, out: Path) -> Path:
    """Compute the sweep into ``out`` through the sweep store (resuming the verified parts of an interrupted run)."""
    from sensitivity.datasets import check_disk_space, provenance
    from sensitivity.sweep.designs import shard_bounds
    from workflows.plumbing.model_inputs import model_inputs_hash

    surrogate = build.surrogate_from(cfg, space)  # imports TensorFlow quietly, before the engine's modules do
    from sensitivity.sweep.stream import point_bytes, sweep

    members = build.ensemble_from(cfg, surrogate, space)  # an ensemble: the members' spread beside values and Jacobians
    jac = members or build.engine_from(cfg, surrogate, space)
    start, stop = shard_bounds(grid.size, cfg.grid.shard, cfg.grid.num_shards)
    check_disk_space(out, (stop - start) * point_bytes(jac, cfg.store_members), "this sweep")
    log.info("sweep: %d points of %s grid, %s mode, %s, chunk %d%s -> %s", grid.size, cfg.grid.kind, jac.mode,
             jac.dtype, jac.chunk_size, f", the spread of {surrogate.n_members} members" if members else "", out)
    attrs = provenance(title=f"Jacobian sweep of {surrogate.source}", workflow="sweep",
                       config_yaml=build.config_yaml(cfg), surrogate_source=surrogate.source,
                       surrogate_hash=surrogate.content_hash, seed=cfg.grid.seed,
                       inputs=[cfg.grid.path] if cfg.grid.kind == "file" else [],
                       settings=(build.grid_design(cfg.grid), space))
    attrs["engine"] = jac.settings
    # what changes the bytes as configured; the library adds the grid's content, layout and resolved engine
    key = build.fingerprint(cfg.model, cfg.space, cfg.grid, cfg.jacobian, cfg.points_per_part, surrogate.content_hash,
                            model_inputs_hash(cfg), space.names, space.units)
    summary = sweep(jac, grid, out, attrs=attrs, fingerprint=key, shard=cfg.grid.shard,
                    num_shards=cfg.grid.num_shards, points_per_part=cfg.points_per_part,
                    parameter_long_names=[p.long_name for p in space.parameters],
                    store_members=cfg.store_members, progress=cfg.progress)
    log.info("sweep done: %d points in %.1f s until the file was published (%.0f Jacobians/s, compilation and "
             "writing included) -> %s", summary.points, summary.seconds, summary.jacobians_per_second, summary.path)
    return summary.path
