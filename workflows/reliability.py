"""Workflow `reliability`: the probability that an output crosses thresholds, by FORM, SORM and sampling ->
reliability.nc.

The events are a picked output (``event.output``: ``{dim: label}``, any element of any output shape; the dims not
named stay, so a series gives Pf per day), or functionals of the outputs (``event.functionals``: the value at a label,
the max / sum / mean over a dim, a weighted sum, declared as worth's ``forecasts``,
:mod:`sensitivity.outputs.functionals`), above or below every threshold of ``event.thresholds``, all in one
batched call of :func:`sensitivity.analyses.reliability.reliability`; the inputs' distribution is the space's
marginals and copula. Every bad input (a threshold outside ``event.output_range``, an unknown output dim or label,
a functional over an unknown dim, a parameter without a proper distribution) is a one-line error before the model
loads (:func:`check`, which ``sensitivity run`` calls for a reliability stage before its first stage).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig, OmegaConf

from sensitivity.analyses import reliability as rel
from sensitivity.settings import HESSIAN_MAX_ROWS
from workflows.plumbing import build
from workflows.plumbing.reliability_settings import (EventConf, FormConf, ImportanceConf, MethodsConf, MonteCarloConf,
                                                     SubsetConf, settings_from)
from workflows.plumbing.schema import SurrogateStudyConf

log = logging.getLogger(__name__)


@dataclass
class ReliabilityConf(MethodsConf, SurrogateStudyConf):
    event: EventConf = field(default_factory=EventConf)
    form: FormConf = field(default_factory=FormConf)
    importance: ImportanceConf = field(default_factory=ImportanceConf)
    subset: SubsetConf = field(default_factory=SubsetConf)
    monte_carlo: MonteCarloConf = field(default_factory=MonteCarloConf)
    hessian_max_rows: int = HESSIAN_MAX_ROWS  # SORM: working memory of the compiled Hessian (rows)
    training_data: Optional[str] = None  # the surrogate's training.nc, whose inputs' reach flags extrapolated design
    # points (null: the training.nc beside model.source, if there is one; none found: "unknown")
    seed: int = 0
    output_dir: str = "???"
    progress: bool = True
    plots: bool = True


SCHEMA = ReliabilityConf


def check(cfg: DictConfig) -> tuple[Any, Any]:
    """Check every setting before any model loads; return ``(space, settings)``.

    The picked outputs are checked against ``model.output`` where the config gives it (else against the
    loaded model's, after it loads).
    """
    from sensitivity.outputs.spec import OutputSpec

    space = build.space_from(cfg)
    settings = settings_from(cfg)
    output = OmegaConf.select(cfg, "model.output", default=None)
    if output is not None:
        rel.plan(space, OutputSpec.from_dict(build.plain(output)), settings)
    return space, settings


def run(cfg: DictConfig) -> Path:
    """Run the reliability analysis of ``cfg``; return the path of ``reliability.nc``."""
    space, settings = check(cfg)
    with build.result_set(cfg, "reliability") as results:
        if results.complete:
            build.announce_complete(results, "reliability")
            return results.path("reliability.nc")
        _compute(cfg, space, settings, results.staging)
        results.publish()
    return results.path("reliability.nc")


def _compute(cfg: DictConfig, space, settings, out_dir: Path) -> Path:
    from sensitivity.datasets import provenance, write_atomic

    surrogate = build.surrogate_from(cfg, space)
    rel.plan(space, surrogate.output, settings)  # the loaded model's outputs, when the config did not give them
    engine = build.any_engine(cfg, surrogate, space)  # an ensemble's members: the analysis handles them
    log.info("reliability: %s of %s, %d thresholds, %s", " ".join(settings.methods), surrogate.source,
             len(settings.thresholds), settings.direction)
    hessian = None
    if "sorm" in settings.methods:
        picked = rel.plan(space, surrogate.output, settings).indices
        hessian = rel.output_hessian(engine, picked, max_rows=cfg.hessian_max_rows)
    training, record = _training_inputs(cfg, space)
    ds = rel.reliability(engine, space, settings, seed=cfg.seed, hessian=hessian, training_inputs=training,
                         training_record=record)
    ds.attrs.update(provenance(title=f"Reliability of {surrogate.source}", workflow="reliability",
                               config_yaml=build.config_yaml(cfg), surrogate_source=surrogate.source,
                               surrogate_hash=surrogate.content_hash, seed=cfg.seed, inputs=[], settings=settings))
    out = write_atomic(ds, out_dir / "reliability.nc")
    build.log_summary(log, rel.summary(ds), "reliability: ")
    if cfg.plots:
        build.file_backend()
        from sensitivity.plots.reliability import reliability_figures

        for figure in reliability_figures(ds, out_dir):
            log.info("figure: %s", figure.name)
    return out


def _training_inputs(cfg: DictConfig, space) -> tuple[Any, str]:
    """The surrogate's training inputs ``[N, n]`` in the space's parameter order and where they come from:
    ``training_data`` or the training.nc beside ``model.source``; ``(None, "none")`` where there is none, or where its
    parameters are not the space's (said in the log)."""
    import numpy as np

    from sensitivity.datasets import open_result
    from sensitivity.errors import ConfigError

    given = cfg.training_data
    source = build.repo_path(cfg.model.source)
    path = build.repo_path(given) if given else source.parent / "training.nc" if source.exists() else None
    if path is None or not path.is_file():
        if given:
            raise ConfigError(f"`training_data`: {path} not found")
        log.info("reliability: no training.nc beside the model %s: the training data's reach of the design points "
                 "is unknown", cfg.model.source)
        return None, "none"
    with open_result(path) as ds:
        if "x" not in ds or "parameter_name" not in ds.coords:
            raise ConfigError(f"`training_data`: {path} holds no training inputs x(sample, parameter)")
        names = [str(v) for v in ds["parameter_name"].values]
        x = np.asarray(ds["x"].values, dtype=float)
    if sorted(names) != sorted(space.names):
        log.info("reliability: %s was trained on parameters %s, not the space's %s: the training data's reach is "
                 "unknown", path, names, list(space.names))
        return None, "none"
    return x[:, [names.index(n) for n in space.names]], str(path)
