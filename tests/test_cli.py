"""The command line's own logic: workflow listing and the positional argument of `merge`."""
from __future__ import annotations

from workflows import merge
from workflows.cli import _positional
from workflows.registry import available


def test_every_workflow_is_listed_with_one_line():
    listed = available()
    assert set(listed) == {"run", "sweep", "train", "calibrate", "propagate", "indices", "export", "merge"}
    assert all(summary and "\n" not in summary for summary in listed.values())


def test_merge_takes_its_directory_as_a_bare_argument(tmp_path):
    assert _positional(merge, ["multirun/sweep", "format=zarr"]) == ["input_dir='multirun/sweep'", "format=zarr"]
    odd = tmp_path / "a=b"  # an existing directory whose name looks like an override
    odd.mkdir()
    assert _positional(merge, [str(odd)]) == [f"input_dir='{odd}'"]
    assert _positional(merge, ["input_dir=x"]) == ["input_dir=x"]
    assert _positional(merge, ["--cfg", "job"]) == ["--cfg", "job"]
