"""The description of a model's outputs: named scalars, a time series or a field.

A surrogate's output per point is an array of shape ``OutputSpec.shape``. Its
dims (``output`` for a list of named scalars; ``time``, ``lat``, ``lon`` ... for a
series or a field) and their coordinates travel into every dataset, so a
time-series model gets ``jacobian(sample, time, parameter)``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from sensitivity.errors import ConfigError
from sensitivity.units import check_units


@dataclass(frozen=True)
class OutputDim:
    """One output dimension.

    Parameters
    ----------
    name
        Dimension name: ``output`` for named scalars, else e.g. ``time``, ``lat``, ``lon``.
    values
        Coordinate values (numbers), or the labels when ``name == "output"``.
    units
        UDUNITS-2 units of the numeric coordinate (e.g. ``"day"``, ``"degrees_north"``).
    long_name
        Description of the coordinate.
    """

    name: str
    values: tuple
    units: str = "1"
    long_name: str = ""

    @property
    def is_labels(self) -> bool:
        """True for the ``output`` dim of named scalars."""
        return self.name == "output"

    @property
    def size(self) -> int:
        return len(self.values)


@dataclass(frozen=True)
class OutputSpec:
    """What a model returns per point.

    Parameters
    ----------
    name
        Variable name of the values in datasets (e.g. ``"new_infections"``).
    units
        One UDUNITS-2 string for every element, or one per label of an ``output`` dim.
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
        if not self.name.isidentifier():
            raise ConfigError(f"output: `name` must be an identifier, got {self.name!r}")
        names = [d.name for d in self.dims]
        if len(set(names)) != len(names):
            raise ConfigError(f"output: dim names must be unique, got {names}")
        for d in self.dims:
            if d.size == 0:
                raise ConfigError(f"output: dim {d.name!r} has no coordinate values")
            if d.is_labels:
                if len(set(d.values)) != d.size:
                    raise ConfigError(f"output: output names must be unique, got {list(d.values)}")
            else:
                check_units(d.units, where=f"output dim {d.name!r}: `units`")
        if isinstance(self.units, str):
            check_units(self.units, where="output: `units`")
        else:
            object.__setattr__(self, "units", tuple(self.units))
            if len(self.dims) != 1 or not self.dims[0].is_labels or len(self.units) != self.dims[0].size:
                raise ConfigError(
                    f"output: a list of units needs one `output` dim of the same length, got {len(self.units)} units "
                    f"for dims {names}"
                )
            for label, u in zip(self.dims[0].values, self.units):
                check_units(u, where=f"output {label!r}: `units`")

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
        return list(self.units) if isinstance(self.units, tuple) else [self.units] * self.size

    def flat_names(self) -> list[str]:
        """A readable label of each scalar output, flattened in C order (e.g. ``"cases[time=3]"``)."""
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
        or, for named scalars, ``{name, units, names: [...]}``."""
        data = dict(data)
        unknown = set(data) - {"name", "units", "long_name", "dims", "names"}
        if unknown:
            raise ConfigError(f"output: unknown key(s) {sorted(unknown)}")
        if data.get("names") and data.get("dims"):
            raise ConfigError("output: give either `names` (named scalars) or `dims`, not both")
        if data.get("names"):
            dims = (OutputDim("output", tuple(str(n) for n in data["names"]), long_name="output"),)
        else:
            dims = tuple(_dim_from_dict(d) for d in data.get("dims") or ())
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
            return cls(dims=(OutputDim("output", tuple(f"y{i}" for i in range(shape[0]))),))
        return cls(dims=tuple(OutputDim(f"dim_{k}", tuple(range(n))) for k, n in enumerate(shape)))


def _dim_from_dict(d: Mapping[str, Any]) -> OutputDim:
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
    return OutputDim(str(d["name"]), tuple(_plain(v) for v in values), d.get("units", "1"), d.get("long_name", ""))


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value


def _fmt(value: Any) -> str:
    return f"{value:g}" if isinstance(value, (float, np.floating)) else str(value)
