"""Render ``report.html`` of a run directory from the Jinja2 template, and write it atomically."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping

from sensitivity import __version__
from sensitivity.datasets import write_text_atomic
from sensitivity.errors import DataError
from workflows.report.notices import chain_checks, result_warnings
from workflows.report.page import Stage
from workflows.report.results import read_result
from workflows.report.run_dir import figure, run_command, stage_commands, stage_files

#: The report's file name in the run directory.
REPORT_NAME = "report.html"
TEMPLATE = "report.html.j2"


def render_report(run_dir: str | Path, *, commands: Mapping[str, str] | None = None) -> Path:
    """Write ``<run_dir>/report.html``: one self-contained page of the run's results.

    The page has a section per stage found (any subset of a chain's stages, or the results of a single
    workflow's run directory) with its command, the key numbers of each result file as tables, and its
    figures embedded as PNG data URIs; every warning and verdict of the run, as its results record them
    (each result's library ``summary(ds)``, the one its workflow logged; never the logs, so a cached rerun
    renders the same page); and the provenance of every result (config, surrogate and input checksums, seed,
    history, package versions). It needs no network, no other file and no JavaScript: the CSS is inline, and
    all text is escaped by the template engine (Jinja2 with autoescape). The page holds no time of its own:
    rendered again from the same files, it is the same bytes.

    Parameters
    ----------
    run_dir
        A run directory of ``sensitivity run`` (one folder per stage) or of one workflow.
    commands
        Stage name -> the command that ran it, overriding the commands read from Hydra's record of the run
        (``.hydra/config.yaml``); ``sensitivity run`` passes the commands it ran.

    Returns
    -------
    pathlib.Path
        The report.

    Raises
    ------
    DataError
        ``run_dir`` is not a directory, or holds no result (``*.nc``) and no figure (``*.png``).
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise DataError(f"run_dir: not a directory: {run_dir}")
    files, single = stage_files(run_dir)
    if not files:
        raise DataError(f"run_dir: no results (*.nc) or figures (*.png) in {run_dir} or its stage folders")
    known = {files[0].name: run_command(run_dir)} if single else stage_commands(run_dir)
    commands = {**known, **(commands or {})}
    stages, notices, read = [], [], []
    for stage in files:
        results = [read_result(p) for p in stage.results]
        notices += result_warnings(stage.name, results)
        read.append((stage.name, stage.folder, results))
        stages.append(Stage(stage.name, _anchor(stage.name), _workflow(results),
                            commands.get(stage.name, ""), results, [figure(p) for p in stage.figures]))
    notices += chain_checks(read)
    html = _environment().get_template(TEMPLATE).render(
        title=run_dir.resolve().name, run_dir=str(run_dir.resolve()), command=run_command(run_dir),
        version=__version__,
        stages=stages, notices=notices, versions=_versions(stages), produced=_produced(read))
    return write_text_atomic(html, run_dir / REPORT_NAME)


def _workflow(results) -> str:
    """The workflow that wrote the results: the last line of their ``history`` (``<time>: sensitivity <version>
    <workflow>``) names it."""
    for r in results:
        match = re.search(r"sensitivity \S+ (\w+)\s*$", (r.provenance.history.splitlines() or [""])[-1])
        if match:
            return match[1]
    return ""


def _produced(read) -> dict[str, str]:
    """Recorded input path -> ``stage/file`` of the result of this run it names."""
    where = {(folder / r.file).resolve(): f"{stage}/{r.file}" for stage, folder, results in read for r in results}
    return {path: where[Path(path).resolve()] for _, _, results in read for r in results
            for path, _ in r.provenance.inputs if Path(path).resolve() in where}


def _anchor(name: str) -> str:
    return "stage-" + re.sub(r"[^A-Za-z0-9_-]+", "-", name)


def _versions(stages: list[Stage]) -> list[tuple[str, list[tuple[str, list[str]]]]]:
    """Package -> [(version, [stage/file, ...])]: the versions every result recorded (one row per package)."""
    table: dict[str, dict[str, list[str]]] = {}
    for stage in stages:
        for r in stage.results:
            for package, version in r.provenance.versions.items():
                table.setdefault(package, {}).setdefault(version, []).append(f"{stage.name}/{r.file}")
    return [(package, list(versions.items())) for package, versions in sorted(table.items())]


def _environment():
    import jinja2

    return jinja2.Environment(loader=jinja2.PackageLoader("workflows.report", "templates"), autoescape=True,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
