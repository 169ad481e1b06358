"""How many of an analysis's points :mod:`sensitivity.analyses.verify` runs the simulator at, and how many rounds of
runs :func:`~sensitivity.analyses.verify.refine` may add."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sensitivity.analyses.indices.design import check_power_of_two
from sensitivity.errors import ConfigError, DataError


@dataclass(frozen=True)
class VerifyPlan:
    """The simulator runs of a verification.

    Parameters
    ----------
    draws
        Posterior draws verified, evenly spaced through the stacked chains [runs].
    sobol_rows
        Base rows of the Sobol' design verified, a power of two (``sobol_rows (d + 2)`` runs).
    failure_runs, safe_runs
        Per reliability event, simulator runs among the redrawn importance samples the surrogate fails / does
        not fail (:func:`~sensitivity.analyses.verify.reliability.verify_reliability`): the pilot [runs].
    reliability_max_runs
        Per reliability event, the most simulator runs in its failure region, pilot included: a pilot that could not
        have seen a factor-2 change of Pf is topped up to the runs that would (about ``2 z / Pf`` safe runs, ``z =
        1.96``: ~4,000 at Pf = 1e-3), at most this many, and the event is inconclusive where they fall short [runs].
    propagation_runs
        Simulator runs on a propagation's Monte Carlo sample, its first points (at least 3; at most the sample):
        the control variates' paired runs (:func:`~sensitivity.analyses.verify.propagation.verify_propagation`)
        [runs]. The error's uncertainty is that of the surrogate's bias on these paired runs, which falls as
        ``1 / sqrt(runs)`` and with the surrogate's error. The default 1024 (1.6 % of the default sample of 2^16
        points) is measured: the 256-run ensemble of the 10-input wing-weight function reports a Monte Carlo std of
        47.85 lb with a combined half-width of 0.18 lb against the exact 48.08; on 256 runs the anchored std was
        47.99 with the error's half-width 0.12 lb (not flagged), on 1024 runs 48.08 with 0.09 lb (flagged), on 4096
        48.08 with 0.05 lb.
    """

    draws: int = 64
    sobol_rows: int = 64
    failure_runs: int = 64
    safe_runs: int = 64
    reliability_max_runs: int = 4096
    propagation_runs: int = 1024

    def __post_init__(self) -> None:
        if isinstance(self.propagation_runs, bool) or not isinstance(self.propagation_runs, int) or \
                self.propagation_runs < 3:
            raise ConfigError(f"`propagation_runs` must be an integer >= 3, got {self.propagation_runs!r}")
        for name in ("draws", "failure_runs", "safe_runs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 2:
                raise ConfigError(f"`{name}` must be an integer >= 2, got {value!r}")
        check_power_of_two(self.sobol_rows, what="sobol_rows")
        pilot = self.failure_runs + self.safe_runs
        if isinstance(self.reliability_max_runs, bool) or not isinstance(self.reliability_max_runs, int) or \
                self.reliability_max_runs < pilot:
            raise ConfigError(f"`reliability_max_runs` must be an integer >= failure_runs + safe_runs = {pilot}, got "
                              f"{self.reliability_max_runs!r}")

    def posterior_subset(self, draws: np.ndarray) -> np.ndarray:
        """``[P, n]`` of the stacked draws ``[N, n]``: ``P = min(draws, N)`` evenly spaced (every chain's share)."""
        if len(draws) < 2:
            raise DataError(f"the posterior has {len(draws)} draws; at least 2 are needed to verify it")
        take = np.unique(np.linspace(0, len(draws) - 1, min(self.draws, len(draws))).round().astype(int))
        return draws[take]

    def design_rows(self, design: np.ndarray, d: int) -> np.ndarray:
        """The first :attr:`sobol_rows` base rows of a Saltelli design of ``d`` parameters (``d + 2`` runs each)."""
        rows = self.sobol_rows * (d + 2)
        if rows > len(design):
            raise ConfigError(f"`sobol_rows` = {self.sobol_rows} exceeds the design's {len(design) // (d + 2)} base "
                              "rows")
        return design[:rows]


@dataclass(frozen=True)
class RefinePlan:
    """The budget of a refinement (:func:`~sensitivity.analyses.verify.refine`).

    Parameters
    ----------
    rounds
        At most this many rounds of new simulator runs, each followed by a retraining (0: no refinement).
    runs_per_round
        Simulator runs added per round, where the ensemble's members disagree most on the analysis's points [runs].
    """

    rounds: int = 0
    runs_per_round: int = 16

    def __post_init__(self) -> None:
        for name, low in (("rounds", 0), ("runs_per_round", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"`{name}` must be an integer >= {low}, got {value!r}")
