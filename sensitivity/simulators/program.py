"""A simulator that is a program: configured, not coded.

:class:`ProgramSettings` says how a program is run for one parameter point: the ``command`` (an argument list, no
shell unless ``shell``), the input files it reads (Jinja2 ``templates`` rendered in a sandbox,
:mod:`sensitivity.simulators.templates`; PEST ``pest_templates``, :mod:`sensitivity.simulators.pest_files`;
``files`` copied as they are) and the ``outputs`` read back by declared rules
(:mod:`sensitivity.simulators.parsers`), joined in their order onto the per-point ``output_shape``. Every key is a
plain value, so a YAML mapping maps onto it by keyword (:func:`program_from`).

:class:`Program` is the simulator itself, a batched map ``[N, n] -> [N, *out]`` that
:func:`sensitivity.surrogates.simulator.simulator_from` accepts as its ``source``: a plain frozen object that
pickles, so spawned and Dask workers run it. Each point runs in a folder of its own,
``<run_root>/run_<index>/`` (``index`` a number no other run under the root has taken, counted under a file
lock), which holds the inputs, the program's ``stdout.txt``, ``stderr.txt`` and ``exit_status.txt``. The folder
is removed after a run that succeeds (kept with ``keep_runs``) and kept after one that fails. A non-zero exit, an
output that is missing or cannot be read, a NaN or an infinity, a run past ``timeout`` (its whole process group
killed) are each one :class:`~sensitivity.errors.ModelError` line naming the run, its point and its kept folder.

:meth:`Program.fingerprint` hashes what the program reads (the templates, the input files, the executable as
``shutil.which`` finds it, the files that say how to read its outputs) with the settings that change its values,
so an edited template reruns and a finished run is never redone (:func:`sensitivity.simulators.runner.run_simulator`
records it).

References
----------
Adams, B. M. et al. (2023), Dakota User's Manual 6.19, Sandia SAND2023-13392, ch. 10 "Interfaces" (fork
interface, work directories, templates).
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import shlex
import shutil
import signal
import subprocess
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from sensitivity.errors import ConfigError, DataError, ModelError
from sensitivity.simulators import templates
from sensitivity.simulators.parsers import Rule, output_rule
from sensitivity.simulators.pest_files import Template, read_template, render_template

#: The files a run's folder keeps of the program's run.
STDOUT, STDERR, EXIT_STATUS = "stdout.txt", "stderr.txt", "exit_status.txt"
#: The file (under the run root) that counts the runs started, and its lock.
COUNTER = ".runs_started"


@dataclass(frozen=True)
class ProgramSettings:
    """How a program is run for one parameter point and how its outputs are read.

    Parameters
    ----------
    command
        The program and its arguments, run in the run's folder, e.g. ``["sh", "beam.sh"]``; a string only with
        ``shell`` (then a shell runs it).
    parameters
        The parameters' names, in the order of the points' columns; templates see each by name.
    outputs
        The output rules, in order (each a mapping with a ``kind``: :func:`sensitivity.simulators.parsers.output_rule`);
        their values are flattened and joined in this order.
    templates
        Input files rendered from Jinja2 templates: ``{file in the run folder: template}``.
    pest_templates
        Input files written from PEST template files (``.tpl``): ``{file in the run folder: template}``.
    files
        Files (or folders) copied into each run's folder under their own name, e.g. the program's script.
    units
        The parameters' units by name (templates see ``units``); optional.
    output_shape
        The per-point output shape the joined values are laid onto (C order); None: one flat axis.
    base_dir
        The folder the relative paths of templates, files and PEST instruction files are found in [path].
    run_root
        The folder the runs' folders are made in (relative: to ``base_dir``) [path].
    keep_runs
        Keep each successful run's folder too (a failed run's folder is always kept).
    timeout
        Seconds one run may take [s]; past them its whole process group is killed and the run fails. None: no limit.
    shell
        Run ``command`` through ``/bin/sh`` (only when asked: a shell reinterprets what it is given).
    """

    command: Sequence[str] | str
    parameters: Sequence[str]
    outputs: Sequence[Mapping[str, Any] | Rule]
    templates: Mapping[str, str] = field(default_factory=dict)
    pest_templates: Mapping[str, str] = field(default_factory=dict)
    files: Sequence[str] = ()
    units: Mapping[str, str] = field(default_factory=dict)
    output_shape: Sequence[int] | None = None
    base_dir: str = "."
    run_root: str = "program_runs"
    keep_runs: bool = False
    timeout: float | None = None
    shell: bool = False

    def __post_init__(self) -> None:
        put = lambda name, value: object.__setattr__(self, name, value)  # noqa: E731 (normalising a frozen field)
        command = self.command
        if isinstance(command, str) and not self.shell:
            raise ConfigError(f"`command` must be an argument list such as ['sh', 'run.sh'] (a string runs through a "
                              f"shell only with `shell: true`), got {command!r}")
        if not isinstance(command, str):
            if not _strings(command) or not command or not all(command):
                raise ConfigError(f"`command` must be a non-empty list of non-empty strings, got {command!r}")
            put("command", tuple(command))
        elif not command.strip():
            raise ConfigError(f"`command` must not be empty, got {command!r}")
        names = self.parameters
        if not _strings(names) or not names or len(set(names)) != len(names) or not all(names):
            raise ConfigError(f"`parameters` must be a non-empty list of distinct names, got {names!r}")
        reserved = [n for n in names if n in templates.RESERVED]
        if reserved:
            raise ConfigError(f"`parameters`: {reserved[0]!r} is a name templates reserve "
                              f"({', '.join(templates.RESERVED)}); rename the parameter")
        put("parameters", tuple(names))
        if isinstance(self.outputs, (str, Mapping)) or not self.outputs:
            raise ConfigError(f"`outputs` must be a non-empty list of output rules, got {self.outputs!r}")
        rules = tuple(output_rule(r, f"`outputs[{k}]`") for k, r in enumerate(self.outputs))
        duplicate = next((r.name for k, r in enumerate(rules) if r.name in [s.name for s in rules[:k]]), None)
        if duplicate is not None:
            raise ConfigError(f"`outputs`: the name {duplicate!r} is given twice")
        put("outputs", rules)
        for key in ("templates", "pest_templates", "units"):
            mapping = getattr(self, key)
            if not isinstance(mapping, Mapping) or not _strings(mapping.keys()) or not _strings(mapping.values()):
                raise ConfigError(f"`{key}` must be a mapping of names to text, got {mapping!r}")
            put(key, dict(mapping))
        if isinstance(self.files, str) or not _strings(self.files):
            raise ConfigError(f"`files` must be a list of paths, got {self.files!r}")
        put("files", tuple(self.files))
        written = [*self.templates, *self.pest_templates, *(Path(f).name for f in self.files)]
        for name in written:
            if Path(name).is_absolute() or ".." in Path(name).parts or name in (STDOUT, STDERR, EXIT_STATUS):
                raise ConfigError(f"an input file's name must be a relative path inside the run folder, other than "
                                  f"{STDOUT}, {STDERR}, {EXIT_STATUS}; got {name!r}")
        if len(set(written)) != len(written):
            raise ConfigError(f"the run folder's input files must have distinct names, got {written}")
        unknown = [u for u in self.units if u not in names]
        if unknown:
            raise ConfigError(f"`units`: {unknown[0]!r} is not one of `parameters` {list(names)}")
        if self.output_shape is not None:
            shape = self.output_shape
            if isinstance(shape, str) or not all(isinstance(k, (int, np.integer)) and not isinstance(k, bool)
                                                 and k >= 1 for k in shape):
                raise ConfigError(f"`output_shape` must be a list of integers >= 1 (or null: one flat axis), got "
                                  f"{shape!r}")
            put("output_shape", tuple(int(k) for k in shape))
        for key in ("base_dir", "run_root"):
            if not isinstance(getattr(self, key), str) or not getattr(self, key):
                raise ConfigError(f"`{key}` must be a path, got {getattr(self, key)!r}")
        for key in ("keep_runs", "shell"):
            if not isinstance(getattr(self, key), bool):
                raise ConfigError(f"`{key}` must be true or false, got {getattr(self, key)!r}")
        t = self.timeout
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t)
                              or t <= 0):
            raise ConfigError(f"`timeout` must be a number of seconds > 0 (or null: no limit), got {t!r}")


def program_from(settings: ProgramSettings | Mapping[str, Any]) -> Program:
    """The program simulator of ``settings`` (or of a config mapping of its keys), checked before any run: every
    template and file exists, every Jinja2 template renders (a misspelt name fails here), every PEST file parses,
    the executable is found, a user's parser imports.

    Raises
    ------
    ConfigError
        One line naming the setting and its value.
    """
    if isinstance(settings, Mapping):
        accepted = [f.name for f in fields(ProgramSettings)]
        unknown = [key for key in settings if key not in accepted]
        if unknown:
            raise ConfigError(f"{unknown[0]!r} is not a setting of a program simulator (its settings: {accepted})")
        try:
            settings = ProgramSettings(**settings)
        except TypeError as err:  # a required key missing
            raise ConfigError(f"a program simulator's settings: {err}".replace("__init__() ", "")) from None
    base = Path(settings.base_dir).resolve()
    if not base.is_dir():
        raise ConfigError(f"`base_dir` {settings.base_dir!r} is not a folder")
    for name, source in settings.templates.items():
        templates.check(base / source, settings.parameters, settings.units)
    pest = {}
    for name, source in settings.pest_templates.items():
        pest[name] = read_template(base / source)
        missing = [p for p in pest[name].names if p not in {n.lower() for n in settings.parameters}]
        if missing:
            raise ConfigError(f"`pest_templates`: {source} fills {missing[0]!r}, which is not one of `parameters` "
                              f"{list(settings.parameters)}")
    for source in settings.files:
        if not (base / source).exists():
            raise ConfigError(f"`files`: {source!r} is not found in {base}")
    program = _executable(settings, base)
    if program is None and not settings.shell:
        first = settings.command[0]
        raise ConfigError(f"`command[0]` {first!r} is not a program on PATH" if "/" not in first else
                          f"`command[0]` {first!r} is neither in {base} nor among `files`")
    rules = tuple(rule.prepare(base) for rule in settings.outputs)
    return Program(settings, str(base), str(base / settings.run_root), rules, pest)


@dataclass(frozen=True)
class Program:
    """A program run once per point in a folder of its own, as a batched simulator ``[N, n] -> [N, *out]``
    (built and checked by :func:`program_from`).

    Attributes
    ----------
    settings
        What it runs and reads.
    base
        The absolute folder of its templates and files.
    run_root
        The absolute folder its runs' folders are made in.
    outputs
        Its output rules, checked against ``base``.
    pest
        Its PEST templates, parsed, by the file each writes.
    """

    settings: ProgramSettings
    base: str
    run_root: str
    outputs: tuple[Rule, ...]
    pest: Mapping[str, Template]

    @property
    def label(self) -> str:
        """How errors and files name it: the command."""
        command = self.settings.command
        return f"program {command if isinstance(command, str) else shlex.join(command)!r}"

    def __call__(self, points: np.ndarray) -> np.ndarray:
        """The outputs ``[N, *out]`` (float64) at ``points [N, n]``, one run per point, in order."""
        x = np.asarray(points, dtype=np.float64)
        n = len(self.settings.parameters)
        if x.ndim != 2 or x.shape[1] != n:
            raise ModelError(f"{self.label} takes points [N, {n}] ({', '.join(self.settings.parameters)}), got shape "
                             f"{list(x.shape)}")
        root = Path(self.run_root)
        root.mkdir(parents=True, exist_ok=True)
        values = [self._run(row, *_claim(root)) for row in x]
        return np.stack(values) if values else np.empty((0, *(self.settings.output_shape or (0,))))

    def fingerprint(self) -> str:
        """SHA-256 (hex) of the settings that change the program's values and of every file it reads: templates,
        input files, the executable, the files that say how to read its outputs. An edited template changes it."""
        kept = {f.name: getattr(self.settings, f.name) for f in fields(ProgramSettings)
                if f.name not in ("base_dir", "run_root", "keep_runs", "timeout", "outputs")}
        kept["outputs"] = [{"kind": r.kind, **asdict(r)} for r in self.settings.outputs]
        h = hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode())
        base = Path(self.base)
        read = [base / s for s in [*self.settings.templates.values(), *self.settings.pest_templates.values(),
                                   *self.settings.files]]
        read += [Path(f) if Path(f).is_absolute() else base / f for r in self.outputs for f in r.config_files()]
        program = _executable(self.settings, base)
        for path in read + ([Path(program)] if program else []):
            for file in sorted(path.rglob("*")) if path.is_dir() else [path]:
                if file.is_file():
                    h.update(f"\0{file.relative_to(path) if path.is_dir() else path.name}\0".encode())
                    h.update(hashlib.sha256(file.read_bytes()).digest())
        return h.hexdigest()

    def _run(self, x: np.ndarray, index: int, folder: Path) -> np.ndarray:
        """One run at the point ``x`` in ``folder``; its outputs joined and shaped, or a one-line ModelError."""
        s = self.settings
        point = "{" + ", ".join(f"{name} = {v:.10g}" for name, v in zip(s.parameters, x)) + "}"

        def failed(why: str) -> ModelError:
            return ModelError(f"{self.label}: run {index} at {point} failed: {why}; its folder is kept: {folder}")

        try:
            self._write_inputs(x, index, folder)
        except (ConfigError, DataError, OSError) as err:
            raise failed(f"its inputs could not be written ({err})") from None
        status = self._execute(folder, failed)
        if status != 0:
            raise failed(f"{_described(status)}{_last_line(folder / STDERR)}")
        parts = []
        for rule in self.outputs:
            try:
                values = rule.read(folder)
            except (ConfigError, DataError) as err:
                raise failed(str(err)) from None
            bad = np.flatnonzero(~np.isfinite(values))
            if bad.size:
                raise failed(f"output {rule.name!r} is {values[bad[0]]} at position {int(bad[0])} of {values.size}; "
                             "a simulator must return finite numbers")
            parts.append(values)
        y = np.concatenate(parts)
        if s.output_shape is not None:
            if y.size != math.prod(s.output_shape):
                sizes = ", ".join(f"{r.name}: {p.size}" for r, p in zip(self.outputs, parts))
                raise failed(f"its outputs hold {y.size} values ({sizes}); `output_shape` {list(s.output_shape)} "
                             f"needs {math.prod(s.output_shape)}")
            y = y.reshape(s.output_shape)
        if not s.keep_runs:
            shutil.rmtree(folder, ignore_errors=True)
        return y

    def _write_inputs(self, x: np.ndarray, index: int, folder: Path) -> None:
        s, base = self.settings, Path(self.base)
        variables = templates.context(s.parameters, x, s.units, index, str(folder))
        for name, source in s.templates.items():
            _write(folder / name, templates.render(base / source, variables))
        values = dict(zip(s.parameters, x))
        for name, template in self.pest.items():
            _write(folder / name, render_template(template, values))
        for source in s.files:
            path = base / source
            if path.is_dir():
                shutil.copytree(path, folder / path.name)
            else:
                shutil.copy2(path, folder / path.name)  # its mode too: a script stays executable

    def _execute(self, folder: Path, failed) -> int:
        """The program's exit status in ``folder`` (its output streams and status written there)."""
        s = self.settings
        with open(folder / STDOUT, "wb") as out, open(folder / STDERR, "wb") as err:
            try:
                process = subprocess.Popen(s.command, cwd=folder, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                           shell=s.shell, start_new_session=True)
            except OSError as error:
                (folder / EXIT_STATUS).write_text(f"not started: {error}\n")
                raise failed(f"it could not be started ({error.strerror or error})") from None
            try:
                status = process.wait(timeout=s.timeout)
            except subprocess.TimeoutExpired:
                _kill_group(process)
                (folder / EXIT_STATUS).write_text(f"killed: past `timeout` = {s.timeout:g} s\n")
                raise failed(f"it did not finish within `timeout` = {s.timeout:g} s; its process group "
                             f"{process.pid} was killed") from None
            except BaseException:  # an interrupt of this process: the program must not run on
                _kill_group(process)
                raise
        (folder / EXIT_STATUS).write_text(f"{status}\n")
        return status


def _executable(settings: ProgramSettings, base: Path) -> str | None:
    """The program file ``command[0]`` names (PATH, else ``base``, else one of ``files``), or None."""
    command = settings.command
    words = shlex.split(command) if isinstance(command, str) else list(command)
    if not words:
        return None
    first = words[0]
    if "/" not in first:
        return shutil.which(first)
    for candidate in (base / first, *(base / f for f in settings.files if Path(f).name == Path(first).name)):
        if candidate.is_file():
            return str(candidate)
    return None


def _claim(root: Path) -> tuple[int, Path]:
    """The next run's number and its new folder ``run_<number>`` under ``root``: the number is counted in a file
    under an exclusive lock (processes of one machine, or of several on a shared file system with locks)."""
    import fcntl

    with open(root / COUNTER, "a+") as counter:
        fcntl.flock(counter, fcntl.LOCK_EX)
        counter.seek(0)
        text = counter.read().strip()
        number = int(text) if text.isdigit() else 0
        while (root / f"run_{number:06d}").exists():  # a counter lost or reset: never reuse a folder
            number += 1
        counter.seek(0)
        counter.truncate()
        counter.write(f"{number + 1}\n")
        counter.flush()
        folder = root / f"run_{number:06d}"
        folder.mkdir()
    return number, folder


def _kill_group(process: subprocess.Popen) -> None:
    """Kill the program's whole process group (its children too) and reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _described(status: int) -> str:
    if status < 0:
        try:
            return f"it was killed by signal {signal.Signals(-status).name}"
        except ValueError:
            return f"it was killed by signal {-status}"
    return f"it exited with status {status}"


def _last_line(path: Path) -> str:
    """`` (stderr: <its last line>)``, or '' for an empty stderr."""
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    if not lines:
        return ""
    text = lines[-1] if len(lines[-1]) <= 160 else lines[-1][:157] + "..."
    return f" (stderr: {text})"


def _strings(values: Any) -> bool:
    try:
        return all(isinstance(v, str) for v in values)
    except TypeError:
        return False
