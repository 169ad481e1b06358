"""The command line: ``sensitivity <workflow> [hydra overrides]``.

Each workflow is a module of this package with a ``run(cfg)``
function, and a primary config ``conf/<workflow>.yaml``. Hydra composes the config
(``--help``, ``--cfg job``, ``-m`` multiruns and launchers all work as usual); a
:class:`~sensitivity.errors.SensitivityError` ends the run with its one-line message
and exit code 2 (a :class:`~sensitivity.errors.VerificationFailed`, a published verdict that fails under
``verify.strict``: exit code 1).
"""
from __future__ import annotations

import faulthandler
import importlib
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from workflows.plumbing.registry import CONF_DIR, WORKFLOWS, available

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
    _hydra_main(name, _user_config_dir(_positional(module, _multirun_first(overrides))))


#: Hydra's flags that take no value and may stand anywhere on a command line (argparse stops reading the
#: overrides at the first flag, so ``sensitivity sweep a=1 -m b=2`` would leave ``b=2`` unread).
_VALUELESS_FLAGS = ("-m", "--multirun")


def _multirun_first(overrides: list[str]) -> list[str]:
    """``-m`` / ``--multirun`` moved ahead of the overrides, wherever the user wrote it."""
    return [o for o in overrides if o in _VALUELESS_FLAGS] + [o for o in overrides if o not in _VALUELESS_FLAGS]


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
        from workflows.plumbing.naming import override

        return [override(key, overrides[0]), *overrides[1:]]
    return overrides


def _hydra_main(name: str, overrides: list[str]) -> None:
    import hydra

    from sensitivity.errors import SensitivityError, VerificationFailed
    from workflows.plumbing.naming import register_resolver
    from workflows.plumbing.runner import run_workflow
    from workflows.plumbing.schema import register

    register(name)
    register_resolver()
    if not set(overrides) & HYDRA_OWN_FLAGS:
        _check_composition(name, overrides)  # before any work: a bad config in one line, exit 2

    def task(cfg) -> None:
        try:
            run_workflow(name, cfg, overrides=_config_overrides(overrides)[0])
        except VerificationFailed as err:  # the result is published; the verdict it holds fails: exit 1, not 2
            log.error("%s: %s", name, err)
            raise SystemExit(1) from None
        except SensitivityError as err:
            log.error("%s: %s", name, err)
            raise SystemExit(2) from None
        except KeyboardInterrupt as stop:  # Ctrl-C, or SIGTERM (below): finished parts stay on disk
            code = 143 if isinstance(stop, Terminated) else 130
            log.error("%s: %s; rerun the same command to resume", name,
                      "terminated" if code == 143 else "interrupted")
            raise SystemExit(code) from None

    signal.signal(signal.SIGTERM, _terminate)
    faulthandler.enable()  # a simulator (or model) that crashes the process in-process: the fault and where, not silence

    sys.argv = [f"sensitivity {name}", *overrides]
    hydra.main(version_base=None, config_path=str(CONF_DIR), config_name=name)(task)()


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the process is, so that a run stops as cleanly as on Ctrl-C (exit 143)."""


#: Seconds a run has, after SIGTERM, to stop cleanly before the process ends anyway (a call into the simulator
#: in-process cannot be interrupted, and the runner's pool waits for it).
TERMINATE_GRACE_S = 10.0


def _terminate(signum, frame) -> None:
    """Raise :class:`Terminated` in the main thread, and end the process with exit 143 after
    :data:`TERMINATE_GRACE_S` seconds (at once on a second SIGTERM) should the run not stop by then: finished
    batches and parts are on disk already, and the run lock is released with the process."""
    if getattr(_terminate, "raised", False):
        _abandon()
    _terminate.raised = True
    watchdog = threading.Timer(TERMINATE_GRACE_S, _abandon)
    watchdog.daemon = True
    watchdog.start()
    raise Terminated()


def _abandon() -> None:
    """End the process with exit 143 now, saying so (a simulator call that does not return is left running)."""
    sys.stderr.write("sensitivity: terminated; a call still running in this process (a simulator's, in-process) "
                     f"was abandoned after {TERMINATE_GRACE_S:g} s; finished work is on disk: rerun the same command "
                     "to resume\n")
    sys.stderr.flush()
    os._exit(143)


#: Command-line flags with which Hydra does something else than compose one job (multiruns compose per job).
HYDRA_OWN_FLAGS = {"-m", "--multirun", "--help", "-h", "--hydra-help", "--info", "-i", "--shell-completion", "-sc",
                   "--run", "-r"}


def _check_composition(name: str, overrides: list[str]) -> None:
    """Compose the job's config as Hydra will, and turn a composition error into one line (exit 2).

    With ``--cfg job`` (``-c job``) print the composed config with only this workflow's keys instead
    (:func:`workflows.plumbing.schema.own_config`): an experiment file's keys for other workflows are left out.
    """
    import yaml
    from hydra.core.global_hydra import GlobalHydra
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    from sensitivity.errors import SensitivityError
    from workflows.plumbing.build import check_study
    from workflows.plumbing.schema import own_config

    args, show, config_dir = _config_overrides(overrides)
    try:
        cfg = own_config(_compose(name, args, config_dir), name)
        if show:
            print(OmegaConf.to_yaml(cfg), end="")
            raise SystemExit(0)
        check_study(cfg)
    except (HydraException, OmegaConfBaseException, SensitivityError, yaml.YAMLError) as err:
        print(f"sensitivity {name}: {_one_line(err)}", file=sys.stderr)
        raise SystemExit(2) from None
    finally:
        GlobalHydra.instance().clear()


def _config_overrides(overrides: list[str]) -> tuple[list[str], bool, str | None]:
    """The config overrides among the command's arguments (flags and their values removed), whether
    ``--cfg job`` asks for the job config to be printed, and the ``--config-dir`` given."""
    args, show, config_dir, skip = [], False, None, False
    for i, arg in enumerate(overrides):
        if skip:
            skip = False
            continue
        key, _, value = arg.partition("=")
        if key in ("--config-dir", "-cd", "--cfg", "-c", "--package", "-p", "--config-name", "-cn",
                   "--config-path", "-cp", "--experimental-rerun"):
            value = value or (overrides[i + 1] if i + 1 < len(overrides) else "")
            skip = not arg.startswith(f"{key}=")
            show = show or (key in ("--cfg", "-c") and value == "job")
            config_dir = value if key in ("--config-dir", "-cd") else config_dir
        elif not arg.startswith("-"):
            args.append(arg)
    show = show and "--resolve" not in overrides and not any(a in ("-p", "--package") for a in overrides)
    return args, show, config_dir


def _compose(name: str, overrides: list[str], config_dir: str | None):
    """The job config of ``name`` with ``overrides``, composed on the command line's search path (``config_dir``
    first, as Hydra's ``--config-dir`` puts it)."""
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path
    from hydra.core.global_hydra import GlobalHydra
    from hydra.types import RunMode
    from omegaconf import OmegaConf

    from workflows.plumbing.naming import register_resolver

    register_resolver()
    GlobalHydra.instance().clear()
    search_path = create_config_search_path(str(CONF_DIR))
    if config_dir is not None:
        search_path.prepend("command-line", f"file://{Path(config_dir).resolve()}")
    hydra = Hydra.create_main_hydra2(task_name=f"sensitivity {name}", config_search_path=search_path)
    cfg = hydra.compose_config(config_name=name, overrides=overrides, run_mode=RunMode.RUN,
                               with_log_configuration=False)
    _check_writable(cfg)
    return OmegaConf.masked_copy(cfg, [key for key in cfg if key != "hydra"])


def _check_writable(cfg) -> None:
    """Refuse, before Hydra makes it, a run directory (Hydra's, and an ``output_dir=`` given instead) whose
    nearest existing folder this user cannot write (no permission, a read-only file system, an immutable folder)."""
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf

    from sensitivity.errors import DataError

    HydraConfig.instance().set_config(cfg)
    run_dirs = [("hydra.run.dir", cfg.hydra.run.dir)]
    if "output_dir" in cfg and not OmegaConf.is_interpolation(cfg, "output_dir") and \
            not OmegaConf.is_missing(cfg, "output_dir"):
        run_dirs.append(("output_dir", cfg.output_dir))
    for key, value in run_dirs:
        run_dir = Path(str(value)).absolute()
        where = run_dir
        while not where.exists() and where != where.parent:
            where = where.parent
        if not (where.is_dir() and os.access(where, os.W_OK | os.X_OK)) or (
                where == run_dir and not os.access(run_dir, os.W_OK)):
            why = "is on a read-only file system" if where.exists() and os.statvfs(where).f_flag & os.ST_RDONLY \
                else "is not writable by this user"
            raise DataError(f"cannot write the run directory {run_dir}: {where} {why}; run from a folder you can "
                            f"write, or set {key}")


def _quote_hint(err: BaseException) -> str:
    """For an override Hydra's lexer could not read (a non-ASCII letter in an unquoted value): the override quoted."""
    from hydra.errors import OverrideParseException

    if not isinstance(err, OverrideParseException) or "LexerNoViableAlt" not in str(err):
        return ""
    key, equals, value = str(err.override).partition("=")
    quote = '"' if "'" in value else "'"
    return f"; quote the value: {key}{equals}{quote}{value}{quote}" if equals else "; quote the value"


def _one_line(err: BaseException) -> str:
    """A composition error in one line: the first line of each error in its chain down to the one naming the
    key, a suggestion for a key that is not in the schema, the options of a config group."""
    import difflib

    import yaml
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    from sensitivity.errors import SensitivityError, yaml_reason
    from workflows.plumbing.schema import renamed, suggest_for

    if isinstance(err, SensitivityError):
        return str(err)
    if isinstance(err, yaml.YAMLError):  # e.g. a `!!python/...` tag: refused by the safe loader, never run
        mark = getattr(err, "problem_mark", None)
        return f"{mark.name}: {yaml_reason(err)}" if mark is not None else yaml_reason(err)
    chain, cause = [], err
    while cause is not None and len(chain) < 4:
        chain.append(cause)
        if getattr(cause, "full_key", None):
            break
        cause = cause.__cause__ or (None if cause.__suppress_context__ else cause.__context__)
    lines = []
    for item in chain:
        line = next((s.strip() for s in str(item).splitlines() if s.strip()), type(item).__name__).rstrip(".")
        if line not in lines:
            lines.append(line)
    key = getattr(chain[-1], "full_key", None)
    if key and isinstance(chain[-1], (ConfigKeyError, ConfigAttributeError)) and renamed(key):
        return renamed(key)
    hint = suggest_for(key) if key and isinstance(chain[-1], (ConfigKeyError, ConfigAttributeError)) else ""
    hint += _quote_hint(err)
    options = [str(o) for o in getattr(err, "options", None) or []]
    if options:
        wanted = str(getattr(err, "missing_cfg_file", "") or "").rpartition("/")[2]
        close = difflib.get_close_matches(wanted, options, n=1)
        hint = (f"; did you mean `{close[0]}`?" if close else "") + f" (options: {', '.join(options)})"
    return ": ".join(lines) + hint
