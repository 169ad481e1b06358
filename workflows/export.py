"""Workflow `export`: the compiled Jacobian as a standalone TF SavedModel, checked; PEST and SALib files.

Writes into the run directory:

* ``<export.name>/`` — a SavedModel with ``value``, ``jacobian``, ``value_and_jacobian`` (and
  ``hessian``) reloadable by TensorFlow alone (:mod:`sensitivity.interop.export`), checked after writing in a
  fresh process that cannot import this package;
* ``export.nc`` — the check points (``export.check_points``, default 256 random points) with the engine's values
  and Jacobians, and the check results
  (errors, reload time, throughputs) as attributes;
* ``problem.json`` — the parameter space as a SALib problem (:mod:`sensitivity.interop.salib`);
* with ``pest.calibration`` or ``pest.point``: ``<pest.name>.jcb`` (PEST JCO binary) and
  ``<pest.name>.unc`` (observation noise) at that point (:mod:`sensitivity.interop.pest`).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

import numpy as np
from omegaconf import DictConfig

from sensitivity.errors import ConfigError
from sensitivity.sweep.designs import make_grid
from sensitivity.interop.pest import calibration_point, write_pest_at
from sensitivity.settings import ExportSettings
from workflows.plumbing import build, chain
from workflows.plumbing.schema import SurrogateStudyConf, schema_of

log = logging.getLogger(__name__)


ExportOptions = schema_of(ExportSettings, "ExportOptions", extra=[
    ("name", str, "jacobian_model"),  # the SavedModel directory in the run dir
    ("problem_file", Optional[str], "problem.json"),  # the space as a SALib problem; null to skip
    ("check_points", int, 256), ("check_seed", int, 0)])  # new random points compared after reload


PointConf = schema_of(calibration_point, "PointConf", keys=("estimate", "start"))
PestFilesConf = schema_of(write_pest_at, "PestFilesConf", keys=("calibration", "observation_std", "sigma", "format"),
                          rename={"observation_std": "std_variable"})


@dataclass
class PestConf(PointConf, PestFilesConf):
    point: Any = None  # or: nominal, or {name: value, ...} for every parameter (else calibration's estimate)
    name: str = "jacobian"  # writes <name>.jcb and <name>.unc


@dataclass
class ExportConf(SurrogateStudyConf):
    export: ExportOptions = field(default_factory=ExportOptions)
    pest: PestConf = field(default_factory=PestConf)
    output_dir: str = "???"
    progress: bool = True
    plots: bool = True


SCHEMA = ExportConf


def _problem_file(name: str | None, space) -> str | None:
    """``export.problem_file``, or None (with a warning) for a space SALib cannot describe: the problem file is an
    extra beside the exported Jacobian, so a space of other scipy families exports without it."""
    from sensitivity.interop.salib import check_problem_form

    if not name:
        return None
    try:
        check_problem_form(space)
    except ConfigError as err:
        log.warning("export: no SALib problem file: %s", err)
        return None
    return name


def run(cfg: DictConfig) -> Path:
    """Export, check and describe the compiled Jacobian of ``cfg.model``; return the SavedModel directory."""
    opts = cfg.export
    space = build.space_from(cfg)
    points = make_grid(space, "random", n=opts.check_points, seed=opts.check_seed).points()  # new points
    pest_point = _pest_point(cfg, space)  # fail on a bad PEST setting before the long export (and TF's import)
    problem_file = _problem_file(opts.problem_file, space)
    with build.result_set(cfg, "export", [cfg.pest.calibration]) as results:
        if results.complete:
            build.announce_complete(results, "export")
            return results.path(opts.name)
        _export(cfg, space, points, pest_point, problem_file, results.staging, results.directory)
        results.publish()
    return results.path(opts.name)


def _export(cfg: DictConfig, space, points: np.ndarray, pest_point: np.ndarray | None, problem_file: str | None,
            out: Path, final: Path) -> None:
    """The SavedModel, its check, ``export.nc`` and the SALib and PEST files, into ``out`` (published to ``final``)."""
    opts = cfg.export
    surrogate = build.surrogate_from(cfg, space)
    if cfg.pest.calibration is not None:
        chain.consumed(cfg, cfg.pest.calibration, "pest.calibration", surrogate_hash=surrogate.content_hash)
    from sensitivity.interop.export import RELOAD_SNIPPET, export_jacobian

    jac = build.engine_from(cfg, surrogate, space)
    target = out / opts.name
    log.info("export: %s mode, %s, jit_compile=%s, hessian=%s", jac.mode, jac.dtype, jac.jit_compile, opts.hessian)
    check = export_jacobian(jac, target, hessian=opts.hessian, check_points=points, rtol=opts.rtol,
                            bench_seconds=opts.bench_seconds, hessian_points=opts.hessian_points)
    log.info("export check (fresh process without this package, %d new points): relative error value %.1e, "
             "jacobian %.1e, hessian %.1e (rtol %.1e; rounding noise of the chain %.1e)", check.n_points,
             check.value_error, check.jacobian_error, check.hessian_error, check.rtol, check.float_noise)
    log.info("reload %.2f s; Jacobians/s reloaded %.0f vs in-process %.0f (ratio %.2f; target >= 0.90)",
             check.reload_seconds, check.reloaded_jacobians_per_second, check.engine_jacobians_per_second,
             check.throughput_ratio)
    log.info("reload it with TensorFlow alone:\n%s",
             RELOAD_SNIPPET.format(path=(final / opts.name).resolve(), n_in=surrogate.n_in, dtype=jac.dtype))
    _write_summary(cfg, jac, space, points, check, out / "export.nc")
    if problem_file:
        from sensitivity.interop.salib import write_problem

        log.info("SALib problem: %s", write_problem(space, out / problem_file).name)
    if pest_point is not None:
        p = cfg.pest
        files = write_pest_at(jac, pest_point, out / f"{p.name}.jcb", calibration=p.calibration,
                              std_variable=p.observation_std, sigma=build.plain(p.sigma), format=p.format)
        log.info("PEST Jacobian at %s: %s (%d observations x %d parameters)%s",
                 dict(zip(jac.surrogate.input_names, np.round(pest_point, 6).tolist())), files.jacobian.name,
                 len(files.observation_names), jac.surrogate.n_in,
                 f", noise {files.uncertainty.name}" if files.uncertainty else "")


def _pest_point(cfg: DictConfig, space) -> np.ndarray | None:
    """The point of the PEST Jacobian: ``pest.point`` ("nominal" or name -> value), else the estimate
    of ``pest.calibration``; None when neither is set."""
    p = cfg.pest
    if p.point is not None and p.calibration is not None:
        raise ConfigError("give either `pest.point` or `pest.calibration`, not both")
    if p.calibration is not None:
        return calibration_point(p.calibration, space.names, estimate=p.estimate, start=p.start)
    if p.point is None:
        return None
    if p.point == "nominal":
        return space.nominal
    values = build.plain(p.point)
    if not isinstance(values, dict) or sorted(values) != sorted(space.names):
        raise ConfigError(f"`pest.point` must be 'nominal' or a value for every parameter {space.names}, "
                          f"got {values!r}")
    return space.check_points(np.array([[values[n] for n in space.names]], float), what="pest.point")[0]


def _write_summary(cfg: DictConfig, jac, space, points: np.ndarray, check, path: Path) -> Path:
    """``export.nc``: the check points with the engine's values and Jacobians, and the check results."""
    import json

    from sensitivity.datasets import provenance, sweep_dataset, write_atomic

    values, jacobian = jac(points)
    s = jac.surrogate
    ds = sweep_dataset(np.arange(len(points)), points, values, jacobian, parameter_names=s.input_names,
                       parameter_units=s.input_units, parameter_long_names=[p.long_name for p in space.parameters],
                       output=s.output)
    attrs = provenance(title=f"Export check of the compiled Jacobian of {s.source}", workflow="export",
                       config_yaml=build.config_yaml(cfg), surrogate_source=s.source, surrogate_hash=s.content_hash,
                       seed=cfg.export.check_seed, inputs=[cfg.pest.calibration] if cfg.pest.calibration else [])
    summary = check.summary()
    attrs.update({
        "engine": jac.settings,
        "export_path": str(Path(check.path).resolve()),
        "export_check": json.dumps(summary, sort_keys=True, default=float),
        "export_passed": int(summary["passed"]),
        "reload_seconds": float(check.reload_seconds),
        "reloaded_jacobians_per_second": float(check.reloaded_jacobians_per_second),
        "engine_jacobians_per_second": float(check.engine_jacobians_per_second),
    })
    return write_atomic(ds.assign_attrs(attrs), path)
