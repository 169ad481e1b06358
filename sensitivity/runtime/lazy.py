"""Deferred imports of the heavy dependencies (xarray, scipy's submodules): imported on first use, not at import.

The command line imports every workflow module to build the config schemas from the library's settings and
signatures, and those modules import the library; a config error should not wait for xarray (pandas, dask) and
scipy.stats to load (~1-2 s), nor for TensorFlow. A module writes ``xr = lazy_import("xarray")`` instead of
``import xarray as xr``; the first attribute read (``xr.Dataset``) imports the module, through the import system
(thread-safe, and ``sys.modules`` holds the module only once it is imported).

Why not :class:`importlib.util.LazyLoader` (or scientific-python's ``lazy_loader``, SPEC 1, built on it): on
Python 3.11, which this package supports, a second thread reading an attribute while the first one loads the module
can see it half-populated (CPython gh-114763, fixed in 3.12.3 and 3.13), and the sweep's writer thread runs beside
the computing one. Here the first read goes through :func:`importlib.import_module`, which holds the import lock.
"""
from __future__ import annotations

import importlib
import types
from typing import Any


class LazyModule(types.ModuleType):
    """A stand-in for module ``name`` that imports it on the first attribute read and then delegates to it."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.__dict__["_module"] = None

    def __getattr__(self, attr: str) -> Any:
        module = self.__dict__["_module"]
        if module is None:
            module = importlib.import_module(self.__name__)
            self.__dict__["_module"] = module
        return getattr(module, attr)

    def __dir__(self) -> list[str]:
        return dir(importlib.import_module(self.__name__))

    def __repr__(self) -> str:
        state = "imported" if self.__dict__["_module"] is not None else "not imported yet"
        return f"<lazy module {self.__name__!r} ({state})>"


def lazy_import(name: str) -> types.ModuleType:
    """Module ``name`` (``"xarray"``, ``"scipy.stats"``), imported when an attribute of it is first read."""
    return LazyModule(name)
