"""Everything a model reads enters the fingerprint: its module, the study modules it imports (transitively), the
files its config names, an ensemble's members, ``model.depends_on``; and nothing else (an unrelated file, an
installed package's module, the folder's location)."""
from __future__ import annotations

import importlib
import shutil
import sys
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from sensitivity.errors import ConfigError
from workflows.plumbing.model_inputs import model_files, model_inputs_hash

MODEL = """\
import numpy as np
import tensorflow as tf
from helpers import shift
from lib.forms import square

def response(x, table="tables/weights.txt", depends=None):
    return square(x) + shift()
"""


@pytest.fixture
def study(tmp_path, monkeypatch):
    """A study folder: model.py imports helpers.py and the package lib/ (whose forms.py imports its sibling
    relatively), names a weights file in its kwargs; notes.txt is read by nothing."""
    root = tmp_path / "study"
    (root / "lib").mkdir(parents=True)
    (root / "tables").mkdir()
    (root / "model.py").write_text(MODEL)
    (root / "helpers.py").write_text("def shift():\n    return 1.0\n")
    (root / "lib" / "__init__.py").write_text("")
    (root / "lib" / "forms.py").write_text("from .powers import power\n\ndef square(x):\n    return power(x, 2)\n")
    (root / "lib" / "powers.py").write_text("def power(x, k):\n    return x ** k\n")
    (root / "tables" / "weights.txt").write_text("1 2 3\n")
    (root / "extra.csv").write_text("a,b\n")
    (root / "notes.txt").write_text("unrelated\n")
    return _enter(root, monkeypatch)


def _enter(root: Path, monkeypatch) -> Path:
    monkeypatch.chdir(root)
    monkeypatch.syspath_prepend(str(root))
    for name in [n for n in sys.modules if n in ("model", "helpers") or n.split(".")[0] == "lib"]:
        monkeypatch.delitem(sys.modules, name)
    importlib.invalidate_caches()
    return root


def model_cfg(**model):
    return OmegaConf.create({"model": {"source": "model:response", "kwargs": {"table": "tables/weights.txt"},
                                       "scaling": None, "depends_on": [], **model}})


@pytest.mark.parametrize("edited", ["model.py", "helpers.py", "lib/forms.py", "lib/powers.py", "tables/weights.txt"])
def test_editing_anything_the_model_reads_changes_its_hash(study, edited):
    before = model_inputs_hash(model_cfg())
    with open(study / edited, "a") as file:
        file.write("\n# edited\n")
    assert model_inputs_hash(model_cfg()) != before


def test_the_files_found_are_exactly_the_model_its_study_imports_and_its_named_files(study):
    found = {p.relative_to(study.resolve()).as_posix() for p in model_files(model_cfg())}
    # numpy and tensorflow are installed packages (their versions are recorded): not hashed
    assert found == {"model.py", "helpers.py", "lib/__init__.py", "lib/forms.py", "lib/powers.py",
                     "tables/weights.txt"}


def test_an_unrelated_file_or_a_moved_folder_keeps_the_hash(study, tmp_path, monkeypatch):
    before = model_inputs_hash(model_cfg())
    (study / "notes.txt").write_text("edited\n")
    assert model_inputs_hash(model_cfg()) == before
    moved = shutil.copytree(study, tmp_path / "elsewhere")
    _enter(moved, monkeypatch)
    assert model_inputs_hash(model_cfg()) == before


def test_depends_on_declares_other_inputs_and_refuses_a_missing_one(study):
    before = model_inputs_hash(model_cfg(depends_on=["extra.csv"]))
    assert before != model_inputs_hash(model_cfg())
    (study / "extra.csv").write_text("a,b\n1,2\n")
    assert model_inputs_hash(model_cfg(depends_on=["extra.csv"])) != before
    with pytest.raises(ConfigError, match=r"`model.depends_on`: 'missing.csv' does not exist"):
        model_inputs_hash(model_cfg(depends_on=["missing.csv"]))


def test_an_ensemble_is_hashed_member_by_member(tmp_path, monkeypatch):
    """A member's bytes changed with its manifest entry (a member of another training swapped in): another hash."""
    monkeypatch.chdir(tmp_path)
    members = tmp_path / "s.ensemble"
    members.mkdir()
    (members / "ensemble.json").write_text("{}")
    (members / "member_0.keras").write_bytes(b"one")
    before = model_inputs_hash(model_cfg(source=str(members), kwargs={}))
    (members / "member_0.keras").write_bytes(b"two")
    assert model_inputs_hash(model_cfg(source=str(members), kwargs={})) != before


def test_a_package_model_is_its_module_alone_its_imports_left_to_the_versions():
    cfg = model_cfg(source="sensitivity.simulators.analytic:ishigami", kwargs={"a": 7.0})
    assert [p.name for p in model_files(cfg)] == ["analytic.py"]


def test_a_missing_declared_input_is_refused_by_the_checks_before_any_run_directory(study):
    from workflows.plumbing.build import check_study

    with pytest.raises(ConfigError, match=r"^`model.depends_on`: 'gone.csv' does not exist$"):
        check_study(model_cfg(depends_on=["gone.csv"]))
