"""Provenance checked along the chain: a result that consumes another verifies it first.

The chains are posterior <- calibration; propagate <- calibration, posterior or sweep; indices <- sweep;
calibrate <- sweep (its step map); merge <- shards (the library checks each shard's record). Before it is
used, a consumed result must match its checksum record (:func:`sensitivity.datasets.publish.verified`),
and it must have been computed with the same surrogate (content hash), observations (content hash) and
parameter space as the consumer; otherwise the consumer refuses in one line naming the difference.
``allow_unverified=true`` accepts a result without any record, ``allow_other_sources=true`` one computed
from other inputs (with a warning): explicit, per run.
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import yaml
from omegaconf import DictConfig

from workflows.plumbing import build

log = logging.getLogger(__name__)


def consumed(cfg: DictConfig, path: str | Path, what: str, *, surrogate_hash: str | None = None,
             observations: str | Path | None = None, space: Any = None) -> Path:
    """``path`` (a result this run consumes: ``what`` names the config key) verified, and computed from the same
    surrogate, observations and space as this run (each checked when given).

    Raises
    ------
    DataError
        No checksum record or a changed file (unless ``allow_unverified``); a result computed from another
        surrogate, other observations or another space (unless ``allow_other_sources``).
    """
    from sensitivity.datasets import content_hash, open_result
    from sensitivity.datasets.publish import verified
    from sensitivity.errors import DataError

    path = build.repo_path(path)
    if not path.exists():
        raise DataError(f"`{what}`: result not found: {path}")
    path = verified(path, allow_unverified=bool(cfg.get("allow_unverified", False)), flag="allow_unverified")
    with open_result(path) as ds:
        attrs = dict(ds.attrs)
    problems = []
    recorded = attrs.get("surrogate_hash")
    if surrogate_hash and recorded and recorded != surrogate_hash:
        problems.append(f"surrogate {recorded[:19]}... (this run's is {surrogate_hash[:19]}...)")
    if observations is not None:
        inputs = json.loads(attrs.get("inputs") or "{}")
        if inputs and content_hash(observations) not in inputs.values():
            problems.append(f"other observations than {observations}")
    if space is not None and not _same_space(attrs, space):
        problems.append("another parameter space (names, units, bounds, scales or distributions)")
    if problems and not cfg.get("allow_other_sources", False):
        raise DataError(f"`{what}` {path} was computed from {'; '.join(problems)}; recompute it with this run's "
                        "inputs, or set allow_other_sources=true to use it anyway")
    for problem in problems:
        log.warning("`%s` %s was computed from %s (allow_other_sources=true)", what, path, problem)
    return path


def _same_space(attrs: dict, space: Any) -> bool:
    """Whether the space recorded in a result's config is ``space`` (what changes a result: names, units, bounds,
    scales, distributions, correlation); True when the result records none (nothing to compare)."""
    from sensitivity.errors import ConfigError
    from sensitivity.inputs.space import ParameterSpace

    config = yaml.safe_load(attrs.get("config") or "null") or {}
    records = (config.get("space") or {}).get("parameters")
    if not records:
        return True
    try:
        recorded = ParameterSpace.from_records([{k: v for k, v in r.items() if v is not None} for r in records],
                                               (config.get("space") or {}).get("correlation"))
    except (ConfigError, AttributeError, TypeError):
        return False
    key = [(p.name, p.units, p.low, p.high, p.scale, p.distribution) for p in space.parameters]
    return key == [(p.name, p.units, p.low, p.high, p.scale, p.distribution) for p in recorded.parameters] and \
        _same_correlation(recorded.correlation, space.correlation)


def _same_correlation(a: Any, b: Any) -> bool:
    import numpy as np

    if a is None or b is None:
        return (a is None or np.allclose(a, np.eye(len(a)))) and (b is None or np.allclose(b, np.eye(len(b))))
    return np.shape(a) == np.shape(b) and np.allclose(a, b)
