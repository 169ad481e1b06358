"""When a surrogate's value agrees with the simulator's, and when a check from a sample could have seen that it
does not: the one rule :mod:`sensitivity.analyses.verify` and :mod:`sensitivity.analyses.multifidelity` judge by.

Agreement
    A difference ``d`` (surrogate minus simulator) agrees when ``|d| <= max(h, tolerance)``: within the half-width
    ``h`` of its interval (``z se`` of a sampled difference, ``z = z_{1 - alpha/2}``) or within an absolute
    tolerance below which no conclusion changes (:data:`INDEX_TOLERANCE` for a Sobol' index). A difference that is
    not finite does not agree.
Power
    A check that finds no difference has shown agreement only if it could have found one that matters. At level
    ``alpha`` and power ``1 - beta`` the smallest difference a two-sided test with standard error ``se`` detects is
    ``delta = (z_{1 - alpha/2} + z_{1 - beta}) se`` (the normal-theory power analysis; Cohen 1988, ch. 12; Julious
    2004). A difference matters when it is a factor-2 error of the quantity ``q`` judged (``|q| / 2``, the
    simulator's value halving ``q``, the smaller of a halving and a doubling) or, where that is smaller, exceeds the
    tolerance. A check that finds no difference is **inconclusive** when ``delta > max(|q| / 2, tolerance)``; since
    ``se`` falls as ``1 / sqrt(runs)``, about ``runs (se / se_needed)^2`` runs would have been enough, ``se_needed =
    max(|q| / 2, tolerance) / (z_{1 - alpha/2} + z_{1 - beta})``.

A verdict is then one of :data:`FAILS` (some difference does not agree), :data:`HOLDS` (none, and every check could
have seen a factor-2 error) and :data:`INCONCLUSIVE` (none, but some check could not have).

References
----------
Cohen, J. (1988), Statistical Power Analysis for the Behavioral Sciences, 2nd ed., Erlbaum, ch. 12.
Julious, S. A. (2004), Sample sizes for clinical trials with normal data, Statistics in Medicine 23(12), 1921-1986,
doi:10.1002/sim.1783.
"""
from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from sensitivity.errors import ConfigError

FAILS, HOLDS, INCONCLUSIVE = 0, 1, 2
#: CF attributes of a ``<prefix>_verdict`` variable.
VERDICT = {"flag_values": np.array([FAILS, HOLDS, INCONCLUSIVE], np.int8), "flag_meanings": "fails holds inconclusive"}
#: The word of each verdict.
WORDS = {FAILS: "fails", HOLDS: "holds", INCONCLUSIVE: "inconclusive"}
#: Absolute tolerance of a Sobol' index [1, a share of the output variance] below which a difference changes no
#: conclusion (:attr:`sensitivity.analyses.verify.VerdictSettings.index_tolerance`, whose default it is).
INDEX_TOLERANCE = 0.01
#: Absolute tolerance of an output mean or standard deviation, a fraction of the output's standard deviation [1]
#: (:attr:`sensitivity.analyses.verify.VerdictSettings.moment_tolerance`, whose default it is).
MOMENT_TOLERANCE = 1e-3


@dataclass(frozen=True)
class Power:
    """The level and power a sampled check is judged at.

    Parameters
    ----------
    level
        ``1 - alpha``, the level of the test of a difference (0.95: ``z = 1.96``).
    power
        ``1 - beta``, the chance of detecting a factor-2 error. The default 0.5 (``z_{1 - beta} = 0``) is the least
        a check can claim: a factor-2 error lies at the test's critical value, so ``se <= max(|q| / 2, tolerance) /
        z``; 0.8 (Cohen's convention) asks ``(1 + 0.84 / 1.96)^2 = 2.04`` times the runs.
    """

    level: float = 0.95
    power: float = 0.5

    def __post_init__(self) -> None:
        for name in ("level", "power"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
                raise ConfigError(f"`{name}` must be a number in (0, 1), got {value!r}")

    @property
    def z(self) -> float:
        """``z_{1 - alpha/2}``."""
        return NormalDist().inv_cdf(0.5 + self.level / 2)

    @property
    def detect(self) -> float:
        """``z_{1 - alpha/2} + z_{1 - beta}``: the detectable difference per standard error."""
        return self.z + NormalDist().inv_cdf(self.power)

    def needed_se(self, quantity: np.ndarray, tolerance: float | np.ndarray = 0.0) -> np.ndarray:
        """The standard error at which a factor-2 error of ``quantity`` (or the tolerance) is detected."""
        return np.maximum(np.abs(np.asarray(quantity, float)) / 2, tolerance) / self.detect


def agrees(difference: np.ndarray, half_width: np.ndarray, tolerance: float | np.ndarray = 0.0) -> np.ndarray:
    """``|difference| <= max(half_width, tolerance)`` (a NaN half-width counts as 0; a NaN difference disagrees)."""
    bound = np.maximum(np.nan_to_num(np.asarray(half_width, float), nan=0.0), tolerance)
    return np.abs(np.asarray(difference, float)) <= bound


def outcome(difference: np.ndarray, se: np.ndarray, quantity: np.ndarray, tolerance: float | np.ndarray = 0.0,
            power: Power = Power()) -> np.ndarray:
    """int8 :data:`FAILS`, :data:`HOLDS` or :data:`INCONCLUSIVE` of each sampled difference (module notes):
    fails where it does not agree at ``z se``, inconclusive where it does but ``se`` exceeds
    :meth:`Power.needed_se` of ``quantity`` (or ``se`` is not finite)."""
    se = np.asarray(se, float)
    agreed = agrees(difference, power.z * se, tolerance)
    blind = ~(se <= power.needed_se(quantity, tolerance))
    return np.where(~agreed, FAILS, np.where(blind, INCONCLUSIVE, HOLDS)).astype(np.int8)


def runs_needed(se: np.ndarray, quantity: np.ndarray, runs: int | np.ndarray, tolerance: float | np.ndarray = 0.0,
                power: Power = Power()) -> np.ndarray:
    """Runs at which the standard error ``se`` of ``runs`` runs (falling as ``1 / sqrt(runs)``) would detect a
    factor-2 error of ``quantity``: ``ceil(runs (se / se_needed)^2)``, at least ``runs``; inf where no number
    would (a zero quantity and tolerance)."""
    needed = power.needed_se(quantity, tolerance)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(needed > 0, (np.asarray(se, float) / needed) ** 2, np.inf)
    return np.maximum(np.ceil(np.asarray(runs, float) * scale), runs)


def overall(verdicts) -> int:
    """One verdict of several: fails if any fails, else inconclusive if any is, else holds (holds of none)."""
    codes = [int(v) for v in np.ravel(np.asarray(list(verdicts), dtype=np.int64))]
    return FAILS if FAILS in codes else INCONCLUSIVE if INCONCLUSIVE in codes else HOLDS
