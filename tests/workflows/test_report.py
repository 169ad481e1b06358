"""The study report (``report.html``): one self-contained page per run, checked with an HTML parser.

The run is the species x day study (:mod:`tests.helpers.report_study`) stage by stage at small sizes. The page
must embed every figure the stages drew (the same bytes as the PNG files), need no other resource, tabulate each
result's key numbers as the result files hold them (read here through the library's readers), list every
warning, escape every text, and cope with any subset of the stages. The slow test runs the chain through the
command line and opens its report in headless Chromium (:mod:`tests.helpers.browser`).
"""
from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from sensitivity.datasets import open_result, read_estimate, select
from sensitivity.errors import DataError
from workflows.report import REPORT_NAME, render_report
from tests.helpers import CLI
from tests.helpers.browser import chromium, load_page
from tests.helpers.report_study import STAGES, run_stages, write_chain_study
from tests.helpers.study_matrix import SPECIES, TRUTH

PNG = b"\x89PNG\r\n\x1a\n"
#: Hydra's job log format (hydra/job_logging/default.yaml), as ``sensitivity run`` writes ``run.log``.
HYDRA_LINE = "[2026-01-01 00:00:00,000][{logger}][{level}] - {message}"


class Page(HTMLParser):
    """The parts of a page the tests check: every element's attributes, the tables (caption, header, rows of
    cell text) and the text of the whole page."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict]] = []
        self.tables: list[dict] = []
        self.text: list[str] = []
        self._cell: list[str] | None = None
        self._caption: list[str] | None = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        if tag == "table":
            self.tables.append({"caption": "", "head": [], "rows": []})
        elif tag == "caption":
            self._caption = []
        elif tag == "tr" and self.tables:
            self.tables[-1]["rows"].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag == "caption" and self._caption is not None:
            self.tables[-1]["caption"] = " ".join("".join(self._caption).split())
            self._caption = None
        elif tag in ("td", "th") and self._cell is not None:
            self.tables[-1]["rows"][-1].append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "thead":
            self.tables[-1]["head"] = self.tables[-1]["rows"].pop()

    def handle_data(self, data):
        self.text.append(data)
        for part in (self._cell, self._caption):
            if part is not None:
                part.append(data)

    def table(self, caption: str) -> dict:
        found = [t for t in self.tables if t["caption"].startswith(caption)]
        assert len(found) == 1, (caption, [t["caption"] for t in self.tables])
        return found[0]

    def column(self, table: dict, header: str) -> dict[str, str]:
        """First cell of each row -> its cell under ``header``."""
        j = table["head"].index(header)
        return {row[0]: row[j] for row in table["rows"]}

    def images(self) -> list[str]:
        return [attrs.get("src", "") for tag, attrs in self.elements if tag == "img"]

    def warnings(self) -> list[list[str]]:
        """Rows (stage, found in, level, message) of the warnings table; none when it says there are none."""
        tables = [t for t in self.tables if t["head"] == ["stage", "found in", "level", "message"]]
        return tables[0]["rows"] if tables else []


def figures_on_disk(run_dir: Path) -> list[bytes]:
    return sorted(p.read_bytes() for p in run_dir.rglob("*.png"))


def embedded(page: Page) -> list[bytes]:
    prefix = "data:image/png;base64,"
    assert all(src.startswith(prefix) for src in page.images())
    return sorted(base64.b64decode(src[len(prefix):]) for src in page.images())


def render(run_dir: Path) -> Page:
    path = render_report(run_dir)
    assert path == run_dir / REPORT_NAME
    return Page(path.read_text(encoding="utf-8"))


def hydra_log(*records: tuple[str, str, str]) -> str:
    """Log lines in Hydra's format from ``(logger, level, message)``."""
    return "".join(HYDRA_LINE.format(logger=lg, level=lv, message=m) + "\n" for lg, lv, m in records)


@pytest.fixture(scope="module")
def study_run(tmp_path_factory):
    """The stages of the species x day study run one by one into ``<run dir>/<stage>/``; its run dir."""
    study = write_chain_study(tmp_path_factory.mktemp("report") / "study")
    run_dir = study / "run"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(study)
        mp.syspath_prepend(str(study))
        run_stages(study, run_dir, "progress=false")
    return run_dir


@pytest.fixture
def copy_of(study_run, tmp_path):
    """``copy_of(*stages)``: a copy of the run dir with only those stages (all by default), report removed."""
    def _copy(*stages: str) -> Path:
        target = tmp_path / "run"
        for stage in stages or [name for name, *_ in STAGES]:
            shutil.copytree(study_run / stage, target / stage)
        return target
    return _copy


def test_the_page_embeds_every_figure_and_needs_no_other_resource(study_run):
    page = render(study_run)
    assert embedded(page) == figures_on_disk(study_run)
    assert len(page.images()) >= 2 * len(STAGES)
    for tag, attrs in page.elements:
        assert tag not in ("script", "iframe", "object", "embed"), tag
        assert not (tag == "link" and attrs.get("rel") != "icon"), attrs
        for key in ("src", "href", "srcset", "action", "poster"):
            assert key not in attrs or attrs[key].startswith(("data:", "#")), (tag, attrs)
    ids = {attrs["id"] for tag, attrs in page.elements if tag == "section"}
    assert ids == {"warnings", "provenance", *(f"stage-{name}" for name, *_ in STAGES)}


def test_the_tables_hold_the_numbers_of_the_result_files(study_run):
    page = render(study_run)
    estimate = read_estimate(study_run / "calibrate" / "calibration.nc")  # the best start, by the library's reader
    table = page.table("Estimates at the best start, with 95% intervals")
    assert [row[0] for row in table["rows"]] == estimate.names == list(TRUTH)
    for name, value, se in zip(estimate.names, estimate.mean, np.sqrt(np.diag(estimate.covariance))):
        assert page.column(table, "estimate")[name] == f"{value:.4g}"
        assert float(page.column(table, "standard error")[name]) == pytest.approx(se, rel=1e-3)
        assert float(page.column(table, "true value")[name]) == TRUTH[name]
    with open_result(study_run / "calibrate" / "calibration.nc") as ds:
        best = int(ds["best_start"])
        for name in TRUTH:
            low, high = select(ds, parameter=name)["parameter_interval"].values[best]
            assert page.column(table, "95% interval")[name] == f"[{low:.4g}, {high:.4g}]"
            inside = int(select(ds, parameter=name)["true_in_interval"])
            assert page.column(table, "inside the interval")[name] == {1: "inside", 0: "outside"}[inside]

    table = page.table("Posterior beside the Laplace approximation of the calibration")
    with open_result(study_run / "posterior" / "posterior.nc") as ds:
        for name in TRUTH:
            p = select(ds, parameter=name)
            assert page.column(table, "posterior mean")[name] == f"{float(p['posterior_mean']):.4g}"
            assert page.column(table, "R-hat")[name] == f"{float(p['rhat']):.4g}"
            assert page.column(table, "Laplace mean")[name] == f"{estimate.mean[estimate.names.index(name)]:.4g}"

    table = page.table("Methods and the linearity verdict")
    with open_result(study_run / "propagate" / "propagation.nc") as ds:
        methods = [str(m) for m in ds["propagation_method_name"].values]
        assert [row[0] for row in table["rows"]] == methods
        assert page.table("Output mean ± standard deviation by method")["head"] == ["output", "units", *methods]

    for species in SPECIES:  # one ranking per label; prey = a exp(-0.1 b t) + 0.05 c t: the level a leads
        table = page.table(f"Parameter ranking at species = {species}, day = ")
        assert sorted(row[0] for row in table["rows"]) == sorted(TRUTH)
    assert page.table("Parameter ranking at species = prey")["rows"][0][0] == "a"


def test_every_warning_the_results_record_is_listed(study_run):
    page = render(study_run)
    with open_result(study_run / "posterior" / "posterior.nc") as ds:  # 2 chains of 40 draws: not converged
        assert int(ds["converged"]) == 0
        diagnostics = ds.attrs["diagnostics"]
    rows = page.warnings()
    assert any(stage == "posterior" and source == "posterior.nc" and diagnostics in message
               for stage, source, _, message in rows), rows


def test_the_warnings_come_from_the_results_never_from_a_log(copy_of):
    """Deliberately changed (issues 47/48): a warning only a log holds is not listed (a cached rerun logs nothing
    of its results, and its report must not differ); one a result records is, under its stage and file."""
    run_dir = copy_of()
    (run_dir / "run.log").write_text(hydra_log(("workflows.run", "INFO", "stage calibrate: sensitivity calibrate"),
                                               ("workflows.calibrate", "WARNING", "only in the log")))
    (run_dir / "posterior" / "posterior.log").write_text(hydra_log(("workflows.posterior", "WARNING", "own log")))
    rows = render(run_dir).warnings()
    assert not any("only in the log" in row[3] or "own log" in row[3] for row in rows)
    assert any(row[:2] == ["posterior", "posterior.nc"] for row in rows), rows


def test_every_text_is_escaped(copy_of):
    run_dir = copy_of("calibrate", "indices")
    hostile = '<script>alert("x")</script> & <img src=x onerror=alert(1)>'
    for name, attrs in (("step_map.nc", {"title": "</p><b>bold</b>"}),
                        ("calibration.nc", {"underdetermined": hostile})):
        path = run_dir / "calibrate" / name
        with xr.open_dataset(path) as ds:
            ds = ds.load()
        ds.attrs.update(attrs)
        ds.to_netcdf(path)
        (run_dir / "calibrate" / f"{name}.sha256").unlink(missing_ok=True)
    page = render(run_dir)
    assert not [tag for tag, _ in page.elements if tag in ("script", "b")]
    assert embedded(page) == figures_on_disk(run_dir)  # no image but the figures
    assert any(row[:3] == ["calibrate", "calibration.nc", "WARNING"] and hostile in row[3] for row in page.warnings())
    assert "</p><b>bold</b>" in "".join(page.text)


def test_a_result_computed_from_an_earlier_version_of_its_input_is_flagged(tmp_path):
    run_dir = tmp_path / "run"
    source = run_dir / "first" / "a.nc"
    source.parent.mkdir(parents=True)
    xr.Dataset({"v": ("x", [1.0, 2.0], {"long_name": "v", "units": "1"})}).to_netcdf(source)
    now = "sha256:" + hashlib.sha256(source.read_bytes()).hexdigest()
    (run_dir / "second").mkdir()
    for name, recorded in (("fresh.nc", now), ("stale.nc", "sha256:" + "0" * 64)):
        xr.Dataset({"w": ("x", [3.0, 4.0])}, attrs={"inputs": json.dumps({str(source): recorded})}).to_netcdf(
            run_dir / "second" / name)
    stale = [(stage, found) for stage, found, _, message in render(run_dir).warnings()
             if f"computed from an earlier version of {source}" in message]
    assert stale == [("second", "stale.nc")]


def test_any_subset_of_stages_and_a_single_workflow_run(copy_of, tmp_path):
    run_dir = copy_of("calibrate", "indices")
    page = render(run_dir)
    ids = {attrs["id"] for tag, attrs in page.elements if tag == "section"}
    assert ids == {"warnings", "provenance", "stage-calibrate", "stage-indices"}
    assert embedded(page) == figures_on_disk(run_dir)

    single = tmp_path / "calibrate-only"
    shutil.copytree(run_dir / "calibrate", single)  # one workflow's run: its results at the top
    page = render(single)
    ids = {attrs["id"] for tag, attrs in page.elements if tag == "section"}
    assert ids == {"warnings", "provenance", "stage-calibrate-only"}
    assert embedded(page) == figures_on_disk(single)


def test_a_directory_without_results_is_a_one_line_error(tmp_path):
    with pytest.raises(DataError, match="run_dir: no results"):
        render_report(tmp_path)
    with pytest.raises(DataError, match="run_dir: not a directory"):
        render_report(tmp_path / "missing")


# ----------------------------------------------------------------------------- in a browser
@pytest.fixture(scope="session")
def browser():
    """A headless Chromium, installed from the distribution when missing and possible; else the test skips."""
    binary, why = chromium()
    if binary is None:
        pytest.skip(f"no headless Chromium: {why}")
    return binary


@pytest.mark.slow
def test_the_report_of_sensitivity_run_opens_in_a_browser_with_every_figure(browser, tmp_path):
    """`sensitivity run experiment=chain` from the study folder writes the report; Chromium loads it without an
    error, requests nothing but the page and its data URIs, and decodes and shows every figure."""
    study = write_chain_study(tmp_path / "study")
    run_dir = tmp_path / "run"
    done = subprocess.run(CLI + ["run", "experiment=chain", "progress=false", f"hydra.run.dir={run_dir}"], cwd=study,
                          capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    report = run_dir / REPORT_NAME
    assert report.is_file()
    page = Page(report.read_text(encoding="utf-8"))
    assert embedded(page) == figures_on_disk(run_dir)
    logged = [line.split("] - ", 1)[1] for line in (run_dir / "run.log").read_text().splitlines()
              if "][WARNING] - " in line]
    listed = [f"{row[0]}: {row[3]}" for row in page.warnings()]  # the log's "<stage>: " is the report's column
    assert logged and all(any(message in text for text in listed) for message in logged), (logged, listed)
    text = "".join(page.text)
    assert "sensitivity run experiment=chain" in text
    for name, workflow, _, _ in STAGES:
        assert f"sensitivity {workflow} experiment=labels_by_numbers" in text

    screenshot = tmp_path / "report.png"
    load = load_page(browser, report, screenshot)
    assert load.errors() == []
    assert all(url == report.resolve().as_uri() or url.startswith("data:") for url in load.requested), load.requested
    assert len(load.images) == len(figures_on_disk(run_dir))
    for image in load.images:
        assert image["complete"] and image["naturalWidth"] > 0 and image["naturalHeight"] > 0, image
        assert image["visible"] and image["shown"] > 0, image
    data = screenshot.read_bytes()
    assert data.startswith(PNG) and int.from_bytes(data[16:20], "big") == 1280


def test_the_step_map_summary_of_an_ensemble_sweep_with_its_members_has_the_median_std_of_the_steps(tmp_path):
    """Oracle: numpy's median over the points of the stored ``gn_step_member_std`` (tested against per-member
    least squares in tests/analyses/test_calibration_step_map.py); a step map without it has no such line."""
    from sensitivity.analyses.calibration import step_map_analysis
    from sensitivity.analyses.calibration.summary import step_map
    from sensitivity.sweep.stored import StoredSweep
    from tests.helpers.blocks import ensemble_sweep_file

    rng = np.random.default_rng(3)
    values, jac = rng.standard_normal((3, 5, 8)), rng.standard_normal((3, 5, 8, 3))
    label = "median std of the Gauss-Newton step over the members"
    for store in (True, False):
        with StoredSweep(ensemble_sweep_file(tmp_path / f"{store}.nc", rng.uniform(size=(5, 3)), values, jac,
                                             store_members=store)) as sweep:
            out = sweep.map_to(tmp_path / f"gn_{store}.nc", step_map_analysis(sweep, rng.standard_normal(8)),
                               fingerprint="key", attrs={})
        ds = xr.open_dataset(out)
        facts = {fact.label: fact.value for fact in step_map(ds).facts}
        if store:
            median = np.median(ds["gn_step_member_std"].values, axis=0)
            assert facts[label] == ", ".join(f"{name} [s] {v:.4g}" for name, v in zip("abc", median))
        else:
            assert label not in facts


# ----------------------------------------------------------------------------- one summary, logged and reported
def _report_rows(table: dict) -> list[list[str]]:
    return table["rows"]


def _summary_rows(table) -> list[list[str]]:
    """The rows of a library summary table as the page shows them (text, then detail, then badge, one space)."""
    return [[" ".join(t for t in (c.text, c.detail, c.badge) if t) for c in row] for row in table.rows]


def test_the_log_and_the_report_of_a_calibration_render_one_summary(compose_config, tmp_path, caplog):
    """calibrate logs the library's summary of calibration.nc line for line, and the report's estimate table holds
    the same cells: its rows are the summary's, and each row's log line holds each of its numbers."""
    from sensitivity.analyses.calibration.summary import summary
    from sensitivity.datasets.summary import log_lines
    from tests.helpers.calibration_models import LINEAR, linear_observations
    from workflows import calibrate

    path, _, _ = linear_observations(tmp_path)
    cfg = compose_config("calibrate", [*LINEAR, f"observations.path={path}", "plots=false", "step_slice.enabled=false"],
                         output_dir=tmp_path / "fit")
    with caplog.at_level("INFO", logger="workflows.calibrate"):
        result = calibrate.run(cfg)
    with open_result(result) as ds:
        found = summary(ds)
    logged = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "workflows.calibrate"]
    expected = log_lines(found, "calibrate: ")
    start = logged.index(expected[0])
    assert logged[start:start + len(expected)] == expected
    table = Page(render_report(tmp_path / "fit").read_text()).table("Estimates at the best start")
    estimates = found.tables[0]
    assert table["head"] == list(estimates.columns)
    assert _report_rows(table) == _summary_rows(estimates)
    with open_result(result) as ds:  # and they are the file's numbers
        best = int(ds["best_start"])
        assert [row[2] for row in table["rows"]] == [f"{v:.4g}" for v in ds["estimate"].values[best]]
    rows = [line for _, line in expected if line.startswith("  ")]
    for cells, line in zip(_summary_rows(estimates), rows):
        assert all(text in line for text in cells), (cells, line)


def _failed_verification_runs(compose_config, tmp_path, caplog) -> tuple[list[bytes], list[list]]:
    """`sensitivity run` of Sobol' indices on Ishigami (a = 7) verified against Ishigami with a = 3, whose x2 term's
    share of the variance falls from 0.44 to ~0.13 (the verification fails), run twice into ``tmp_path``: the two
    reports, and the records each run logged from ``workflows.verify``."""
    from hydra import initialize_config_dir

    from workflows import run
    from workflows.plumbing.registry import CONF_DIR
    from workflows.run import StageConf

    common = ["jacobian=float64", "jacobian.jit_compile=false"]
    cfg = compose_config("run", ["plots=false", "experiment=ishigami", "study=ishigami"])
    cfg.stages = [
        StageConf("indices", "indices", [*common, "methods=[sobol]", "sobol.n=1024"]),
        StageConf("verify", "verify", [*common, "verify.simulator=sensitivity.simulators.analytic:ishigami",
                                       "+verify.simulator_kwargs.a=3.0", "verify.sobol_rows=128"],
                  {"verify.indices": "indices"})]
    reports, logged = [], []
    for _ in range(2):
        caplog.clear()
        with caplog.at_level("INFO"), initialize_config_dir(str(CONF_DIR), version_base=None):
            assert run.run(cfg) == tmp_path
        reports.append((tmp_path / REPORT_NAME).read_bytes())
        logged.append([(r.levelno, r.getMessage()) for r in caplog.records if r.name == "workflows.verify"])
    return reports, logged


@pytest.mark.slow
def test_a_cached_rerun_reports_the_failed_verification_as_the_first_run_did(compose_config, tmp_path, caplog):
    """The failing study of :func:`_failed_verification_runs`: the first run and its rerun (every stage cached,
    nothing logged of the verdict) write the same report, byte for byte; both list the failure as a warning of
    verify.nc and show the verdict with its worst cases, in the words the first run logged."""
    from sensitivity.analyses.verify.summary import summary
    from sensitivity.datasets.summary import log_lines

    reports, logged = _failed_verification_runs(compose_config, tmp_path, caplog)
    assert reports[0] == reports[1]
    with open_result(tmp_path / "verify" / "verify.nc") as ds:
        assert ds.attrs["verdict"] == "fails" and int(ds["sobol_verdict"]) == 0
        found = summary(ds)
    (verdict,) = found.verdicts
    expected = log_lines(found, "verify: ")
    assert all(line in logged[0] for line in expected)  # the first run logged the summary ...
    assert (30, f"verify: indices: FAILS: {verdict.statement}") in logged[0]
    assert not any("FAILS" in message for _, message in logged[1])  # ... the cached rerun did not
    page = Page(reports[1].decode("utf-8"))
    assert ["verify", "verify.nc", "WARNING", f"indices: FAILS: {verdict.statement}"] in page.warnings()
    assert f"indices: FAILS: {verdict.statement}" in " ".join("".join(page.text).split())
    worst = page.table("worst indices")
    assert _report_rows(worst) == _summary_rows(verdict.worst) and worst["rows"][0][0].startswith(("S1 of", "ST of"))
    assert float(worst["rows"][0][2]) > 1  # the worst case exceeds its sampling half-width


@pytest.mark.slow
def test_a_browser_shows_the_failed_verification_on_the_first_run_and_the_cached_rerun(browser, compose_config,
                                                                                       tmp_path, caplog):
    """Issue 48: the failing study of :func:`_failed_verification_runs` in headless Chromium: each run's page loads
    without an error and the text it shows holds the verdict, the failure and its worst index, the same on the
    cached rerun as on the first run."""
    from sensitivity.analyses.verify.summary import summary

    reports, _ = _failed_verification_runs(compose_config, tmp_path, caplog)
    with open_result(tmp_path / "verify" / "verify.nc") as ds:
        (verdict,) = summary(ds).verdicts
    shown = []
    for k, report in enumerate(reports):
        page = tmp_path / f"report-{k}.html"
        page.write_bytes(report)
        load = load_page(browser, page, tmp_path / f"report-{k}.png")
        assert load.errors() == []
        text = " ".join(load.text.split())
        assert f"indices: FAILS: {verdict.statement}" in text and "verdict fails" in text
        assert verdict.worst.rows[0][0].text in text  # the worst index, in the verify section's table
        shown.append(text)
    assert shown[0] == shown[1]



def test_an_inconclusive_verdict_is_a_warning_shown_amber_never_green():
    """A check that could not have seen a factor-2 error neither holds nor fails: the log warns, the run's notices
    list it, and the page's verdict paragraph takes the amber class the template styles (not the green one)."""
    import logging

    from sensitivity.datasets.summary import GOOD, UNSURE, Summary, Verdict, log_lines
    from workflows.report.notices import result_warnings
    from workflows.report.page import Result
    from workflows.report.render import _environment

    verdict = Verdict.of("reliability", 2, "its 4096 runs could not have seen a factor-2 change of pf")
    assert (verdict.holds, verdict.inconclusive, verdict.word, verdict.flag) == (False, True, "INCONCLUSIVE", UNSURE)
    with pytest.raises(ValueError, match="cannot both hold and be inconclusive"):
        Verdict("x", True, "", inconclusive=True)
    summary = Summary("verification", verdicts=(verdict,))
    assert log_lines(summary) == [(logging.WARNING, f"reliability: INCONCLUSIVE: {verdict.statement}")]
    result = Result("verify.nc", "verify", "", "", "", summary, None)
    warned = [n.message for n in result_warnings("verify", [result])]
    assert warned == [f"reliability: INCONCLUSIVE: {verdict.statement}"]
    source = _environment().loader.get_source(_environment(), "report.html.j2")[0]
    assert '<p class="verdict {{ v.flag }}">' in source and "p.verdict.unsure {" in source
    assert Verdict.of("x", 1, "").flag == GOOD
