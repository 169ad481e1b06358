"""UDUNITS-2 units strings: validation and the units of derived quantities.

Units are checked with ``cf_units`` (the UDUNITS-2 library that the CF checker
itself uses), so a string accepted here is one the CF conventions accept.
"""
from __future__ import annotations

from functools import lru_cache

import cf_units
import numpy as np

from sensitivity.errors import ConfigError, DataError


@lru_cache(maxsize=None)
def _parses(units: str) -> bool:
    try:
        cf_units.Unit(units)
    except ValueError:
        return False
    return True


def check_units(units: object, *, where: str) -> str:
    """Return ``units`` if it is a UDUNITS-2 string, else raise a :class:`ConfigError` naming ``where``."""
    if not isinstance(units, str) or not units.strip() or not _parses(units):
        raise ConfigError(f"{where} must be a UDUNITS-2 units string (e.g. 'day-1', 'm s-1', '1'), got {units!r}")
    return units


def quotient(numerator: str, denominator: str) -> str:
    """Units of ``numerator / denominator``, e.g. of a derivative d(output)/d(parameter)."""
    if denominator.strip() == "1":
        return numerator
    return f"({numerator})/({denominator})"


def product(a: str, b: str) -> str:
    """Units of ``a * b``."""
    if a.strip() == "1":
        return b
    if b.strip() == "1":
        return a
    return f"({a}) ({b})"


def convert(values: np.ndarray, source: str | None, target: str, *, where: str) -> np.ndarray:
    """``values`` in ``source`` units expressed in ``target`` units (offsets and time origins included).

    ``source`` None or equal to ``target`` returns ``values`` as they are. Raises a one-line
    :class:`DataError` naming ``where`` when the units do not parse or are not convertible.
    """
    if source is None or str(source).strip() == str(target).strip():
        return np.asarray(values, dtype=float)
    a, b = _unit(source, where), _unit(target, where)
    if not a.is_convertible(b):
        raise DataError(f"{where}: units {source!r} cannot be converted to the model's {target!r}")
    return np.asarray(a.convert(np.asarray(values, dtype=float), b), dtype=float)


def scale(source: str | None, target: str, *, where: str) -> float:
    """Factor that takes a *difference* (a standard deviation) from ``source`` to ``target`` units."""
    zero, one = convert(np.array([0.0, 1.0]), source, target, where=where)
    return float(one - zero)


def _unit(units: str, where: str) -> cf_units.Unit:
    try:
        return cf_units.Unit(str(units))
    except ValueError:
        raise DataError(f"{where}: units {units!r} are not a UDUNITS-2 units string") from None
