"""The application's registry: every command declared once; the CLI's list and the next steps derive from it."""
from __future__ import annotations

import pytest

from sensitivity.errors import ConfigError
from sensitivity.studies import BY_NAME, NONE
from workflows.plumbing.registry import REGISTRY, WORKFLOWS, Workflow, available
from workflows.plumbing.runner import NEXT, study_overrides


@pytest.mark.parametrize("part", ["line", "writes", "next", "study"])
def test_a_workflow_registered_without_one_of_its_parts_is_refused(part):
    parts = dict(name="mine", module="workflows.mine", line="does mine", writes="mine.nc", next="indices",
                 study="indices")
    Workflow(**{**parts, part: NONE}) if part != "line" else Workflow(**parts)
    with pytest.raises(ConfigError, match=f"workflow 'mine': no `{part}`"):
        Workflow(**{**parts, part: None})


def test_a_workflow_of_a_study_the_library_does_not_have_is_refused():
    with pytest.raises(ConfigError, match="`study` 'nope' is not a study of the library"):
        Workflow("mine", "workflows.mine", "does mine", NONE, NONE, "nope")


def test_each_study_is_run_by_one_command_and_the_lists_derive_from_the_registry():
    studies = [w.study for w in REGISTRY if w.study is not NONE]
    assert len(studies) == len(set(studies)) and set(studies) <= set(BY_NAME)
    assert list(WORKFLOWS) == [w.name for w in REGISTRY]
    assert list(available()) == [w.name for w in REGISTRY]  # every module of this tree exists
    assert NEXT == {w.name: w.next for w in REGISTRY if w.next is not NONE}
    assert set(NEXT) <= set(WORKFLOWS) and all(step.split()[0] in WORKFLOWS for step in NEXT.values())


def test_the_report_tells_the_kinds_the_studies_declare_in_their_order():
    from workflows.report.kinds import KINDS

    assert [k.name for k in KINDS] == [k.name for s in BY_NAME.values() for k in s.kinds]


@pytest.mark.parametrize("given, kept", [
    (["experiment=study", "grid.n=64"], ["experiment=study"]),
    (["model=keras", "model.source=m.keras", "jacobian=float64"], ["model=keras", "model.source=m.keras"]),
    (["+model.kwargs.r=2", "++model.output.name=h", "~model.kwargs.q"],
     ["+model.kwargs.r=2", "++model.output.name=h", "~model.kwargs.q"]),
    (["space.path=s.yaml", "space=study", "observations.path=o.nc", "models=3"], ["space.path=s.yaml", "space=study"]),
])
def test_the_overrides_that_choose_the_study_are_kept_in_every_form(given, kept):
    assert study_overrides(given) == kept
