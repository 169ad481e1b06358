"""Shared fixtures: quiet TensorFlow, composed configs pointed at tmp_path."""
from __future__ import annotations

import os

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def compose_config(tmp_path):
    """Compose a workflow's config as the CLI would, with outputs in ``tmp_path``.

    Usage: ``cfg = compose_config("sweep", ["grid.n=64"])``.
    """
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from workflows.registry import CONF_DIR
    from workflows.schema import register

    register()

    def _compose(name: str, overrides: list[str] | None = None, output_dir: Path | None = None):
        GlobalHydra.instance().clear()
        with initialize_config_dir(str(CONF_DIR), version_base=None):
            return compose(name, overrides=[f"output_dir={output_dir or tmp_path}", "progress=false",
                                            *(overrides or [])])

    yield _compose
    GlobalHydra.instance().clear()
