"""Workflow `verify`: run the simulator where an analysis depends on the surrogate and judge the surrogate there
-> verify.nc.

Given the results of analyses of a surrogate (``verify.calibration``: calibration.nc, ``verify.posterior``:
posterior.nc, ``verify.indices``: indices.nc, any of them) and the simulator (``verify.simulator``, a batched
``package.module:function`` as for ``train``), the simulator is run at the points each result depends on: the
calibration's best fit and distinct minima, an evenly spaced subset of the posterior draws (``verify.draws``), the
first base rows of the Sobol' design (``verify.sobol_rows``, redrawn from the indices' recorded settings). The
surrogate's error there is compared with the analysis's own uncertainty (:mod:`sensitivity.analyses.verify`), with a
verdict each: the surrogate error below the sampling error, or not. On an ensemble surrogate the members' spread at
the same points is reported beside the error. Every consumed result is verified first and must have been computed
with this run's surrogate, space and observations (:mod:`workflows.chain`).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Optional

import numpy as np
from omegaconf import DictConfig, OmegaConf

from sensitivity.analyses.verify import VerifyPlan
from workflows import build, chain
from workflows.schema import ObservationsConf, SurrogateStudyConf, schema_of

log = logging.getLogger(__name__)


PlanConf = schema_of(VerifyPlan, "VerifyPlanConf")

#: Result kinds verify reads, in the order it checks them.
RESULTS = ("calibration", "posterior", "indices")


@dataclass
class VerifySectionConf(PlanConf):
    """What is verified against which simulator."""

    simulator: Optional[str] = None  # "package.module:function": points [N, n] -> outputs [N, *out] (numpy)
    simulator_kwargs: Dict[str, Any] = field(default_factory=dict)
    calibration: Optional[str] = None  # a calibration.nc: its best fit and distinct minima
    posterior: Optional[str] = None  # a posterior.nc: a subset of its draws
    indices: Optional[str] = None  # an indices.nc: the first base rows of its Sobol' design


@dataclass
class VerifyConf(SurrogateStudyConf):
    verify: VerifySectionConf = field(default_factory=VerifySectionConf)
    observations: ObservationsConf = field(default_factory=ObservationsConf)  # of the calibration / posterior
    seed: int = 0
    output_dir: str = "???"
    progress: bool = True


SCHEMA = VerifyConf


def run(cfg: DictConfig) -> Path:
    """Verify the analyses named in ``cfg.verify``; return the path of ``verify.nc``."""
    from sensitivity.errors import ConfigError
    from sensitivity.observations import check_path

    v = cfg.verify
    chosen = {key: build.repo_path(v[key]) for key in RESULTS if v[key]}
    if not chosen:
        raise ConfigError("nothing to verify: give `verify.calibration`, `verify.posterior` and/or `verify.indices` "
                          "(result files of analyses of this surrogate)")
    if not v.simulator:
        raise ConfigError("`verify.simulator` ('package.module:function') is required: the model the surrogate "
                          "stands for")
    plan = build.settings(VerifyPlan, v)
    space = build.space_from(cfg)
    needs_obs = any(key in chosen for key in ("calibration", "posterior"))
    if needs_obs and OmegaConf.is_missing(cfg.observations, "path"):
        raise ConfigError("verifying a calibration or a posterior needs its `observations.path`")
    obs_path = check_path(build.repo_path(cfg.observations.path)) if needs_obs else None
    chosen = {key: chain.consumed(cfg, path, f"verify.{key}", observations=obs_path if key != "indices" else None,
                                  space=space) for key, path in chosen.items()}
    with build.result_set(cfg, "verify", [*chosen.values(), obs_path]) as results:
        if results.complete:
            build.announce_complete(results, "verify")
            return results.path("verify.nc")
        _verify(cfg, space, plan, chosen, obs_path, results.staging)
        results.publish()
    return results.path("verify.nc")


def _verify(cfg: DictConfig, space, plan: VerifyPlan, chosen: dict[str, Path], obs_path: Path | None,
            out_dir: Path) -> Path:
    """Run every check -> ``out_dir/verify.nc``."""
    import xarray as xr

    from sensitivity.datasets import provenance, write_atomic
    from sensitivity.output_axes import flat_coords, unstack_output

    simulator = build.simulator_from(cfg.verify.simulator, build.plain(cfg.verify.simulator_kwargs),
                                     "`verify.simulator`")
    surrogate = build.surrogate_from(cfg, space)
    for key, path in chosen.items():
        chain.consumed(cfg, path, f"verify.{key}", surrogate_hash=surrogate.content_hash)
    checks = Checks(cfg, space, surrogate, simulator, plan, obs_path)
    parts = [getattr(checks, key)(path) for key, path in chosen.items()]
    spec = surrogate.output
    ds = unstack_output(xr.merge(parts, combine_attrs="override").assign_coords(
        {**flat_coords(spec), **_parameter_coords(space)}), spec)
    verdicts = {key: int(ds[f"{'sobol' if key == 'indices' else key}_verdict"]) for key in chosen}
    ds.attrs.update(provenance(title=f"Verification of {', '.join(chosen)} of {surrogate.source} against the simulator",
                               workflow="verify", config_yaml=build.config_yaml(cfg), surrogate_source=surrogate.source,
                               surrogate_hash=surrogate.content_hash, seed=cfg.seed,
                               inputs=[*chosen.values(), *([obs_path] if obs_path else [])]),
                    simulator=cfg.verify.simulator, verdict="holds" if all(verdicts.values()) else "fails",
                    verdicts=" ".join(f"{k}={'holds' if v else 'fails'}" for k, v in verdicts.items()))
    out = write_atomic(ds, out_dir / "verify.nc")
    for key, verdict in verdicts.items():
        log.log(logging.INFO if verdict else logging.WARNING, "verify: %s: %s", key, _summary(ds, key))
    return out


@dataclass
class Checks:
    """The checks of one verification: the surrogate, its ensemble engine when it has one, the simulator."""

    cfg: DictConfig
    space: Any
    surrogate: Any
    simulator: Any
    plan: VerifyPlan
    obs_path: Path | None

    def __post_init__(self) -> None:
        self.engine = build.engine_from(self.cfg, self.surrogate)
        self.ensemble = build.ensemble_from(self.cfg, self.surrogate)

    def calibration(self, path: Path):
        from sensitivity.analyses.verify import verify_calibration

        observations = self._observations("calibration")
        points = build.calibration_minima(path, self.space.names)
        se = _best_standard_error(path, self.space.names)
        _, jacobian = self.engine.flat_value_and_jacobian(points[:1])
        log.info("verify: calibration %s: the simulator at the best fit and %d other minima", path, len(points) - 1)
        return verify_calibration(self._simulate, self.engine.flat_values, jacobian[0].astype(float), points, se,
                                  observations, member_std=self._member_std)

    def posterior(self, path: Path):
        from sensitivity.analyses.verify import gaussian_log_likelihood, verify_posterior
        from sensitivity.datasets import open_result, read_draws

        observations = self._observations("posterior")
        draws = self.plan.posterior_subset(read_draws(path, self.space.names).values)
        with open_result(path) as ds:
            mcse = _in_order(ds, "mcse_mean", self.space.names)
            emulator = "emulator" in str(ds.attrs.get("likelihood", ""))
        values = self.engine.flat_values(draws).astype(float)
        spread = self._member_std(draws) ** 2 if emulator and self.ensemble is not None else None
        log.info("verify: posterior %s: the simulator at %d draws", path, len(draws))
        return verify_posterior(self._simulate, gaussian_log_likelihood(values, observations, spread), draws, mcse,
                                observations, surrogate=self.engine.flat_values, member_std=self._member_std)

    def indices(self, path: Path):
        from sensitivity.analyses.indices import sobol
        from sensitivity.analyses.verify import verify_sobol
        from sensitivity.datasets import open_result

        with open_result(path) as ds:
            recorded = OmegaConf.create(ds.attrs["config"])
            half = {key: _half_widths(ds, f"sobol_{key}_interval", self.surrogate.output) for key in ("S1", "ST")}
        replicates = recorded.intervals.replicates if recorded.intervals.method == "rqmc" else 1
        design = sobol.sample(self.space, recorded.sobol.n, seed=recorded.seed, replicates=replicates)
        rows = self.plan.design_rows(design, len(self.space))
        log.info("verify: indices %s: the simulator at the first %d base rows of its Sobol' design (%d runs)", path,
                 self.plan.sobol_rows, len(rows))
        return verify_sobol(self._simulate, self.engine.flat_values, rows, self.space, half,
                            member_std=self._member_std)

    def _simulate(self, points: np.ndarray) -> np.ndarray:
        return self.simulator(points).reshape(len(points), -1)

    @property
    def _member_std(self):
        """The ensemble's predictive spread ``[P, n] -> [P, m]`` (None for one model)."""
        if self.ensemble is None:
            return None
        k = self.ensemble.members

        def spread(points: np.ndarray) -> np.ndarray:
            values = self.ensemble.values(points).reshape(k, len(points), -1).astype(float)
            return np.sqrt((1 + 1 / k) * values.var(axis=0, ddof=1))

        return spread

    def _observations(self, what: str):
        from sensitivity.analyses.calibration import ObservationModel
        from sensitivity.observations import read_observations

        obs = read_observations(self.obs_path, self.surrogate.output)
        return ObservationModel.from_arrays(obs.values, **obs.errors())


def _best_standard_error(path: Path, names: list[str]) -> np.ndarray:
    """``[n]`` the standard errors of a calibration's best start, in the order ``names``."""
    from sensitivity.datasets import open_result

    with open_result(path) as ds:
        return _in_order(ds.isel(start=int(ds["best_start"])), "standard_error", names)


def _in_order(ds, variable: str, names: list[str]) -> np.ndarray:
    order = [list(map(str, ds["parameter_name"].values)).index(n) for n in names]
    return ds[variable].values[order].astype(float)


def _half_widths(ds, variable: str, spec) -> np.ndarray:
    """``[d, m]`` half-widths of an index's sampling interval on the model's flat outputs."""
    from sensitivity.errors import DataError

    if variable not in ds:
        raise DataError(f"indices: no `{variable}` (Sobol' indices with sampling intervals are needed to verify them)")
    interval = ds[variable].transpose("parameter", *spec.dim_names, "bound").values
    return 0.5 * (interval[..., 1] - interval[..., 0]).reshape(interval.shape[0], -1)


def _parameter_coords(space) -> dict:
    from sensitivity.labels import parameter_coords

    return parameter_coords(space.names, space.units)


def _summary(ds, key: str) -> str:
    """One line per verified analysis: the verdict and the ratio behind it."""
    if key == "calibration":
        ratio = ds["calibration_shift_ratio"].values
        return (f"{'holds' if ratio.max() <= 1 else 'FAILS'}: the surrogate's error shifts the estimate by at most "
                f"{ratio.max():.2f} standard errors; whitened error at the best fit "
                f"{float(ds['calibration_whitened_error_rms'][0]):.2f} x the noise")
    if key == "posterior":
        ratio = ds["posterior_shift_ratio"].values
        return (f"{'holds' if ratio.max() <= 1 else 'FAILS'}: reweighting to the simulator moves the posterior mean "
                f"by at most {ratio.max():.2f} Monte Carlo standard errors (importance ESS "
                f"{float(ds['posterior_importance_ess']):.2f} per draw)")
    worst = max(float(np.nanmax(ds[f"sobol_{k}_error_ratio"].values)) for k in ("S1", "ST"))
    return (f"{'holds' if worst <= 1 else 'FAILS'}: the surrogate's Sobol' indices differ from the simulator's by at "
            f"most {worst:.2f} sampling half-widths")
