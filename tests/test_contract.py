"""The one contract every study keeps (issue 56), over the registry of studies x every engine kind x every output
shape, as scikit-learn's ``parametrize_with_checks`` over ``all_estimators()``.

The cases derive from :data:`sensitivity.studies.STUDIES`: a study registered without a contract case in
:mod:`tests.helpers.contract` fails here, so adding a study without passing it is impossible. Each study runs, at the
library verb, tiny, on a Keras file, a TF function, a trained two-member ensemble and the function at float64, with a
scalar, a series and two named dims; its result is labelled by the output spec, carries the members' spread and
combined intervals when given an ensemble, it refuses a bad setting of each of its settings types in one line naming
the field, its summary renders and the report tells it as its own kind and renders its section. What a study does
not keep yet is a strict expected failure with its reason (:attr:`tests.helpers.contract.Case.xfail`); what has no
meaning for it (an engine for ``simulate``) is declared with its reason (:attr:`~tests.helpers.contract.Case.not_run`).
"""
from __future__ import annotations

import ast

import pytest

from sensitivity.errors import ConfigError
from sensitivity.studies import BY_NAME, NONE, STUDIES, resolve
from tests.helpers import ROOT
from tests.helpers.contract import CASES, CONTRACTS, ENGINES, SHAPES, Bench, label_problems, spread_names

STUDY_NAMES = [study.name for study in STUDIES]


def _case(name: str):
    """The study's contract case; a study without one fails its every check."""
    if name not in CASES:
        pytest.fail(f"study {name!r} (sensitivity.studies.STUDIES) has no contract case in tests/helpers/contract.py: "
                    f"declare how it runs, its bad settings and what it does not keep yet")
    return CASES[name]


def _params(contract: str, kinds=ENGINES, shapes=SHAPES):
    """``(study, engine kind, shape)`` of every combination a study runs, a strict xfail where it does not keep
    ``contract`` yet; a study with no case gets one combination that fails."""
    params = []
    for name in STUDY_NAMES:
        case = CASES.get(name)
        if case is None:
            params.append(pytest.param(name, kinds[0], shapes[0], id=f"{name}-no-case"))
            continue
        for kind in kinds:
            for shape in shapes:
                if case.reason_not_run(kind, shape):
                    continue
                why = case.reason_xfail(contract, kind, shape)
                marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
                params.append(pytest.param(name, kind, shape, marks=marks, id=f"{name}-{kind}-{shape}"))
    return params


@pytest.fixture(scope="session")
def bench(tmp_path_factory):
    """The session's engines and results, each made once."""
    return Bench(tmp_path_factory.mktemp("contract"))


def test_every_study_has_a_contract_case_and_every_case_a_study():
    assert sorted(CASES) == sorted(STUDY_NAMES), "tests/helpers/contract.py: one case per study of the registry"


def test_a_case_only_leaves_out_combinations_with_a_reason_and_runs_somewhere():
    for name, case in CASES.items():
        assert set(case.not_run) <= set(ENGINES) | set(SHAPES) and all(case.not_run.values()), name
        assert any(not case.reason_not_run(k, s) for k in ENGINES for s in SHAPES), name
        assert all(contract in CONTRACTS and why
                   for (contract, _), why in case.xfail.items()), name


@pytest.mark.parametrize("study,kind,shape", _params("labels"))
def test_the_study_runs_and_labels_its_result_by_the_output_spec(bench, study, kind, shape):
    _case(study)
    ds = bench.result(study, kind, shape)
    assert label_problems(ds, bench.engine(kind, shape).spec) == []


@pytest.mark.parametrize("study,kind,shape", _params("ensemble spread", kinds=("ensemble",)))
def test_given_an_ensemble_it_carries_the_members_spread_and_combined_intervals(bench, study, kind, shape):
    _case(study)
    ds = bench.result(study, kind, shape)
    assert spread_names(ds), f"no X_member / X_surrogate_std / X_combined_interval among {list(ds.data_vars)}"
    assert ds.sizes["member"] == 2


def _bad_params():
    params = []
    for study in STUDIES:
        case = CASES.get(study.name)
        for name, path in study.face().items():
            if isinstance(resolve(path), type) or path.endswith(".Grid"):
                why = case.reason_xfail("bad setting", name) if case else None
                marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
                params.append(pytest.param(study.name, name, marks=marks, id=f"{study.name}-{name}"))
    return params


@pytest.mark.parametrize("study,settings", _bad_params())
def test_it_refuses_a_bad_setting_in_one_line_naming_the_field(bench, study, settings, tmp_path):
    case = _case(study)
    if settings not in case.bad:
        pytest.fail(f"study {study!r}: no bad setting of its settings type {settings} in tests/helpers/contract.py")
    bad = case.bad[settings]
    kind = next(k for k in ("float64", "ensemble") if not case.reason_not_run(k, "series"))
    engine = bench.engine(kind, "series")
    with pytest.raises(ConfigError) as refused:
        case.run(bench, engine, tmp_path, **bad.settings())
    message = str(refused.value)
    assert "\n" not in message and bad.field in message, message


@pytest.mark.parametrize("study,kind,shape", _params("summary", kinds=("float64", "ensemble")))
def test_its_summary_renders_and_the_report_tells_its_result_and_renders_its_section(bench, study, kind, shape,
                                                                                      tmp_path):
    from markupsafe import escape  # the report's template engine's escaping

    from sensitivity.datasets import write_atomic
    from sensitivity.datasets.summary import log_lines
    from workflows.report.kinds import OTHER, kind_of
    from workflows.report.render import render_report

    _case(study)
    ds = bench.result(study, kind, shape)
    told = kind_of(ds)
    own = [k.name for k in BY_NAME[study].kinds]
    assert told.name in own if BY_NAME[study].kinds is not NONE else told is OTHER, (told.name, own)
    summary = told.summarize(ds)
    assert summary.title and log_lines(summary)
    write_atomic(ds, tmp_path / f"{study}.nc")
    page = render_report(tmp_path).read_text()
    assert f"{study}.nc" in page and str(escape(summary.title)) in page


def _followed() -> set[str]:
    """The workflows whose ``next:`` line ``tests/workflows/test_next_steps.py`` runs as printed (the names in the
    expected lists of its ``follow(...)`` calls)."""
    tree = ast.parse((ROOT / "tests" / "workflows" / "test_next_steps.py").read_text())
    return {element.value for node in ast.walk(tree) if isinstance(node, ast.Call)
            and getattr(node.func, "id", "") == "follow" and len(node.args) == 3 and isinstance(node.args[2], ast.List)
            for element in node.args[2].elts[:-1] if isinstance(element, ast.Constant)}


def _next_params():
    from workflows.plumbing.registry import REGISTRY

    return [pytest.param(w.name, id=w.name) for w in REGISTRY if w.next is not NONE]


@pytest.mark.parametrize("workflow", _next_params())
def test_its_printed_next_command_is_run_as_printed_by_the_next_steps_test(workflow):
    """The runs themselves (slow, by the command line, from an ``init`` folder) are tests/workflows/test_next_steps.py;
    here: every workflow that prints a ``next:`` line is among the ones it follows."""
    assert workflow in _followed()
