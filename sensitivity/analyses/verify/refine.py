"""Refinement: simulator runs added where an ensemble's members disagree most on an analysis's points, retrained,
round after round, until the verdict holds or the budget is spent; every round recorded.

:func:`refine` is pure orchestration over three callables (the simulator, a training function and the
analysis's check), so a notebook can refine any surrogate; the members' disagreement at a point is their
predictive standard deviation relative to the outputs' spread over the candidates (each output counts alike).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from sensitivity.errors import ConfigError
from sensitivity.runtime.lazy import lazy_import
from sensitivity.outputs.members import predictive_variance

xr = lazy_import("xarray")

#: Trains an ensemble on ``(x [N, n], y [N, m])`` and returns its members' values ``[P, n] -> [K, P, m]``.
FitFn = Callable[[np.ndarray, np.ndarray], Callable[[np.ndarray], np.ndarray]]
#: The analysis's verdict on an ensemble's members' values (True: the surrogate error is below its uncertainty).
CheckFn = Callable[[Callable[[np.ndarray], np.ndarray]], bool]


def refine(simulate: Callable[[np.ndarray], np.ndarray], fit: FitFn, check: CheckFn, x: np.ndarray, y: np.ndarray,
           candidates: np.ndarray, *, rounds: int, points_per_round: int,
           initial: Callable[[np.ndarray], np.ndarray] | None = None,
           priority: Callable[[np.ndarray], np.ndarray] | None = None) -> xr.Dataset:
    """Refine an ensemble on the points an analysis depends on.

    Parameters
    ----------
    simulate
        ``[P, n] -> [P, m]``, the simulator (flat outputs).
    fit
        Trains the ensemble on the samples (:data:`FitFn`); called after each round (and once before the first
        when no ``initial`` ensemble is given).
    check
        The analysis's verdict on an ensemble (:data:`CheckFn`).
    x, y
        ``[N, n]``, ``[N, m]`` the training samples so far.
    candidates
        ``[P, n]`` the analysis's points: new runs are chosen among them, where the members disagree most.
    rounds
        At most this many rounds of new runs (0: only the verdict of the ensemble as given).
    points_per_round
        Simulator runs added per round.
    initial
        The members' values ``[P, n] -> [K, P, m]`` of the ensemble already trained on ``(x, y)`` (round 0 judges
        it as given); None: ``fit(x, y)``.
    priority
        ``members' values [K, P, m] -> [P]``: the candidates' order of new runs, lowest first (the U-function of a
        reliability analysis, :func:`~sensitivity.analyses.verify.reliability.u_function`); None: the members'
        largest disagreement first.

    Returns
    -------
    xarray.Dataset
        On ``round`` (0: before any refinement): ``refine_training_size``, ``refine_verdict``,
        ``refine_member_std_max`` and ``refine_member_std_mean`` (the members' relative disagreement on the
        candidates), ``refine_error_rms`` (the ensemble mean's error on the candidates relative to the outputs'
        spread: the simulator runs once at every candidate for it); ``refine_added(added, parameter)`` the points
        added with ``refine_added_round(added)``; the attribute ``refine_outcome``, why it stopped (``holds``: the
        verdict holds; ``budget spent``: the rounds are spent and it does not; ``candidates exhausted``: every
        candidate was run and it does not).
    """
    for name, value in (("rounds", rounds), ("points_per_round", points_per_round)):
        if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "rounds" else 1):
            raise ConfigError(f"`{name}` must be an integer >= {0 if name == 'rounds' else 1}, got {value!r}")
    candidates = np.atleast_2d(np.asarray(candidates, float))
    x, y = np.asarray(x, float), np.asarray(y, float).reshape(len(x), -1)
    truth = np.asarray(simulate(candidates), float).reshape(len(candidates), -1)
    scale = truth.std(axis=0)
    scale = np.where(scale > 0, scale, 1.0)
    available = np.ones(len(candidates), bool)
    records, added, added_round = [], [], []
    members = fit(x, y) if initial is None else initial
    for r in range(rounds + 1):
        values = np.asarray(members(candidates), float).reshape(-1, len(candidates), truth.shape[1])
        spread = np.sqrt(predictive_variance(values)) if values.shape[0] > 1 else np.zeros_like(truth)
        disagreement = (spread / scale).max(axis=1)  # [P]: the output where the members disagree most
        error = (values.mean(axis=0) - truth) / scale
        verdict = bool(check(members))
        records.append((len(x), verdict, disagreement.max(), disagreement.mean(), np.sqrt((error**2).mean())))
        if verdict or r == rounds or not available.any():
            break
        score = -disagreement if priority is None else np.asarray(priority(values), float)
        order = np.argsort(np.where(available, score, np.inf), kind="stable")[:min(points_per_round, available.sum())]
        available[order] = False
        x, y = np.vstack([x, candidates[order]]), np.vstack([y, truth[order]])
        added += list(candidates[order])
        added_round += [r + 1] * len(order)
        members = fit(x, y)
    size, verdicts, std_max, std_mean, rms = (np.array(c) for c in zip(*records))
    outcome = "holds" if verdicts[-1] else "budget spent" if len(records) == rounds + 1 else "candidates exhausted"
    n = candidates.shape[1]
    one = {"units": "1"}
    return xr.Dataset({
        "refine_training_size": ("round", size.astype(np.int64), {"long_name": "training samples of the round", **one}),
        "refine_verdict": ("round", verdicts.astype(np.int8), {"long_name": "the analysis's verdict after the round",
                                                                 "flag_values": np.array([0, 1], np.int8),
                                                                 "flag_meanings": "fails holds"}),
        "refine_member_std_max": ("round", std_max, {"long_name": "largest predictive standard deviation of the "
                                                                   "members on the analysis's points, relative to "
                                                                   "the outputs' spread there", **one}),
        "refine_member_std_mean": ("round", std_mean, {
            "long_name": "mean predictive standard deviation of the members on the analysis's points, relative",
            **one}),
        "refine_error_rms": ("round", rms, {"long_name": "root-mean-square error of the ensemble mean on the "
                                                         "analysis's points, relative to the outputs' spread", **one}),
        "refine_added": (("added", "parameter"), np.array(added, float).reshape(-1, n),
                         {"long_name": "simulator runs added to the training samples"}),
        "refine_added_round": ("added", np.array(added_round, np.int64), {"long_name": "round that added the run",
                                                                          **one}),
    }, coords={"round": ("round", np.arange(len(records), dtype=np.int32), {"long_name": "refinement round (0: "
                                                                                         "before any)", **one})},
        attrs={"refine_outcome": outcome})
