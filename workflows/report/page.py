"""The content of a report page as plain data: cells, tables, figures, notices, results and stages.

The study modules fill these from the datasets, :mod:`workflows.report.run_dir` from the files of a run
directory, and the template (``templates/report.html.j2``) lays them out; every text in them is escaped there.
"""
from __future__ import annotations

from dataclasses import dataclass, field

#: :attr:`Cell.flag` of a value that fails its check (red), that passes one (green), or neither.
BAD, GOOD, PLAIN = "bad", "good", ""


@dataclass(frozen=True)
class Cell:
    """One table cell: ``text``, then ``detail`` in small type (an interval), then ``badge`` (a rank)."""

    text: str
    detail: str = ""
    badge: str = ""
    flag: str = PLAIN


@dataclass(frozen=True)
class Table:
    """A table of key numbers: ``columns`` headers, ``rows`` of cells, a ``note`` under it."""

    caption: str
    columns: list[str]
    rows: list[list[Cell]]
    note: str = ""


@dataclass(frozen=True)
class Fact:
    """One key number or setting: ``label``, ``value`` (flagged like a :class:`Cell`)."""

    label: str
    value: str
    flag: str = PLAIN


@dataclass(frozen=True)
class Summary:
    """What a study module reads from one result: facts, tables and the warnings its attributes record."""

    facts: list[Fact] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Provenance:
    """Where one result came from: its global attributes (the dataset contract's provenance)."""

    history: str
    surrogate: str
    surrogate_hash: str
    seed: str
    inputs: list[tuple[str, str]]  # (path, sha256) of every file it was computed from
    versions: dict[str, str]
    config: str


@dataclass(frozen=True)
class Result:
    """One result file of a stage: what it is, its key numbers and its provenance."""

    file: str
    kind: str
    title: str
    size: str
    checksum: str
    summary: Summary
    provenance: Provenance


@dataclass(frozen=True)
class Figure:
    """A PNG figure embedded as a data URI, with its pixel size."""

    name: str
    data_uri: str
    width: int
    height: int


@dataclass(frozen=True)
class Notice:
    """A warning of the run: which stage, where it was found (a log or a result file), its level and text."""

    stage: str
    source: str
    level: str
    message: str


@dataclass(frozen=True)
class Stage:
    """One stage of the run: its folder, workflow, command, results and figures."""

    name: str
    anchor: str
    workflow: str
    command: str
    results: list[Result]
    figures: list[Figure]
