"""The command line: ``sensitivity <workflow> [hydra overrides]``.

Each workflow is a module of this package with a ``SUMMARY`` line and a ``run(cfg)``
function, and a primary config ``conf/<workflow>.yaml``. Hydra composes the config
(``--help``, ``--cfg job``, ``-m`` multiruns and launchers all work as usual); a
:class:`~sensitivity.errors.SensitivityError` ends the run with its one-line message
and exit code 2.
"""
from __future__ import annotations

import importlib
import logging
import os
import sys
from pathlib import Path

from workflows.registry import CONF_DIR, WORKFLOWS, available

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

log = logging.getLogger("sensitivity")


def usage() -> str:
    lines = ["usage: sensitivity <workflow> [hydra overrides ...]", "", "workflows:"]
    lines += [f"  {name:<10} {summary}" for name, summary in available().items()]
    lines += [f"  {'init':<10} write a study skeleton into a folder: sensitivity init DIR"]
    lines += ["", "Each workflow's options: sensitivity <workflow> --help; its composed config: "
              "sensitivity <workflow> --cfg job", "Start with: sensitivity run"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``sensitivity`` console script."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return
    name, overrides = argv[0], argv[1:]
    if name == "init":
        from workflows.init import main as init

        raise SystemExit(init(overrides))
    if name not in available():
        print(f"sensitivity: unknown workflow {name!r}\n\n{usage()}", file=sys.stderr)
        raise SystemExit(2)
    if os.getcwd() not in sys.path:  # `model.source=mymodule:fn` from the folder holding mymodule.py
        sys.path.insert(0, os.getcwd())
    module = importlib.import_module(WORKFLOWS[name])
    _hydra_main(name, module.run, _user_config_dir(_positional(module, overrides)))


def _user_config_dir(overrides: list[str]) -> list[str]:
    """Put the study's own ``./conf`` ahead of the packaged configs (Hydra's ``--config-dir``), unless the
    command names a config dir itself; the packaged groups stay reachable behind it."""
    here = Path("conf").resolve()
    if not here.is_dir() or here == CONF_DIR.resolve() or any(
            o in ("--config-dir", "-cd") or o.startswith("--config-dir=") for o in overrides):
        return overrides
    return ["--config-dir", str(here), *overrides]


def _positional(module, overrides: list[str]) -> list[str]:
    """Map a leading bare argument to the workflow's ``POSITIONAL`` key: ``sensitivity merge DIR``."""
    key = getattr(module, "POSITIONAL", None)
    if key and overrides and not overrides[0].startswith("-") and (
            "=" not in overrides[0] or Path(overrides[0]).exists()):
        quoted = overrides[0].replace("\\", "\\\\").replace("'", "\\'")
        return [f"{key}='{quoted}'", *overrides[1:]]
    return overrides


def _hydra_main(name: str, run, overrides: list[str]) -> None:
    import hydra

    from sensitivity.errors import SensitivityError
    from sensitivity.tf_runtime import import_tensorflow
    from workflows.naming import register_resolver
    from workflows.schema import check_known_keys, register

    register()
    register_resolver()

    def task(cfg) -> None:
        try:
            module = importlib.import_module(WORKFLOWS[name])
            check_known_keys(cfg, module.SCHEMA, name)
            if getattr(module, "USES_TENSORFLOW", True):
                import_tensorflow()
            run(cfg)
        except SensitivityError as err:
            log.error("%s: %s", name, err)
            raise SystemExit(2) from None

    sys.argv = [f"sensitivity {name}", *overrides]
    hydra.main(version_base=None, config_path=str(CONF_DIR), config_name=name)(task)()
