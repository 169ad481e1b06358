"""One result file as a :class:`~workflows.report.page.Result`: its kind, key numbers and provenance."""
from __future__ import annotations

import json
from pathlib import Path

from sensitivity.datasets import open_result
from workflows.report.kinds import kind_of
from workflows.report.page import Provenance, Result
from workflows.report.run_dir import checksum, size_text


def read_result(path: Path) -> Result:
    """Open ``path`` (lazily: a large sweep is not loaded) and read what the report shows of it."""
    with open_result(path) as ds:
        kind = kind_of(ds)
        summary = kind.summarize(ds)
        attrs = dict(ds.attrs)
    provenance = Provenance(
        history=str(attrs.get("history", "")),
        surrogate=str(attrs.get("surrogate", "")),
        surrogate_hash=str(attrs.get("surrogate_hash", "")),
        seed=str(attrs.get("seed", "")),
        inputs=list(_json(attrs.get("inputs"), {}).items()),
        versions={str(k): str(v) for k, v in _json(attrs.get("package_versions"), {}).items()},
        config=str(attrs.get("config", "")),
    )
    return Result(path.name, kind.name, str(attrs.get("title", "")), size_text(path), checksum(path), summary,
                  provenance)


def _json(text, default):
    """A JSON attribute (``inputs``, ``package_versions``), ``default`` when absent or not JSON (an older file)."""
    try:
        value = json.loads(text) if text else default
    except (TypeError, ValueError):
        return default
    return value if isinstance(value, dict) else default
