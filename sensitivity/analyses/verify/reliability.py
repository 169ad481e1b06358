"""The simulator at a reliability analysis's design points and in its failure region: does the surrogate's error
there change the probability of failure?

Events are ``e = i t + j`` (picked output ``i``, threshold ``j``), as in
:mod:`sensitivity.analyses.reliability.events`; ``g`` is ``T - y`` (failure above) or ``y - T`` (below).

Design points
    The surrogate's error ``d = y_sur - y_sim`` at a design point moves the simulator's limit state as a
    threshold ``T + d`` moves the surrogate's (``y_sim > T`` is ``y_sur > T + d``), so to first order the
    simulator's reliability index there is ``beta + (d beta / d T) d`` (``d beta / d T`` the analysis's own,
    :func:`~sensitivity.analyses.reliability.form.threshold_sensitivity`): exact for a linear limit state and a
    constant error.
The failure region
    Importance samples are redrawn from the analysis's proposal (the mixture at its design points,
    :class:`~sensitivity.analyses.reliability.sampling.Mixture`, with its weights and sample size) and the
    surrogate is evaluated at all of them: ``Pf_sur = mean(w 1[g_sur <= 0])``. The simulator runs at a simple
    random subsample of the samples the surrogate fails (``failure_runs``) and of those it does not
    (``safe_runs``); the two strata's totals give, without bias, the change the simulator makes,
    ``D = mean(w (1[g_sim <= 0] - 1[g_sur <= 0]))`` (stratified estimator with the finite-population
    correction, Cochran 1977, ch. 5), so ``Pf_sim = Pf_sur + D``. ``sign_agreement`` is the share of the runs
    where the two agree on the sign of ``g``.
The runs
    The subsample starts as a pilot (``failure_runs``, ``safe_runs``). A stratum whose runs all agree cannot rule
    out a change it was too sparse to hit, so the check is judged by its resolution: each stratum's variance at
    least that of one disagreement among its ``k`` runs, ``(share mean(w) / k)^2`` (times the finite-population
    correction). The safe stratum's ``share mean(w)`` is about ``1 - Pf``, so seeing a factor-2 change of ``Pf``
    takes about ``2 (z_{1-alpha/2} + z_{1-beta}) / Pf`` safe runs: the runs scale with ``1 / Pf``. Where the pilot
    could not have seen a factor-2 change (:mod:`sensitivity.analyses.agreement`), both strata are topped up by
    their growth (Stein's two-stage design: a pilot sets the size of the second stage; the observed standard
    error falls as ``1 / sqrt(runs)``, the floor as ``1 / runs``), at most ``max_runs`` per event in all. A pilot
    that already sees a change is not topped up.
The verdict
    The surrogate's error changes the answer of an event where ``|D| > z (se(Pf_sur) + se(D))``: the change
    exceeds the sampling uncertainty of the importance-sampling estimate (its interval's half-width) by more
    than the subsample can explain: the event fails. An event that does not is inconclusive where
    ``se(Pf_sur)`` plus the resolution exceeds what a factor-2 change of ``Pf`` (the larger of the surrogate's and
    the re-weighted one) needs at power ``1 - beta`` (:func:`~sensitivity.analyses.agreement.outcome`), with the
    runs that would have been enough; an event without a design point (a threshold the analysis found out of
    reach) is inconclusive too: nothing was checked. It holds where every event holds.

Where the surrogate's failure region and the simulator's do not overlap the proposal, the estimate of ``D`` is
only as good as the safe stratum's subsample; the design-point index is the first-order check beside it.

References
----------
Cochran, W. G. (1977), Sampling Techniques, 3rd ed., Wiley, ch. 5 (stratified random sampling).
Stein, C. (1945), A two-sample test for a linear hypothesis whose power is independent of the variance, Annals of
Mathematical Statistics 16(3), 243-258, doi:10.1214/aoms/1177731088.
Melchers, R. E. (1989), Importance sampling in structural systems, Structural Safety 6(1), 3-10,
doi:10.1016/0167-4730(89)90003-9.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from sensitivity.analyses.reliability import events as ev
from sensitivity.analyses.reliability.sampling import ImportanceSettings, Mixture
from sensitivity.analyses.agreement import FAILS, INCONCLUSIVE, VERDICT, Power, outcome, overall
from sensitivity.errors import ConfigError
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")

#: A batched map on flat outputs: ``[P, n]`` points -> ``[P, M]`` values.
FlatFn = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class ReliabilityEvents:
    """What a reliability analysis found, read from its result (flat events ``e = i t + j``).

    Parameters
    ----------
    indices
        ``[m]`` flat model outputs of the picked outputs.
    thresholds
        ``[t]`` thresholds [the output's units].
    direction
        ``'above'`` or ``'below'``.
    design_u, design_beta, dbeta_dthreshold
        ``[E, D, n]``, ``[E, D]``, ``[E, D]`` the design points (NaN rows: none), their indices, and
        ``d beta / d T`` [1 / the output's units].
    importance
        The analysis's importance-sampling settings (its proposal's weights, sample size and interval level).
    """

    indices: np.ndarray
    thresholds: tuple[float, ...]
    direction: str
    design_u: np.ndarray
    design_beta: np.ndarray
    dbeta_dthreshold: np.ndarray
    importance: ImportanceSettings = ImportanceSettings()

    @classmethod
    def from_dataset(cls, ds: xr.Dataset, indices: np.ndarray, settings: Any) -> "ReliabilityEvents":
        """The events of a reliability dataset (:func:`sensitivity.analyses.reliability.reliability`'s) on flat
        events ``e = i t + j``, with the :class:`~sensitivity.analyses.reliability.ReliabilitySettings` it was
        computed with and its picked outputs' flat ``indices``."""
        dims = [d for d in ds["design_u"].dims if d not in ("threshold", "design_point", "parameter")]
        e = len(indices) * len(settings.thresholds)
        arrays = {name: ds[name].transpose(*dims, "threshold", "design_point", ...).values
                  for name in ("design_u", "design_beta", "dbeta_dthreshold")}  # [*picked, t, D, (n)]
        flat = {name: a.reshape(e, *a.shape[len(dims) + 1:]) for name, a in arrays.items()}
        return cls(np.asarray(indices), tuple(settings.thresholds), settings.direction, flat["design_u"],
                   flat["design_beta"], flat["dbeta_dthreshold"], settings.importance)

    def near_limit_state(self, draws: int, seed: int | np.random.Generator | None = 0) -> np.ndarray:
        """``[P, n]`` in ``u``: every event's design points, each followed by ``draws`` draws of its
        importance-sampling proposal (the candidates of a refinement near the limit state)."""
        rng = np.random.default_rng(seed)
        u = []
        for centres, betas in zip(self.design_u, self.design_beta):
            ok = np.isfinite(betas)
            if ok.any():
                u += [centres[ok], Mixture.proposal(centres[ok], self.importance, betas[ok]).draw(draws, rng)[0]]
        return np.vstack(u) if u else np.empty((0, self.design_u.shape[-1]))


def verify_reliability(simulate: FlatFn, surrogate: FlatFn, to_physical: Callable[[np.ndarray], np.ndarray],
                       found: ReliabilityEvents, *, failure_runs: int = 64, safe_runs: int = 64,
                       max_runs: int = 4096, power: float = Power().power,
                       seed: int | np.random.Generator | None = 0) -> xr.Dataset:
    """The simulator at every event's design points and in its failure region (module notes).

    Parameters
    ----------
    simulate, surrogate
        ``[P, n] -> [P, M]`` on the model's flat outputs (physical inputs).
    to_physical
        ``u [P, n] -> x [P, n]``, the analysis's transform (its Nataf).
    found
        :class:`ReliabilityEvents`.
    failure_runs, safe_runs
        The pilot: simulator runs per event among the importance samples the surrogate fails / does not fail
        [runs].
    max_runs
        Most simulator runs per event in the failure region, pilot included: where the pilot could not have seen a
        factor-2 change of pf, the strata are topped up to the runs that would (module notes), at most this many
        [runs].
    power
        The chance of seeing a factor-2 change of pf the check is planned and judged by
        (:class:`~sensitivity.analyses.agreement.Power`, at the analysis's interval level).
    seed
        Of the redrawn importance samples and the subsamples.

    Returns
    -------
    xarray.Dataset
        On ``reliability_event`` (coordinates ``reliability_event_output`` and ``reliability_event_threshold``):
        ``reliability_design_error(reliability_event, design_point)`` (surrogate minus simulator at the design
        point), ``reliability_design_beta_simulator`` (first-order index of the simulator there),
        ``reliability_pf_surrogate`` and ``reliability_pf_surrogate_se`` (on the redrawn samples),
        ``reliability_pf_simulator`` and ``reliability_pf_simulator_se``, ``reliability_pf_change`` (``D``) and its
        ``_se``, ``reliability_pf_change_resolution`` (the standard error the check is judged by),
        ``reliability_sign_agreement``, ``reliability_event_runs`` and ``reliability_runs_needed`` (runs that would
        see a factor-2 change, at most the whole redrawn sample: its census leaves no subsample error),
        ``reliability_changes`` (1: the surrogate's error changes the answer),
        ``reliability_event_verdict`` (fails, holds or inconclusive); ``reliability_runs`` and
        ``reliability_verdict`` (:func:`~sensitivity.analyses.agreement.overall` of the events').
    """
    for name, value in (("failure_runs", failure_runs), ("safe_runs", safe_runs)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 2:
            raise ConfigError(f"`{name}` must be an integer >= 2, got {value!r}")
    if isinstance(max_runs, bool) or not isinstance(max_runs, int) or max_runs < failure_runs + safe_runs:
        raise ConfigError(f"`max_runs` must be an integer >= failure_runs + safe_runs = {failure_runs + safe_runs}, "
                          f"got {max_runs!r}")
    judge = Power(found.importance.level, power)
    rng = np.random.default_rng(seed)
    t = len(found.thresholds)
    e, d = found.design_beta.shape
    design_error = np.full((e, d), np.nan)
    keys = ("pf_sur", "se_sur", "change", "se_change", "resolution", "agree", "runs", "needed")
    per_event = {k: np.full(e, np.nan) for k in keys}
    runs = 0
    for event in range(e):
        i, j = divmod(event, t)
        column = found.indices[i]
        ok = np.isfinite(found.design_beta[event])
        if not ok.any():
            continue

        def g(values: np.ndarray, j: int = j) -> np.ndarray:
            return ev.threshold_values(values, [found.thresholds[j]], found.direction)[:, 0]

        x_star = to_physical(found.design_u[event, ok])
        design_error[event, ok] = (_flat(surrogate, x_star)[:, column] - _flat(simulate, x_star)[:, column])
        mixture = Mixture.proposal(found.design_u[event, ok], found.importance, found.design_beta[event, ok])
        u, log_ratio = mixture.draw(found.importance.n_samples, rng)
        x = to_physical(u)
        weight = np.exp(log_ratio)
        fails = g(_flat(surrogate, x)[:, column]) <= 0
        n = len(u)
        pf_sur = np.mean(weight * fails)
        se_sur = np.sqrt(max(np.mean((weight * fails) ** 2) - pf_sur**2, 0.0) / (n - 1))
        strata = _Strata(weight, fails, rng)
        strata.run(lambda rows: g(_flat(simulate, x[rows])[:, column]) <= 0, (failure_runs, safe_runs))
        change, se_change = strata.estimate()[:2]
        wanted = strata.wanted(judge.needed_se(strata.pf_reference(pf_sur)) - se_sur, max_runs)
        if wanted is not None and abs(change) <= judge.z * (se_sur + se_change):  # a pilot that fails has seen enough
            strata.run(lambda rows: g(_flat(simulate, x[rows])[:, column]) <= 0, wanted)
        change, se_change, resolution, _ = strata.estimate()
        growth = strata.growth(judge.needed_se(strata.pf_reference(pf_sur)) - se_sur)
        per_event["needed"][event] = min(np.ceil(strata.runs * growth), n) if np.isfinite(growth) else np.inf
        runs += strata.runs + int(ok.sum())
        for key, value in (("pf_sur", pf_sur), ("se_sur", se_sur), ("change", change), ("se_change", se_change),
                           ("resolution", resolution), ("agree", strata.agreement), ("runs", strata.runs)):
            per_event[key][event] = value
    assessed = np.isfinite(per_event["change"])
    pf_reference = np.maximum(per_event["pf_sur"], per_event["pf_sur"] + per_event["change"])
    verdicts = np.where(assessed, outcome(per_event["change"], per_event["se_sur"] + per_event["se_change"],
                                          pf_reference, power=judge), INCONCLUSIVE).astype(np.int8)
    blind = assessed & (verdicts != FAILS) & ~(per_event["se_sur"] + per_event["resolution"]
                                               <= judge.needed_se(pf_reference))
    verdicts[blind] = INCONCLUSIVE
    changes = verdicts == FAILS
    return _dataset(found, design_error, per_event, changes, verdicts, runs, judge)


class _Strata:
    """The two strata of an event's redrawn importance samples (the surrogate fails / does not) and the simulator's
    runs on a simple random subsample of each (module notes)."""

    def __init__(self, weight: np.ndarray, fails: np.ndarray, rng: np.random.Generator) -> None:
        self.weight, self.fails, self.rng = weight, fails, rng
        self.members = (np.flatnonzero(fails), np.flatnonzero(~fails))
        self.picked = [np.empty(0, int), np.empty(0, int)]
        self.sim_fails = [np.empty(0, bool), np.empty(0, bool)]

    @property
    def runs(self) -> int:
        return sum(len(p) for p in self.picked)

    @property
    def agreement(self) -> float:
        """The share of the runs where the simulator and the surrogate agree on the sign of ``g``."""
        agree = sum(int(np.sum(s == self.fails[p])) for p, s in zip(self.picked, self.sim_fails))
        return agree / self.runs if self.runs else np.nan

    def run(self, sim_fails: Callable[[np.ndarray], np.ndarray], sizes: tuple[int, int]) -> None:
        """Top each stratum's subsample up to ``sizes`` runs (at most the stratum), new rows drawn at random."""
        for h, size in enumerate(sizes):
            left = np.setdiff1d(self.members[h], self.picked[h])
            more = min(size - len(self.picked[h]), left.size)
            if more > 0:
                rows = self.rng.choice(left, size=more, replace=False)
                self.picked[h] = np.concatenate([self.picked[h], rows])
                self.sim_fails[h] = np.concatenate([self.sim_fails[h], sim_fails(rows)])

    def estimate(self) -> tuple[float, float, float, float]:
        """``D``, its standard error, its resolution, and the floor alone: the resolution is the standard error with
        each stratum's variance at least that of one disagreement among its ``k`` runs, ``fpc (share mean(w) /
        k)^2`` (the floor, falling as ``1 / k``): a stratum whose runs all agree cannot rule out a change it was too
        sparse to hit."""
        n = len(self.weight)
        change = variance = resolved = floor = 0.0
        for stratum, picked, sim in zip(self.members, self.picked, self.sim_fails):
            if not len(picked):
                continue
            diff = self.weight[picked] * (sim.astype(float) - self.fails[picked])
            share, k = stratum.size / n, len(picked)
            fpc = 1 - k / stratum.size
            change += share * diff.mean()
            observed = share**2 * fpc * diff.var(ddof=1) / k if k > 1 else 0.0
            one = fpc * (share * self.weight[stratum].mean() / k) ** 2
            variance, resolved, floor = variance + observed, resolved + max(observed, one), floor + one
        return change, np.sqrt(variance), np.sqrt(resolved), np.sqrt(floor)

    def growth(self, target: float) -> float:
        """The factor of runs at which the resolution would reach ``target``: the observed standard error falls as
        ``1 / sqrt(runs)``, the floor as ``1 / runs`` (inf: no target left; 1: reached)."""
        _, se, resolution, floor = self.estimate()
        if resolution <= target:
            return 1.0
        return max((se / target) ** 2, floor / target) if target > 0 else np.inf

    def pf_reference(self, pf_sur: float) -> float:
        """The pf a factor-2 change is judged against: the larger of the surrogate's and the re-weighted one."""
        return max(pf_sur, pf_sur + self.estimate()[0])

    def wanted(self, target: float, max_runs: int) -> tuple[int, int] | None:
        """Runs per stratum at which the resolution would reach ``target`` (both strata grown alike by
        :meth:`growth`, at most the stratum), capped at ``max_runs`` in all; None when the pilot already resolves
        it."""
        scale = self.growth(target)
        if scale <= 1:
            return None
        sizes = np.array([len(p) for p in self.picked], float)
        grown = np.minimum(np.ceil(sizes * min(scale, 1e12)), [m.size for m in self.members])
        if grown.sum() > max_runs:
            grown = np.maximum(sizes, np.floor(grown * max_runs / grown.sum()))
        return int(grown[0]), int(grown[1])


def _dataset(found: ReliabilityEvents, design_error: np.ndarray, per_event: dict[str, np.ndarray],
             changes: np.ndarray, verdicts: np.ndarray, runs: int, judge: Power) -> xr.Dataset:
    """The check's dataset (:func:`verify_reliability`'s Returns)."""
    t, z = len(found.thresholds), judge.z
    beta_sim = found.design_beta + found.dbeta_dthreshold * design_error
    one = {"units": "1"}
    event_dims, design_dims = ("reliability_event",), ("reliability_event", "design_point")
    data = {
        "reliability_design_error": (design_dims, design_error, {
            "long_name": "surrogate minus simulator at the design point (the picked output)"}),
        "reliability_design_beta_simulator": (design_dims, beta_sim, {
            "long_name": "first-order reliability index of the simulator at the design point: beta + dbeta/dT "
                         "(surrogate - simulator)", **one}),
        "reliability_pf_surrogate": (event_dims, per_event["pf_sur"], {
            "long_name": "importance-sampling pf of the surrogate on the redrawn samples", **one}),
        "reliability_pf_surrogate_se": (event_dims, per_event["se_sur"], {
            "long_name": "standard error of reliability_pf_surrogate", **one}),
        "reliability_pf_change": (event_dims, per_event["change"], {
            "long_name": "change of pf when the simulator's sign of g replaces the surrogate's (stratified subsample)",
            **one}),
        "reliability_pf_change_se": (event_dims, per_event["se_change"], {
            "long_name": "standard error of reliability_pf_change (the subsample's)", **one}),
        "reliability_pf_change_resolution": (event_dims, per_event["resolution"], {
            "long_name": "standard error of reliability_pf_change with each stratum's variance at least that of one "
                         "disagreement among its runs", **one}),
        "reliability_pf_simulator": (event_dims, per_event["pf_sur"] + per_event["change"], {
            "long_name": "pf re-weighted with the simulator's values", **one}),
        "reliability_pf_simulator_se": (event_dims, np.hypot(per_event["se_sur"], per_event["se_change"]), {
            "long_name": "standard error of reliability_pf_simulator", **one}),
        "reliability_sign_agreement": (event_dims, per_event["agree"], {
            "long_name": "share of the simulator runs where surrogate and simulator agree on the sign of g", **one}),
        "reliability_event_runs": (event_dims, np.nan_to_num(per_event["runs"]).astype(np.int32), {
            "long_name": "simulator runs of the event in its failure region (pilot and top-up)", **one}),
        "reliability_runs_needed": (event_dims, per_event["needed"], {
            "long_name": f"simulator runs in the failure region that would see a factor-2 change of pf at "
                         f"{judge.level:.0%} confidence with power {judge.power:.0%} (inf: no number would; the "
                         "importance sample itself is too small)", **one}),
        "reliability_changes": (event_dims, changes.astype(np.int8), {
            "long_name": f"the surrogate's error changes pf: |change| > {z:.3g} (se of pf + se of the change)",
            "flag_values": np.array([0, 1], np.int8), "flag_meanings": "unchanged changes"}),
        "reliability_event_verdict": (event_dims, verdicts, {
            "long_name": "pf unchanged beyond its sampling uncertainty (holds), changed (fails), or unchanged by a "
                         "check that could not have seen a factor-2 change (inconclusive)", **VERDICT}),
        "reliability_runs": ((), np.int32(runs), {"long_name": "simulator runs of the reliability check", **one}),
        "reliability_verdict": ((), np.int8(overall(verdicts)), {
            "long_name": "no event's pf changes beyond its sampling uncertainty when the simulator replaces the "
                         "surrogate, and every event's check could have seen a factor-2 change", **VERDICT}),
    }
    coords = {
        "reliability_event": ("reliability_event", np.arange(len(verdicts), dtype=np.int32),
                              {"long_name": "event: picked output x threshold", **one}),
        "reliability_event_output": ("reliability_event", np.repeat(np.asarray(found.indices, np.int32), t),
                                     {"long_name": "flat model output of the event", **one}),
        "reliability_event_threshold": ("reliability_event", np.tile(np.asarray(found.thresholds, float), len(
            found.indices)), {"long_name": "threshold of the event"}),
    }
    return xr.Dataset(data, coords=coords)


def u_function(values: np.ndarray, found: ReliabilityEvents) -> np.ndarray:
    """``[P]`` the U-function of AK-MCS with an ensemble in place of the Gaussian process, lowest over the events.

    ``U = |mean_k g_k| / sd_k g_k`` (``ddof=1``) of the members' limit states ``g_k`` at each point: the number
    of the members' standard deviations between their mean and the limit state, small where they may disagree
    about the sign of ``g``; refinement runs the simulator at the lowest first (Echard, Gayton & Lemaire 2011,
    AK-MCS, Structural Safety 33(2), 145-154, doi:10.1016/j.strusafe.2011.01.002; they stop at ``U >= 2``).

    Parameters
    ----------
    values
        ``[K, P, M]`` the members' flat outputs at ``P`` points.
    found
        The events (:class:`ReliabilityEvents`: the picked outputs, thresholds and direction).
    """
    v = np.asarray(values, float)
    k, p = v.shape[:2]
    picked = v.reshape(k, p, -1)[:, :, np.asarray(found.indices)]
    g = ev.threshold_values(picked.reshape(k * p, -1), found.thresholds, found.direction).reshape(k, p, -1)
    with np.errstate(divide="ignore", invalid="ignore"):
        u = np.abs(g.mean(axis=0)) / g.std(axis=0, ddof=1)
    return np.nan_to_num(u, nan=np.inf).min(axis=1)


def _flat(fn: FlatFn, points: np.ndarray) -> np.ndarray:
    values = np.asarray(fn(points), float)
    return values.reshape(len(points), -1)
