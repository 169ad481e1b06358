"""Provenance: the global attributes every result records (CF ``Conventions``, ``history``, the config,
the surrogate's hash, package versions, seed, the hash of every input file, and the library settings)."""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import platform
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from sensitivity import __version__
from sensitivity.datasets.settings import settings_json
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")


CONVENTIONS = "CF-1.8"


def content_hash(path: str | Path) -> str:
    """SHA-256 of a file's bytes, as ``sha256:<hex>``."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


def _installed_version(*distributions: str) -> str:
    """Version of the first installed distribution among ``distributions``, read from package metadata
    (no import: recording provenance must not load TensorFlow into a process that does not use it)."""
    from importlib.metadata import PackageNotFoundError, version

    for name in distributions:
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return "not installed"


def provenance(
    *,
    title: str,
    workflow: str,
    config_yaml: str,
    surrogate_source: str | None = None,
    surrogate_hash: str | None = None,
    seed: int | None = None,
    inputs: Iterable[str | Path | tuple[str, str | Path]] = (),
    history: str | None = None,
    settings: Any = (),
) -> dict[str, str]:
    """Global attributes: CF ``Conventions``/``title``/``history``/``source`` and the full provenance.

    netCDF rejects dict and bool attributes, so everything is serialised to strings.
    ``inputs`` are the result files this one was computed from; each is recorded with its hash (a pair
    ``(name, path)`` records ``name`` for the file at ``path``, e.g. a file of the same result set by its name
    while it is still staged). ``settings`` are the frozen settings dataclasses the verb ran with (one or a
    sequence), recorded as ``settings`` for :func:`~sensitivity.datasets.settings.settings_of`.
    """
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    line = f"{now}: sensitivity {__version__} {workflow}"
    inputs = [(str(p[0]), p[1]) if isinstance(p, tuple) else (str(p), p) for p in inputs]
    versions = {"sensitivity": __version__, "python": platform.python_version(), "tensorflow": _installed_version("tensorflow-cpu", "tensorflow"),
                "numpy": np.__version__, "xarray": xr.__version__}
    return {
        "Conventions": CONVENTIONS,
        "title": title,
        "history": f"{history}\n{line}" if history else line,
        "source": f"sensitivity {__version__} workflow '{workflow}' on surrogate {surrogate_source or 'none'}",
        "config": config_yaml,
        "surrogate": surrogate_source or "",
        "surrogate_hash": surrogate_hash or "",
        "seed": "" if seed is None else str(seed),
        "package_versions": json.dumps(versions, sort_keys=True),
        "inputs": json.dumps({name: content_hash(p) for name, p in inputs}, sort_keys=True),
        "settings": settings_json(settings),
    }
