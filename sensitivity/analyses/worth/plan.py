"""The settings of a data-worth study, and its plan: every check that needs no model.

:class:`WorthSettings` declares the forecasts (:class:`~sensitivity.outputs.functionals.Functional`), which outputs
are candidates and their noise, how observations and candidates are grouped (by a dim of the output: a day, a
station) and the greedy design. :func:`plan` resolves them against the model's
:class:`~sensitivity.outputs.spec.OutputSpec`, the observations (values NaN where not observed) and the prior, and
raises a one-line :class:`~sensitivity.errors.ConfigError` for a forecast over an unknown dim, a candidate that is
already observed, or a singular prior, before any model is loaded.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from sensitivity.analyses.worth.linear import cholesky, covariance_matrix
from sensitivity.analyses.worth.settings import DesignSettings
from sensitivity.errors import ConfigError
from sensitivity.outputs.functionals import Functional, Functionals, position, resolve
from sensitivity.outputs.spec import OutputSpec


@dataclass(frozen=True)
class WorthSettings:
    """What a data-worth study computes.

    Attributes
    ----------
    forecasts
        The forecasts, at least one.
    candidates
        Dim -> coordinates that restrict the candidate observations (e.g. ``{"day": [60, 61]}``); empty: every
        output not observed.
    candidate_sigma
        Noise standard deviation of a candidate observation [output units].
    candidate_relative_sigma
        Added noise standard deviation per unit of the model's value there, ``sigma = candidate_sigma +
        candidate_relative_sigma |y(best fit)|`` [1]; the total must be positive for every candidate.
    group_observations_by, group_candidates_by
        An output dim whose coordinates group the observations removed / candidates added together (all the
        species of a day, every day of a station); None: one at a time.
    design
        The greedy design; with the ``variance`` criterion and no forecast named, one design per forecast.
    max_draws
        At most this many posterior draws (evenly thinned) enter the posterior-averaged analysis.
    batch_size
        Draws per batch of Jacobians [points].
    rtol
        The linear and the posterior-averaged analyses disagree on a forecast when their posterior standard
        deviations differ by more than this fraction of the averaged one [1].
    level
        On an ensemble surrogate: the probability of each result's interval over the members
        (:func:`sensitivity.outputs.members.combined_bounds`) [1].
    min_rank_correlation
        On an ensemble surrogate: the worth ranking of a forecast is robust to the surrogate's error when every
        member's Spearman rank correlation of its worth with the ensemble mean's is at least this, and every member
        finds the same most valuable candidate (and observation) [1].
    """

    forecasts: tuple[Functional, ...] = ()
    candidates: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    candidate_sigma: float = 0.0
    candidate_relative_sigma: float = 0.1
    group_observations_by: str | None = None
    group_candidates_by: str | None = None
    design: DesignSettings = DesignSettings(k=10)
    max_draws: int = 200
    batch_size: int = 64
    rtol: float = 0.25
    level: float = 0.95
    min_rank_correlation: float = 0.9

    def __post_init__(self) -> None:
        forecasts = tuple(f if isinstance(f, Functional) else Functional.from_dict(f) for f in self.forecasts)
        object.__setattr__(self, "forecasts", forecasts)
        object.__setattr__(self, "candidates", {k: list(v) if isinstance(v, (list, tuple)) else [v]
                                                for k, v in dict(self.candidates or {}).items()})
        if isinstance(self.design, Mapping):
            object.__setattr__(self, "design", DesignSettings(**self.design))
        for key in ("candidate_sigma", "candidate_relative_sigma"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ConfigError(f"`{key}` must be a number >= 0, got {value!r}")
        if self.candidate_sigma == 0 and self.candidate_relative_sigma == 0:
            raise ConfigError("`candidate_sigma` and `candidate_relative_sigma` are both 0: a candidate needs noise")
        for key in ("max_draws", "batch_size"):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"`{key}` must be an integer >= 1, got {value!r}")
        if isinstance(self.rtol, bool) or not isinstance(self.rtol, (int, float)) or not self.rtol > 0:
            raise ConfigError(f"`rtol` must be a number > 0, got {self.rtol!r}")
        if isinstance(self.level, bool) or not isinstance(self.level, (int, float)) or not 0 < self.level < 1:
            raise ConfigError(f"`level` must be a number in (0, 1), got {self.level!r}")
        value = self.min_rank_correlation
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not -1 <= value <= 1:
            raise ConfigError(f"`min_rank_correlation` must be a number in [-1, 1], got {value!r}")


@dataclass(frozen=True)
class Plan:
    """A study resolved against the model's outputs, the observations and the prior.

    Attributes
    ----------
    functionals
        The resolved forecasts.
    observed, candidates
        Flat (C order) positions of the observed outputs and of the candidates.
    noise
        ``[n_obs, n_obs]`` noise covariance of the observed outputs [output units squared].
    prior_covariance
        ``[n_par, n_par]`` prior covariance, checked positive definite [parameter units squared].
    observation_groups, candidate_groups
        Group name -> positions among ``observed`` / ``candidates`` (None: one at a time).
    """

    spec: OutputSpec
    functionals: Functionals
    observed: np.ndarray
    candidates: np.ndarray
    noise: np.ndarray
    prior_covariance: np.ndarray
    observation_groups: dict[str, list[int]] | None
    candidate_groups: dict[str, list[int]] | None


def plan(spec: OutputSpec, settings: WorthSettings, observed_values: np.ndarray, noise: np.ndarray,
         prior_covariance: np.ndarray) -> Plan:
    """Resolve ``settings`` and check every input; nothing here evaluates the model.

    Parameters
    ----------
    spec
        The model's outputs.
    settings
        The study.
    observed_values
        ``[*spec.shape]`` or ``[m]`` observations, NaN where not observed [output units].
    noise
        ``[m]`` noise standard deviations or ``[m, m]`` covariance of the outputs; read on the observed ones
        [output units, or squared].
    prior_covariance
        ``[n_par, n_par]`` prior covariance [parameter units squared].

    Raises
    ------
    ConfigError
        A forecast over an unknown dim or label, a candidate already observed, a grouping dim that is not an
        output dim, no candidate left, noise that is not positive on an observation, a singular prior.
    """
    functionals = resolve(settings.forecasts, spec)
    values = np.asarray(observed_values, dtype=float).reshape(-1)
    if values.size != spec.size:
        raise ConfigError(f"observations: need {spec.size} values (the model's outputs), got {values.size}")
    observed = np.flatnonzero(np.isfinite(values))
    candidates = _candidates(spec, settings.candidates, observed)
    noise = np.asarray(noise, dtype=float)
    noise_cov = np.diag(noise[observed] ** 2) if noise.ndim == 1 else noise[np.ix_(observed, observed)]
    if not np.all(np.isfinite(noise_cov)) or np.any(np.diag(noise_cov) <= 0):
        raise ConfigError("observations: the noise of every observed output must be finite and positive")
    prior = covariance_matrix(prior_covariance, prior_covariance.shape[0], "prior covariance")
    cholesky(prior, "prior covariance")
    if settings.design.forecast is not None and settings.design.forecast not in functionals.names:
        raise ConfigError(f"design.forecast {settings.design.forecast!r} is not one of the forecasts "
                          f"{list(functionals.names)}")
    return Plan(spec=spec, functionals=functionals, observed=observed, candidates=candidates, noise=noise_cov,
                prior_covariance=prior,
                observation_groups=_groups(spec, observed, settings.group_observations_by, "group_observations_by"),
                candidate_groups=_groups(spec, candidates, settings.group_candidates_by, "group_candidates_by"),
                )


def _candidates(spec: OutputSpec, restrict: Mapping[str, Sequence[Any]], observed: np.ndarray) -> np.ndarray:
    """Flat positions of the candidates: the outputs ``restrict`` selects (all by default) that are not observed."""
    dims = {d.name: d for d in spec.dims}
    keep = np.ones(spec.shape, dtype=bool)
    for name, coords in restrict.items():
        if name not in dims:
            raise ConfigError(f"candidates: {name!r} is not an output dim; the dims are {list(dims)}")
        positions = [position(dims[name], c, "candidates") for c in coords]
        axis = spec.dim_names.index(name)
        mask = np.zeros(dims[name].size, dtype=bool)
        mask[positions] = True
        keep &= mask.reshape([-1 if k == axis else 1 for k in range(len(spec.dims))])
    chosen = np.flatnonzero(keep.ravel())
    if restrict:
        already = np.intersect1d(chosen, observed)
        if already.size:
            raise ConfigError(f"candidates: {spec.flat_names()[already[0]]} is already observed "
                              f"({already.size} selected candidates are)")
    chosen = np.setdiff1d(chosen, observed)
    if chosen.size == 0:
        raise ConfigError("candidates: every selected output is observed; no candidate is left")
    return chosen


def _groups(spec: OutputSpec, flat: np.ndarray, dim: str | None, key: str) -> dict[str, list[int]] | None:
    """Group name (the dim's coordinate) -> positions in ``flat`` of the outputs at that coordinate."""
    if dim is None:
        return None
    if dim not in spec.dim_names:
        raise ConfigError(f"`{key}` {dim!r} is not an output dim; the dims are {list(spec.dim_names)}")
    axis = spec.dim_names.index(dim)
    coordinate = np.unravel_index(flat, spec.shape)[axis]
    values = spec.dims[axis].values
    return {str(values[c]): np.flatnonzero(coordinate == c).tolist() for c in np.unique(coordinate)}
