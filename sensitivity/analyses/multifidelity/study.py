"""The multifidelity study: the simulator's own mean, variance and Sobol' indices of every output from a few of its
runs, the surrogate as control variate (:func:`multifidelity`).

One pick-freeze design (:func:`sensitivity.analyses.indices.sobol.sample`, ``N`` base rows, ``G + 2`` points per
row block) serves every estimate: the surrogate runs on all of it, the simulator on its first ``n`` row blocks.

1. **pilot**: the simulator on the first ``p`` row blocks (``settings.pilot`` runs, rounded up to whole blocks),
   timed; the surrogate's time per run from its run over the design;
2. **allocation** (:func:`~sensitivity.analyses.multifidelity.allocation.allocate`): from the pilot's correlation
   of every output and the measured cost ratio, the split of ``settings.budget`` simulator runs (the pilot's
   included) into ``n`` simulator row blocks and the surrogate's; the pilot's runs are the first of the ``n``;
3. the simulator on row blocks ``p .. n``;
4. the estimates: control-variate mean and variance of every output on the stacked ``[f(A); f(B)]`` rows
   (:mod:`~sensitivity.analyses.multifidelity.control_variates`, Peherstorfer, Willcox & Gunzburger 2016,
   doi:10.1137/15M1046472) and multifidelity main and total indices
   (:mod:`~sensitivity.analyses.multifidelity.sobol`, Qian et al. 2018, doi:10.1137/17M1151006), each beside the
   surrogate-only estimate on all ``N`` rows with its own interval (the same estimators given the surrogate as
   both fidelities: the control variate then vanishes), the surrogate's bias the anchor corrected, and the
   achieved variance reduction against simulator-only Monte Carlo of the same budget.

The simulator is a callable ``(points, stage) -> values`` (``stage``: ``"pilot"`` or ``"runs"``), so that the caller
decides where its runs are recorded (:func:`sensitivity.simulators.runner.run_simulator`); this module writes no
file.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from sensitivity.analyses.callables import BatchedModel
from sensitivity.analyses.multifidelity import checks
from sensitivity.analyses.multifidelity.allocation import Allocation, AllocationResult, allocate
from sensitivity.analyses.multifidelity.checks import Seed
from sensitivity.analyses.multifidelity.control_variates import ControlVariate, estimate_mean, estimate_variance
from sensitivity.analyses.multifidelity.sobol import MFSobol, sobol_indices
from sensitivity.errors import ConfigError, DataError
from sensitivity.inputs.space import ParameterSpace
from sensitivity.outputs.members import member_count
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")

#: A simulator as the study runs it: points ``[K, n]`` and the stage's name -> ``[K, *out]`` values, or an object
#: with ``values`` and ``seconds``, the simulator's own time for them
#: (:class:`~sensitivity.simulators.runner.SimulatorRuns`: recorded, so a resumed run measures the pilot's cost
#: as it ran).
StagedSimulator = Callable[[np.ndarray, str], np.ndarray]


@dataclass(frozen=True)
class MultifidelityStudy:
    """Settings of :func:`multifidelity`.

    Parameters
    ----------
    budget
        Simulator runs in all, the pilot's included [runs]; the simulator-only estimators it is compared with get
        as many.
    pilot
        Simulator runs of the pilot that measures the cost ratio and the correlation (rounded up to whole row
        blocks of ``G + 2`` runs, at least 3 blocks) [runs]; they are also the first runs of the estimators.
    surrogate_rows
        Base rows ``N`` of the pick-freeze design the surrogate runs on, a power of two (the surrogate runs
        ``N (G + 2)`` times); the allocation's optimum, if smaller, is used instead; if larger, the budget the
        surrogate leaves goes to simulator runs.
    n_resamples
        Bootstrap resamples of the indices' intervals (>= 10).
    level
        Confidence level of every interval, in (0, 1).
    cost_ratio
        The simulator's cost per run over the surrogate's [1], which sets the allocation; None: measured (the
        pilot's wall time per run over the surrogate's), so that a rerun may allocate differently. Give it for a
        reproducible result.
    """

    budget: int = 1000
    pilot: int = 64
    surrogate_rows: int = 4096
    n_resamples: int = 200
    level: float = 0.95
    cost_ratio: float | None = None

    def check(self, n_factors: int | None = None) -> MultifidelityStudy:
        """These settings, or a one-line :class:`~sensitivity.errors.ConfigError` naming the bad field; with the
        number of factors ``G``, also that the budget pays for the pilot and more."""
        checks.count(self.budget, "budget", 1)
        checks.count(self.pilot, "pilot", 1)
        checks.count(self.surrogate_rows, "surrogate_rows", 4)
        if self.surrogate_rows & (self.surrogate_rows - 1):
            raise ConfigError(f"`surrogate_rows` must be a power of two, got {self.surrogate_rows}")
        MFSobol(self.n_resamples, self.level).check()
        r = self.cost_ratio
        if r is not None and (isinstance(r, bool) or not isinstance(r, (int, float)) or not math.isfinite(r) or r <= 0):
            raise ConfigError(f"`cost_ratio` must be a number > 0 (or null: measured), got {r!r}")
        if n_factors is not None:
            block = n_factors + 2
            p = self.pilot_blocks(n_factors)
            if self.budget <= p * block:
                raise ConfigError(f"`budget` must exceed the pilot's {p * block} simulator runs ({p} row blocks of "
                                  f"{block}: `pilot` = {self.pilot} rounded up, at least 3 blocks), got {self.budget}")
            if p > self.surrogate_rows:
                raise ConfigError(f"`surrogate_rows` must be at least the pilot's {p} row blocks, "
                                  f"got {self.surrogate_rows}")
        return self

    def pilot_blocks(self, n_factors: int) -> int:
        """Row blocks of the pilot: ``pilot`` runs rounded up to whole blocks of ``G + 2``, at least 3."""
        return max(3, -(-self.pilot // (n_factors + 2)))


def multifidelity(model: BatchedModel, space: ParameterSpace, settings: MultifidelityStudy = MultifidelityStudy(), *,
                  simulator: StagedSimulator, seed: Seed = None) -> xr.Dataset:
    """The simulator-anchored mean, variance and main / total Sobol' indices of every output.

    Parameters
    ----------
    model
        The surrogate: a :class:`BatchedModel` (its ``values`` ``[K, n] -> [K, m]`` and its ``output``
        description), a compiled surrogate, or a compiled ensemble, whose members' mean is the control variate and
        whose members each give their own surrogate-only estimates on the same design (their spread and the
        combined intervals, :func:`sensitivity.outputs.members.with_member_spread`).
    space
        Independent inputs (the pick-freeze design swaps columns).
    settings
        Budget, pilot, design size, intervals.
    simulator
        ``(points [K, n], stage) -> [K, *out]`` (or ``[K, m]``) simulator values, ``stage`` ``"pilot"`` or ``"runs"``;
        or an object with those ``values`` and ``seconds`` (:data:`StagedSimulator`). The pilot's cost per run is
        its ``seconds`` over its runs, else the call's wall time.
    seed
        Seed of the design's scrambling and of the bootstrap.

    Returns
    -------
    xarray.Dataset
        :func:`sensitivity.analyses.multifidelity.dataset.study_dataset`: the anchored and the surrogate-only
        estimates with their intervals, the bias and its verdict, the allocation and the variance reduction.
    """
    from sensitivity.analyses.indices import design, sobol
    from sensitivity.analyses.multifidelity.dataset import study_dataset

    g = len(space)
    s = settings.check(g)
    values, output, k = _surrogate(model)
    design.require_independent(space, method="the multifidelity Sobol' indices", instead=sobol.DEPENDENT)
    rng = checks.rng(seed)
    block, big = g + 2, s.surrogate_rows
    points = sobol.sample(space, big, seed=rng)
    started = time.perf_counter()
    sur = values(points)
    cost_sur = max((time.perf_counter() - started) / len(points), 1e-12)
    members = sur.reshape(k, len(points), -1) if k else None  # [K, N (G + 2), m] of an ensemble
    sur = _flat(sur if members is None else members.mean(axis=0), len(points), "the surrogate")
    p = s.pilot_blocks(g)
    started = time.perf_counter()
    pilot, seconds = _ran(simulator(points[:p * block], "pilot"))
    pilot = _flat(pilot, p * block, "the simulator")
    cost_sim = max((time.perf_counter() - started if seconds is None else seconds) / (p * block), 1e-12)
    if pilot.shape[1] != sur.shape[1]:
        raise DataError(f"the simulator returned {pilot.shape[1]} outputs per point, the surrogate {sur.shape[1]}")
    ratio = s.cost_ratio or cost_sim / cost_sur
    plan = allocate(pilot, sur[:p * block], Allocation(budget=float(s.budget * ratio), cost_sim=float(block * ratio),
                                                       cost_sur=float(block), min_sim=3))
    n, rows, spent = spend(plan, s, p, block, ratio)
    rest = _ran(simulator(points[p * block:n * block], "runs"))[0] if n > p else np.empty((0, pilot.shape[1]))
    sim = np.concatenate([pilot, _flat(rest, (n - p) * block, "the simulator")])
    y0, y1 = sim.reshape(n, block, -1), sur[:rows * block].reshape(rows, block, -1)
    estimates = _estimates(y0, y1, g, s, rng)
    if members is not None:  # each member's own estimates on the same design: the surrogate's spread
        estimates["members"] = [_surrogate_only(member[:rows * block].reshape(rows, block, -1), g, s, rng)
                                for member in members]
    return study_dataset(output, space, estimates, spent, s, n_sim=n, n_sur=rows, cost_sim=cost_sim,
                         cost_sur=cost_sur, cost_ratio=ratio, constant=np.ptp(sim, axis=0) == 0)


@dataclass(frozen=True)
class Spent:
    """How the budget was spent: the allocation's plan, and what ran where it departs from it.

    ``worthwhile`` and ``variance_ratio`` / ``variance_reduction`` (``[m]``, the mean's prediction against the
    simulator alone on the whole budget) are those of the row blocks that ran; ``note`` says why they depart from
    the plan's optimum (empty where they do not)."""

    plan: AllocationResult
    worthwhile: bool
    variance_ratio: np.ndarray
    variance_reduction: np.ndarray
    note: str

    @property
    def rho(self) -> np.ndarray:
        """``[m]`` the pilot's correlation of every output."""
        return self.plan.rho

    @property
    def n_sim(self) -> int:
        """The allocation's optimum of simulator row blocks."""
        return self.plan.n_sim

    @property
    def n_sur(self) -> int:
        """The allocation's optimum of surrogate row blocks."""
        return self.plan.n_sur


def spend(plan: AllocationResult, s: MultifidelityStudy, p: int, block: int, ratio: float) -> tuple[int, int, Spent]:
    """``(n, N, spent)``: the simulator's and the surrogate's row blocks that the budget pays for, after the pilot.

    The simulator runs at least the pilot's ``p`` blocks (more where the allocation's optimum ``plan.n_sim`` is
    larger); the surrogate gets the blocks the rest of the budget buys at the cost ratio (``ratio``), at most
    ``surrogate_rows`` and rounded down to a power of two (the first rows of a scrambled Sobol' sequence); what
    that leaves of the budget goes to more simulator blocks. Where the result is predicted no better than the
    simulator alone on the whole budget (or the allocation says so), the simulator runs alone: ``N = n``.
    """
    alone = min(s.budget // block, s.surrogate_rows)  # row blocks of the simulator alone
    notes = []
    if plan.worthwhile:
        n = max(plan.n_sim, p)
        if plan.n_sim < p:
            notes.append(f"the pilot's {p} row blocks exceed the optimum's {plan.n_sim}")
        affordable = int(math.floor((s.budget - n * block) * ratio / block))
        rows = max(n, min(affordable, s.surrogate_rows))
        if affordable > s.surrogate_rows:
            notes.append(f"the surrogate stops at surrogate_rows = {s.surrogate_rows} row blocks")
        if rows & (rows - 1) and 2 ** int(math.log2(rows)) >= n:
            rows = 2 ** int(math.log2(rows))
            notes.append(f"its row blocks rounded down to {rows}, a power of two")
        more = min(rows, alone, int(math.floor((s.budget - rows * block / ratio) / block)))
        if more > n:
            notes.append(f"the rest of the budget to {more - n} more simulator row blocks")
            n = more
        rho2 = np.minimum(np.asarray(plan.rho, float) ** 2, 1.0)
        ratios = (1.0 - (1.0 - n / rows) * rho2) / n * alone
        worthwhile = bool((1.0 - (1.0 - n / rows) * min(plan.rho_design ** 2, 1.0)) / n * alone < 1.0)
        if worthwhile:
            return n, rows, Spent(plan, True, ratios, 1.0 - ratios, "; ".join(notes))
        notes = [f"the simulator alone: at the cost ratio {ratio:.3g}, the {rows} surrogate row blocks the budget "
                 f"pays for besides {n} of the simulator's would not lower the variance"]
    else:
        notes = [f"the simulator alone: the correlation {plan.rho_design:.3g} does not pay for the surrogate's cost "
                 f"at the cost ratio {ratio:.3g}"]
    n = max(alone, p)
    ones = np.ones_like(np.asarray(plan.rho, float))
    return n, n, Spent(plan, False, ones, 0.0 * ones, "; ".join(notes))


def _surrogate(model) -> tuple[Callable[[np.ndarray], np.ndarray], object, int]:
    """``(values, output spec, K)`` of any surrogate: a :class:`BatchedModel` (its ``values``), a compiled surrogate
    (:func:`sensitivity.engine.jacobian.compile_jacobian`: its flat values) or a compiled ensemble
    (:func:`sensitivity.engine.ensemble.compile_ensemble`: every member's values ``[K, N, *out]``, ``K`` > 0)."""
    if isinstance(model, BatchedModel):
        if model.values is None:
            raise ConfigError("the multifidelity study needs the surrogate's values (`model.values`)")
        return model.values, model.output, 0
    k = member_count(model)
    if not (k or hasattr(model, "flat_values")):
        raise ConfigError(f"`model` must be a BatchedModel or a compiled surrogate or ensemble, got {model!r}")
    output = getattr(getattr(model, "surrogate", None), "output", None)
    return (model.values, output, k) if k else (model.flat_values, output, 0)


def _estimates(y0: np.ndarray, y1: np.ndarray, g: int, s: MultifidelityStudy, rng: np.random.Generator) -> dict:
    """Anchored and surrogate-only indices and moments of blocks ``y0 [n, G + 2, m]`` and ``y1 [N, G + 2, m]``."""
    n = y0.shape[0]
    mf = MFSobol(s.n_resamples, s.level)
    cv = ControlVariate(level=s.level)
    ab0 = np.concatenate([y0[:, 0], y0[:, -1]])
    ab1 = np.concatenate([y1[:n, 0], y1[:n, -1], y1[n:, 0], y1[n:, -1]])  # the shared rows first (nested)
    return {
        "sobol": sobol_indices(y0, y1, g, mf, seed=rng), "mean": estimate_mean(ab0, ab1, cv),
        "variance": estimate_variance(ab0, ab1, cv), **_surrogate_only(y1, g, s, rng),
    }


def _surrogate_only(y1: np.ndarray, g: int, s: MultifidelityStudy, rng: np.random.Generator) -> dict:
    """The surrogate-only indices and moments of its blocks ``y1 [N, G + 2, m]`` (the estimators with the surrogate
    as both fidelities, ``n = N``: the control variate vanishes)."""
    ab = np.concatenate([y1[:, 0], y1[:, -1]])
    cv = ControlVariate(level=s.level)
    return {"sobol_surrogate": sobol_indices(y1, y1, g, MFSobol(s.n_resamples, s.level), seed=rng),
            "mean_surrogate": estimate_mean(ab, ab, cv), "variance_surrogate": estimate_variance(ab, ab, cv)}


def _ran(result) -> tuple[np.ndarray, float | None]:
    """The values a simulator call returned, and its own recorded time [s] where it returned one."""
    if hasattr(result, "values") and hasattr(result, "seconds"):
        return result.values, float(result.seconds)
    return result, None


def _flat(values: np.ndarray, rows: int, who: str) -> np.ndarray:
    y = np.asarray(values, dtype=np.float64)
    if y.ndim < 1 or y.shape[0] != rows:
        raise DataError(f"{who} returned shape {list(y.shape)} for {rows} points; expected [{rows}, outputs]")
    return y.reshape(rows, int(np.prod(y.shape[1:])))
