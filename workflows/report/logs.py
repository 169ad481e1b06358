"""Warnings from the logs of a run: Hydra's job log of the run directory and each stage's own log.

A line of Hydra's log format, ``[time][logger][LEVEL] - message``, starts a record; lines that do not
match continue the message of the one before (a multi-line message). The chain of stages logs
``stage <name>: ...`` (logger ``workflows.run``) where each stage starts and ``study done`` at the end, so
the records of the run directory's own log are assigned to their stages. Hydra appends to that log on a
rerun: only the last run counts, the records after the last ``study done`` when a stage started after it (a
rerun that stopped early), else those after the ``study done`` before it.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

#: Hydra's default job log format (``hydra/job_logging/default``).
RECORD = re.compile(r"^\[(?P<time>[^\]]*)\]\[(?P<logger>[^\]]*)\]\[(?P<level>[A-Z]+)\] - (?P<message>.*)$")
#: Where the chain of stages (``workflows.run``) logs the start of a stage and the end of the study.
STAGE_START = re.compile(r"^stage (?P<stage>[^\s:]+):")
STUDY_DONE = "study done"
CHAIN_LOGGER = "workflows.run"
#: The levels reported as warnings.
WARNING_LEVELS = ("WARNING", "ERROR", "CRITICAL")


@dataclass(frozen=True)
class Record:
    """One log record."""

    logger: str
    level: str
    message: str


def read_records(path: str | Path) -> list[Record]:
    """The records of a log file in Hydra's format (lines before the first record are left out)."""
    records: list[Record] = []
    for line in Path(path).read_text(encoding="utf-8", errors="replace").splitlines():
        match = RECORD.match(line)
        if match:
            records.append(Record(match["logger"], match["level"], match["message"]))
        elif records:
            last = records[-1]
            records[-1] = Record(last.logger, last.level, f"{last.message}\n{line}")
    return records


def last_run(records: list[Record]) -> list[Record]:
    """The records of the last run in an appended log (see the module notes)."""
    done = [i for i, r in enumerate(records) if _is_chain(r) and r.message.startswith(STUDY_DONE)]
    if not done:
        return records
    if any(_is_chain(r) and STAGE_START.match(r.message) for r in records[done[-1] + 1:]):  # a later rerun
        return records[done[-1] + 1:]
    return records[done[-2] + 1:] if len(done) > 1 else records


def by_stage(records: list[Record]) -> dict[str | None, list[Record]]:
    """The records of one run by the stage they were logged in (None: before the first stage or after the
    study, the chain's own)."""
    stages: dict[str | None, list[Record]] = {None: []}
    current: str | None = None
    for record in records:
        if _is_chain(record):
            start = STAGE_START.match(record.message)
            current = start["stage"] if start else None if record.message.startswith(STUDY_DONE) else current
            if start:
                stages[current] = []
        stages.setdefault(current, []).append(record)
    return stages


def warnings_of(records: list[Record]) -> list[Record]:
    """The records at warning level or above."""
    return [r for r in records if r.level in WARNING_LEVELS]


def _is_chain(record: Record) -> bool:
    return record.logger == CHAIN_LOGGER
