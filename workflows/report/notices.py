"""Every warning of a run, from its results, never from a log (a cached rerun logs nothing of them): the warnings
and failed verdicts each result's summary holds, and two checks across the chain: results computed with
different surrogates, and a result computed from an earlier version of one of its input files (stale)."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from sensitivity.datasets import checksum_path
from workflows.report.page import Notice, Result
from workflows.report.run_dir import checksum

#: The stage name of the chain's own warnings (the checks across the results).
CHAIN = "run"
#: Inputs without a checksum record larger than this [bytes] are not hashed to check them (a large sample file).
MAX_HASHED = 1 << 30


def result_warnings(stage: str, results: Sequence[Result]) -> list[Notice]:
    """The warnings and failed verdicts the summaries of the results of ``stage`` hold, each listed once."""
    notices: list[Notice] = []
    for result in results:
        failed = [f"{v.subject}: {v.word}: {v.statement}" for v in result.summary.verdicts if not v.holds]
        for message in [*failed, *result.summary.warnings]:
            if not any(n.message == message for n in notices):
                notices.append(Notice(stage, result.file, "WARNING", message))
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

