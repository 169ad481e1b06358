"""The workflow registry: which workflows exist, where their modules and configs are.

Imported by the command line (:mod:`workflows.cli`), the schema registration
(:mod:`workflows.schema`) and the study chain (:mod:`workflows.run`); it imports none of them.
Each workflow is a module with a ``SUMMARY`` line and a ``run(cfg)`` function, optionally a
``SCHEMA`` dataclass and a ``POSITIONAL`` config key, and a primary config ``conf/<workflow>.yaml``.
"""
from __future__ import annotations

import importlib
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent

#: The folder holding ``conf/`` and ``data/``: this package in a wheel (``setup.py``'s build step copies the
#: repository's top-level folders into it), else the repository root (a source checkout, an editable install).
RESOURCE_ROOT = _PACKAGE if (_PACKAGE / "conf").is_dir() else _PACKAGE.parent

#: The Hydra config tree (the primary config directory of every workflow).
CONF_DIR = RESOURCE_ROOT / "conf"

#: Workflow name -> module, in the order `sensitivity --help` lists them.
WORKFLOWS = {
    "run": "workflows.run",
    "sweep": "workflows.sweep",
    "train": "workflows.train",
    "calibrate": "workflows.calibrate",
    "posterior": "workflows.posterior",
    "propagate": "workflows.propagate",
    "indices": "workflows.indices",
    "export": "workflows.export",
    "merge": "workflows.merge",
}


def modules():
    """Yield ``(name, module)`` for every workflow whose module exists, in registry order.

    Only a missing workflow module is passed over: a module that exists but fails to import (a
    dependency it needs is missing) raises, instead of its workflow silently leaving the list.
    """
    for name, module_name in WORKFLOWS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if err.name != module_name:
                raise
            continue
        yield name, module


def available() -> dict[str, str]:
    """Workflows whose module exists, with their one-line summaries."""
    return {name: module.SUMMARY for name, module in modules()}
