"""The library settings a result was computed with, recorded in it and read back: one serialised form, one reader.

A result records the frozen settings dataclasses its verb ran with as the global attribute ``settings``: a JSON
list of ``{"type": "<module>.<class>", "value": {field: ...}}``, nested dataclasses written the same way, tuples as
``{"tuple": [...]}``, mappings as ``{"mapping": [[key, value], ...]}``, arrays as ``{"array": [...], "dtype": ...}``
and paths as ``{"path": "..."}``, so :func:`settings_of` rebuilds each one equal to the one written. A study that
consumes another's result reads its settings here, never the workflow config the result also records. A field or
attribute renamed since (:data:`RENAMED`) is read under its new name, so a result of an earlier version still reads.
"""
from __future__ import annotations

import dataclasses
import importlib
import json
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any, TypeVar

import numpy as np

from sensitivity.errors import ConfigError, DataError

#: The global attribute holding a result's settings.
ATTRIBUTE = "settings"

T = TypeVar("T")

#: Settings fields and global attributes renamed since a result could have been recorded: ``{old: new}`` (one name
#: per concept, docs/glossary.md: the interval's ``level`` was ``conf_level`` and ``confidence``).
RENAMED = {"conf_level": "level", "confidence": "level"}


def _dotted(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _encode(value: Any, where: str) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"type": _dotted(type(value)), "value": {f.name: _encode(getattr(value, f.name), f"{where}.{f.name}")
                                                         for f in dataclasses.fields(value) if f.init}}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return {"array": value.tolist(), "dtype": value.dtype.str}
    if isinstance(value, PurePath):
        return {"path": str(value)}
    if isinstance(value, tuple):
        return {"tuple": [_encode(v, f"{where}[{i}]") for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [_encode(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        return {"mapping": [[_encode(k, where), _encode(v, f"{where}[{k!r}]")] for k, v in value.items()]}
    raise ConfigError(f"settings `{where}`: a {type(value).__name__} cannot be recorded in a result ({value!r})")


def _type(dotted: str) -> type:
    """The settings dataclass a record names (only the library's own)."""
    module, _, name = dotted.rpartition(".")
    cls = getattr(importlib.import_module(module), name, None) if module.split(".")[0] == "sensitivity" else None
    if not dataclasses.is_dataclass(cls):
        raise DataError(f"recorded settings name {dotted!r}, not a settings dataclass of this library")
    return cls


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "type" in value:
        cls = _type(value["type"])
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k if k in names else RENAMED.get(k, k): _decode(v) for k, v in value["value"].items()})
    if "tuple" in value:
        return tuple(_decode(v) for v in value["tuple"])
    if "mapping" in value:
        return {_decode(k): _decode(v) for k, v in value["mapping"]}
    if "array" in value:
        return np.asarray(value["array"], dtype=np.dtype(value["dtype"]))
    if "path" in value:
        return Path(value["path"])
    raise DataError(f"recorded settings hold an unknown form {sorted(value)}; rerun the result with this version")


def settings_json(settings: Any) -> str:
    """The attribute value recording ``settings`` (one frozen dataclass or a sequence of them)."""
    items = (settings,) if dataclasses.is_dataclass(settings) else tuple(settings)
    for item in items:
        if not dataclasses.is_dataclass(item) or isinstance(item, type):
            raise ConfigError(f"settings: a result records settings dataclasses, got a {type(item).__name__}")
    return json.dumps([_encode(item, type(item).__name__) for item in items])


def settings_of(ds: Any, cls: type[T], *, where: Any = None) -> T:
    """The settings of type ``cls`` (or a subclass) that ``ds`` (anything with ``attrs``, e.g. an
    :class:`xarray.Dataset`) records, rebuilt as written.

    Parameters
    ----------
    ds
        The result.
    cls
        The settings dataclass to read.
    where
        How errors name the result (default: the file it was opened from).

    Raises
    ------
    DataError
        One line, when the result records none (or several) of ``cls``: written by an earlier version.
    """
    where = where or getattr(ds, "encoding", {}).get("source") or "the result"
    entries = [entry for entry in json.loads(ds.attrs.get(ATTRIBUTE) or "[]")
               if entry["type"] == _dotted(cls) or issubclass(_type(entry["type"]), cls)]
    if len(entries) != 1:
        raise DataError(f"{where} records {'no' if not entries else len(entries)} settings of {cls.__name__}; "
                        "rerun it with this version")
    return _decode(entries[0])


def recorded_attr(ds: Any, name: str, default: Any = None) -> Any:
    """The global attribute ``name`` of ``ds``, or the one an earlier version recorded under its old name
    (:data:`RENAMED`), else ``default``."""
    old = [key for key, new in RENAMED.items() if new == name and key in ds.attrs]
    return ds.attrs[name] if name in ds.attrs else ds.attrs[old[0]] if old else default
