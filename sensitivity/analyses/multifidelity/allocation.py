"""The MFMC optimal split of a computational budget between the simulator and the surrogate.

From pilot runs (simulator and surrogate values at the same points) the correlation ``rho`` of every
output, and from the measured costs per run the ratio ``w = cost_sim / cost_sur``, Peherstorfer, Willcox &
Gunzburger (2016), doi:10.1137/15M1046472, Thm 3.4 with one low-fidelity model give::

    r = sqrt(w rho^2 / (1 - rho^2)),   n_sim = B / (cost_sim + cost_sur r),   n_sur = r n_sim

(``n_sur`` counts every surrogate run, the ``n_sim`` shared ones included) and, for the mean, Cor. 3.5::

    Var[MFMC] / Var[MC at the same budget] = (sqrt(1 - rho^2) + rho / sqrt(w))^2

More generally, at any ratio ``r = n_sur / n_sim`` an output of correlation ``rho`` has the ratio
``(1 + r/w) (1 - (1 - 1/r) rho^2)``, which is the one above at the optimal ``r``. The surrogate pays only
when that ratio is below 1 (Thm 3.4's ordering condition is ``r > 1``, i.e. ``w rho^2 > 1 - rho^2``);
otherwise :func:`allocate` spends the whole budget on the simulator (``r = 1``: the surrogate runs only on
the simulator's points, where it costs ``cost_sur`` each) and says so in ``worthwhile``.

Several outputs share one allocation: by default the one of the least correlated output (the most
cautious); each output's predicted ratio at that allocation is reported. ``rho`` from a pilot is itself
uncertain (a pilot of 30 runs at ``rho = 0.9`` gives roughly ``0.8 .. 0.95``), so the prediction is a guide.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from sensitivity.analyses.multifidelity import checks
from sensitivity.errors import ConfigError, DataError

Criterion = Literal["min", "median"]


@dataclass(frozen=True)
class Allocation:
    """Settings of :func:`allocate`.

    Parameters
    ----------
    budget
        Total computational budget ``B`` [the units of the costs, e.g. s].
    cost_sim, cost_sur
        Measured cost of one simulator run and of one surrogate run [same units], > 0.
    criterion
        Which output's correlation sets the allocation: ``"min"`` (the least correlated) or ``"median"``.
    min_sim
        Fewest simulator runs of an allocation (>= 2: the weight is estimated on them).
    """

    budget: float
    cost_sim: float
    cost_sur: float
    criterion: Criterion = "min"
    min_sim: int = 2

    def check(self) -> Allocation:
        """These settings, or a :class:`~sensitivity.errors.ConfigError` naming the bad field."""
        for name in ("budget", "cost_sim", "cost_sur"):
            value = getattr(self, name)
            if not (isinstance(value, (int, float, np.floating)) and math.isfinite(value) and value > 0):
                raise ConfigError(f"`{name}` must be a finite number > 0, got {value!r}")
        checks.choice(self.criterion, "criterion", ("min", "median"))
        checks.count(self.min_sim, "min_sim", 2)
        if self.budget < self.min_sim * (self.cost_sim + self.cost_sur):
            raise ConfigError(f"`budget` must pay for at least min_sim={self.min_sim} simulator and surrogate runs "
                              f"({self.min_sim * (self.cost_sim + self.cost_sur):g}), got {self.budget:g}")
        return self


@dataclass(frozen=True)
class AllocationResult:
    """The split of a budget and what it is predicted to buy.

    Attributes
    ----------
    n_sim, n_sur
        Simulator runs and surrogate runs (``n_sur`` includes the ``n_sim`` shared points), integers
        whose cost fits the budget.
    ratio
        The optimal real ``r = n_sur / n_sim`` before rounding (1 where the surrogate does not pay).
    cost_ratio
        ``w = cost_sim / cost_sur`` [1].
    rho
        ``[m]`` pilot correlation of every output [1]; ``rho_design`` the one that set the allocation.
    variance_ratio
        ``[m]`` predicted ``Var[MFMC mean] / Var[simulator-only MC mean at the same budget]`` at the
        rounded allocation [1]; ``variance_reduction = 1 - variance_ratio``.
    worthwhile
        Whether the surrogate lowers the variance of the design output at all.
    n_mc
        Simulator runs that the same budget buys without the surrogate.
    """

    n_sim: int
    n_sur: int
    ratio: float
    cost_ratio: float
    rho: np.ndarray
    rho_design: float
    variance_ratio: np.ndarray
    variance_reduction: np.ndarray
    worthwhile: bool
    n_mc: int
    reference: str = "Peherstorfer, Willcox & Gunzburger 2016, Thm 3.4, doi:10.1137/15M1046472"


def correlation(sim: np.ndarray, sur: np.ndarray) -> np.ndarray:
    """``[m]`` Pearson correlation of paired simulator and surrogate values ``[n, m]`` (0 for a constant)."""
    y0, y1 = checks.values(sim, "sim", min_rows=3), checks.values(sur, "sur", min_rows=3)
    if y0.shape != y1.shape:
        raise DataError(f"pilot `sur` must have the shape of `sim` {y0.shape} (paired runs), got {y1.shape}")
    c0, c1 = y0 - y0.mean(axis=0), y1 - y1.mean(axis=0)
    denominator = np.sqrt((c0 * c0).sum(axis=0) * (c1 * c1).sum(axis=0))
    return np.clip(np.where(denominator > 0, (c0 * c1).sum(axis=0) / np.where(denominator > 0, denominator, 1), 0.0),
                   -1.0, 1.0)


def optimal_ratio(rho: float, cost_ratio: float) -> float:
    """Thm 3.4's ``r = sqrt(w rho^2 / (1 - rho^2))`` (``inf`` for ``|rho| = 1``)."""
    rho2 = min(rho * rho, 1.0)
    return math.inf if rho2 >= 1.0 else math.sqrt(cost_ratio * rho2 / (1.0 - rho2))


def variance_ratio(rho: np.ndarray, cost_ratio: float, ratio: float) -> np.ndarray:
    """``Var[MFMC mean] / Var[MC mean]`` at equal budget: ``(1 + r/w) (1 - (1 - 1/r) rho^2)``."""
    rho2 = np.minimum(np.asarray(rho, dtype=float) ** 2, 1.0)
    return (1.0 + ratio / cost_ratio) * (1.0 - (1.0 - 1.0 / ratio) * rho2)


def allocate(pilot_sim: np.ndarray, pilot_sur: np.ndarray, settings: Allocation) -> AllocationResult:
    """The MFMC allocation of ``settings.budget`` from pilot runs.

    Parameters
    ----------
    pilot_sim, pilot_sur
        ``[p, m]`` simulator and surrogate values at the same ``p >= 3`` pilot points.
    settings
        Budget, measured costs per run, the output criterion.

    Returns
    -------
    AllocationResult
        ``n_sim`` and ``n_sur`` (rounded down so that ``n_sim cost_sim + n_sur cost_sur <= budget``) and
        the predicted variance ratio of every output against simulator-only Monte Carlo.
    """
    s = settings.check()
    rho = correlation(pilot_sim, pilot_sur)
    w = s.cost_sim / s.cost_sur
    rho_design = float(np.min(np.abs(rho)) if s.criterion == "min" else np.median(np.abs(rho)))
    r = optimal_ratio(rho_design, w)
    worthwhile = r > 1.0 and (math.isinf(r) or float(variance_ratio(rho_design, w, r)) < 1.0)  # |rho| = 1: it pays
    if not worthwhile:
        r = 1.0
    n_sim = max(s.min_sim, int(math.floor(s.budget / (s.cost_sim + s.cost_sur * r)))) if math.isfinite(r) else s.min_sim
    n_sur = max(n_sim, int(math.floor((s.budget - n_sim * s.cost_sim) / s.cost_sur)))
    if not worthwhile:
        n_sur = n_sim
    ratios = _ratio_at(rho, s, n_sim, n_sur)
    return AllocationResult(
        n_sim=n_sim, n_sur=n_sur, ratio=float(r), cost_ratio=w, rho=rho, rho_design=rho_design,
        variance_ratio=ratios, variance_reduction=1.0 - ratios, worthwhile=bool(worthwhile),
        n_mc=int(math.floor(s.budget / s.cost_sim)),
    )


def _ratio_at(rho: np.ndarray, s: Allocation, n_sim: int, n_sur: int) -> np.ndarray:
    """``Var[MFMC mean at (n_sim, n_sur)] / Var[MC mean with budget / cost_sim runs]`` of every output."""
    rho2 = np.minimum(rho**2, 1.0)
    mfmc = (1.0 - (1.0 - n_sim / n_sur) * rho2) / n_sim
    return mfmc * (s.budget / s.cost_sim)
