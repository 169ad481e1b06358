"""The design ``train`` runs the simulator on: the ``grid`` kind with ``training.runs`` points.

``training.runs`` is the training size; ``grid.n`` is the sweep's. Until this release ``grid.n`` was the training
size too, so for one release a config that leaves ``training.runs`` null (the default) and sets ``grid.n`` still
trains on ``grid.n`` runs, with a one-line deprecation warning naming ``training.runs``; with neither set, ``train``
runs :data:`DEFAULT_RUNS` (``conf/train.yaml``'s ``grid.n``).
"""
from __future__ import annotations

import logging

from omegaconf import DictConfig, OmegaConf

from sensitivity.inputs.space import ParameterSpace
from sensitivity.sweep.designs import Grid
from workflows.plumbing import build

log = logging.getLogger(__name__)

#: The training size while ``training.runs`` is null [simulator runs]: ``conf/train.yaml`` sets ``grid.n`` to it.
DEFAULT_RUNS = 512


def training_runs(cfg: DictConfig) -> int:
    """The number of simulator runs of ``train``'s design: ``training.runs``; while it is null, ``grid.n``
    (:data:`DEFAULT_RUNS` unless a config sets it: deprecated, warned in one line)."""
    if cfg.training.runs is not None:
        return int(cfg.training.runs)  # grid.n is the sweep's
    if cfg.grid.n != DEFAULT_RUNS:
        log.warning("train: `grid.n` = %d is the training size, as before this release; set `training.runs` instead "
                    "(from the next release `grid.n` sizes the sweep alone)", cfg.grid.n)
    return int(cfg.grid.n)


def training_grid(cfg: DictConfig, space: ParameterSpace) -> Grid:
    """``cfg.grid``'s design with :func:`training_runs` points."""
    node = OmegaConf.create(OmegaConf.to_container(cfg.grid, resolve=True))
    node.n = training_runs(cfg)
    return build.grid_from(cfg, space, node)
