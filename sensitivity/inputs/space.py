"""The parameter space: names, units, bounds, nominal values and input distributions.

A :class:`ParameterSpace` is the one description of the model inputs that every
grid, engine call, analysis and dataset shares. It is immutable and validated on
construction, so a bad bound or an unknown unit fails before any work starts,
with a message that names the parameter and the value.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Sequence

import numpy as np

from sensitivity.inputs.covariance import checked_covariance
from sensitivity.errors import ConfigError
from sensitivity.units import check_units

Scale = Literal["linear", "log"]

#: The original kinds, with the parameters each takes (besides the bounds, used by uniform/truncnormal/triangular);
#: any other kind is a scipy.stats name.
_DISTRIBUTION_PARAMS: dict[str, tuple[str, ...]] = {
    "uniform": (),
    "normal": ("mean", "std"),
    "truncnormal": ("mean", "std"),
    "lognormal": ("median", "sigma_log"),
    "triangular": ("mode",),
}
_ON_BOUNDS = ("uniform", "truncnormal", "triangular")
_LOG_FAMILIES = ("lognorm", "loguniform", "reciprocal")  # laws of log x on x > 0 (without a loc shift)

#: Quantiles that stand in for an infinite end of the support where a grid needs finite bounds.
BOUND_QUANTILES: tuple[float, float] = (0.001, 0.999)


@dataclass(frozen=True)
class Distribution:
    """A marginal input distribution of one parameter, in physical units.

    Parameters
    ----------
    kind
        Any continuous :mod:`scipy.stats` distribution by name, with its own parameters
        (shapes, ``loc``, ``scale``): ``norm`` (``loc``, ``scale``), ``gumbel_r`` (``loc``,
        ``scale``), ``beta`` (``a``, ``b``, ``loc``, ``scale``), ``lognorm`` (``s``, ``loc``,
        ``scale``), ``weibull_min`` (``c``, ...), ``gamma`` (``a``, ...), ``uniform`` (``loc``,
        ``scale``) ... Or one of the original kinds: ``uniform`` without parameters (on the
        parameter's bounds); ``normal`` (``mean``, ``std``); ``truncnormal`` (``mean``, ``std``)
        truncated to the bounds; ``lognormal`` (``median``, ``sigma_log`` = standard deviation of
        the natural log); ``triangular`` (``mode``) on the bounds.
    params
        The kind's parameters, by name.
    truncate
        Optional ``(lower, upper)`` truncation, ``None`` for an open side (one-sided truncation).
    """

    kind: str = "uniform"
    params: Mapping[str, float] = field(default_factory=dict)
    truncate: tuple[float | None, float | None] | None = None

    @property
    def needs_bounds(self) -> bool:
        """True for the original kinds defined on the parameter's bounds (``low``, ``high`` required)."""
        return self.kind in _ON_BOUNDS and (self.kind != "uniform" or not self.params)

    @property
    def of_log(self) -> bool:
        """True for a law of ``log x`` with its support on ``x > 0``: ``lognorm`` (``lognormal``), ``loguniform``
        (``reciprocal``), without a ``loc`` shift. Such an input is fitted and sampled in ``log x`` by default."""
        name, params = self.scipy_form(1.0, 2.0)
        return name in _LOG_FAMILIES and not params.get("loc", 0.0)

    def scipy_form(self, low: float | None = None, high: float | None = None) -> tuple[str, dict[str, float]]:
        """``(scipy name, its parameters)`` of the untruncated law; ``low``/``high`` for :attr:`needs_bounds`."""
        p = dict(self.params)
        if self.kind == "uniform" and not p:
            return "uniform", {"loc": low, "scale": high - low}
        if self.kind in ("normal", "truncnormal"):
            return "norm", {"loc": p["mean"], "scale": p["std"]}
        if self.kind == "lognormal":
            return "lognorm", {"s": p["sigma_log"], "scale": p["median"]}
        if self.kind == "triangular":
            return "triang", {"c": (p["mode"] - low) / (high - low), "loc": low, "scale": high - low}
        return self.kind, p

    def frozen(self, low: float | None = None, high: float | None = None, *, where: str = "distribution") -> Any:
        """The :mod:`scipy.stats` frozen distribution (truncated when asked), on bounds ``[low, high]``."""
        from sensitivity.inputs import marginals

        name, params = self.scipy_form(low, high)
        truncate = (low, high) if self.kind == "truncnormal" else self.truncate
        return marginals.marginal(name, params, truncate, where)


@dataclass(frozen=True)
class Parameter:
    """One model input.

    Parameters
    ----------
    name
        Identifier used in configs and datasets (unique within a space).
    units
        UDUNITS-2 units string, e.g. ``"day-1"``, ``"day"``, ``"1"``.
    low, high
        Finite bounds in physical units, ``low < high``: the range of grids, sweeps and
        calibration, where the model is valid. Derived from the distribution when omitted, side by
        side: the truncation bound when that side is truncated, the end of the support when the
        support is bounded on both sides (beta, uniform, triang), else the :data:`BOUND_QUANTILES`
        quantile (0.1 % or 99.9 %; e.g. both sides of a lognormal). Required by the original kinds defined on the bounds (``uniform``
        without parameters, ``truncnormal``, ``triangular``) and when there is no distribution.
    nominal
        Reference value inside the bounds; the midpoint (geometric midpoint for
        ``scale="log"``) when omitted.
    long_name
        Human-readable description, written as the CF ``long_name``.
    scale
        ``"log"`` spaces factorial levels geometrically and requires ``low > 0``.
    distribution
        Input distribution for propagation and global indices; uniform on the
        bounds when omitted.
    """

    name: str
    units: str
    low: float | None = None
    high: float | None = None
    nominal: float | None = None
    long_name: str = ""
    scale: Scale = "linear"
    distribution: Distribution = field(default_factory=Distribution)

    def __post_init__(self) -> None:
        where = f"parameter {self.name!r}"
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ConfigError(f"parameter name must be an identifier, got {self.name!r}")
        self._derive_bounds(where)
        for attr in ("low", "high"):
            value = getattr(self, attr)
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigError(f"{where}: `{attr}` must be a finite number, got {value!r}")
        if not self.low < self.high:
            raise ConfigError(f"{where}: bounds must be low < high, got ({self.low}, {self.high})")
        if self.scale not in ("linear", "log"):
            raise ConfigError(f"{where}: `scale` must be 'linear' or 'log', got {self.scale!r}")
        if self.scale == "log" and self.low <= 0:
            raise ConfigError(f"{where}: scale 'log' needs low > 0, got low={self.low}")
        if self.nominal is None:
            mid = math.sqrt(self.low * self.high) if self.scale == "log" else 0.5 * (self.low + self.high)
            object.__setattr__(self, "nominal", float(mid))
        elif not (isinstance(self.nominal, (int, float)) and self.low <= self.nominal <= self.high):
            raise ConfigError(
                f"{where}: `nominal` must lie in [{self.low}, {self.high}], got {self.nominal!r}"
            )
        check_units(self.units, where=f"{where}: `units`")
        _check_distribution(self.distribution, self.low, self.high, where)

    def frozen_distribution(self) -> Any:
        """The parameter's input distribution as a :mod:`scipy.stats` frozen object."""
        return self.distribution.frozen(self.low, self.high, where=f"parameter {self.name!r}")

    def _derive_bounds(self, where: str) -> None:
        """Fill an omitted ``low``/``high`` from the distribution (see the class docstring)."""
        if self.low is not None and self.high is not None:
            return
        if self.distribution.needs_bounds:
            missing = "low" if self.low is None else "high"
            raise ConfigError(f"{where}: `{missing}` is required for distribution {self.distribution.kind!r} "
                              "as given (it is defined on the bounds)")
        frozen = self.distribution.frozen(where=where)
        support = frozen.support()
        bounded = all(math.isfinite(end) for end in support)
        truncate = self.distribution.truncate or (None, None)
        for i, (attr, q) in enumerate((("low", BOUND_QUANTILES[0]), ("high", BOUND_QUANTILES[1]))):
            if getattr(self, attr) is None:
                end = support[i] if bounded or truncate[i] is not None else frozen.ppf(q)
                object.__setattr__(self, attr, float(end))


def _check_distribution(dist: Distribution, low: float, high: float, where: str) -> None:
    if dist.kind in _DISTRIBUTION_PARAMS and (dist.kind != "uniform" or not dist.params):
        expected = set(_DISTRIBUTION_PARAMS[dist.kind])
        if set(dist.params) != expected:
            raise ConfigError(f"{where}: distribution {dist.kind!r} takes parameters {sorted(expected)}, "
                              f"got {sorted(dist.params)}")
        for key, value in dist.params.items():
            if not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigError(f"{where}: distribution `{key}` must be a finite number, got {value!r}")
        for key in ("std", "sigma_log", "median"):
            if key in dist.params and dist.params[key] <= 0:
                raise ConfigError(f"{where}: distribution `{key}` must be > 0, got {dist.params[key]}")
        if dist.kind == "triangular" and not low <= dist.params["mode"] <= high:
            raise ConfigError(f"{where}: triangular `mode` must lie in [{low}, {high}], got {dist.params['mode']}")
    if dist.kind == "uniform" and not dist.params and dist.truncate is None:
        return  # uniform on the bounds (the default): valid as low < high are finite; no scipy.stats to import
    dist.frozen(low, high, where=where)  # any scipy kind: its name, parameters and truncation


@dataclass(frozen=True)
class ParameterSpace:
    """An ordered, validated set of :class:`Parameter` with optional input correlation.

    Parameters
    ----------
    parameters
        The inputs, in the order of the model's input vector.
    correlation
        Optional ``[n, n]`` correlation matrix of the inputs, applied through a
        Gaussian copula (symmetric, unit diagonal, positive definite).
    """

    parameters: tuple[Parameter, ...]
    correlation: np.ndarray | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "parameters", tuple(self.parameters))
        if not self.parameters:
            raise ConfigError("space: `parameters` must name at least one parameter, got none")
        seen: set[str] = set()
        for p in self.parameters:
            if p.name in seen:
                raise ConfigError(f"space: parameter names must be unique, got {p.name!r} twice")
            seen.add(p.name)
        if self.correlation is not None:
            object.__setattr__(self, "correlation", _checked_correlation(self.correlation, len(self.parameters)))

    @classmethod
    def from_records(
        cls, records: Sequence[Mapping[str, Any]], correlation: Sequence[Sequence[float]] | None = None
    ) -> "ParameterSpace":
        """Build a space from plain mappings (e.g. a config list), validating each field."""
        parameters = []
        for i, record in enumerate(records):
            record = dict(record)
            dist = record.pop("distribution", None) or {}
            dist = dict(dist)
            truncate = dist.pop("truncate", None)
            try:
                distribution = Distribution(kind=dist.pop("kind", "uniform"), params=dist,
                                            truncate=tuple(truncate) if isinstance(truncate, list) else truncate)
                parameters.append(Parameter(distribution=distribution, **record))
            except TypeError as err:  # unknown or missing field
                raise ConfigError(f"space: parameter #{i} ({record.get('name', '?')!r}): {err}") from None
        return cls(tuple(parameters), None if correlation is None else np.asarray(correlation, dtype=float))

    def records(self) -> dict[str, Any]:
        """The space as a config node, ``{parameters: [...], correlation: ...}`` of plain values: the inverse of
        :meth:`from_records` (every bound and nominal written out, as derived), so a space read from another
        source (a SALib problem file) is recorded in a result's config as the space it computed with."""
        def record(p: Parameter) -> dict[str, Any]:
            d = p.distribution
            distribution = {"kind": d.kind, **{k: float(v) for k, v in d.params.items()}}
            if d.truncate is not None:
                distribution["truncate"] = [None if t is None else float(t) for t in d.truncate]
            return {"name": p.name, "units": p.units, "low": float(p.low), "high": float(p.high),
                    "nominal": float(p.nominal), "long_name": p.long_name, "scale": p.scale,
                    "distribution": distribution}

        return {"parameters": [record(p) for p in self.parameters],
                "correlation": None if self.correlation is None else np.asarray(self.correlation).tolist()}

    @property
    def names(self) -> list[str]:
        """Parameter names in input order."""
        return [p.name for p in self.parameters]

    @property
    def units(self) -> list[str]:
        """Parameter units in input order."""
        return [p.units for p in self.parameters]

    @property
    def bounds(self) -> np.ndarray:
        """``[n, 2]`` array of (low, high) in physical units."""
        return np.array([[p.low, p.high] for p in self.parameters], dtype=float)

    def moments(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean ``[n]`` and covariance ``[n, n]`` of the inputs: each marginal's mean and standard deviation (scipy,
        after truncation), correlated by :attr:`correlation`. The joint law's own when every marginal is normal;
        otherwise the copula's correlation stands for theirs. NaN where a marginal has no finite moment."""
        marginals = [p.frozen_distribution() for p in self.parameters]
        mean = np.array([m.mean() for m in marginals], dtype=float)
        std = np.array([m.std() for m in marginals], dtype=float)
        correlation = np.eye(len(mean)) if self.correlation is None else np.asarray(self.correlation, dtype=float)
        return mean, correlation * np.outer(std, std)

    @property
    def nominal(self) -> np.ndarray:
        """``[n]`` nominal point in physical units."""
        return np.array([p.nominal for p in self.parameters], dtype=float)

    def __len__(self) -> int:
        return len(self.parameters)

    def index(self, name: str) -> int:
        """Position of parameter ``name``; a clear error when it is not in the space."""
        try:
            return self.names.index(name)
        except ValueError:
            raise ConfigError(f"unknown parameter {name!r}; the space has {self.names}") from None

    def check_points(self, points: np.ndarray, *, what: str = "points") -> np.ndarray:
        """Validate an ``[N, n]`` array of points: shape, finiteness, bounds (a point is named by its 0-based index
        and by its 1-based data row, as the readers of files name rows)."""
        x = np.asarray(points, dtype=float)
        if x.ndim != 2 or x.shape[1] != len(self):
            raise ConfigError(f"{what}: expected shape [N, {len(self)}], got {list(x.shape)}")
        bad = ~np.isfinite(x)
        if bad.any():
            i, j = np.argwhere(bad)[0]
            raise ConfigError(f"{what}: {self.names[j]!r} is not finite at point {i} (data row {i + 1}): {x[i, j]}")
        lo, hi = self.bounds.T
        outside = (x < lo) | (x > hi)
        if outside.any():
            i, j = np.argwhere(outside)[0]
            raise ConfigError(
                f"{what}: {self.names[j]!r} = {x[i, j]} at point {i} (data row {i + 1}) is outside its bounds "
                f"[{lo[j]}, {hi[j]}]"
            )
        return x


def _checked_correlation(matrix: np.ndarray, n: int) -> np.ndarray:
    c, _ = checked_covariance(matrix, n, "space: `correlation`")
    if not np.allclose(np.diag(c), 1.0):
        raise ConfigError(f"space: `correlation` must have a unit diagonal, got {np.diag(c).tolist()}")
    return c
