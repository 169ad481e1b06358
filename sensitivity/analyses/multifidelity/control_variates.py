"""Control-variate (MFMC / ACV) estimators of the mean, variance and covariance of every output.

The simulator (high fidelity, ``f0``) runs on ``n`` points, the surrogate (low fidelity, ``f1``) on
``N >= n`` points whose first ``n`` are the simulator's (nested sets). For a statistic ``Q`` computed by
an estimator ``Q_k`` on ``k`` points, the control-variate estimate is::

    Q_cv = Q_n(f0) + alpha (Q_N(f1) - Q_n(f1))

unbiased for any fixed ``alpha`` (the bracket has mean zero) and of least variance for::

    alpha* = (Cov[Q_n(f0), Q_n(f1)] - Cov[Q_n(f0), Q_N(f1)]) / (Var[Q_n(f1)] - Var[Q_N(f1)])

(Peherstorfer, Willcox & Gunzburger 2016, doi:10.1137/15M1046472, Thm 2.4 / Lemma 3.3). Every ``Q_k``
here is a U-statistic of degree 1 or 2, so ``Var[Q_k] = a/k + b/(k (k - 1))``, and on nested sets
``Cov[Q_n(f0), Q_N(f1)] = Cov[Q_N(f0), Q_N(f1)]`` (each ``n``-subset has the same joint law with a
symmetric statistic of all ``N`` points). With ``V(k) = a/k + b/(k (k - 1))`` for each pair::

    alpha* = (V01(n) - V01(N)) / (V1(n) - V1(N)),   Var[Q_cv] = V0(n) - alpha* (V01(n) - V01(N))

* **mean** (``a = sigma^2``, ``b = 0``): ``alpha* = Cov[f0, f1] / Var[f1]`` and
  ``Var[Q_cv] = sigma0^2 / n (1 - (1 - n/N) rho^2)``, the MFMC estimator;
* **variance** and **covariance** of outputs: the unbiased sample (co)variance, a U-statistic with kernel
  ``(a - a')(b - b') / 2`` (Qian, Peherstorfer, O'Malley, Vesselinov & Willcox 2018,
  doi:10.1137/17M1151006, section 3); for simulator outputs ``(a, b)`` and the surrogate's ``(c, d)`` of
  the same pair ``a01 = E[a~ b~ c~ d~] - s_ab s_cd``, ``b01 = s_ac s_bd + s_ad s_bc`` (``x~`` centred),
  which for ``a = b``, ``c = d`` is Qian et al.'s ``(q - s0^2 s1^2)/n + 2 C^2 / (n (n - 1))``.

The moments in ``a`` and ``b`` are plug-in estimates on the ``n`` shared points, so ``alpha`` is
estimated on the shared samples (for the mean exactly the sample ``cov / var``). With a perfect surrogate
(``f1 = f0``) ``alpha = 1`` and the estimate is the surrogate's own on all ``N`` points.

Approximate control variates (Gorodetsky, Geraci, Eldred & Jakeman 2020, doi:10.1016/j.jcp.2020.109257):
with one low-fidelity model, ACV-MF, ACV-IS and MFMC all evaluate the surrogate on the simulator's points
``z1* = z0`` and on ``z1 = z0 + (N - n)`` further independent points; their discrepancy matrices reduce to
the one scalar ``F = (r - 1)/r`` with ``r = N/n``, so the optimal weight (``alpha*`` above) and the variance
coincide: this module's estimator *is* ACV-MF and ACV-IS for one surrogate; they differ only from two
low-fidelity models on.

Intervals: ``formula`` is ``estimate -+ z se`` with ``se`` from ``Var[Q_cv]`` above (plug-in moments);
``bootstrap`` resamples the ``n`` paired simulator/surrogate rows and the ``N - n`` surrogate-only rows
independently (the nested layout is kept), re-estimates ``alpha`` on every resample, and gives the
resamples' standard deviation and percentile interval.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

import numpy as np

from sensitivity.analyses.multifidelity import checks
from sensitivity.analyses.multifidelity.checks import Seed

IntervalMethod = Literal["formula", "bootstrap"]
INTERVAL_METHODS: tuple[str, ...] = ("formula", "bootstrap")

#: What the ``method`` field of every result says.
METHOD = ("control variate (MFMC, Peherstorfer et al. 2016; = ACV-MF = ACV-IS for one low-fidelity model, "
          "Gorodetsky et al. 2020)")
REFERENCES = "doi:10.1137/15M1046472 doi:10.1137/17M1151006 doi:10.1016/j.jcp.2020.109257"


@dataclass(frozen=True)
class ControlVariate:
    """Settings of the control-variate estimators.

    Parameters
    ----------
    interval
        ``"formula"``: normal interval from the estimator's variance formula; ``"bootstrap"``: percentile
        interval over resamples of the simulator rows (and, independently, the surrogate-only rows).
    level
        Confidence level of the interval, in (0, 1).
    n_resamples
        Bootstrap resamples (``interval="bootstrap"`` only), >= 10.
    """

    interval: IntervalMethod = "formula"
    level: float = 0.95
    n_resamples: int = 400

    def check(self) -> ControlVariate:
        """These settings, or a :class:`~sensitivity.errors.ConfigError` naming the bad field."""
        checks.choice(self.interval, "interval", INTERVAL_METHODS)
        checks.level(self.level)
        checks.count(self.n_resamples, "n_resamples", 10)
        return self


@dataclass(frozen=True)
class CVResult:
    """A control-variate estimate of one statistic of every output (``[m]``, or ``[m, m]`` for covariance).

    Attributes
    ----------
    quantity
        ``"mean"``, ``"variance"`` or ``"covariance"``.
    estimate, standard_error
        The estimate [output units, squared for (co)variances] and its standard error.
    interval
        ``[..., 2]`` low and high bounds at ``level``, by ``interval_method``.
    alpha
        The control-variate weight, estimated on the shared points [1].
    correlation
        Leading-order correlation of the simulator's and the surrogate's kernels on the shared points
        (for the mean: ``rho`` of the outputs) [1].
    variance_ratio
        ``Var[estimate] / Var[simulator-only estimate on the n points]`` by the variance formula
        (``1 - (1 - n/N) rho^2`` for the mean) [1].
    simulator_only, surrogate_only
        The statistic of the simulator on its ``n`` points and of the surrogate on all ``N``.
    bias, bias_standard_error
        The surrogate's error in the statistic that the estimator corrected: simulator minus surrogate
        on the shared points (for the mean: the mean of ``sim - sur``), with its standard error.
    n_sim, n_sur
        ``n`` and ``N``.
    """

    quantity: str
    estimate: np.ndarray
    standard_error: np.ndarray
    interval: np.ndarray
    alpha: np.ndarray
    correlation: np.ndarray
    variance_ratio: np.ndarray
    simulator_only: np.ndarray
    surrogate_only: np.ndarray
    bias: np.ndarray
    bias_standard_error: np.ndarray
    n_sim: int
    n_sur: int
    level: float
    interval_method: str
    method: str = METHOD
    references: str = REFERENCES


def estimate_mean(sim: np.ndarray, sur: np.ndarray, settings: ControlVariate = ControlVariate(), *,
                  seed: Seed = None) -> CVResult:
    """MFMC / control-variate estimate of the mean of every output.

    Parameters
    ----------
    sim
        ``[n, m]`` simulator values (a vector is one output) at the first ``n`` points.
    sur
        ``[N, m]`` surrogate values, ``N >= n``; its first ``n`` rows are at the simulator's points.
    settings
        Interval method and level.
    seed
        Seed of the bootstrap (int, Generator or None); unused by ``formula``.

    Returns
    -------
    CVResult
        ``quantity="mean"``, arrays ``[m]`` in output units.
    """
    return _run("mean", sim, sur, settings, seed)


def estimate_variance(sim: np.ndarray, sur: np.ndarray, settings: ControlVariate = ControlVariate(), *,
                      seed: Seed = None) -> CVResult:
    """Control-variate estimate of the variance of every output (Qian et al. 2018, section 3).

    Parameters and returns as :func:`estimate_mean`; the statistic is the unbiased sample variance,
    arrays ``[m]`` in output units squared.
    """
    return _run("variance", sim, sur, settings, seed)


def estimate_covariance(sim: np.ndarray, sur: np.ndarray, settings: ControlVariate = ControlVariate(), *,
                        seed: Seed = None) -> CVResult:
    """Control-variate estimate of the covariance matrix of the outputs, entry by entry.

    Parameters and returns as :func:`estimate_mean`; the statistic is the unbiased sample covariance,
    arrays ``[m, m]`` (symmetric) in the product of the outputs' units. Memory ``n m^2``.
    """
    return _run("covariance", sim, sur, settings, seed)


# ----------------------------------------------------------------------------- the combination
def variance_of(a: np.ndarray, b: np.ndarray, k: int) -> np.ndarray:
    """``Var[Q_k] = a/k + b/(k (k - 1))`` of a U-statistic of degree <= 2 on ``k`` points."""
    return a / k + (b / (k * (k - 1)) if k > 1 else np.where(b == 0, 0.0, np.inf))


def combine(est0: np.ndarray, est1_n: np.ndarray, est1_all: np.ndarray, terms: dict[str, np.ndarray],
            n: int, n_all: int) -> dict[str, np.ndarray]:
    """The control-variate estimate, its optimal weight and variance from the ``a``, ``b`` terms.

    ``terms`` holds ``a0, b0`` (simulator), ``a1, b1`` (surrogate), ``a01, b01`` (their covariance) of
    ``Var[Q_k] = a/k + b/(k (k - 1))``; ``est0`` is the simulator's statistic on ``n`` points, ``est1_n``
    and ``est1_all`` the surrogate's on ``n`` and on ``n_all``.
    """
    t = terms
    v0 = variance_of(t["a0"], t["b0"], n)
    v1 = variance_of(t["a1"], t["b1"], n)
    v01 = variance_of(t["a01"], t["b01"], n)
    d1 = v1 - variance_of(t["a1"], t["b1"], n_all)
    d01 = v01 - variance_of(t["a01"], t["b01"], n_all)
    usable = d1 > 0
    alpha = np.where(usable, d01 / np.where(usable, d1, 1.0), 0.0)
    variance = np.maximum(v0 - alpha * d01, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        correlation = np.clip(t["a01"] / np.sqrt(t["a0"] * t["a1"]), -1.0, 1.0)
        ratio = np.where(v0 > 0, variance / np.where(v0 > 0, v0, 1.0), 1.0)
    return {
        "estimate": est0 + alpha * (est1_all - est1_n),
        "variance": variance,
        "alpha": alpha,
        "correlation": correlation,
        "variance_ratio": ratio,
        "bias": est0 - est1_n,
        "bias_variance": np.maximum(v0 + v1 - 2 * v01, 0.0),
    }


def mean_terms(y0: np.ndarray, y1: np.ndarray) -> dict[str, np.ndarray]:
    """``a, b`` terms of the sample mean on the shared points (``b = 0``), last axis any shape."""
    c0, c1 = y0 - y0.mean(axis=0), y1 - y1.mean(axis=0)
    k = y0.shape[0]
    zero = np.zeros(y0.shape[1:])
    return {"a0": (c0 * c0).sum(axis=0) / (k - 1), "a1": (c1 * c1).sum(axis=0) / (k - 1),
            "a01": (c0 * c1).sum(axis=0) / (k - 1), "b0": zero, "b1": zero, "b01": zero}


def variance_terms(y0: np.ndarray, y1: np.ndarray) -> dict[str, np.ndarray]:
    """``a, b`` terms of the unbiased sample variance of every column (plug-in moments on the shared points)."""
    c0, c1 = y0 - y0.mean(axis=0), y1 - y1.mean(axis=0)
    s0, s1, s01 = (c0 * c0).mean(axis=0), (c1 * c1).mean(axis=0), (c0 * c1).mean(axis=0)
    return {"a0": (c0**4).mean(axis=0) - s0**2, "b0": 2 * s0**2,
            "a1": (c1**4).mean(axis=0) - s1**2, "b1": 2 * s1**2,
            "a01": (c0**2 * c1**2).mean(axis=0) - s0 * s1, "b01": 2 * s01**2}


def covariance_terms(y0: np.ndarray, y1: np.ndarray) -> dict[str, np.ndarray]:
    """``a, b`` terms of the unbiased sample covariance of every pair of columns, ``[m, m]`` each."""
    k = y0.shape[0]
    c0, c1 = y0 - y0.mean(axis=0), y1 - y1.mean(axis=0)
    s00, s11, s01 = c0.T @ c0 / k, c1.T @ c1 / k, c0.T @ c1 / k
    p0, p1 = c0[:, :, None] * c0[:, None, :], c1[:, :, None] * c1[:, None, :]
    d00, d11, d01 = np.diag(s00), np.diag(s11), np.diag(s01)
    return {"a0": (p0 * p0).mean(axis=0) - s00**2, "b0": np.outer(d00, d00) + s00**2,
            "a1": (p1 * p1).mean(axis=0) - s11**2, "b1": np.outer(d11, d11) + s11**2,
            "a01": (p0 * p1).mean(axis=0) - s00 * s11, "b01": np.outer(d01, d01) + s01 * s01.T}


def _statistic(quantity: str) -> tuple[Callable[[np.ndarray], np.ndarray], Callable[..., dict[str, np.ndarray]]]:
    """The statistic of one fidelity's rows and its terms function."""
    if quantity == "mean":
        return (lambda y: y.mean(axis=0)), mean_terms
    if quantity == "variance":
        return (lambda y: y.var(axis=0, ddof=1)), variance_terms
    return (lambda y: np.cov(y, rowvar=False, ddof=1).reshape(y.shape[1], y.shape[1])), covariance_terms


def _estimate(quantity: str, y0: np.ndarray, y1: np.ndarray) -> dict[str, np.ndarray]:
    """Every number of a :class:`CVResult` but the interval, on one (re)sample."""
    stat, terms = _statistic(quantity)
    n = y0.shape[0]
    shared = y1[:n]
    est0, est1_n, est1_all = stat(y0), stat(shared), stat(y1)
    out = combine(est0, est1_n, est1_all, terms(y0, shared), n, y1.shape[0])
    return {**out, "simulator_only": est0, "surrogate_only": est1_all}


def bootstrap_rows(rng: np.random.Generator, n: int, n_all: int) -> np.ndarray:
    """One resample of the nested layout: ``n`` shared rows from ``[0, n)``, ``N - n`` from ``[n, N)``."""
    return np.concatenate([rng.integers(0, n, n), rng.integers(n, n_all, n_all - n)])


def _run(quantity: str, sim: np.ndarray, sur: np.ndarray, settings: ControlVariate, seed: Seed) -> CVResult:
    settings = settings.check()
    y0, y1 = checks.nested(sim, sur, min_rows=2 if quantity == "mean" else 3)
    n, n_all = y0.shape[0], y1.shape[0]
    out = _estimate(quantity, y0, y1)
    if settings.interval == "formula":
        se = np.sqrt(out["variance"])
        z = checks.z_value(settings.level)
        interval = np.stack([out["estimate"] - z * se, out["estimate"] + z * se], axis=-1)
    else:
        rng = checks.rng(seed)
        reps = []
        for _ in range(settings.n_resamples):
            rows = bootstrap_rows(rng, n, n_all)
            reps.append(_estimate(quantity, y0[rows[:n]], y1[rows])["estimate"])
        reps = np.stack(reps)
        se = reps.std(axis=0, ddof=1)
        tail = 50 * (1 - settings.level)
        interval = np.moveaxis(np.percentile(reps, [tail, 100 - tail], axis=0), 0, -1)
    return CVResult(
        quantity=quantity, estimate=out["estimate"], standard_error=se, interval=interval, alpha=out["alpha"],
        correlation=out["correlation"], variance_ratio=out["variance_ratio"],
        simulator_only=out["simulator_only"], surrogate_only=out["surrogate_only"], bias=out["bias"],
        bias_standard_error=np.sqrt(out["bias_variance"]), n_sim=n, n_sur=n_all,
        level=settings.level, interval_method=settings.interval,
    )
