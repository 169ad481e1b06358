"""UDUNITS-2 units strings: validation and the units of derived quantities.

Units are checked with ``cf_units`` (the UDUNITS-2 library that the CF checker
itself uses), so a string accepted here is one the CF conventions accept.
"""
from __future__ import annotations

from functools import lru_cache

import cf_units

from sensitivity.errors import ConfigError


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
