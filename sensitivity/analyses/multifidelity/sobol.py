"""Multifidelity main and total Sobol' indices on a pick-freeze design.

Qian, Peherstorfer, O'Malley, Vesselinov & Willcox (2018), doi:10.1137/17M1151006: the variance and the
main/total-effect numerators of the pick-freeze estimators are each estimated by a control variate — the
simulator on the first ``n`` rows of every design matrix ``A``, ``B``, ``A_B^(i)``, the surrogate on all
``N`` rows — and the indices are their ratios. The design is the project's Saltelli layout
(:func:`sensitivity.analyses.indices.sobol.sample`, ``calc_second_order=False``): row block ``k`` holds
``A_k, A_B^(1..G)_k, B_k``, so "the first ``n`` rows of each matrix" are the first ``n (G + 2)`` rows.

Per row ``k`` and factor ``i`` (Saltelli et al. 2010, doi:10.1016/j.cpc.2009.09.018, Table 2, as the
project's pick-freeze module)::

    main_i  = (f(B) - c) (f(A_B^(i)) - f(A))      E = V_i                  Saltelli 2010 (b)
    total_i = (f(A) - f(A_B^(i)))^2 / 2            E = V_Ti                 Jansen 1999 (f)

with ``c`` the surrogate's mean over all ``N`` rows of ``A`` and ``B`` (a near-constant shift: it does not
change the expectation and removes the mean's share of the variance of ``main``). Each numerator is the
control-variate estimate of a mean of per-row terms; the variance ``V`` is the control-variate estimate of
the unbiased sample variance of the stacked ``[f(A); f(B)]`` (``2n`` and ``2N`` values); both by
:mod:`~sensitivity.analyses.multifidelity.control_variates`, each with its own optimal weight estimated on the
shared rows. ``S1_i = V_i / V``, ``ST_i = V_Ti / V``.

Intervals: percentile bootstrap over the rows (the ``n`` shared rows and the ``N - n`` surrogate-only rows
resampled independently, every weight re-estimated on each resample; seeded numpy Generator). The achieved
variance reduction is reported two ways: measured, as the bootstrap variance of each multifidelity index over
that of simulator-only pick-freeze on the same ``n`` rows (same resamples); and in closed form for each
numerator, the control-variate factor ``1 - rho^2 (N - n)/N`` with ``rho`` the correlation of the
simulator's and the surrogate's per-row terms on the shared rows.

Inputs must be independent (the estimators swap columns), as for single-fidelity pick-freeze.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sensitivity.analyses.multifidelity import checks, control_variates
from sensitivity.analyses.multifidelity.checks import Seed
from sensitivity.errors import DataError

METHOD = ("multifidelity pick-freeze Sobol' indices (Qian et al. 2018): control-variate estimates of the variance "
          "and of the Saltelli 2010 main / Jansen total numerators")
REFERENCES = "doi:10.1137/17M1151006 doi:10.1016/j.cpc.2009.09.018 doi:10.1137/15M1046472"


@dataclass(frozen=True)
class MFSobol:
    """Settings of :func:`sobol_indices`.

    Parameters
    ----------
    n_resamples
        Bootstrap resamples of the rows for the intervals and the measured variance reduction
        (0: none, the interval and measured fields are NaN; else >= 10).
    level
        Confidence level of the percentile intervals, in (0, 1).
    """

    n_resamples: int = 200
    level: float = 0.95

    def check(self) -> MFSobol:
        """These settings, or a :class:`~sensitivity.errors.ConfigError` naming the bad field."""
        checks.level(self.level)
        if self.n_resamples != 0:
            checks.count(self.n_resamples, "n_resamples", 10)
        return self


@dataclass(frozen=True)
class MFSobolResult:
    """Multifidelity Sobol' indices of ``G`` factors and ``m`` outputs.

    Attributes
    ----------
    S1, ST
        ``[G, m]`` main and total indices [1]; ``S1_se``, ``ST_se`` their bootstrap standard errors and
        ``S1_interval``, ``ST_interval`` ``[G, m, 2]`` percentile intervals at ``level``.
    variance
        ``[m]`` control-variate estimate of the output variance [output units squared].
    simulator_only, surrogate_only
        ``{"S1", "ST", "variance"}``: pick-freeze on the simulator's ``n`` rows alone and on the
        surrogate's ``N`` rows alone (the latter carries the surrogate's bias).
    alpha
        ``{"main", "total"}`` ``[G, m]`` and ``{"variance"}`` ``[m]`` control-variate weights [1].
    correlation
        Same keys: correlation of the simulator's and surrogate's terms on the shared rows [1].
    variance_ratio_formula
        Same keys: ``1 - rho^2 (N - n)/N``, each numerator's variance over its simulator-only variance [1].
    variance_ratio_bootstrap
        ``{"S1", "ST"}`` ``[G, m]``: bootstrap variance of the multifidelity index over that of the
        simulator-only index at the same ``n`` [1] (NaN without resamples).
    n_sim, n_sur
        ``n`` and ``N`` (rows of each design matrix).
    """

    S1: np.ndarray
    ST: np.ndarray
    S1_se: np.ndarray
    ST_se: np.ndarray
    S1_interval: np.ndarray
    ST_interval: np.ndarray
    variance: np.ndarray
    simulator_only: dict[str, np.ndarray]
    surrogate_only: dict[str, np.ndarray]
    alpha: dict[str, np.ndarray]
    correlation: dict[str, np.ndarray]
    variance_ratio_formula: dict[str, np.ndarray]
    variance_ratio_bootstrap: dict[str, np.ndarray]
    n_sim: int
    n_sur: int
    level: float
    method: str = METHOD
    references: str = REFERENCES


def sobol_indices(sim: np.ndarray, sur: np.ndarray, n_factors: int, settings: MFSobol = MFSobol(), *,
                  seed: Seed = None) -> MFSobolResult:
    """Multifidelity main and total Sobol' indices of every output.

    Parameters
    ----------
    sim
        ``[n (G + 2), m]`` simulator values on the first ``n`` row blocks of the design (or
        ``[n, G + 2, m]``).
    sur
        ``[N (G + 2), m]`` surrogate values on all ``N >= n`` row blocks (or ``[N, G + 2, m]``).
    n_factors
        ``G``, the number of factors of the design.
    settings
        Bootstrap resamples and level.
    seed
        Seed of the bootstrap (int, Generator or None).

    Returns
    -------
    MFSobolResult
    """
    s = settings.check()
    g = checks.count(n_factors, "n_factors", 1)
    y0, y1 = _blocks(sim, "sim", g), _blocks(sur, "sur", g)
    if y1.shape[2] != y0.shape[2] or y1.shape[0] < y0.shape[0]:
        raise DataError(f"`sur` must hold at least the {y0.shape[0]} row blocks of `sim` with its {y0.shape[2]} "
                        f"outputs, got {y1.shape[0]} blocks of {y1.shape[2]}")
    n, n_all = y0.shape[0], y1.shape[0]
    est = _estimate(y0, y1)
    nan = np.full_like(est["S1"], np.nan)
    se = {"S1": nan, "ST": nan}
    bounds = {"S1": np.stack([nan, nan], -1), "ST": np.stack([nan, nan], -1)}
    measured = {"S1": nan, "ST": nan}
    if s.n_resamples:
        rng = checks.rng(seed)
        reps = [_estimate(y0[rows[:n]], y1[rows]) for rows in
                (control_variates.bootstrap_rows(rng, n, n_all) for _ in range(s.n_resamples))]
        tail = 50 * (1 - s.level)
        for key in ("S1", "ST"):
            mf = np.stack([r[key] for r in reps])
            alone = np.stack([r[f"sim_{key}"] for r in reps])
            se[key] = mf.std(axis=0, ddof=1)
            bounds[key] = np.moveaxis(np.percentile(mf, [tail, 100 - tail], axis=0), 0, -1)
            with np.errstate(invalid="ignore", divide="ignore"):
                measured[key] = mf.var(axis=0, ddof=1) / alone.var(axis=0, ddof=1)
    parts = ("main", "total", "variance")
    return MFSobolResult(
        S1=est["S1"], ST=est["ST"], S1_se=se["S1"], ST_se=se["ST"], S1_interval=bounds["S1"],
        ST_interval=bounds["ST"], variance=est["variance"],
        simulator_only={k: est[f"sim_{k}"] for k in ("S1", "ST", "variance")},
        surrogate_only={k: est[f"sur_{k}"] for k in ("S1", "ST", "variance")},
        alpha={k: est[f"alpha_{k}"] for k in parts}, correlation={k: est[f"rho_{k}"] for k in parts},
        variance_ratio_formula={k: est[f"ratio_{k}"] for k in parts}, variance_ratio_bootstrap=measured,
        n_sim=n, n_sur=n_all, level=s.level,
    )


def _blocks(values: np.ndarray, name: str, g: int) -> np.ndarray:
    """``[rows, G + 2, m]`` blocks of a flat ``[rows (G + 2), m]`` array (or a 3-D one as is)."""
    y = np.asarray(values, dtype=np.float64)
    if y.ndim == 3:
        if y.shape[1] != g + 2:
            raise DataError(f"`{name}` blocks must have G + 2 = {g + 2} rows each, got shape {y.shape}")
    else:
        y = checks.values(y, name, min_rows=g + 2)
        if y.shape[0] % (g + 2):
            raise DataError(f"`{name}` must have a multiple of G + 2 = {g + 2} rows (blocks A, A_B^(1..G), B), "
                            f"got {y.shape[0]}")
        y = y.reshape(-1, g + 2, y.shape[1])
    if y.shape[0] < 3 or not np.isfinite(y).all():
        raise DataError(f"`{name}` must hold >= 3 finite row blocks, got {y.shape[0]} blocks "
                        f"(finite: {bool(np.isfinite(y).all())})")
    return y


def _terms(y: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row main and total terms ``[rows, G, m]`` of blocks ``y [rows, G + 2, m]``."""
    a, b, ab = y[:, :1], y[:, -1:], y[:, 1:-1]
    return (b - c) * (ab - a), 0.5 * (a - ab) ** 2


def _stacked(y: np.ndarray) -> np.ndarray:
    """``[f(A); f(B)]``, ``[2 rows, m]``."""
    return np.concatenate([y[:, 0], y[:, -1]])


def _estimate(y0: np.ndarray, y1: np.ndarray) -> dict[str, np.ndarray]:
    """Multifidelity, simulator-only and surrogate-only indices and the weights, on one (re)sample."""
    n, n_all = y0.shape[0], y1.shape[0]
    g, m = y0.shape[1] - 2, y0.shape[2]
    c = _stacked(y1).mean(axis=0)
    out: dict[str, np.ndarray] = {}
    terms0, terms1 = _terms(y0, c), _terms(y1, c)
    for key, t0, t1 in zip(("main", "total"), terms0, terms1):
        f0, f1 = t0.reshape(n, -1), t1.reshape(n_all, -1)
        shared = f1[:n]
        r = control_variates.combine(f0.mean(axis=0), shared.mean(axis=0), f1.mean(axis=0),
                                     control_variates.mean_terms(f0, shared), n, n_all)
        out[key] = r["estimate"].reshape(g, m)
        out[f"sur_{key}"] = f1.mean(axis=0).reshape(g, m)
        for name in ("alpha", "correlation", "variance_ratio"):
            out[f"{_short(name)}_{key}"] = r[name].reshape(g, m)
    s0, s1 = _stacked(y0), _stacked(y1)
    shared = np.concatenate([y1[:n, 0], y1[:n, -1]])
    v0, v1_n, v1 = s0.var(axis=0, ddof=1), shared.var(axis=0, ddof=1), s1.var(axis=0, ddof=1)
    r = control_variates.combine(v0, v1_n, v1, control_variates.variance_terms(s0, shared), 2 * n, 2 * n_all)
    out["variance"] = r["estimate"]
    for name in ("alpha", "correlation", "variance_ratio"):
        out[f"{_short(name)}_variance"] = r[name]
    with np.errstate(invalid="ignore", divide="ignore"):
        out["S1"], out["ST"] = out["main"] / out["variance"], out["total"] / out["variance"]
        out["sur_S1"], out["sur_ST"] = out["sur_main"] / v1, out["sur_total"] / v1
        sim_main, sim_total = _terms(y0, s0.mean(axis=0))
        out["sim_S1"], out["sim_ST"] = sim_main.mean(axis=0) / v0, sim_total.mean(axis=0) / v0
    out["sim_variance"], out["sur_variance"] = v0, v1
    return out


def _short(name: str) -> str:
    return {"alpha": "alpha", "correlation": "rho", "variance_ratio": "ratio"}[name]
