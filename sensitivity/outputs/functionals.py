"""Differentiable functionals of a model's outputs: forecasts such as a peak, a total, or a value on a day.

A forecast is a scalar computed from one point's outputs ``y`` (shape :attr:`OutputSpec.shape`). A
:class:`Functional` declares one: ``at`` fixes some dims to one coordinate each (a label, or a number of a
numeric dim), ``over`` names the dims it reduces, and ``kind`` says how:

* ``value`` — the element at ``at`` (every dim fixed);
* ``sum``, ``mean`` — the sum / mean over ``over``;
* ``weighted_sum`` — ``sum_k w_k y_k`` over ``over`` (``weights`` in C order of the ``over`` dims);
* ``max`` — the largest element over ``over``.

Every dim of the output is either fixed by ``at`` or reduced by ``over``, so each functional is a scalar per
point. The linear ones are ``f = w^T y`` with a fixed weight vector over the flat outputs, so their Jacobian is
``w^T dy/dx`` exactly. ``max`` is piecewise: its value and Jacobian are those of the argmax element (the
derivative wherever the argmax is unique; on a tie the first element, as ``numpy.argmax``, a one-sided
derivative).

:func:`resolve` checks a tuple of functionals against an :class:`~sensitivity.outputs.spec.OutputSpec` (a one-line
:class:`~sensitivity.errors.ConfigError` names an unknown dim or label before any model is loaded) and returns
:class:`Functionals`, which applies them to values ``[K, *out]`` and Jacobians ``[K, *out, n]``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, Sequence

import numpy as np

from sensitivity.errors import ConfigError, DataError
from sensitivity.outputs.spec import OutputDim, OutputSpec

Kind = Literal["value", "sum", "mean", "max", "weighted_sum"]
KINDS: tuple[str, ...] = ("value", "sum", "mean", "max", "weighted_sum")


@dataclass(frozen=True)
class Functional:
    """One scalar forecast of a model's outputs.

    Parameters
    ----------
    name
        Identifier of the forecast (a dataset label), e.g. ``"peak_daily_infections"``.
    kind
        ``value``, ``sum``, ``mean``, ``max`` or ``weighted_sum``.
    at
        Dim name -> the one coordinate (label or number) it is fixed at, e.g. ``{"day": 60}``.
    over
        The dims reduced by ``kind`` (empty for ``value``).
    weights
        ``weighted_sum`` only: one weight per element of the ``over`` dims (C order) [forecast units / output
        units].
    units
        UDUNITS-2 units of the forecast; empty: the output's units (a ``weighted_sum`` with weights carrying units
        must give them).
    long_name
        Description of the forecast.
    """

    name: str
    kind: Kind = "value"
    at: Mapping[str, Any] = field(default_factory=dict)
    over: tuple[str, ...] = ()
    weights: tuple[float, ...] = ()
    units: str = ""
    long_name: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "at", dict(self.at or {}))
        over = (self.over,) if isinstance(self.over, str) else tuple(self.over or ())
        object.__setattr__(self, "over", over)
        object.__setattr__(self, "weights", tuple(float(w) for w in (self.weights or ())))
        where = f"forecast {self.name!r}"
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ConfigError(f"forecast: `name` must be an identifier, got {self.name!r}")
        if self.kind not in KINDS:
            raise ConfigError(f"{where}: `kind` must be one of {list(KINDS)}, got {self.kind!r}")
        if self.kind == "value" and over:
            raise ConfigError(f"{where}: kind `value` reduces no dim, got `over` {list(over)}")
        if self.kind != "value" and not over:
            raise ConfigError(f"{where}: kind {self.kind!r} needs `over`, the dim(s) it reduces")
        if len(set(over)) != len(over) or set(over) & set(self.at):
            raise ConfigError(f"{where}: a dim is fixed or reduced once, got `at` {sorted(self.at)} and `over` "
                              f"{list(over)}")
        if (self.kind == "weighted_sum") != bool(self.weights):
            raise ConfigError(f"{where}: `weights` are given with kind `weighted_sum` and only then, got kind "
                              f"{self.kind!r} with {len(self.weights)} weights")
        if not np.all(np.isfinite(self.weights)):
            raise ConfigError(f"{where}: `weights` must be finite, got {list(self.weights)[:6]}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Functional":
        """Build from plain data ``{name, kind, at, over, weights, units, long_name}`` (a config entry)."""
        if not isinstance(data, Mapping):
            raise ConfigError(f"forecast: each entry must be a mapping {{name, kind, at, over, ...}}, got {data!r}")
        unknown = set(data) - {"name", "kind", "at", "over", "weights", "units", "long_name"}
        if unknown:
            raise ConfigError(f"forecast {data.get('name', '?')!r}: unknown key(s) {sorted(unknown)}")
        if "name" not in data:
            raise ConfigError(f"forecast {dict(data)}: needs a `name`")
        return cls(**{k: v for k, v in data.items() if v is not None})


@dataclass(frozen=True)
class Functionals:
    """Functionals resolved against an output spec: what :meth:`apply` evaluates.

    Attributes
    ----------
    names, units, long_names
        ``[F]`` per forecast.
    indices
        Per forecast, the flat (C order) positions of the outputs it reads.
    weights
        Per forecast, the weight of each of those outputs (``None`` for ``max``).
    """

    names: tuple[str, ...]
    units: tuple[str, ...]
    long_names: tuple[str, ...]
    indices: tuple[np.ndarray, ...]
    weights: tuple[np.ndarray | None, ...]
    output_shape: tuple[int, ...]

    def __len__(self) -> int:
        return len(self.names)

    def apply(self, values: np.ndarray, jacobian: np.ndarray | None = None
              ) -> tuple[np.ndarray, np.ndarray | None]:
        """The forecasts ``[K, F]`` and their Jacobians ``[K, F, n]`` at ``K`` points.

        Parameters
        ----------
        values
            ``[K, *out]`` model outputs (or ``[K, m]``, flat in C order).
        jacobian
            ``[K, *out, n]`` (or ``[K, m, n]``) their exact Jacobians; None: values only.

        Returns
        -------
        forecasts, forecast_jacobian
            ``[K, F]`` [forecast units] and ``[K, F, n]`` [forecast units / parameter units] (None without
            ``jacobian``).
        """
        k = len(values)
        m = int(np.prod(self.output_shape, dtype=int))
        flat = np.asarray(values, dtype=float).reshape(k, -1)
        if flat.shape[1] != m:
            raise DataError(f"forecasts: values must hold {self.output_shape} outputs per point, got "
                            f"{np.shape(values)[1:]}")
        jac = None if jacobian is None else np.asarray(jacobian, dtype=float).reshape(k, m, -1)
        out = np.empty((k, len(self)))
        dout = None if jac is None else np.empty((k, len(self), jac.shape[-1]))
        rows = np.arange(k)
        for f, (idx, w) in enumerate(zip(self.indices, self.weights)):
            if w is None:  # max: the argmax element's value and Jacobian row
                pick = idx[np.argmax(flat[:, idx], axis=1)]
                out[:, f] = flat[rows, pick]
                if dout is not None:
                    dout[:, f] = jac[rows, pick]
            else:
                out[:, f] = flat[:, idx] @ w
                if dout is not None:
                    dout[:, f] = np.einsum("kmn,m->kn", jac[:, idx], w)
        return out, dout


def resolve(functionals: Sequence[Functional], spec: OutputSpec) -> Functionals:
    """Check ``functionals`` against the model's outputs and resolve each to flat positions and weights.

    Raises
    ------
    ConfigError
        No functional, a duplicate name, an unknown dim, a coordinate not on its dim, a dim neither fixed nor
        reduced, a weight count that does not match, or outputs of different units in one reduction.
    """
    functionals = tuple(functionals)
    if not functionals:
        raise ConfigError("forecasts: give at least one forecast")
    names = [f.name for f in functionals]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"forecasts: names must be unique, got {dupes} more than once")
    flat_units = np.asarray(spec.flat_units(), dtype=object).reshape(spec.shape)
    order = np.arange(spec.size).reshape(spec.shape)
    indices, weights, units, long_names = [], [], [], []
    for f in functionals:
        where = f"forecast {f.name!r}"
        dims = {d.name: d for d in spec.dims}
        for dim in (*f.at, *f.over):
            if dim not in dims:
                raise ConfigError(f"{where}: {dim!r} is not an output dim; the dims are {list(dims)}")
        free = [d for d in spec.dim_names if d not in f.at and d not in f.over]
        if free:
            raise ConfigError(f"{where}: dim(s) {free} are neither fixed by `at` nor reduced by `over`")
        pick = tuple(position(dims[d], f.at[d], where) if d in f.at else slice(None) for d in spec.dim_names)
        idx = order[pick].ravel()
        if f.weights and len(f.weights) != idx.size:
            raise ConfigError(f"{where}: `weights` must hold {idx.size} entries (the {list(f.over)} elements), got "
                              f"{len(f.weights)}")
        own = sorted(set(np.ravel(flat_units[pick])))
        if len(own) > 1 and not f.units:
            raise ConfigError(f"{where}: reduces outputs of different units {own}; give `units`")
        indices.append(idx)
        weights.append(None if f.kind == "max" else
                       np.asarray(f.weights) if f.kind == "weighted_sum" else
                       np.full(idx.size, 1.0 / idx.size if f.kind == "mean" else 1.0))
        units.append(str(f.units or own[0]))
        long_names.append(f.long_name or _describe(f, spec))
    return Functionals(names=tuple(names), units=tuple(units), long_names=tuple(long_names), indices=tuple(indices),
                       weights=tuple(weights), output_shape=spec.shape)


def position(dim: OutputDim, value: Any, where: str) -> int:
    """Position of ``value`` on ``dim`` (a label, or a number of a numeric dim); a ConfigError prefixed by ``where``
    names one that is not there."""
    if dim.is_labels:
        if str(value) in dim.values:
            return dim.values.index(str(value))
    elif isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
        hits = np.flatnonzero(np.isclose(np.asarray(dim.values, dtype=float), float(value), rtol=1e-12, atol=0))
        if hits.size:
            return int(hits[0])
    shown = list(dim.values) if dim.size <= 8 else f"{dim.values[0]}..{dim.values[-1]} ({dim.size} values)"
    raise ConfigError(f"{where}: `at` {dim.name}={value!r} is not a coordinate of dim {dim.name!r} {shown}")


def _describe(f: Functional, spec: OutputSpec) -> str:
    at = ", ".join(f"{k}={v}" for k, v in f.at.items())
    what = spec.name if f.kind == "value" else f"{f.kind.replace('_', ' ')} of {spec.name} over {', '.join(f.over)}"
    return f"{what} at {at}" if at else what
