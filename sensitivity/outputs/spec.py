"""The description of a model's outputs: named scalars, a series, a field, or labels by numbers.

A surrogate's output per point is an array of shape ``OutputSpec.shape``. Each of its dims is
either *labeled* (its values are names: ``output = [H, Q]``, ``species = [prey, predator]``) or
*numeric* (numbers with units: ``day = 1..40 [day]``, ``lat``, ``lon``). The dims and their
coordinates travel unchanged into every dataset, so a model of ``(species, day)`` gets
``jacobian(sample, species, day, parameter)``.

The output contract
-------------------
- A labeled dim ``d`` is stored as an integer index dim ``d`` with the labels as the
  non-dimension coordinate ``d_name(d)`` (netCDF and the CF checker reject string dimension
  coordinates); select by label with :func:`sensitivity.datasets.select` (``select(ds, species="prey")``).
- A numeric dim is a dimension coordinate with its ``units`` and ``long_name``.
- ``output`` names a labeled dim only when it is the sole dim (a list of named scalars): an analysis
  that needs one flat axis stacks the model's dims into ``output`` (:mod:`sensitivity.outputs.axes`).
- Dim names are identifiers and may not be one of :data:`RESERVED_DIMS` (the dims of the dataset
  contract, and the keyword arguments of ``xarray``'s ``sel``/``isel``/``interp``/``reindex``, which
  would silently swallow a selection such as ``ds.sel(method="x")``).
- ``units`` is one UDUNITS-2 string for every value, or one per label of the model's only labeled dim
  (stored as ``d_units(d)``), the same along its other dims.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from sensitivity.errors import ConfigError
from sensitivity.units import check_units


#: Dim names an output may not use: the dataset contract's own dims, and the keyword arguments of
#: ``xarray``'s ``sel``, ``isel``, ``interp`` and ``reindex`` (``ds.sel(method="x")`` would not select).
RESERVED_DIMS = frozenset({
    "sample", "parameter", "parameter_i", "parameter_j", "output_i", "output_j", "bound", "iteration", "start",
    "chain", "draw", "propagation_method", "quantile", "replicate", "member",
    "method", "tolerance", "drop", "missing_dims", "indexers", "indexers_kwargs", "fill_value", "copy",
    "assume_sorted", "kwargs", "coords", "method_non_numeric",
})

#: The flat axis of named scalars, and the axis analyses stack a model's dims into.
FLAT = "output"


@dataclass(frozen=True)
class OutputDim:
    """One output dimension.

    Parameters
    ----------
    name
        Dimension name: ``output`` for named scalars, else e.g. ``species``, ``day``, ``lat``, ``lon``.
    values
        Coordinate values: all strings (a labeled dim) or all numbers (a numeric dim).
    units
        UDUNITS-2 units of a numeric coordinate (e.g. ``"day"``, ``"degrees_north"``); unused for labels.
    long_name
        Description of the coordinate.
    """

    name: str
    values: tuple
    units: str = "1"
    long_name: str = ""

    @property
    def is_labels(self) -> bool:
        """True when the values are names (``species = [prey, predator]``), not numbers."""
        return bool(self.values) and all(isinstance(v, str) for v in self.values)

    @property
    def size(self) -> int:
        return len(self.values)

    def check(self, sole: bool) -> None:
        """Raise a one-line :class:`ConfigError` for a dim the dataset contract cannot hold.

        ``sole``: this is the output's only dim (the one case where ``output`` may name it).
        """
        where = f"output dim {self.name!r}"
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ConfigError(f"output: dim `name` must be an identifier, got {self.name!r}")
        if self.name in RESERVED_DIMS:
            raise ConfigError(f"{where}: `name` {self.name!r} is reserved (a dim of the result datasets or an "
                              f"argument of xarray's sel/isel/interp/reindex); rename it, e.g. {self.name}s")
        if self.size == 0:
            raise ConfigError(f"{where}: has no coordinate values")
        strings = [isinstance(v, str) for v in self.values]
        if any(strings) and not all(strings):
            raise ConfigError(f"{where}: `values` must be all labels or all numbers, got {list(self.values)[:6]}")
        if self.is_labels:
            if len(set(self.values)) != self.size:
                raise ConfigError(f"{where}: labels must be unique, got {list(self.values)}")
        else:
            bad = [v for v in self.values if isinstance(v, bool) or not isinstance(v, (int, float, np.number))
                   or not np.isfinite(v)]
            if bad:
                raise ConfigError(f"{where}: `values` must be finite numbers or labels, got {bad[0]!r}")
            check_units(self.units, where=f"{where}: `units`")
            if self.name == "time" and " since " not in self.units:
                raise ConfigError(f"{where}: CF keeps a dim named `time` for instants, units '<unit> since <epoch>' "
                                  f"(e.g. 'days since 2020-01-01'), got units {self.units!r}; name a duration axis "
                                  f"after what it counts, e.g. `day` or `lead_time`")
        if self.name == FLAT and not (sole and self.is_labels):
            raise ConfigError(f"{where}: the name `output` is kept for a sole dim of named scalars (it is the flat "
                              f"axis analyses stack into); name this dim after what it holds, e.g. `variable`")


@dataclass(frozen=True)
class OutputSpec:
    """What a model returns per point.

    Parameters
    ----------
    name
        Variable name of the values in datasets (e.g. ``"new_infections"``).
    units
        One UDUNITS-2 string for every element, or one per label of the only labeled dim.
    dims
        The output dimensions, outermost first.
    long_name
        Description written as the CF ``long_name``.
    """

    name: str = "y"
    units: str | tuple[str, ...] = "1"
    dims: tuple[OutputDim, ...] = field(default_factory=tuple)
    long_name: str = "model output"

    def __post_init__(self) -> None:
        object.__setattr__(self, "dims", tuple(self.dims))
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ConfigError(f"output: `name` must be an identifier, got {self.name!r}")
        names = [d.name for d in self.dims]
        if len(set(names)) != len(names):
            raise ConfigError(f"output: dim names must be unique, got {names}")
        for d in self.dims:
            d.check(sole=len(self.dims) == 1)
        if isinstance(self.units, str):
            check_units(self.units, where="output: `units`")
            return
        object.__setattr__(self, "units", tuple(self.units))
        labeled = [d for d in self.dims if d.is_labels]
        if len(labeled) != 1 or len(self.units) != labeled[0].size:
            raise ConfigError(f"output: a list of units needs exactly one labeled dim of the same length, got "
                              f"{len(self.units)} units for dims {names}")
        for label, u in zip(labeled[0].values, self.units):
            check_units(u, where=f"output {label!r}: `units`")

    @property
    def units_dim(self) -> OutputDim | None:
        """The labeled dim whose labels have units of their own (``units`` is a list), else None."""
        return None if isinstance(self.units, str) else next(d for d in self.dims if d.is_labels)

    @property
    def is_flat(self) -> bool:
        """True when the model's own dims are the flat axis already: one ``output`` dim of named scalars."""
        return self.dim_names == (FLAT,)

    @property
    def shape(self) -> tuple[int, ...]:
        """Per-point output shape."""
        return tuple(d.size for d in self.dims)

    @property
    def size(self) -> int:
        """Number of scalar outputs per point."""
        return int(np.prod(self.shape, dtype=int))

    @property
    def dim_names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self.dims)

    def flat_units(self) -> list[str]:
        """Units of each scalar output, flattened in C order."""
        if isinstance(self.units, str):
            return [self.units] * self.size
        axis = self.dims.index(self.units_dim)
        per_label = np.asarray(self.units, dtype=object).reshape([-1 if k == axis else 1 for k in range(len(self.dims))])
        return [str(u) for u in np.broadcast_to(per_label, self.shape).ravel()]

    def flat_names(self) -> list[str]:
        """A readable label of each scalar output, flattened in C order (e.g. ``"cases[species=prey,day=3]"``)."""
        if len(self.dims) == 1 and self.dims[0].is_labels:
            return [str(v) for v in self.dims[0].values]
        grids = np.meshgrid(*[np.asarray(d.values) for d in self.dims], indexing="ij")
        flat = [g.ravel() for g in grids]
        return [
            f"{self.name}[" + ",".join(f"{d.name}={_fmt(v[k])}" for d, v in zip(self.dims, flat)) + "]"
            for k in range(self.size)
        ]

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (YAML/JSON-safe), inverse of :meth:`from_dict`."""
        return {
            "name": self.name,
            "long_name": self.long_name,
            "units": self.units if isinstance(self.units, str) else list(self.units),
            "dims": [
                {"name": d.name, "values": [_plain(v) for v in d.values], "units": d.units, "long_name": d.long_name}
                for d in self.dims
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "OutputSpec":
        """Build from plain data: ``{name, units, long_name, dims: [{name, values | {start, stop, step}, units}]}``
        or, for named scalars, ``{name, units, names: [...]}``; with neither, one scalar per point (one named output
        labelled ``name``)."""
        data = dict(data)
        unknown = set(data) - {"name", "units", "long_name", "dims", "names"}
        if unknown:
            raise ConfigError(f"output: unknown key(s) {sorted(unknown)}")
        if data.get("names") and data.get("dims"):
            raise ConfigError("output: give either `names` (named scalars) or `dims`, not both")
        if data.get("names"):
            dims = (OutputDim(FLAT, tuple(str(n) for n in data["names"])),)
        elif data.get("dims"):
            dims = tuple(_dim_from_dict(d) for d in data["dims"])
        else:  # one scalar per point: one named output, labelled by the output's name
            dims = (OutputDim(FLAT, (str(data.get("name", "y")),)),)
        units = data.get("units", "1")
        return cls(
            name=data.get("name", "y"),
            units=units if isinstance(units, str) else tuple(units),
            dims=dims,
            long_name=data.get("long_name") or "model output",
        )

    @classmethod
    def generic(cls, shape: Sequence[int]) -> "OutputSpec":
        """A description for an unlabeled output of ``shape``: ``output`` labels ``y0..`` or index dims."""
        if len(shape) == 1:
            return cls(dims=(OutputDim(FLAT, tuple(f"y{i}" for i in range(shape[0]))),))
        return cls(dims=tuple(OutputDim(f"dim_{k}", tuple(range(n))) for k, n in enumerate(shape)))


def _dim_from_dict(d: Any) -> OutputDim:
    if not isinstance(d, Mapping):
        raise ConfigError(f"output: each entry of `dims` must be a mapping {{name, values, units, long_name}}, got "
                          f"{d!r} (e.g. {{name: day, values: {{start: 1, stop: 41}}, units: day}})")
    d = dict(d)
    unknown = set(d) - {"name", "values", "units", "long_name"}
    if unknown:
        raise ConfigError(f"output dim {d.get('name', '?')!r}: unknown key(s) {sorted(unknown)}")
    if "name" not in d or "values" not in d:
        raise ConfigError(f"output dim {d}: needs `name` and `values`")
    values = d["values"]
    if isinstance(values, Mapping):
        try:
            values = np.arange(values["start"], values["stop"], values.get("step", 1))
        except KeyError as key:
            raise ConfigError(f"output dim {d['name']!r}: `values` range needs {key}") from None
        except TypeError:
            raise ConfigError(f"output dim {d['name']!r}: `values` range {{start, stop, step}} must be numbers, "
                              f"got {dict(d['values'])}") from None
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
        raise ConfigError(f"output dim {d['name']!r}: `values` must be a list (labels or numbers) or "
                          f"{{start, stop, step}}, got {values!r}")
    return OutputDim(str(d["name"]), tuple(_plain(v) for v in values), d.get("units", "1"), d.get("long_name", ""))


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _fmt(value: Any) -> str:
    return f"{value:g}" if isinstance(value, (float, np.floating)) else str(value)
