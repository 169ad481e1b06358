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
The verdict
    The surrogate's error changes the answer of an event where ``|D| > z (se(Pf_sur) + se(D))``: the change
    exceeds the sampling uncertainty of the importance-sampling estimate (its interval's half-width) by more
    than the subsample can explain. It holds where no event changes.

Where the surrogate's failure region and the simulator's do not overlap the proposal, the estimate of ``D`` is
only as good as the safe stratum's subsample; the design-point index is the first-order check beside it.

References
----------
Cochran, W. G. (1977), Sampling Techniques, 3rd ed., Wiley, ch. 5 (stratified random sampling).
Melchers, R. E. (1989), Importance sampling in structural systems, Structural Safety 6(1), 3-10,
doi:10.1016/0167-4730(89)90003-9.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from sensitivity.analyses.reliability import events as ev
from sensitivity.analyses.reliability.sampling import ImportanceSettings, Mixture
from sensitivity.analyses.verify.checks import VERDICT
from sensitivity.errors import ConfigError
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")
stats = lazy_import("scipy.stats")

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
        The analysis's importance-sampling settings (its proposal's weights, sample size and confidence).
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
        Simulator runs per event among the importance samples the surrogate fails / does not fail [runs].
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
        ``_se``, ``reliability_sign_agreement``, ``reliability_changes`` (1: the surrogate's error changes the
        answer); ``reliability_runs`` and ``reliability_verdict`` (no event changes).
    """
    for name, value in (("failure_runs", failure_runs), ("safe_runs", safe_runs)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 2:
            raise ConfigError(f"`{name}` must be an integer >= 2, got {value!r}")
    rng = np.random.default_rng(seed)
    t = len(found.thresholds)
    e, d = found.design_beta.shape
    z = float(stats.norm.isf((1.0 - found.importance.confidence) / 2.0))
    design_error = np.full((e, d), np.nan)
    per_event = {k: np.full(e, np.nan) for k in ("pf_sur", "se_sur", "change", "se_change", "agree")}
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
        per_event["pf_sur"][event] = pf_sur
        per_event["se_sur"][event] = np.sqrt(max(np.mean((weight * fails) ** 2) - pf_sur**2, 0.0) / (n - 1))
        change = variance = 0.0
        agree, simulated = 0, 0
        for stratum, size in ((np.flatnonzero(fails), failure_runs), (np.flatnonzero(~fails), safe_runs)):
            if stratum.size == 0:
                continue
            picked = rng.choice(stratum, size=min(size, stratum.size), replace=False)
            sim_fails = g(_flat(simulate, x[picked])[:, column]) <= 0
            diff = weight[picked] * (sim_fails.astype(float) - fails[picked])
            share = stratum.size / n
            change += share * diff.mean()
            if len(picked) > 1:
                variance += share**2 * (1 - len(picked) / stratum.size) * diff.var(ddof=1) / len(picked)
            agree += int(np.sum(sim_fails == fails[picked]))
            simulated += len(picked)
        runs += simulated + int(ok.sum())
        per_event["change"][event], per_event["se_change"][event] = change, np.sqrt(variance)
        per_event["agree"][event] = agree / simulated
    beta_sim = found.design_beta + found.dbeta_dthreshold * design_error
    changes = np.abs(per_event["change"]) > z * (per_event["se_sur"] + per_event["se_change"])
    assessed = np.isfinite(per_event["change"])
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
        "reliability_pf_simulator": (event_dims, per_event["pf_sur"] + per_event["change"], {
            "long_name": "pf re-weighted with the simulator's values", **one}),
        "reliability_pf_simulator_se": (event_dims, np.hypot(per_event["se_sur"], per_event["se_change"]), {
            "long_name": "standard error of reliability_pf_simulator", **one}),
        "reliability_sign_agreement": (event_dims, per_event["agree"], {
            "long_name": "share of the simulator runs where surrogate and simulator agree on the sign of g", **one}),
        "reliability_changes": (event_dims, np.where(assessed, changes, 0).astype(np.int8), {
            "long_name": f"the surrogate's error changes pf: |change| > {z:.3g} (se of pf + se of the change)",
            "flag_values": np.array([0, 1], np.int8), "flag_meanings": "unchanged changes"}),
        "reliability_runs": ((), np.int32(runs), {"long_name": "simulator runs of the reliability check", **one}),
        "reliability_verdict": ((), np.int8(not bool((changes & assessed).any())), {
            "long_name": "no event's pf changes beyond its sampling uncertainty when the simulator replaces the "
                         "surrogate", **VERDICT}),
    }
    coords = {
        "reliability_event": ("reliability_event", np.arange(e, dtype=np.int32),
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
