"""Every warning of a run, from the logs and from the results: each stage's logged warnings, those its datasets
record (a warning already logged is listed once), and two checks across the chain: results computed with
different surrogates, and a result computed from an earlier version of one of its input files (stale)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Sequence

from sensitivity.datasets import checksum_path
from workflows.report.logs import Record, by_stage, last_run, read_records, warnings_of
from workflows.report.page import Notice, Result
from workflows.report.run_dir import StageFiles, checksum

#: The stage name of the chain's own warnings (logged before the first stage or after the last).
CHAIN = "run"
#: Inputs without a checksum record larger than this [bytes] are not hashed to check them (a large sample file).
MAX_HASHED = 1 << 30


def stage_log_warnings(files: StageFiles, chain_records: dict[str | None, list[Record]]) -> list[Notice]:
    """The warnings a stage logged: in its own logs when it has any, else in its part of the run's log."""
    if files.logs:
        found = [(log.name, r) for log in files.logs for r in warnings_of(read_records(log))]
    else:
        found = [("run log", r) for r in warnings_of(chain_records.get(files.name, []))]
    return [Notice(files.name, source, r.level, r.message) for source, r in found]


def chain_records(logs: Sequence[Path]) -> dict[str | None, list[Record]]:
    """The records of the last run in the run directory's own logs, by stage."""
    return by_stage(last_run([r for log in logs for r in read_records(log)]))


def chain_warnings(records: dict[str | None, list[Record]]) -> list[Notice]:
    """The chain's own warnings (outside every stage)."""
    return [Notice(CHAIN, "run log", r.level, r.message) for r in warnings_of(records.get(None, []))]


def result_warnings(stage: str, results: Sequence[Result], logged: Sequence[Notice]) -> list[Notice]:
    """The warnings the results of ``stage`` record, except those its log already holds."""
    seen = [_plain(n.message) for n in logged]
    notices = []
    for result in results:
        for message in result.summary.warnings:
            if not any(_plain(message) in text or text in _plain(message) for text in seen):
                notices.append(Notice(stage, result.file, "WARNING", message))
                seen.append(_plain(message))
    return notices


def chain_checks(stages: Sequence[tuple[str, Path, Sequence[Result]]]) -> list[Notice]:
    """Results of the run computed with different surrogates, and inputs whose recorded checksum differs from
    the file now at their path (the result was computed from an earlier version of it). An input that is no
    result of this run is checked when it exists and has a checksum record or at most :data:`MAX_HASHED` bytes."""
    notices = []
    surrogates = {r.provenance.surrogate_hash: (stage, r.file) for stage, _, results in stages for r in results
                  if r.provenance.surrogate_hash}
    if len(surrogates) > 1:
        where = "; ".join(f"{stage}/{file}: {h[:19]}..." for h, (stage, file) in surrogates.items())
        notices.append(Notice(CHAIN, "results", "WARNING", f"the results come from {len(surrogates)} different "
                                                           f"surrogates ({where})"))
    current: dict[Path, str | None] = {(folder / r.file).resolve(): r.checksum for _, folder, results in stages
                                       for r in results}
    for stage, _, results in stages:
        for r in results:
            for path, recorded in r.provenance.inputs:
                where = Path(path).resolve()
                if where not in current:
                    current[where] = _checksum(where)
                now = current[where]
                if now is not None and now != recorded:
                    notices.append(Notice(stage, r.file, "WARNING",
                                          f"{r.file} was computed from an earlier version of {path} (recorded "
                                          f"{recorded[:19]}..., now {now[:19]}...): rerun this stage"))
    return notices


def _checksum(path: Path) -> str | None:
    """The checksum of an input file, None when it is gone or too large to hash without a record."""
    if not path.is_file() or (not checksum_path(path).is_file() and path.stat().st_size > MAX_HASHED):
        return None
    return checksum(path)


def _plain(text: str) -> str:
    """``text`` for comparison: lower case, underscores and runs of white space as one space."""
    return re.sub(r"[\s_]+", " ", text.lower()).strip()
