"""A workflow's config composed as the CLI composes it in a study folder made by ``sensitivity init``."""
from __future__ import annotations

from pathlib import Path
from typing import Any


def init_study(directory: Path) -> Path:
    """``sensitivity init directory``: the folder, with the template's files."""
    from workflows.init import init

    init(directory)
    return directory


def compose_in_study(study: Path, name: str, overrides: list[str] | None = None) -> Any:
    """``name``'s composed config (``experiment=study`` and ``overrides``) with ``study/conf`` ahead of the packaged
    configs, as the CLI puts it (``workflows.cli``: Hydra's ``--config-dir``), without the ``hydra`` node."""
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    from workflows.plumbing.naming import register_resolver
    from workflows.plumbing.registry import CONF_DIR
    from workflows.plumbing.schema import register

    register()
    register_resolver()
    GlobalHydra.instance().clear()
    search_path = create_config_search_path(str(CONF_DIR))
    search_path.prepend("command-line", f"file://{(study / 'conf').resolve()}")
    hydra = Hydra.create_main_hydra2(task_name=f"sensitivity {name}", config_search_path=search_path)
    try:
        cfg = hydra.compose_config(config_name=name, overrides=["experiment=study", *(overrides or [])],
                                   run_mode=RunMode.RUN, with_log_configuration=False)
        return OmegaConf.masked_copy(cfg, [key for key in cfg if key != "hydra"])  # the job's config
    finally:
        GlobalHydra.instance().clear()
