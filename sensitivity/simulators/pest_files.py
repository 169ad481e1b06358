"""PEST's own files for a program's inputs and outputs, read as PEST reads them: a template file (``.tpl``) that
writes the parameters into an input file, and an instruction file (``.ins``) that reads observations from an
output file. A PEST user's existing files work as they are.

A template file's first line is ``ptf <delim>``; every other line is copied, except that each field
``<delim> name <delim>`` is replaced by the parameter's value written in the field's full width (delimiters
included), right-justified, with as many significant figures as fit (Doherty 2018, sec. 3.2). Parameter names are
case-insensitive.

An instruction file's first line is ``pif <marker>``; each further line is read against the output file
(Doherty 2018, sec. 3.3), with these instructions:

* ``l<n>``: move down ``n`` lines, the cursor to the line's start;
* ``<marker>text<marker>``: first on a line, a *primary* marker: search the lines after the current one for
  ``text``; elsewhere a *secondary* marker: search the rest of the current line (not found while only markers
  preceded it on the instruction line: the primary search goes on from the next line);
* ``w``: move past the current non-blank characters and then the blanks after them;
* ``!name!``: read the next blank-delimited number (ended early by a secondary marker that follows);
* ``[name]s:e``: read the number in columns ``s`` to ``e`` (1-based, inclusive);
* ``(name)s:e``: read the blank-delimited number that starts at or after column ``s``, before column ``e``;
* the name ``dum`` reads a number and keeps none.

As PEST and pyEMU do, markers and names are matched case-insensitively; a Fortran ``D`` exponent reads as ``E``.
Tabs (``t<n>``) and continuations (``&``) are refused by name.

References
----------
Doherty, J. (2018), PEST Model-Independent Parameter Estimation, User Manual Part I, 7th ed., Watermark Numerical
Computing, sec. 3.2 (template files) and 3.3 (instruction files).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from sensitivity.errors import ConfigError, DataError

#: The observation name of a number read and not kept.
DUMMY = "dum"


@dataclass(frozen=True)
class Template:
    """A PEST template file, parsed: its delimiter and its lines (the ``ptf`` header dropped), with the fields of
    each as ``(start, stop, name)`` (0-based character span of the field, delimiters included; lower-case name)."""

    path: str
    delimiter: str
    lines: tuple[str, ...]
    fields: tuple[tuple[tuple[int, int, str], ...], ...]

    @property
    def names(self) -> list[str]:
        """The parameter names of the fields, each once, in order of appearance."""
        return list(dict.fromkeys(name for line in self.fields for *_, name in line))


def read_template(path: str | Path) -> Template:
    """The PEST template file ``path``, or a one-line :class:`ConfigError` naming the file, its line and the fault."""
    text = _read(path, "PEST template")
    lines = text.splitlines()
    header = lines[0].split() if lines else []
    if len(header) != 2 or header[0].lower() != "ptf" or len(header[1]) != 1:
        raise ConfigError(f"PEST template {path}: the first line must be 'ptf <one-character delimiter>', got "
                          f"{(lines or [''])[0]!r}")
    delimiter = header[1]
    fields = []
    for number, line in enumerate(lines[1:], start=2):
        at = [i for i, c in enumerate(line) if c == delimiter]
        if len(at) % 2:
            raise ConfigError(f"PEST template {path} line {number}: an unmatched delimiter {delimiter!r} in {line!r}")
        spans = tuple((a, b + 1, line[a + 1:b].strip().lower()) for a, b in zip(at[::2], at[1::2]))
        for a, b, name in spans:
            if not name:
                raise ConfigError(f"PEST template {path} line {number}: an empty field at column {a + 1}")
        fields.append(spans)
    return Template(str(path), delimiter, tuple(lines[1:]), tuple(fields))


def render_template(template: Template, values: Mapping[str, float]) -> str:
    """The input file that ``template`` writes with the parameter ``values`` (keyed by name, any case).

    Raises
    ------
    ConfigError
        A field names a parameter not in ``values``, or a value does not fit its field's width.
    """
    lower = {name.lower(): float(v) for name, v in values.items()}
    out = []
    for number, (line, spans) in enumerate(zip(template.lines, template.fields), start=2):
        pieces, last = [], 0
        for a, b, name in spans:
            if name not in lower:
                raise ConfigError(f"PEST template {template.path} line {number}: parameter {name!r} is not one of "
                                  f"{sorted(lower)}")
            pieces += [line[last:a], format_field(lower[name], b - a, f"{template.path} line {number}")]
            last = b
        out.append("".join(pieces) + line[last:])
    return "\n".join(out) + "\n"


def format_field(value: float, width: int, where: str = "") -> str:
    """``value`` right-justified in ``width`` characters with as many significant figures as fit (E or F notation,
    the exponent shortened where that buys a digit), or a :class:`ConfigError` if none fits."""
    exact = repr(float(value)).upper()
    if exact.endswith(".0"):
        exact = exact[:-2]
    candidates = [exact] + [text for digits in range(16, -1, -1)
                            for form in (f"{value:.{digits}E}", f"{value:.{digits}f}")
                            for text in (form, _short_exponent(form))]
    fitting = [text for text in candidates if len(text) <= width]
    if not fitting:
        raise ConfigError(f"PEST template {where}: {value!r} does not fit in a field of {width} characters")
    best = min(fitting, key=lambda text: (abs(float(text) - value), len(text)))
    return best.rjust(width)


def _short_exponent(text: str) -> str:
    """``1.5E+07`` as ``1.5E7``, ``1.5E-07`` as ``1.5E-7``."""
    mantissa, e, exponent = text.partition("E")
    return f"{mantissa}E{int(exponent)}" if e else text


@dataclass(frozen=True)
class Instructions:
    """A PEST instruction file, parsed: its marker and, per instruction line, ``(line number, tokens)``."""

    path: str
    marker: str
    lines: tuple[tuple[int, tuple[str, ...]], ...]

    @property
    def names(self) -> list[str]:
        """The observation names it reads (``dum`` left out), in order."""
        return [name for _, tokens in self.lines for token in tokens
                for name in [_observation(token, self.marker)] if name and name != DUMMY]


def read_instructions(path: str | Path) -> Instructions:
    """The PEST instruction file ``path``, or a one-line :class:`ConfigError` naming the file, its line and the
    instruction it cannot use."""
    text = _read(path, "PEST instruction file")
    raw = text.splitlines()
    header = raw[0].split() if raw else []
    if len(header) != 2 or header[0].lower() != "pif" or len(header[1]) != 1:
        raise ConfigError(f"PEST instruction file {path}: the first line must be 'pif <one-character marker>', got "
                          f"{(raw or [''])[0]!r}")
    marker, lines, seen = header[1].lower(), [], set()
    for number, line in enumerate(raw[1:], start=2):
        if not line.strip():
            continue
        pieces = line.lower().split(marker)
        if len(pieces) % 2 == 0:
            raise ConfigError(f"PEST instruction file {path} line {number}: an unmatched marker {marker!r}")
        tokens = []
        for k, piece in enumerate(pieces):
            tokens += [marker + piece + marker] if k % 2 else piece.split()
        for i, token in enumerate(tokens):
            problem = _instruction_problem(token, marker, first=i == 0)
            if problem:
                raise ConfigError(f"PEST instruction file {path} line {number}: {problem}")
            name = _observation(token, marker)
            if name and name != DUMMY:
                if name in seen:
                    raise ConfigError(f"PEST instruction file {path} line {number}: observation {name!r} is read "
                                      "twice")
                seen.add(name)
        lines.append((number, tuple(tokens)))
    return Instructions(str(path), marker, tuple(lines))


def _instruction_problem(token: str, marker: str, *, first: bool) -> str:
    """Why ``token`` is not an instruction this reader runs ('' if it is)."""
    if token.startswith(marker):
        return "" if len(token) > 2 else f"an empty marker {token!r}"
    if first and not re.fullmatch(r"l\d+", token):
        return f"an instruction line must start with 'l<n>' or a primary marker, got {token!r}"
    if re.fullmatch(r"l\d+|w", token) or re.fullmatch(r"!\w[^!\s]*!", token):
        return ""
    columns = re.fullmatch(r"(?:\[[^\]\s]+\]|\([^)\s]+\))(\d+):(\d+)", token)
    if columns:
        s, e = int(columns[1]), int(columns[2])
        return "" if 1 <= s <= e else f"the columns {s}:{e} of {token!r} must be 1 <= s <= e"
    if token.startswith(("t", "&")):
        return f"{token!r}: tabs (t<n>) and continuations (&) are not supported; use w, markers or columns"
    return f"an unknown instruction {token!r}"


def _observation(token: str, marker: str) -> str | None:
    """The observation name an instruction reads (``None`` for a move or a marker)."""
    if token.startswith(marker):
        return None
    found = re.match(r"!([^!]+)!|\[([^\]]+)\]|\(([^)]+)\)", token)
    return next(g for g in found.groups() if g) if found else None


def read_observations(instructions: Instructions, text: str, where: str) -> dict[str, float]:
    """The observations the instructions read from an output file's ``text``, by name in the order read.

    Raises
    ------
    DataError
        One line naming ``where`` (the output file), the instruction file's line and what was not found.
    """
    lines = text.lower().splitlines()
    row, found = -1, {}
    for number, tokens in instructions.lines:
        row = _run_line(instructions, tokens, lines, row, found, f"{where} (instruction line {number} of "
                                                                  f"{Path(instructions.path).name})")
    return found


def _run_line(ins: Instructions, tokens: Sequence[str], lines: list[str], row: int, found: dict[str, float],
              where: str) -> int:
    """Run one instruction line from output line ``row``; the observations go into ``found``; the new row."""
    marker, i, pos, only_markers = ins.marker, 0, 0, True
    while i < len(tokens):
        token = tokens[i]
        line = lines[row] if 0 <= row < len(lines) else ""
        if token.startswith(marker) and i == 0:  # primary: the lines after the current one
            text = token[1:-1]
            row = next((r for r in range(row + 1, len(lines)) if text in lines[r]), -1)
            if row < 0:
                raise DataError(f"{where}: the marker {text!r} is not found before the end of the file")
            pos = lines[row].index(text) + len(text)
        elif token.startswith(marker):  # secondary: the rest of this line
            at = line.find(token[1:-1], pos)
            if at < 0 and only_markers and tokens[0].startswith(marker):
                i = 0  # the primary marker again, from the next line
                continue
            if at < 0:
                raise DataError(f"{where}: the marker {token[1:-1]!r} is not on output line {row + 1} after "
                                f"column {pos}")
            pos = at + len(token) - 2
        elif token[0] == "l":
            row += int(token[1:])
            if row >= len(lines):
                raise DataError(f"{where}: {token!r} moves past the end of the file ({len(lines)} lines)")
            pos = 0
        elif token == "w":
            rest = re.match(r"[^\s,]*[\s,]+", line[pos:])
            if rest is None or pos + rest.end() >= len(line):
                raise DataError(f"{where}: 'w' finds no blank followed by more text on output line {row + 1} after "
                                f"column {pos}")
            pos += rest.end()
            only_markers = False
        else:
            name = _observation(token, marker)
            pos, text = _field(token, line, pos, tokens[i + 1] if i + 1 < len(tokens) else "", marker)
            try:
                value = float(text.replace("d", "e"))
            except ValueError:
                raise DataError(f"{where}: {token!r} reads {text.strip()!r} on output line {row + 1}, not a "
                                "number") from None
            if name != DUMMY:
                found[name] = value
            only_markers = False
        i += 1
    return row


def _field(token: str, line: str, pos: int, following: str, marker: str) -> tuple[int, str]:
    """The text an observation instruction reads from ``line`` at cursor ``pos``, and the cursor after it."""
    if token[0] == "[":
        s, e = (int(k) for k in token.split("]", 1)[1].split(":"))
        return e, line[s - 1:e]
    if token[0] == "(":
        s, e = (int(k) for k in token.split(")", 1)[1].split(":"))
        found = re.compile(r"[^\s,]+").search(line, max(pos, s - 1))
        if found is None or found.start() >= e:
            return pos, ""
        return found.end(), found.group()
    start = re.compile(r"[^\s,]").search(line, pos)
    if start is None:
        return pos, ""
    stop = re.compile(r"[\s,]").search(line, start.start())
    end = stop.start() if stop else len(line)
    if following.startswith(marker):
        at = line.find(following[1:-1], start.start())
        end = min(end, at) if at >= 0 else end
    return end, line[start.start():end]


def _read(path: str | Path, what: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as err:
        raise ConfigError(f"{what} {path} cannot be read: {err.strerror or err}") from None
