"""A program's input files rendered from Jinja2 templates that insert values and run no code.

Templates are rendered in a :class:`jinja2.sandbox.SandboxedEnvironment` (no attribute that starts with ``_``, no
method that changes an object, ``str.format`` made safe: ``{{ ''.__class__.__mro__ }}`` is refused) with
:class:`jinja2.StrictUndefined` (a misspelt name is an error, never an empty string). A template sees:

* each parameter by its name (a float), e.g. ``{{ "%20.12E" | format(E) }}``;
* ``parameters``: the same as a mapping (for a name that is not an identifier: ``{{ parameters["R0-x"] }}``);
* ``units``: the parameters' units by name, as configured (``{{ units.E }}``);
* ``index``: the run's number (its folder is ``run_<index>``);
* ``run_dir``: the run's folder, an absolute path.

References
----------
Jinja2 documentation, "Sandbox", https://jinja.palletsprojects.com/en/stable/sandbox/
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Mapping, Sequence

from sensitivity.errors import ConfigError, DataError

#: Names a template sees besides the parameters: no parameter may take one.
RESERVED = ("parameters", "units", "index", "run_dir")


@functools.lru_cache(maxsize=None)
def environment() -> Any:
    """The one sandboxed, strict Jinja2 environment (files kept byte for byte: trailing newline, no autoescape)."""
    from jinja2 import StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    return SandboxedEnvironment(undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False)


def context(names: Sequence[str], values: Sequence[float], units: Mapping[str, str], index: int,
            run_dir: str) -> dict[str, Any]:
    """What a template sees for one run (the module docstring lists it)."""
    parameters = {name: float(v) for name, v in zip(names, values)}
    return {**parameters, "parameters": parameters, "units": dict(units), "index": int(index), "run_dir": run_dir}


def render(path: str | Path, variables: Mapping[str, Any]) -> str:
    """The template file ``path`` rendered with ``variables``.

    Raises
    ------
    DataError
        One line naming the template, and its line where Jinja2 knows it: a syntax error, an undefined name, a
        refused (unsafe) access, or any error of the template's own expressions.
    """
    text = _read(path, DataError)
    try:
        return environment().from_string(text).render(variables)
    except Exception as err:  # noqa: BLE001 (Jinja2's errors, and a template expression's own: 1/0, a bad format)
        raise DataError(_described(path, err)) from None


def check(path: str | Path, names: Sequence[str], units: Mapping[str, str]) -> None:
    """Render the template ``path`` once with every parameter = 1.0, so that a missing file, a syntax error, a
    misspelt name or an unsafe access is a :class:`ConfigError` before any run (an error of the template's own
    arithmetic at 1.0 is left to the runs)."""
    from jinja2 import TemplateError

    text = _read(path, ConfigError)
    try:
        environment().from_string(text).render(context(names, [1.0] * len(names), units, 0, "run_000000"))
    except TemplateError as err:
        raise ConfigError(_described(path, err)) from None
    except Exception:  # noqa: BLE001,S110 (arithmetic that fails at 1.0 may hold at the real points)
        pass


def _read(path: str | Path, error: type[Exception]) -> str:
    try:
        return Path(path).read_text()
    except OSError as err:
        raise error(f"template {path} cannot be read: {err.strerror or err}") from None


def _described(path: str | Path, err: BaseException) -> str:
    """One line: the template, its line where Jinja2 knows it (a syntax error's own, else the last frame of the
    template in the traceback Jinja2 rewrites to its lines), the error."""
    import traceback

    line = getattr(err, "lineno", None)
    if line is None:
        lines = [n for frame, n in traceback.walk_tb(err.__traceback__) if frame.f_code.co_filename == "<template>"]
        line = lines[-1] if lines else None
    lines = [text.strip() for text in str(err).splitlines() if text.strip()]
    return f"template {path}{f' line {line}' if line else ''}: {type(err).__name__}: {lines[0] if lines else ''}"
