"""Workflow `indices`: local, DGSM, Sobol', Morris, active-subspace, Shapley, dependent-Sobol', aggregated and
given-data indices of every output -> indices.nc.

On an ensemble surrogate the indices are the ensemble mean's, with each member's, their spread and the interval
that combines sampling and surrogate error beside every index with a sampling interval
(:func:`sensitivity.analyses.indices.compute_ensemble`).
"""
from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, List

from omegaconf import DictConfig

from sensitivity.analyses import indices
from sensitivity.analyses.indices.summary import summary
from sensitivity.errors import ConfigError
from sensitivity.inputs.fields import field_cells
from workflows.plumbing import build, chain
from workflows.plumbing.schema import SurrogateStudyConf, schema_of

log = logging.getLogger(__name__)


IntervalsConf = schema_of(indices.Intervals, "IntervalsConf", keys=("method", "replicates", "level"))
BootstrapConf = schema_of(indices.Intervals, "BootstrapConf", keys=("n_resamples", "interval"))
LocalConf = schema_of(indices.LocalDerivatives, "LocalConf", keys=("nominal", "sigma_points", "weights"),
                      extra=[("across_grid", bool, False)])  # also at every point of `grid`
DgsmConf = schema_of(indices.Dgsm, "DgsmConf")
SobolConf = schema_of(indices.Sobol, "SobolConf")
MorrisConf = schema_of(indices.Morris, "MorrisConf")
ActiveSubspacesConf = schema_of(indices.ActiveSubspaces, "ActiveSubspacesConf")
ShapleyConf = schema_of(indices.Shapley, "ShapleyConf")
SobolDependentConf = schema_of(indices.SobolDependent, "SobolDependentConf")
AggregatedConf = schema_of(indices.Aggregated, "AggregatedConf")
GivenDataConf = schema_of(indices.GivenData, "GivenDataConf")
PlanConf = schema_of(indices.plan, "PlanConf", keys=("seed", "top_k"))  # top_k: size of the ranking cross-check's top sets


@dataclass
class IndicesConf(PlanConf, SurrogateStudyConf):
    methods: List[str] = field(default_factory=lambda: list(indices.DEFAULT_METHODS))
    intervals: IntervalsConf = field(default_factory=IntervalsConf)
    bootstrap: BootstrapConf = field(default_factory=BootstrapConf)
    local: LocalConf = field(default_factory=LocalConf)
    dgsm: DgsmConf = field(default_factory=DgsmConf)
    sobol: SobolConf = field(default_factory=SobolConf)
    morris: MorrisConf = field(default_factory=MorrisConf)
    active_subspaces: ActiveSubspacesConf = field(default_factory=ActiveSubspacesConf)
    shapley: ShapleyConf = field(default_factory=ShapleyConf)
    sobol_dependent: SobolDependentConf = field(default_factory=SobolDependentConf)
    aggregated: AggregatedConf = field(default_factory=AggregatedConf)
    given_data: GivenDataConf = field(default_factory=GivenDataConf)
    # fields of inputs mapped in a figure: {name: shape}, the parameters <name>_* in C order (sensitivity.inputs.fields);
    # typed Any: OmegaConf cannot merge a dict override into an empty typed Dict node
    input_fields: Any = None
    output_dir: str = "???"
    progress: bool = True
    plots: bool = True


SCHEMA = IndicesConf


def check(cfg: DictConfig) -> tuple[Any, list[str], dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Check every setting before any model loads (``sensitivity run`` checks its indices stage with it before
    the study's first stage); return ``(space, chosen, methods, options, designs)``."""
    space = build.space_from(cfg)
    field_cells(space.names, build.plain(cfg.input_fields) or {})  # a field that does not fit fails first
    chosen = list(cfg.methods)
    for name in chosen:
        build.check_choice(name, indices.METHODS, "methods")
    points = build.grid_from(cfg, space).points() if "local" in chosen and cfg.local.across_grid else None
    methods = {name: _method(cfg, name, points) for name in chosen}
    c, b = cfg.intervals, cfg.bootstrap
    options = {"seed": cfg.seed, "top_k": cfg.top_k,
               "intervals": indices.Intervals(**build.plain(c), **build.plain(b))}
    return space, chosen, methods, options, indices.plan(space, methods, **options)


def run(cfg: DictConfig) -> Path:
    """Compute the indices described by ``cfg``; return the path of ``indices.nc``."""
    space, chosen, methods, options, designs = check(cfg)
    accepts = {"dgsm": ("DGSM", indices.SAMPLING_GRIDS), "given_data": ("given-data indices", indices.RANK_GRIDS)}
    sweeps = {f"{name}.sweep": (cfg[name].sweep, grids) for name, grids in accepts.items()
              if name in chosen and cfg[name].sweep}
    for key, (sweep, _) in sweeps.items():  # verified here; its space and surrogate by check_sweep_sample below
        chain.consumed(cfg, sweep, key)
    samples = cfg.given_data.samples if "given_data" in chosen else None
    grid_file = cfg.grid.path if "local" in chosen and cfg.local.across_grid and cfg.grid.kind == "file" else None
    shard_files = ([str(p) for files in designs["sobol"].values() for p in files]
                   if "sobol" in chosen and cfg.sobol.merge else [])
    inputs = [p for p in (*(sweep for sweep, _ in sweeps.values()), samples, grid_file, *shard_files) if p]
    name = "sobol_statistics.nc" if "sobol" in chosen and cfg.sobol.shards > 1 else "indices.nc"
    with build.result_set(cfg, "indices", inputs) as results:
        if results.complete:
            build.announce_complete(results, "indices")
            return results.path(name)
        kept = results.path(PARTS)  # the one-pass methods' finished groups of blocks: a rerun resumes from them
        keep = partial(_kept, kept, results.fingerprint)
        _compute(cfg, space, chosen, methods, designs, options, sweeps, inputs, results.staging, keep)
        results.publish()
        shutil.rmtree(kept, ignore_errors=True)  # the finished work is published
    return results.path(name)


#: The run folder's unfinished work of the one-pass methods (their groups' statistics, by result key).
PARTS = "indices.parts"


def _kept(directory: Path, fingerprint: str, key: str) -> Any:
    """Where the one-pass analysis of result ``key`` keeps its finished groups."""
    from sensitivity.store.checkpoints import DatasetCheckpoints

    return DatasetCheckpoints(directory / key, fingerprint)


def _compute(cfg: DictConfig, space, chosen, methods, designs, options, sweeps, inputs, out_dir: Path,
             keep) -> Path:
    """The indices of every chosen method -> ``out_dir/indices.nc`` (+ figures); a Sobol' shard's statistics ->
    ``out_dir/<key>_statistics.nc``."""
    from sensitivity.datasets import provenance, write_atomic

    surrogate = build.surrogate_from(cfg, space)
    for key, (sweep, (label, grids)) in sweeps.items():
        from sensitivity.sweep.stored import StoredSweep

        with indices.in_section(key, StoredSweep, sweep) as stored:
            indices.in_section(key, partial(indices.check_sweep_sample, method=label, grids=grids), stored, space,
                               surrogate.output, surrogate.content_hash)
    jac = build.any_engine(cfg, surrogate, space)  # an ensemble's members: each one's indices, their spread
    log.info("indices: %s on %s (%d parameters, %d outputs%s), %s mode, %s", ", ".join(chosen), surrogate.source,
             len(space), surrogate.output_size,
             f", {surrogate.n_members} members" if surrogate.n_members > 1 else "", jac.mode, jac.dtype)
    attrs = provenance(title=f"Sensitivity indices of {surrogate.source}", workflow="indices",
                       config_yaml=build.config_yaml(cfg), surrogate_source=surrogate.source,
                       surrogate_hash=surrogate.content_hash, seed=cfg.seed, inputs=inputs,
                       settings=(*methods.values(), options["intervals"]))
    if "sobol" in chosen and cfg.sobol.shards > 1:
        if surrogate.n_members > 1:
            raise ConfigError("sobol: `shards` > 1 computes a single surrogate's statistics, got an ensemble")
        parts = indices.shard_statistics(jac, space, methods["sobol"], designs["sobol"], keep=keep, **options)
        for key, part in parts.items():
            write_atomic(part.assign_attrs(attrs, title=f"Sobol' statistics of a shard of {surrogate.source}"),
                         out_dir / f"{key}_statistics.nc")
        log.info("indices: shard %d of %d written; join the shards with sobol.merge=[<their folders>]",
                 cfg.sobol.shard, cfg.sobol.shards)
        return out_dir / "sobol_statistics.nc"
    ds = indices.compute(jac, space, methods, designs=designs, keep=keep, **options)
    ds.attrs.update(attrs)
    ds.attrs["methods"] = " ".join(chosen)
    out = write_atomic(ds, out_dir / "indices.nc")
    build.log_summary(log, summary(ds), "indices: ")
    if cfg.plots:
        build.file_backend()
        from sensitivity.plots.indices import indices_figures

        for figure in indices_figures(out, out_dir, build.plain(cfg.input_fields) or {}):
            log.info("figure: %s", figure.name)
    return out


#: Method name -> its settings class; each reads the config section of the same name.
SETTINGS = {"local": indices.LocalDerivatives, "dgsm": indices.Dgsm, "sobol": indices.Sobol, "morris": indices.Morris,
            "active_subspaces": indices.ActiveSubspaces, "shapley": indices.Shapley,
            "sobol_dependent": indices.SobolDependent, "aggregated": indices.Aggregated, "given_data": indices.GivenData}


def _method(cfg: DictConfig, name: str, points: Any) -> Any:
    """The settings object of method ``name`` from its config section, by keyword."""
    given: dict[str, Any] = {}
    if name == "local":
        given["points"] = points
    elif name == "active_subspaces" and cfg.active_subspaces.quantity is not None:
        given["quantity"] = _quantity(build.plain(cfg.active_subspaces.quantity))
    return build.settings(SETTINGS[name], cfg[name], **given)


def _quantity(node: Any) -> Any:
    """``active_subspaces.quantity`` as a :class:`~sensitivity.analyses.indices.Quantity`."""
    if not isinstance(node, dict) or set(node) - {"name", "units", "weights"}:
        raise ConfigError(f"`active_subspaces.quantity` must be {{name, units, weights}}, got {node!r}")
    return indices.Quantity(**node)
