"""Plain values of a config: resolved containers, a stable fingerprint, paths found from any directory.

The lowest plumbing module: :mod:`workflows.plumbing.build` and :mod:`workflows.plumbing.model_inputs` both use
it, and it imports neither.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from sensitivity import __version__
from workflows.plumbing.registry import RESOURCE_ROOT


def plain(node: Any) -> Any:
    """A config node as plain Python containers, interpolations resolved."""
    return OmegaConf.to_container(node, resolve=True) if isinstance(node, DictConfig) or OmegaConf.is_list(node) else node


def fingerprint(*parts: Any) -> str:
    """A stable hash of the things that define a computation (config nodes, hashes, versions)."""
    payload = json.dumps([plain(p) for p in parts] + [__version__], sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


def repo_path(path: str | Path) -> Path:
    """A path from a config: as given when it is absolute or exists from the working directory, else relative
    to the packaged resources (the repository root, or the installed package holding ``conf/`` and ``data/``)
    when it exists there, so ``data/seir/...`` works from any directory and from a wheel; a path found
    nowhere is returned as given, for the error message."""
    given = Path(path).expanduser()
    if given.is_absolute() or given.exists() or not (RESOURCE_ROOT / given).exists():
        return given
    return RESOURCE_ROOT / given
