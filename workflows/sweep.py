"""Workflow `sweep`: values and Jacobians of a surrogate over a parameter grid -> sweep.nc."""
from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
from omegaconf import DictConfig

from workflows import build
from workflows.schema import SweepConf

log = logging.getLogger(__name__)

SCHEMA = SweepConf


def run(cfg: DictConfig) -> Path:
    """Run the sweep described by ``cfg``; return the path of ``sweep.nc``."""
    from sensitivity.datasets import check_disk_space, provenance
    from sensitivity.grids import shard_bounds

    space = build.space_from(cfg)
    grid = build.grid_from(cfg, space)
    shard_bounds(grid.size, cfg.grid.shard, cfg.grid.num_shards)  # fail before loading the model
    surrogate = build.surrogate_from(cfg, space)
    from sensitivity.sweep import sweep

    jac = build.engine_from(cfg, surrogate)
    out = build.output_dir(cfg) / "sweep.nc"
    start, stop = shard_bounds(grid.size, cfg.grid.shard, cfg.grid.num_shards)
    n, m = surrogate.n_in, surrogate.output_size
    check_disk_space(out, (stop - start) * (n + m + m * n) * np.dtype(jac.dtype).itemsize, "this sweep")
    log.info("sweep: %d points of %s grid, %s mode, %s, chunk %d -> %s", grid.size, cfg.grid.kind, jac.mode,
             jac.dtype, jac.chunk_size, out)
    attrs = provenance(title=f"Jacobian sweep of {surrogate.source}", workflow="sweep",
                       config_yaml=build.config_yaml(cfg), surrogate_source=surrogate.source,
                       surrogate_hash=surrogate.content_hash, seed=cfg.grid.seed,
                       inputs=[cfg.grid.path] if cfg.grid.kind == "file" else [])
    attrs["engine"] = f"mode={jac.mode} dtype={jac.dtype} jit_compile={jac.jit_compile} chunk_size={jac.chunk_size}"
    # what changes the bytes as configured; the library adds the grid's content, layout and resolved engine
    key = build.fingerprint(cfg.model, cfg.space, cfg.grid, cfg.jacobian, cfg.points_per_part, surrogate.content_hash,
                            space.names, space.units)
    summary = sweep(jac, grid, out, attrs=attrs, fingerprint=key, shard=cfg.grid.shard,
                    num_shards=cfg.grid.num_shards, points_per_part=cfg.points_per_part,
                    parameter_long_names=[p.long_name for p in space.parameters], progress=cfg.progress)
    log.info("sweep done: %d points in %.1f s until the file was published (%.0f Jacobians/s, compilation and "
             "writing included) -> %s", summary.points, summary.seconds, summary.jacobians_per_second, summary.path)
    if cfg.plots:
        build.file_backend()
        from sensitivity.plots.sweep import sweep_figure

        figure = sweep_figure(summary.path, build.output_dir(cfg) / "sweep.png")
        log.info("figure: %s", figure)
    return summary.path
