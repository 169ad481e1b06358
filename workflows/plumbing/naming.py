"""Short, safe run-directory names: a readable prefix of the overrides plus a hash of all of them.

Hydra's ``job.override_dirname`` is every command-line override joined, e.g.
``model.source=/home/me/m.py:f,space={parameters: [...]}``: spaces, braces, slashes (nested
folders) and, for long values, names past the file system's 255-byte limit. :func:`run_name`
keeps the characters that are safe in a file name, cuts the prefix at :data:`PREFIX_LENGTH` and
appends 8 hex digits of the SHA-256 of the full string, so the same command always lands in the
same directory (resume keeps working) and two commands that differ anywhere land in different
ones. The full overrides stay in the run's ``.hydra/overrides.yaml`` and in every result's
provenance.

The other way round, :func:`override` writes one override the application passes to Hydra (a run
directory, a result's path) so that Hydra's grammar reads the value back unchanged, whatever its letters.
"""
from __future__ import annotations

import hashlib
import re

from omegaconf import OmegaConf

#: Characters of the readable prefix at most (the hash adds 9).
PREFIX_LENGTH = 48
RESOLVER = "run_name"


def run_name(overrides: str) -> str:
    """``"grid.n=64,seed=1"`` -> ``"grid.n=64,seed=1-1a2b3c4d"``; ``""`` (no overrides) -> ``""``."""
    if not overrides:
        return ""
    prefix = re.sub(r"[^A-Za-z0-9._+-]+", "_", overrides).strip("_.")[:PREFIX_LENGTH].rstrip("_.")
    digest = hashlib.sha256(overrides.encode()).hexdigest()[:8]
    return f"{prefix}-{digest}" if prefix else digest


def register_resolver() -> None:
    """Register ``${run_name:...}`` for ``conf/base.yaml`` (idempotent)."""
    if not OmegaConf.has_resolver(RESOLVER):
        OmegaConf.register_new_resolver(RESOLVER, run_name)


def override(key: str, value: object) -> str:
    """``key='value'``: one Hydra override whose value is read back as the very string ``str(value)``.

    Hydra's override grammar takes an unquoted value only of a few ASCII characters (a path in a folder named
    ``stüdy`` fails to lex); a quoted one takes any letters. In quotes a backslash is literal, except a run of
    them before a quote, which stands for half as many (Hydra, "Override grammar: basic", quoted values): that
    run is doubled, and the quote escaped.
    """
    text = re.sub(r"(\\*)'", lambda m: m.group(1) * 2 + "\\'", str(value))
    text = re.sub(r"(\\+)$", lambda m: m.group(1) * 2, text)
    return f"{key}='{text}'"
