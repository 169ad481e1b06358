"""Confidence intervals of the indices: randomised-QMC replicates, the row bootstrap, or none.

Every index here is a function of means of per-row terms, so a weighting ``[K, N]`` of the ``N``
rows gives the estimate and ``K - 1`` replicate estimates in one matrix product
(:func:`~sensitivity.analyses.indices.bootstrap.weighted_mean`). Row 0 is all ones: the point
estimate is always the pooled estimate on every row. The other rows depend on the method:

``rqmc``
    The design is ``R`` independent scramblings of a Sobol' sequence, ``N / R`` rows each, stacked
    (:func:`~sensitivity.analyses.indices.design.sobol_base` with ``replicates=R``); replicate ``r``
    weights the rows of scrambling ``r`` by ``R`` and the others by 0, i.e. it is the estimate on
    that scrambling alone. The ``R`` replicates are i.i.d. and unbiased for a mean, so a Student-t
    interval on them is valid whatever the QMC error rate (L'Ecuyer & Lemieux 2002; Owen 2013,
    ch. 17)::

        estimate -+ t_{R-1, (1 + c)/2} s / sqrt(R),   s = sd(replicates, ddof=1)

    ``s / sqrt(R)`` is the standard error of the replicates' mean; the pooled estimate equals that
    mean for a plain mean and to first order for a ratio (Sobol' indices divide by the variance),
    whose ``O(1/n)`` bias is ``R`` times smaller pooled than averaged. The budget is split: the
    method's ``n`` stays the total, each scrambling has ``n / R`` rows.
``bootstrap``
    ``n_resamples`` multinomial resamples of the rows (:mod:`~sensitivity.analyses.indices.bootstrap`):
    valid for i.i.d. designs (random draws, Morris trajectories). On a scrambled Sobol' design it
    measures the Monte Carlo error of i.i.d. points, not the (smaller) QMC error, so its intervals
    are too wide there.
``none``
    Row 0 only: no interval variables, no cost.

References
----------
L'Ecuyer, P. & Lemieux, C. (2002), Recent advances in randomized quasi-Monte Carlo methods, in
Modeling Uncertainty, Kluwer, 419-474.
Owen, A. B. (2013), Monte Carlo theory, methods and examples, ch. 17 (artowen.su.domains/mc).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from sensitivity.analyses.indices import bootstrap
from sensitivity.analyses.indices.bootstrap import IntervalKind
from sensitivity.analyses.indices.design import Seed
from sensitivity.errors import ConfigError, DataError
from sensitivity.runtime.lazy import lazy_import

stats = lazy_import("scipy.stats")

IntervalMethod = Literal["rqmc", "bootstrap", "none"]
INTERVAL_METHODS: tuple[str, ...] = ("rqmc", "bootstrap", "none")
#: The defaults of every interval of the indices (each method's ``analyze`` and the settings take these).
LEVEL = 0.95
N_RESAMPLES = 100
INTERVAL = "percentile"
REPLICATES = 8


@dataclass(frozen=True)
class IntervalPlan:
    """How one analysis makes its intervals: ``method`` and its settings (see the module docstring).

    ``bootstrap`` with ``n_resamples=0`` is ``none``. ``replicates`` only matters to ``rqmc``,
    ``n_resamples``, ``interval`` (``percentile`` | ``normal``) and ``seed`` only to the bootstrap.
    """

    method: IntervalMethod = "bootstrap"
    level: float = LEVEL
    n_resamples: int = N_RESAMPLES
    interval: IntervalKind = INTERVAL
    replicates: int = REPLICATES
    seed: Seed = None

    @property
    def kind(self) -> str:
        """The method actually used: ``none`` for a bootstrap of zero resamples."""
        return "none" if self.method == "bootstrap" and self.n_resamples == 0 else self.method

    def iid(self) -> IntervalPlan:
        """This plan on an i.i.d. design (trajectories, a stored sweep): ``rqmc`` becomes the bootstrap, ``none`` a
        bootstrap of zero resamples."""
        if self.method == "rqmc":
            return replace(self, method="bootstrap")
        return replace(self, method="bootstrap", n_resamples=0) if self.method == "none" else self

    def check(self) -> IntervalPlan:
        """Validate the settings; returns ``self``."""
        if self.method not in INTERVAL_METHODS:
            raise ConfigError(f"`intervals` must be one of {INTERVAL_METHODS}, got {self.method!r}")
        if self.kind == "bootstrap":
            bootstrap.check_bootstrap(self.n_resamples, self.level, self.interval)
        elif self.kind == "rqmc":
            check_replicates(self.replicates)
            if not 0.0 < self.level < 1.0:
                raise ConfigError(f"`level` must lie in (0, 1), got {self.level!r}")
        return self

    def weights(self, n: int) -> np.ndarray:
        """``[K, n]`` row weights: ones (the pooled estimate), then one row per replicate estimate.

        ``rqmc``: ``K = 1 + R``, the rows of scrambling ``r`` (the ``r``-th consecutive ``n / R``)
        weighted ``R``; ``bootstrap``: ``K = 1 + n_resamples``; ``none``: ``K = 1``.
        """
        if self.kind == "rqmc":
            r = self.check_rows(n)
            return np.vstack([np.ones((1, n)), r * np.repeat(np.eye(r), n // r, axis=1)])
        if self.kind == "bootstrap":
            return bootstrap.resample_weights(np.random.default_rng(self.seed), n, self.n_resamples)
        return np.ones((1, n))

    def check_rows(self, n: int) -> int:
        """The number of scramblings, if ``n`` rows split into them with >= 2 rows each (else a DataError)."""
        r = self.replicates
        if n % r or n < 2 * r:
            raise DataError(f"the {n} base rows must split into `replicates` = {r} scramblings of >= 2 rows each")
        return r

    def bounds(self, replicates: np.ndarray) -> np.ndarray:
        """``[..., 2]`` (low, high) from ``[K, ...]`` estimate-then-replicates (:meth:`weights`' rows)."""
        if self.kind == "rqmc":
            estimate, reps = replicates[0], replicates[1:]
            r = reps.shape[0]
            half = stats.t.ppf(0.5 + self.level / 2, r - 1) * np.std(reps, axis=0, ddof=1) / np.sqrt(r)
            return np.stack([estimate - half, estimate + half], axis=-1)
        return bootstrap.interval(replicates, self.level, self.interval)

    def describe(self) -> str:
        """The interval's kind, for a ``long_name``."""
        if self.kind == "rqmc":
            return (f"randomised-QMC Student-t {self.level:g} confidence interval "
                    f"over {self.replicates} scramblings")
        return f"bootstrap {self.level:g} confidence interval"

    def attrs(self) -> dict[str, object]:
        """The attributes that record how the intervals were made."""
        if self.kind == "rqmc":
            return {"intervals": "rqmc", "replicates": self.replicates, "level": self.level}
        if self.kind == "bootstrap":
            return {"intervals": "bootstrap", "n_resamples": self.n_resamples, "level": self.level,
                    "interval": self.interval}
        return {"intervals": "none"}


#: The default plan of the analyses of scrambled-Sobol' designs: Student-t intervals over the scramblings.
RQMC = IntervalPlan("rqmc")


def check_replicates(replicates: int) -> int:
    """``replicates`` if it is a power of two >= 2 (each scrambling then keeps Sobol' balance)."""
    if not isinstance(replicates, (int, np.integer)) or replicates < 2 or replicates & (replicates - 1):
        raise ConfigError(f"`replicates` must be a power of two >= 2, got {replicates!r}")
    return int(replicates)
