"""The content of a report page as plain data: results, figures, notices and stages.

Each result's :class:`~sensitivity.datasets.summary.Summary` comes from its study's ``summary(ds)`` in the library
(the one the workflow logged), :mod:`workflows.report.run_dir` reads the files of a run directory, and the
template (``templates/report.html.j2``) lays them out; every text in them is escaped there.
"""
from __future__ import annotations

from dataclasses import dataclass

from sensitivity.datasets.summary import Summary

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
    """A warning of the run: which stage, where it was found (a result file, or the results of the run), its level
    and text."""

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
