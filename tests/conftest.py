"""Shared fixtures: quiet TensorFlow, composed configs pointed at tmp_path.

Where shared test code lives: pytest fixtures here; plain helpers (references, models, the CF
checker, paths) in the ``tests/helpers/`` package. A test module imports shared code only from
``tests.helpers``, never from another test module or from this file (``tests/test_layout.py``
checks it). Tests that run the command line in a subprocess, train a model or run a workflow
chain end to end are marked ``slow``; ``pytest -m "not slow"`` is the fast run.
"""
from __future__ import annotations

import os

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture
def compose_config(tmp_path):
    """Compose a workflow's config as the CLI would, with outputs in ``tmp_path``.

    Usage: ``cfg = compose_config("sweep", ["grid.n=64"])``.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from workflows.plumbing.registry import CONF_DIR
    from workflows.plumbing.schema import register

    register()

    def _compose(name: str, overrides: list[str] | None = None, output_dir: Path | None = None):
        GlobalHydra.instance().clear()
        with initialize_config_dir(str(CONF_DIR), version_base=None):
            return compose(name, overrides=[f"output_dir={output_dir or tmp_path}", "progress=false",
                                            *(overrides or [])])

    yield _compose
    GlobalHydra.instance().clear()
