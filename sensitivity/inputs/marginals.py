"""Marginal input distributions: any continuous :mod:`scipy.stats` distribution, optionally truncated.

A parameter's distribution is named by its :mod:`scipy.stats` name with that distribution's own
parameters (its shapes, ``loc`` and ``scale``; ``beta`` takes ``a, b, loc, scale``, ``gumbel_r``
takes ``loc, scale``, ``lognorm`` takes ``s, loc, scale``, ...), and may be truncated to
``[lower, upper]`` (either side may be open). :func:`marginal` validates the parameters, naming
the field at fault, and returns a frozen distribution; :class:`Truncated` is the truncated law,
with quantile functions accurate in both tails (the lower tail through ``ppf``, the upper tail
through ``isf`` of the untruncated law) and moments by quadrature.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np

from sensitivity.errors import ConfigError
from sensitivity.runtime.lazy import lazy_import

stats = lazy_import("scipy.stats")


def scipy_distribution(kind: str, where: str) -> Any:
    """The :class:`scipy.stats.rv_continuous` named ``kind``, or a :class:`ConfigError`."""
    dist = getattr(stats, kind, None) if isinstance(kind, str) else None
    if not isinstance(dist, stats.rv_continuous):
        raise ConfigError(f"{where}: distribution `kind` must name a continuous scipy.stats distribution "
                          f"(e.g. norm, gumbel_r, beta, lognorm, weibull_min, gamma), got {kind!r}")
    return dist


def parameter_names(dist: Any) -> tuple[str, ...]:
    """The parameters of a scipy distribution: its shapes, then ``loc`` and ``scale``."""
    shapes = tuple(s.strip() for s in (dist.shapes or "").split(",") if s.strip())
    return (*shapes, "loc", "scale")


def marginal(kind: str, params: Mapping[str, Any], truncate: tuple[float | None, float | None] | None,
             where: str) -> Any:
    """A frozen scipy distribution ``kind(**params)``, truncated to ``truncate`` when given.

    Parameters
    ----------
    kind
        A continuous :mod:`scipy.stats` distribution name.
    params
        Its shapes (all required), ``loc`` (default 0) and ``scale`` (default 1) [parameter units].
    truncate
        ``(lower, upper)`` [parameter units]; ``None`` for an open side.
    where
        Prefix of the error messages, e.g. ``"parameter 'Q'"``.

    Raises
    ------
    ConfigError
        An unknown kind, a missing, unknown or non-finite parameter, parameters outside the
        distribution's domain, or a truncation that is not ``lower < upper`` or holds no mass.
    """
    dist = scipy_distribution(kind, where)
    names = parameter_names(dist)
    for key, value in params.items():
        if key not in names:
            raise ConfigError(f"{where}: `{key}` is not a parameter of {kind!r} (it takes {', '.join(names)})")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(f"{where}: distribution `{key}` must be a finite number, got {value!r}")
    missing = [s for s in names[:-2] if s not in params]
    if missing:
        raise ConfigError(f"{where}: distribution {kind!r} needs `{'`, `'.join(missing)}` "
                          f"(it takes {', '.join(names)}), got {sorted(params)}")
    if params.get("scale", 1.0) <= 0:
        raise ConfigError(f"{where}: distribution `scale` must be > 0, got {params['scale']}")
    frozen = dist(**params)
    if not np.isfinite(frozen.ppf(0.5)):
        shown = ", ".join(f"{k}={v}" for k, v in params.items())
        raise ConfigError(f"{where}: {kind!r} rejects its parameters ({shown}): outside its domain")
    return frozen if truncate is None else truncated(frozen, truncate, where)


def truncated(base: Any, truncate: Any, where: str) -> Any:
    """``base`` restricted to ``truncate = (lower, upper)`` (``None`` = open side), renormalised."""
    if not isinstance(truncate, (list, tuple)) or len(truncate) != 2:
        raise ConfigError(f"{where}: `truncate` must be [lower, upper] (null for an open side), got {truncate!r}")
    support = base.support()
    bounds = []
    for side, value, default in (("lower", truncate[0], support[0]), ("upper", truncate[1], support[1])):
        if value is None:
            bounds.append(float(default))
        elif isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(f"{where}: `truncate` {side} bound must be a finite number or null, got {value!r}")
        else:
            bounds.append(float(value))
    lower, upper = max(bounds[0], support[0]), min(bounds[1], support[1])
    if not lower < upper or not base.cdf(upper) - base.cdf(lower) > 0:
        raise ConfigError(f"{where}: `truncate` {list(truncate)} leaves no probability mass of "
                          f"{base.dist.name} (support [{support[0]}, {support[1]}])")
    if base.dist.name == "norm":  # scipy's own truncated normal: exact moments
        mean, std = base.mean(), base.std()
        return stats.truncnorm((lower - mean) / std, (upper - mean) / std, loc=mean, scale=std)
    return Truncated(base, lower, upper)


class Truncated:
    """A frozen scipy distribution restricted to ``[lower, upper]`` (infinite for an open side).

    Offers the frozen-distribution methods the analyses use (``ppf``, ``isf``, ``cdf``, ``sf``,
    ``pdf``, ``logpdf``, ``support``, ``mean``, ``var``, ``std``, ``median``); ``dist`` is the untruncated
    family, so ``dist.name`` names it.
    """

    def __init__(self, base: Any, lower: float, upper: float) -> None:
        self.base, self.lower, self.upper = base, float(lower), float(upper)
        self.dist = base.dist
        self._cdf_lower, self._sf_upper = float(base.cdf(lower)), float(base.sf(upper))
        self._mass = float(base.sf(lower)) - self._sf_upper if self._cdf_lower > 0.5 else \
            float(base.cdf(upper)) - self._cdf_lower
        self._moments: tuple[float, float] | None = None

    def support(self) -> tuple[float, float]:
        return self.lower, self.upper

    def ppf(self, q: Any) -> np.ndarray:
        x = self.base.ppf(self._cdf_lower + np.asarray(q, dtype=float) * self._mass)
        return np.clip(x, self.lower, self.upper)

    def isf(self, p: Any) -> np.ndarray:
        x = self.base.isf(self._sf_upper + np.asarray(p, dtype=float) * self._mass)
        return np.clip(x, self.lower, self.upper)

    def cdf(self, x: Any) -> np.ndarray:
        x = np.clip(np.asarray(x, dtype=float), self.lower, self.upper)
        return np.clip((self.base.cdf(x) - self._cdf_lower) / self._mass, 0.0, 1.0)

    def sf(self, x: Any) -> np.ndarray:
        x = np.clip(np.asarray(x, dtype=float), self.lower, self.upper)
        return np.clip((self.base.sf(x) - self._sf_upper) / self._mass, 0.0, 1.0)

    def pdf(self, x: Any) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        return np.where((x >= self.lower) & (x <= self.upper), self.base.pdf(x) / self._mass, 0.0)

    def logpdf(self, x: Any) -> np.ndarray:
        x = np.asarray(x, dtype=float)
        inside = (x >= self.lower) & (x <= self.upper)
        return np.where(inside, self.base.logpdf(np.where(inside, x, self.lower)) - math.log(self._mass), -np.inf)

    def median(self) -> float:
        return float(self.ppf(0.5))

    def mean(self) -> float:
        return self._mean_std()[0]

    def std(self) -> float:
        return self._mean_std()[1]

    def var(self) -> float:
        return self._mean_std()[1] ** 2

    def _mean_std(self) -> tuple[float, float]:
        if self._moments is None:
            expect = self.base.expect
            mean = expect(lambda x: x, lb=self.lower, ub=self.upper, conditional=True)
            var = expect(lambda x: (x - mean) ** 2, lb=self.lower, ub=self.upper, conditional=True)
            self._moments = (float(mean), float(math.sqrt(var)))
        return self._moments


def frozen_parameters(frozen: Any) -> dict[str, float]:
    """A frozen scipy distribution's parameters by name: its shapes, then ``loc`` and ``scale``."""
    names = parameter_names(frozen.dist)
    values = {"loc": 0.0, "scale": 1.0, **dict(zip(names, frozen.args)), **frozen.kwds}
    return {name: float(values[name]) for name in names}


def log_mass(base: Any, lower: float, upper: float) -> float:
    """``log P(lower <= X <= upper)`` of a frozen scipy distribution, accurate in both tails.

    From the log cdf where the interval lies in the lower half of the law, else from the log survival
    function (as :class:`Truncated` takes its mass), as ``log F(b) + log1p(-exp(log F(a) - log F(b)))``:
    an interval far in either tail keeps its relative accuracy (``log_ndtr``-based for the normal).
    """
    if float(base.cdf(lower)) > 0.5:
        near, far = float(base.logsf(lower)), float(base.logsf(upper))
    else:
        near, far = float(base.logcdf(upper)), float(base.logcdf(lower))
    return near + math.log1p(-math.exp(far - near)) if far > -math.inf else near
