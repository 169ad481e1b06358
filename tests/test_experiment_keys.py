"""One experiment file holds a whole study: every workflow takes its own keys from it, whatever else it holds.

An experiment that sets every key of every workflow's schema (each to a value unlike its default) is composed
with each workflow; each of that workflow's keys must arrive with the value set, and the keys of the other
workflows must be left out of the job config (``own_config``).
"""
from __future__ import annotations

import dataclasses
import typing
from typing import Any

import yaml
from omegaconf import OmegaConf


def _leaves(schema: type, prefix: str = "") -> dict[str, Any]:
    """``{dotted key: a value of its type unlike the default}`` for every leaf of ``schema`` with a plain type."""
    out: dict[str, Any] = {}
    hints = typing.get_type_hints(schema)
    for item in dataclasses.fields(schema):
        key, hint = f"{prefix}{item.name}", hints[item.name]
        default = item.default_factory() if item.default_factory is not dataclasses.MISSING else item.default
        if dataclasses.is_dataclass(default):
            out.update(_leaves(type(default), f"{key}."))
            continue
        value = _value_of(hint, default, key)
        if value is not None:
            out[key] = value
    return out


def _value_of(hint: Any, default: Any, key: str) -> Any:
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    base = args[0] if typing.get_origin(hint) is typing.Union and len(args) == 1 else hint
    if base is bool:
        return not bool(default)
    if base is int:
        return (default if isinstance(default, int) else 0) + 7
    if base is float:
        return (default if isinstance(default, (int, float)) else 0.0) + 0.125
    if base is str:
        return f"set_{key.replace('.', '_')}"
    if typing.get_origin(base) in (list, typing.List) and typing.get_args(base)[0] in (int, float, str):
        return {int: [3, 5], float: [0.25, 0.75], str: ["first", "second"]}[typing.get_args(base)[0]]
    return None  # Any, mappings: free-form nodes


def _nested(flat: dict[str, Any]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for key, value in flat.items():
        node = tree
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return tree


def test_every_workflow_takes_each_of_its_keys_from_one_experiment_file(tmp_path):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from workflows.plumbing.registry import CONF_DIR
    from workflows.plumbing.schema import _SCHEMAS, own_config, own_keys, register

    register()
    every: dict[str, Any] = {}
    for schema in _SCHEMAS.values():
        for key, value in _leaves(schema).items():
            every.setdefault(key, value)  # a key shared by several workflows has one value
    every = {k: v for k, v in every.items() if k.split(".")[0] not in ("output_dir", "stages")}
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "whole_study.yaml").write_text(
        "# @package _global_\n" + yaml.safe_dump(_nested(every), sort_keys=False))
    checked = 0
    for name, schema in _SCHEMAS.items():
        GlobalHydra.instance().clear()
        with initialize_config_dir(str(CONF_DIR), version_base=None):
            cfg = compose(name, overrides=[f"hydra.searchpath=[file://{tmp_path}]", "experiment=whole_study",
                                           f"output_dir={tmp_path / 'out'}"])
        job = own_config(cfg, name)
        assert set(job.keys()) <= set(own_keys(schema)), name  # nothing of the other workflows
        for key in _leaves(schema):
            if key in every:
                assert OmegaConf.select(job, key) == every[key], (name, key)
                checked += 1
    GlobalHydra.instance().clear()
    assert checked > 250  # every workflow's keys (280 when written), not a handful


def test_an_experiment_chooses_every_study_preset_for_every_workflow(tmp_path):
    """`override /indices: quick` (and the calibrate, posterior, propagate presets) in one experiment file: every
    workflow composes it, and the workflow that owns a preset gets its values."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from workflows.plumbing.registry import CONF_DIR
    from workflows.plumbing.schema import _SCHEMAS, own_config, register

    register()
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "presets.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /calibrate: gauss_newton\n  - override /posterior: snaper\n"
        "  - override /propagate: calibration\n  - override /indices: quick\n")
    expected = {"calibrate": ("solver.kind", "gauss_newton"), "posterior": ("nuts.algorithm", "snaper"),
                "propagate": ("uncertainty.source", "calibration"), "indices": ("sobol.n", 128)}
    for name in _SCHEMAS:
        GlobalHydra.instance().clear()
        with initialize_config_dir(str(CONF_DIR), version_base=None):
            cfg = compose(name, overrides=[f"hydra.searchpath=[file://{tmp_path}]", "experiment=presets",
                                           f"output_dir={tmp_path / 'out'}"])
        job = own_config(cfg, name)
        if name in expected:
            key, value = expected[name]
            assert OmegaConf.select(job, key) == value, (name, key)
    GlobalHydra.instance().clear()
