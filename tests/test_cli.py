"""The command line's own logic: workflow listing and the positional argument of `merge`."""
from __future__ import annotations

from workflows import merge
from workflows.cli import _positional
from workflows.registry import available


def test_every_workflow_is_listed_with_one_line():
    listed = available()
    assert set(listed) == {"run", "sweep", "train", "calibrate", "sample", "propagate", "indices", "export", "merge"}
    assert all(summary and "\n" not in summary for summary in listed.values())


def test_merge_takes_its_directory_as_a_bare_argument(tmp_path):
    assert _positional(merge, ["multirun/sweep", "format=zarr"]) == ["input_dir='multirun/sweep'", "format=zarr"]
    odd = tmp_path / "a=b"  # an existing directory whose name looks like an override
    odd.mkdir()
    assert _positional(merge, [str(odd)]) == [f"input_dir='{odd}'"]
    assert _positional(merge, ["input_dir=x"]) == ["input_dir=x"]
    assert _positional(merge, ["--cfg", "job"]) == ["--cfg", "job"]


def test_a_key_appended_past_the_schema_is_refused_with_a_suggestion(compose_config):
    import importlib

    import pytest

    from sensitivity.errors import ConfigError
    from workflows.registry import WORKFLOWS
    from workflows.schema import check_known_keys

    schema = importlib.import_module(WORKFLOWS["sweep"]).SCHEMA
    check_known_keys(compose_config("sweep", ["grid.seed=3", "+model.kwargs.zz=1"]), schema, "sweep")  # free-form
    with pytest.raises(ConfigError, match=r"unknown key `grid.seeed`: .*did you mean `grid.seed`\?$") as err:
        check_known_keys(compose_config("sweep", ["+grid.seeed=3"]), schema, "sweep")
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=r"unknown key `colour`"):
        check_known_keys(compose_config("sweep", ["+colour=red"]), schema, "sweep")
