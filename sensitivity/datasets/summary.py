"""The key facts of a result dataset as plain data, one :class:`Summary` per study, and its log lines.

Every study keeps one ``summary(ds)`` (``sensitivity.analyses.<study>.summary``, ``sensitivity.sweep.summary``)
that reads its result dataset, and only it, into a :class:`Summary`: a title, facts, tables, verdicts and
warnings, every number already text (:mod:`.summary_text`). The workflow logs it (:func:`log_lines`) and the
study report renders it (``workflows.report``), so the two cannot disagree, and a cached rerun, which computes
nothing, reports what the first run did.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

#: :attr:`Cell.flag` of a value that fails its check (red), that passes one (green), or neither; of one its check
#: could not judge (amber: an inconclusive verdict, never green).
BAD, GOOD, PLAIN, UNSURE = "bad", "good", "", "unsure"


@dataclass(frozen=True)
class Cell:
    """One table cell: ``text``, then ``detail`` in small type (an interval), then ``badge`` (a rank)."""

    text: str
    detail: str = ""
    badge: str = ""
    flag: str = PLAIN


@dataclass(frozen=True)
class Table:
    """A table of key numbers: ``columns`` headers, ``rows`` of cells (the first names the row), a ``note``."""

    caption: str
    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    note: str = ""


@dataclass(frozen=True)
class Fact:
    """One key number or setting: ``label``, ``value`` as text, its ``unit`` ('' when none or within the value),
    flagged like a :class:`Cell`."""

    label: str
    value: str
    unit: str = ""
    flag: str = PLAIN

    @property
    def text(self) -> str:
        """``value unit``."""
        return f"{self.value} {self.unit}" if self.unit else self.value


@dataclass(frozen=True)
class Verdict:
    """A check the result records: what was checked, whether it ``holds``, the statement behind it, a table of its
    worst cases (None without one), and whether it is ``inconclusive``: a check from a sample that found no error
    but could not have seen a factor-2 one (:mod:`sensitivity.analyses.agreement`); it does not hold then."""

    subject: str
    holds: bool
    statement: str
    worst: Table | None = None
    inconclusive: bool = False

    def __post_init__(self) -> None:
        if self.holds and self.inconclusive:
            raise ValueError(f"the verdict on {self.subject!r} cannot both hold and be inconclusive")

    @classmethod
    def of(cls, subject: str, code: int, statement: str, worst: Table | None = None) -> "Verdict":
        """A verdict of a recorded code (:data:`~sensitivity.analyses.agreement.FAILS`, ``HOLDS`` or
        ``INCONCLUSIVE``: 0, 1, 2)."""
        return cls(subject, int(code) == 1, statement, worst, inconclusive=int(code) == 2)

    @property
    def word(self) -> str:
        """``holds``, ``FAILS`` or ``INCONCLUSIVE``."""
        return "holds" if self.holds else "INCONCLUSIVE" if self.inconclusive else "FAILS"

    @property
    def flag(self) -> str:
        """How the verdict is shown: :data:`GOOD` when it holds, :data:`BAD` when it fails, :data:`UNSURE` when
        inconclusive."""
        return GOOD if self.holds else UNSURE if self.inconclusive else BAD


@dataclass(frozen=True)
class Summary:
    """What a result dataset records: ``title``, facts, tables, verdicts and warnings (sentences)."""

    title: str
    facts: tuple[Fact, ...] = ()
    tables: tuple[Table, ...] = ()
    verdicts: tuple[Verdict, ...] = ()
    warnings: tuple[str, ...] = ()


#: The global attribute of a result that records warnings its workflow found about its inputs (one per line), so
#: that its summary, and with it the log and the report, states them on every rendering.
WARNINGS_ATTR = "warnings"


def with_warning(ds, text: str):
    """``ds`` with ``text`` added to its recorded warnings (:data:`WARNINGS_ATTR`)."""
    recorded = [w for w in str(ds.attrs.get(WARNINGS_ATTR, "")).split("\n") if w]
    return ds.assign_attrs({WARNINGS_ATTR: "\n".join([*recorded, text])})


def recorded_warnings(ds) -> tuple[str, ...]:
    """The warnings a result records (:func:`with_warning`), in order."""
    return tuple(w for w in str(ds.attrs.get(WARNINGS_ATTR, "")).split("\n") if w)


def log_lines(summary: Summary, prefix: str = "") -> list[tuple[int, str]]:
    """``(logging level, line)`` of a summary, in the order a log shows it: the facts, each table row (its first
    cell, then ``column value detail`` of the others), each verdict (WARNING when it fails) with its worst cases,
    then the warnings (WARNING). ``prefix`` starts every line that is no table row (``"calibrate: "``)."""
    lines = [(logging.INFO, f"{prefix}{fact.label}: {fact.text}") for fact in summary.facts]
    for table in summary.tables:
        lines += [(logging.INFO, f"{prefix}{table.caption}")] + [(logging.INFO, row) for row in row_lines(table)]
    for verdict in summary.verdicts:
        level = logging.INFO if verdict.holds else logging.WARNING
        lines.append((level, f"{prefix}{verdict.subject}: {verdict.word}: {verdict.statement}"))
        if verdict.worst is not None:
            lines += [(level, row) for row in row_lines(verdict.worst)]
    return lines + [(logging.WARNING, f"{prefix}{warning}") for warning in summary.warnings]


def row_lines(table: Table) -> list[str]:
    """One line per row: ``  <first cell>  <column> <text> <detail>; ...`` (empty cells left out)."""
    lines = []
    for row in table.rows:
        cells = [f"{column} {_cell(cell)}" for column, cell in zip(table.columns[1:], row[1:]) if cell.text]
        lines.append(f"  {_cell(row[0])}  " + "; ".join(cells))
    return lines


def _cell(cell: Cell) -> str:
    return " ".join(t for t in (cell.text, cell.detail, cell.badge and f"({cell.badge})") if t)
