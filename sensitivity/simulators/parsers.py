"""A program's outputs read back by declared rules, one frozen dataclass per kind of rule.

Each rule reads one named output from a run's folder as a float64 array (:meth:`Rule.read`); a program's outputs are
its rules' values, flattened and joined in the declared order (:mod:`sensitivity.simulators.program`). A rule is
written in a config as a mapping with its ``kind`` (:func:`output_rule`):

==========  ============================================================================================
``marker``  the number after a marker (literal text, or a regular expression with ``regex: true``): on the
            marker's line, else the first number of the lines after it
``table``   a column of a table: blank-separated (``column``, 1-based) or fixed columns (``span: [s, e]``,
            1-based, inclusive), its rows after a marker line (``after``), ``skip`` lines, for ``rows`` rows or
            until a row without a number there
``csv``     a CSV column by its header name
``netcdf``  a netCDF variable (any shape, flattened in C order)
``npy``     a ``.npy`` array (any shape, flattened in C order)
``pest``    the observations a PEST instruction file (``instructions``) reads, in its order or ``observations``'
            (:mod:`sensitivity.simulators.pest_files`)
``python``  a user's parser ``"package.module:function"``, called with the run's folder (a
            :class:`pathlib.Path`) and returning an array
==========  ============================================================================================

A rule's ``file`` is relative to the run's folder; a file a rule reads to know *how* to read (``instructions``)
is relative to the program's base folder and enters its fingerprint. An output that is missing or cannot be read
is a one-line :class:`~sensitivity.errors.DataError` naming the rule and the file.
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np

from sensitivity.errors import ConfigError, DataError

#: A number as programs print it: C or Fortran (``1.5D+03``) notation, or a NaN or an infinity (so that a run that
#: prints one is named for it, not for an unreadable file).
NUMBER = re.compile(r"[-+]?(?:(?:\d+\.?\d*|\.\d+)(?:[eEdD][-+]?\d+)?|nan|inf(?:inity)?)(?![\w.])", re.IGNORECASE)


@dataclass(frozen=True)
class Rule:
    """What every rule has: the output's ``name`` and the ``file`` it is read from (relative to the run folder)."""

    kind: ClassVar[str] = ""
    name: str
    file: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"an output rule's `name` must be a non-empty string, got {self.name!r}")
        if not isinstance(self.file, str) or (self.needs_file and not self.file):
            raise ConfigError(f"output {self.name!r}: `file` must name the file it is read from, got {self.file!r}")

    @property
    def needs_file(self) -> bool:
        return True

    def config_files(self) -> list[str]:
        """Files (relative to the program's base folder) that say how to read: they enter the fingerprint."""
        return []

    def prepare(self, base: Path) -> Rule:
        """This rule, checked against the program's base folder (its config files exist and parse)."""
        return self

    def read(self, folder: Path) -> np.ndarray:
        """The output's values from the run folder ``folder``, float64 1-D."""
        text = self._text(folder)
        return np.asarray(self._parse(text), dtype=np.float64).ravel()

    def _text(self, folder: Path) -> str:
        path = folder / self.file
        try:
            return path.read_text(errors="replace")
        except FileNotFoundError:
            raise DataError(f"output {self.name!r}: the file {self.file} is missing") from None
        except OSError as err:
            raise DataError(f"output {self.name!r}: {self.file} cannot be read: {err.strerror or err}") from None

    def _parse(self, text: str) -> Any:
        raise NotImplementedError


@dataclass(frozen=True)
class Marker(Rule):
    """The number after ``marker`` (its first occurrence; ``regex``: a regular expression)."""

    kind: ClassVar[str] = "marker"
    marker: str = ""
    regex: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.marker, str) or not self.marker:
            raise ConfigError(f"output {self.name!r}: `marker` must be non-empty text, got {self.marker!r}")
        if self.regex:
            try:
                re.compile(self.marker)
            except re.error as err:
                raise ConfigError(f"output {self.name!r}: `marker` {self.marker!r} is not a regular expression "
                                  f"({err})") from None

    def _parse(self, text: str) -> float:
        found = re.search(self.marker if self.regex else re.escape(self.marker), text)
        if found is None:
            raise DataError(f"output {self.name!r}: the marker {self.marker!r} is not in {self.file}")
        number = NUMBER.search(text, found.end())
        if number is None:
            raise DataError(f"output {self.name!r}: no number after the marker {self.marker!r} in {self.file}")
        return _number(number.group())


@dataclass(frozen=True)
class Table(Rule):
    """A column of a table of ``rows`` rows (None: until a row without a number in the column or a blank line)
    that starts ``skip`` lines after the line holding ``after`` (None: the file's first line)."""

    kind: ClassVar[str] = "table"
    column: int | None = None
    span: Sequence[int] | None = None
    after: str | None = None
    skip: int = 0
    rows: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if (self.column is None) == (self.span is None):
            raise ConfigError(f"output {self.name!r}: give one of `column` (blank-separated, 1-based) or `span` "
                              f"([first, last] character columns, 1-based), got column={self.column!r}, "
                              f"span={self.span!r}")
        if self.column is not None and not _count(self.column, 1):
            raise ConfigError(f"output {self.name!r}: `column` must be an integer >= 1, got {self.column!r}")
        if self.span is not None:
            if isinstance(self.span, str) or len(self.span) != 2 or not all(_count(k, 1) for k in self.span) or \
                    self.span[0] > self.span[1]:
                raise ConfigError(f"output {self.name!r}: `span` must be [first, last] with 1 <= first <= last, got "
                                  f"{self.span!r}")
            object.__setattr__(self, "span", tuple(int(k) for k in self.span))
        if not _count(self.skip, 0):
            raise ConfigError(f"output {self.name!r}: `skip` must be an integer >= 0, got {self.skip!r}")
        if self.rows is not None and not _count(self.rows, 1):
            raise ConfigError(f"output {self.name!r}: `rows` must be an integer >= 1 (or null: to the table's end), "
                              f"got {self.rows!r}")

    def _parse(self, text: str) -> list[float]:
        lines = text.splitlines()
        start = 0
        if self.after is not None:
            start = next((k + 1 for k, line in enumerate(lines) if self.after in line), -1)
            if start < 0:
                raise DataError(f"output {self.name!r}: the line {self.after!r} is not in {self.file}")
        body = lines[start + self.skip:]
        values = []
        for k, line in enumerate(body[:self.rows] if self.rows else body):
            field = self._field(line)
            number = NUMBER.fullmatch(field.strip()) if field is not None else None
            if number is None and self.rows is None:
                break
            if number is None:
                raise DataError(f"output {self.name!r}: row {k + 1} of the table in {self.file} has {line!r}, no "
                                f"number in {self._where}")
            values.append(_number(number.group()))
        if not values or (self.rows is not None and len(values) < self.rows):
            raise DataError(f"output {self.name!r}: the table in {self.file} has {len(values)} rows, expected "
                            f"{self.rows or 'at least 1'}")
        return values

    @property
    def _where(self) -> str:
        return f"column {self.column}" if self.column is not None else f"columns {self.span[0]}-{self.span[1]}"

    def _field(self, line: str) -> str | None:
        if self.span is not None:
            return line[self.span[0] - 1:self.span[1]] if len(line) >= self.span[0] else None
        words = line.split()
        return words[self.column - 1] if len(words) >= self.column else None


@dataclass(frozen=True)
class CsvColumn(Rule):
    """The CSV column whose header is ``column``."""

    kind: ClassVar[str] = "csv"
    column: str = ""
    delimiter: str = ","

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.column, str) or not self.column:
            raise ConfigError(f"output {self.name!r}: `column` must be a header name, got {self.column!r}")
        if not isinstance(self.delimiter, str) or len(self.delimiter) != 1:
            raise ConfigError(f"output {self.name!r}: `delimiter` must be one character, got {self.delimiter!r}")

    def _parse(self, text: str) -> list[float]:
        rows = list(csv.reader(text.splitlines(), delimiter=self.delimiter))
        header = [h.strip() for h in rows[0]] if rows else []
        if self.column not in header:
            raise DataError(f"output {self.name!r}: {self.file} has no column {self.column!r} (columns: {header})")
        j = header.index(self.column)
        try:
            return [_number(row[j]) for row in rows[1:] if row]
        except (IndexError, ValueError):
            raise DataError(f"output {self.name!r}: column {self.column!r} of {self.file} holds a value that is not "
                            "a number") from None


@dataclass(frozen=True)
class NetcdfVariable(Rule):
    """The netCDF variable ``variable`` of ``file``."""

    kind: ClassVar[str] = "netcdf"
    variable: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.variable, str) or not self.variable:
            raise ConfigError(f"output {self.name!r}: `variable` must name a netCDF variable, got {self.variable!r}")

    def read(self, folder: Path) -> np.ndarray:
        import xarray as xr

        path = folder / self.file
        if not path.is_file():
            raise DataError(f"output {self.name!r}: the file {self.file} is missing")
        try:
            with xr.open_dataset(path) as ds:
                if self.variable not in ds.variables:
                    raise DataError(f"output {self.name!r}: {self.file} has no variable {self.variable!r} "
                                    f"(variables: {sorted(map(str, ds.variables))})")
                return np.asarray(ds[self.variable].values, dtype=np.float64).ravel()
        except DataError:
            raise
        except Exception as err:  # noqa: BLE001 (a truncated or foreign file)
            raise DataError(f"output {self.name!r}: {self.file} is not a readable netCDF file "
                            f"({type(err).__name__})") from None


@dataclass(frozen=True)
class NpyArray(Rule):
    """The array of the ``.npy`` file ``file``."""

    kind: ClassVar[str] = "npy"

    def read(self, folder: Path) -> np.ndarray:
        path = folder / self.file
        if not path.is_file():
            raise DataError(f"output {self.name!r}: the file {self.file} is missing")
        try:
            values = np.load(path, allow_pickle=False)
            return np.asarray(values, dtype=np.float64).ravel()
        except (ValueError, TypeError, OSError) as err:
            raise DataError(f"output {self.name!r}: {self.file} is not a .npy array of numbers "
                            f"({type(err).__name__}: {err})") from None


@dataclass(frozen=True)
class PestInstructions(Rule):
    """The observations the PEST instruction file ``instructions`` reads from ``file``: all in the instruction
    file's order, or those of ``observations`` in that order."""

    kind: ClassVar[str] = "pest"
    instructions: str = ""
    observations: Sequence[str] | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.instructions, str) or not self.instructions:
            raise ConfigError(f"output {self.name!r}: `instructions` must name a PEST instruction file (.ins), got "
                              f"{self.instructions!r}")
        if self.observations is not None:
            if isinstance(self.observations, str) or not all(isinstance(o, str) for o in self.observations):
                raise ConfigError(f"output {self.name!r}: `observations` must be a list of names, got "
                                  f"{self.observations!r}")
            object.__setattr__(self, "observations", tuple(o.lower() for o in self.observations))

    def config_files(self) -> list[str]:
        return [self.instructions]

    def prepare(self, base: Path) -> PestInstructions:
        from sensitivity.simulators.pest_files import read_instructions

        names = read_instructions(base / self.instructions).names
        missing = [o for o in self.observations or () if o not in names]
        if missing:
            raise ConfigError(f"output {self.name!r}: `observations` {missing} are not read by {self.instructions} "
                              f"(it reads {names})")
        return replace(self, instructions=str(base / self.instructions))

    def _parse(self, text: str) -> list[float]:
        from sensitivity.simulators.pest_files import read_instructions, read_observations

        instructions = read_instructions(self.instructions)
        found = read_observations(instructions, text, f"output {self.name!r}: {self.file}")
        return [found[o] for o in (self.observations or instructions.names)]


@dataclass(frozen=True)
class PythonParser(Rule):
    """A user's parser ``"package.module:function"`` called with the run's folder; ``file`` is optional here."""

    kind: ClassVar[str] = "python"
    parser: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.parser, str) or ":" not in self.parser:
            raise ConfigError(f"output {self.name!r}: `parser` must be 'package.module:function', got "
                              f"{self.parser!r}")

    @property
    def needs_file(self) -> bool:
        return False

    def prepare(self, base: Path) -> PythonParser:
        self._function()  # importable now, not at the first run
        return self

    def config_files(self) -> list[str]:
        import importlib.util

        spec = importlib.util.find_spec(self.parser.partition(":")[0])
        return [spec.origin] if spec is not None and spec.origin and Path(spec.origin).is_file() else []

    def read(self, folder: Path) -> np.ndarray:
        try:
            raw = self._function()(folder)
            values = np.asarray(raw, dtype=np.float64)
        except (ConfigError, DataError):
            raise
        except Exception as err:  # noqa: BLE001 (a user's parser may raise anything)
            lines = [line for line in str(err).splitlines() if line.strip()]
            raise DataError(f"output {self.name!r}: the parser {self.parser} raised {type(err).__name__}: "
                            f"{lines[0] if lines else ''}") from None
        return values.ravel()

    def _function(self):
        from sensitivity.surrogates.load import import_callable

        try:
            return import_callable(self.parser, what=f"output {self.name!r}: `parser`")
        except Exception as err:  # noqa: BLE001 (ModelError from the import: a config fault here)
            raise ConfigError(str(err)) from None


#: The rules by their ``kind``.
RULES: dict[str, type[Rule]] = {rule.kind: rule for rule in (Marker, Table, CsvColumn, NetcdfVariable, NpyArray,
                                                             PestInstructions, PythonParser)}


def output_rule(spec: Mapping[str, Any] | Rule, where: str = "`outputs`") -> Rule:
    """The rule a config mapping ``{kind: ..., name: ..., ...}`` describes (a rule is returned as it is).

    Raises
    ------
    ConfigError
        An unknown ``kind``, a key the kind does not take, or a bad value (one line naming ``where``).
    """
    if isinstance(spec, Rule):
        return spec
    if not isinstance(spec, Mapping):
        raise ConfigError(f"{where} must be a mapping with a `kind` ({sorted(RULES)}), got {spec!r}")
    settings = dict(spec)
    kind = settings.pop("kind", None)
    if kind not in RULES:
        raise ConfigError(f"{where}: `kind` must be one of {sorted(RULES)}, got {kind!r}")
    accepted = [f.name for f in fields(RULES[kind])]
    unknown = [key for key in settings if key not in accepted]
    if unknown:
        raise ConfigError(f"{where}: {unknown[0]!r} is not a setting of a {kind!r} output (its settings: "
                          f"{accepted})")
    if "name" not in settings:
        raise ConfigError(f"{where}: a {kind!r} output needs a `name`")
    return RULES[kind](**settings)


def _number(text: str) -> float:
    return float(text.strip().lower().replace("d", "e"))


def _count(value: Any, low: int) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and value >= low
