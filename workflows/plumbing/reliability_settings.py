"""The reliability analysis's config sections, its settings read from them, and the events of a recorded result.

Shared by ``reliability`` and the commands that consume a reliability.nc (``verify``, ``multifidelity``), so that
no command imports another.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from sensitivity.analyses import reliability as rel
from workflows.plumbing import build
from workflows.plumbing.schema import schema_of

_DEFAULTS = {f.name: f.default for f in dataclasses.fields(rel.ReliabilitySettings)}


def _section(cls: type, name: str) -> type:
    """The schema of a method's settings with the defaults
    :class:`~sensitivity.analyses.reliability.settings.ReliabilitySettings` gives them."""
    own = {f.name: f.default for f in dataclasses.fields(cls)}
    given = _DEFAULTS[name]
    changed = [k for k in own if getattr(given, k) != own[k]]
    schema = schema_of(cls, f"{cls.__name__}Conf", keys=tuple(k for k in own if k not in changed),
                       extra=[(k, type(getattr(given, k)), getattr(given, k)) for k in changed])
    return schema


EventConf = schema_of(rel.ReliabilitySettings, "EventConf",  # `output` typed Any: a {dim: label} mapping of any dims
                      keys=("thresholds", "direction", "output_range", "functionals"), extra=[("output", Any, None)])


FormConf = _section(rel.FormSettings, "form")


ImportanceConf = _section(rel.ImportanceSettings, "importance")


SubsetConf = _section(rel.SubsetSettings, "subset")


MonteCarloConf = _section(rel.MonteCarloSettings, "monte_carlo")


MethodsConf = schema_of(rel.ReliabilitySettings, "MethodsConf", keys=("methods", "n_starts", "start_radius", "rtol"),
                        rename={"n_starts": "starts"})  # `starts` is calibrate's section in a shared experiment


def settings_from(cfg: DictConfig) -> Any:
    """The :class:`~sensitivity.analyses.reliability.ReliabilitySettings` of ``cfg``."""
    event = build.plain(cfg.event)
    sections = {name: build.settings(cls, cfg[name]) for name, cls in (
        ("form", rel.FormSettings), ("importance", rel.ImportanceSettings), ("subset", rel.SubsetSettings),
        ("monte_carlo", rel.MonteCarloSettings))}
    return rel.ReliabilitySettings(
        thresholds=tuple(event["thresholds"] or ()), direction=event["direction"], output=event["output"] or {},
        functionals=tuple(event["functionals"] or ()),
        output_range=None if event["output_range"] is None else tuple(event["output_range"]),
        methods=tuple(cfg.methods), starts=cfg.n_starts, start_radius=cfg.start_radius, rtol=cfg.rtol, **sections)


def reliability_events(path: Path, what: str):
    """``(settings, read)`` of a reliability.nc that another workflow consumes (``what``: its config key, e.g.
    ``verify.reliability``): its recorded :class:`~sensitivity.analyses.reliability.ReliabilitySettings` and
    ``read(indices) ->`` :class:`~sensitivity.analyses.verify.reliability.ReliabilityEvents`; a one-line error when
    it holds no importance sampling (whose proposal the consumer redraws), or when its events are about functionals
    (the consumer compares the simulator's outputs at the picked output indices)."""
    from sensitivity.analyses.verify.reliability import ReliabilityEvents
    from sensitivity.datasets import open_result, settings_of
    from sensitivity.errors import ConfigError

    with open_result(path) as ds:
        settings = settings_of(ds, rel.ReliabilitySettings, where=path)
        ds = ds[["design_u", "design_beta", "dbeta_dthreshold"]].load()
    if "importance_sampling" not in settings.methods:
        raise ConfigError(f"`{what}`: {path} ran {list(settings.methods)}; {what.split('.')[0]} redraws the "
                          "importance samples of its design points: run reliability with `importance_sampling` among "
                          "its methods")
    if settings.functionals:
        raise ConfigError(f"`{what}`: {path} is about functionals {[f.name for f in settings.functionals]}; "
                          f"{what.split('.')[0]} compares the simulator's picked outputs: run reliability with "
                          "`event.output` instead of `event.functionals`")
    return settings, lambda indices: ReliabilityEvents.from_dataset(ds, indices, settings)
