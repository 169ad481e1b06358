"""The checks of one verification: the simulator at the points each consumed result depends on, the surrogate (and
its members) at the same points, judged against the result's own uncertainty (:mod:`sensitivity.analyses.verify`).

The command :mod:`workflows.verify` chooses the results, keeps the simulator's runs and refines; this module holds
what one check reads from a result and asks of the library.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from sensitivity.analyses.verify import VerdictSettings, VerifyPlan
from sensitivity.outputs.members import predictive_variance
from workflows.plumbing import build
from workflows.plumbing.reliability_settings import reliability_events

log = logging.getLogger("workflows.verify")


def recorded_propagation(path: Path):
    """``(recorded config, settings)`` of a propagation.nc: the :class:`~sensitivity.analyses.propagation.Propagation`
    it records, and its config, whose ``uncertainty`` section (the input uncertainty, read from its source files:
    no library settings hold it) and seed redraw its sample; a one-line error when it ran no Monte Carlo (whose
    sample verify redraws)."""
    from sensitivity.analyses.propagation import Propagation
    from sensitivity.datasets import open_result, settings_of
    from sensitivity.errors import ConfigError

    with open_result(path) as ds:
        settings = settings_of(ds, Propagation, where=path)
        recorded = OmegaConf.create(ds.attrs.get("config", "{}"))  # its uncertainty section: see the docstring
    if "monte_carlo" not in settings.methods:
        raise ConfigError(f"`verify.propagation`: {path} ran {list(settings.methods)}; verify redraws its Monte Carlo "
                          "sample: run propagate with `monte_carlo` among its methods")
    return recorded, settings


@dataclass(frozen=True)
class Kept:
    """Where a run keeps its finished work (:class:`sensitivity.store.checkpoints.Checkpoints`) and the fingerprint
    of the run's result set and the simulator's code, which the kept simulator runs' fingerprints extend."""

    store: Any
    fingerprint: str


@dataclass
class Checks:
    """The checks of one verification: the surrogate, its ensemble engine when it has one, the simulator."""

    cfg: DictConfig
    space: Any
    surrogate: Any
    simulator: Any
    plan: VerifyPlan
    obs_path: Path | None
    verdict: VerdictSettings
    kept: Kept  # the simulator's runs, kept for a rerun after a kill
    cache: dict = field(default_factory=dict)  # the simulator's outputs by point set: a refinement runs it once

    def __post_init__(self) -> None:
        self.engine = build.engine_from(self.cfg, self.surrogate, self.space)
        self.ensemble = build.ensemble_from(self.cfg, self.surrogate, self.space)

    def calibration(self, path: Path):
        from sensitivity.analyses.verify import verify_calibration

        observations = self._observations("calibration")
        points = self.points("calibration", path)
        se = _best_standard_error(path, self.space.names)
        _, jacobian = self.engine.flat_value_and_jacobian(points[:1])
        log.info("verify: calibration %s: the simulator at the best fit and %d other minima", path, len(points) - 1)
        return verify_calibration(self._simulate, self.engine.flat_values, jacobian[0].astype(float), points, se,
                                  observations, members=self.members, floor=self._floor, output=self.surrogate.output)

    def posterior(self, path: Path):
        from sensitivity.analyses.verify import gaussian_log_likelihood, verify_posterior
        from sensitivity.datasets import open_result

        observations = self._observations("posterior")
        draws = self.points("posterior", path)
        with open_result(path) as ds:
            mcse = _in_order(ds, "mcse_mean", self.space.names)
            emulator = "emulator" in str(ds.attrs.get("likelihood", ""))
        values = self.engine.flat_values(draws).astype(float)
        spread = predictive_variance(self.members(draws)) if emulator and self.ensemble is not None else None
        log.info("verify: posterior %s: the simulator at %d draws", path, len(draws))
        return verify_posterior(self._simulate, gaussian_log_likelihood(values, observations, spread), draws, mcse,
                                observations, surrogate=self.engine.flat_values, members=self.members,
                                floor=self._floor, output=self.surrogate.output)

    def indices(self, path: Path):
        from sensitivity.analyses.verify import verify_sobol
        from sensitivity.datasets import open_result

        with open_result(path) as ds:
            half = {key: _half_widths(ds, f"sobol_{key}_interval", self.surrogate.output) for key in ("S1", "ST")}
        rows = self.points("indices", path)
        log.info("verify: indices %s: the simulator at the first %d base rows of its Sobol' design (%d runs)", path,
                 self.plan.sobol_rows, len(rows))
        return verify_sobol(self._simulate, self.engine.flat_values, rows, self.space, half,
                            members=self.members, settings=self.verdict, output=self.surrogate.output)

    def reliability(self, path: Path):
        from sensitivity.analyses.verify.reliability import verify_reliability

        settings, read = reliability_events(path, "verify.reliability")
        nataf = self._reliability_plan(settings).nataf
        found = read(self._reliability_plan(settings).indices)
        log.info("verify: reliability %s: the simulator at the design points and %d + %d importance samples of each "
                 "of %d events (topped up to at most %d where that could not see a factor-2 change of pf)", path,
                 self.plan.failure_runs, self.plan.safe_runs, len(found.design_beta), self.plan.reliability_max_runs)
        return verify_reliability(self._simulate, self.engine.flat_values, nataf.to_physical, found,
                                  failure_runs=self.plan.failure_runs, safe_runs=self.plan.safe_runs,
                                  max_runs=self.plan.reliability_max_runs, seed=self.cfg.seed)

    def propagation(self, path: Path):
        from sensitivity.analyses.verify.propagation import recorded_half_widths, verify_propagation
        from sensitivity.datasets import open_result

        level = recorded_propagation(path)[1].level
        with open_result(path) as ds:
            half = recorded_half_widths(ds, self.surrogate.output.dim_names, level)
        sample = self._propagation_sample(path)
        runs = min(self.plan.propagation_runs, len(sample))
        log.info("verify: propagation %s: the simulator at the first %d of its %d Monte Carlo points, the surrogate "
                 "at all", path, runs, len(sample))
        return verify_propagation(self._simulate, self.engine.flat_values, sample, runs, half, level=level,
                                  settings=self.verdict, members=self.members, output=self.surrogate.output)

    def _propagation_sample(self, path: Path) -> np.ndarray:
        """``[N, n]`` the Monte Carlo sample of the propagation ``path``, redrawn from its recorded inputs, settings
        and seed (:func:`~sensitivity.analyses.propagation.monte_carlo.sample_points`)."""
        from sensitivity.analyses.propagation.monte_carlo import sample_points
        from workflows.plumbing.propagation_settings import inputs_from

        recorded, settings = recorded_propagation(path)
        inputs, _ = inputs_from(recorded, self.space)
        return sample_points(inputs, self.surrogate.output_size, **settings.monte_carlo.kwargs(),
                             seed=int(recorded.seed))

    def _reliability_candidates(self, path: Path) -> np.ndarray:
        """``[P, n]`` every event's design points and ``failure_runs + safe_runs`` draws of its importance-sampling
        proposal (near its limit state): the candidates of a refinement, run where the U-function is lowest."""
        settings, read = reliability_events(path, "verify.reliability")
        p = self._reliability_plan(settings)
        u = read(p.indices).near_limit_state(self.plan.failure_runs + self.plan.safe_runs, self.cfg.seed)
        return p.nataf.to_physical(u)

    def u_priority(self, path: Path):
        """The U-function of the reliability result ``path``'s events (lowest first,
        :func:`~sensitivity.analyses.verify.reliability.u_function`) as a refinement's priority."""
        from sensitivity.analyses.verify.reliability import u_function

        settings, read = reliability_events(path, "verify.reliability")
        found = read(self._reliability_plan(settings).indices)
        return lambda values: u_function(values, found)

    def _reliability_plan(self, settings):
        from sensitivity.analyses.reliability import plan

        return plan(self.space, self.surrogate.output, settings)

    def points(self, key: str, path: Path) -> np.ndarray:
        """``[P, n]`` the points the analysis ``key`` (its result ``path``) is verified at."""
        from sensitivity.datasets import open_result, read_draws

        if key == "reliability":
            return self._reliability_candidates(path)
        if key == "propagation":
            return self._propagation_sample(path)[:self.plan.propagation_runs]
        if key == "calibration":
            return build.calibration_minima(path, self.space.names)
        if key == "posterior":
            return self.plan.posterior_subset(read_draws(path, self.space.names).values)
        from sensitivity.analyses.indices import Intervals, Sobol, sobol
        from sensitivity.datasets import settings_of

        with open_result(path) as ds:
            n, intervals = settings_of(ds, Sobol, where=path).n, settings_of(ds, Intervals, where=path)
            seed = int(ds.attrs["seed"])
        replicates = intervals.replicates if intervals.method == "rqmc" else 1
        design = sobol.sample(self.space, n, seed=seed, replicates=replicates)
        return self.plan.design_rows(design, len(self.space))

    def _simulate(self, points: np.ndarray) -> np.ndarray:
        import hashlib

        key = hashlib.sha256(np.ascontiguousarray(points, float).tobytes()).hexdigest()
        if key not in self.cache:
            self.cache[key] = self._simulated(points, key)
        return self.cache[key]

    def _simulated(self, points: np.ndarray, key: str) -> np.ndarray:
        """The simulator's flat outputs at ``points`` (whose hash is ``key``): kept by an interrupted run, or run and
        kept."""
        name, fingerprint = f"simulated-{key[:16]}", f"{self.kept.fingerprint}:{key}"
        entry = self.kept.store.load(name, fingerprint)
        if entry is not None:
            log.info("verify: the simulator's %d runs reused from an interrupted run (%s)", len(points), entry)
            return np.load(entry / "y.npy")
        y = self.simulator(points).reshape(len(points), -1)
        self.kept.store.save(name, fingerprint, lambda tmp: np.save(tmp / "y.npy", y))
        return y

    @property
    def _floor(self) -> np.ndarray:
        """``[n]`` the absolute floor of a shift of an estimate or a posterior mean [parameter units]."""
        return self.verdict.shift_floor(self.space.bounds)

    @property
    def members(self):
        """The ensemble's members' values ``[P, n] -> [K, P, m]`` (None for one model)."""
        if self.ensemble is None:
            return None
        k = self.ensemble.members
        return lambda points: self.ensemble.values(points).reshape(k, len(points), -1).astype(float)

    def _observations(self, what: str):
        from sensitivity.analyses.calibration import ObservationModel
        from sensitivity.analyses.calibration.observations import read_observations

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
    """``[d, m]`` half-widths of an index's sampling interval on the model's flat outputs (checked present by
    the command :mod:`workflows.verify` before any check)."""
    interval = ds[variable].transpose("parameter", *spec.dim_names, "bound").values
    return 0.5 * (interval[..., 1] - interval[..., 0]).reshape(interval.shape[0], -1)


def parameter_coords(space) -> dict:
    from sensitivity.outputs.labels import parameter_coords

    return parameter_coords(space.names, space.units)
