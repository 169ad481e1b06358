"""UDUNITS-2 units strings: validation and the units of derived quantities.

Units are checked with ``cf_units`` (the UDUNITS-2 library that the CF checker
itself uses), so a string accepted here is one the CF conventions accept.
"""
from __future__ import annotations

import re
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
    """Units of ``numerator / denominator``, e.g. of a derivative d(output)/d(parameter): ``m mm-1 h`` for
    ``m`` over ``mm h-1``; ``(a)/(b)`` when either is not a plain product of powers."""
    if denominator.strip() == "1":
        return numerator
    powers = _powers(denominator)
    inverse = None if powers is None else (1.0 / powers[0], {k: -v for k, v in powers[1].items()})
    return _combined(numerator, inverse, f"({numerator})/({denominator})")


def product(a: str, b: str) -> str:
    """Units of ``a * b``: ``m2`` for ``m`` times ``m``, ``1e-10 day-2`` for ``1e-5 day-1`` squared;
    ``(a) (b)`` when either is not a plain product of powers."""
    if a.strip() == "1":
        return b
    if b.strip() == "1":
        return a
    return _combined(a, _powers(b), f"({a}) ({b})")


_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$")
_POWER = re.compile(r"^([A-Za-z_]+)(?:\^|\*\*)?(-?\d+)?$")


def _powers(units: str) -> tuple[float, dict[str, int]] | None:
    """``(factor, {symbol: power})`` of a units string made of a number and ``symbol[power]`` terms separated by
    spaces or ``.`` (``1e-5 day-1``, ``m.s-1``); None for anything else (``/``, parentheses, ``since``)."""
    factor, powers = 1.0, {}
    for word in units.split():
        for term in [word] if _NUMBER.match(word) else word.split("."):
            if _NUMBER.match(term):
                factor *= float(term)
                continue
            match = _POWER.match(term)
            if match is None or match.group(1) == "since":
                return None
            powers[match.group(1)] = powers.get(match.group(1), 0) + int(match.group(2) or 1)
    return factor, powers


def _combined(a: str, b: tuple[float, dict[str, int]] | None, fallback: str) -> str:
    """``a`` times the powers ``b`` as one plain string, checked by UDUNITS to equal ``fallback``; else ``fallback``."""
    first = _powers(a)
    if first is None or b is None:
        return fallback
    powers = dict(first[1])
    for symbol, power in b[1].items():
        powers[symbol] = powers.get(symbol, 0) + power
    factor = first[0] * b[0]
    terms = [f"{factor:.15g}"] if factor != 1.0 else []
    terms += [symbol + ("" if power == 1 else str(power)) for symbol, power in powers.items() if power]
    combined = " ".join(terms) or "1"
    try:
        same = abs(cf_units.Unit(combined).convert(1.0, cf_units.Unit(fallback)) - 1.0) < 1e-12
    except ValueError:
        same = False
    return combined if same else fallback




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


def instants(dates: np.ndarray, target: str, *, where: str) -> np.ndarray:
    """Instants (``datetime64``) as numbers of the CF time axis ``target`` (``<unit> since <epoch>``), in the
    standard calendar the datasets' time axes carry: ``2021-03-01`` is 59.0 in ``days since 2021-01-01``."""
    unit = _unit(target, where)
    if not unit.is_time_reference():
        raise DataError(f"{where}: holds dates, but the model's axis has units {target!r}, not '<unit> since <epoch>'")
    seconds = (dates.astype("datetime64[us]") - np.datetime64("1970-01-01", "us")) / np.timedelta64(1, "s")
    return np.asarray(cf_units.Unit("seconds since 1970-01-01", calendar="standard").convert(seconds, unit), float)


def instant_text(value: float, units: str, calendar: str = "standard") -> str:
    """The instant ``value`` of the CF time axis ``units`` in ISO 8601, in its ``calendar`` (any CF calendar): its
    date (``2021-08-23``), with the time of day where it is not midnight; the inverse of :func:`instants`."""
    date = cf_units.Unit(units, calendar=calendar).num2date(float(value)).isoformat(timespec="seconds")
    return date.removesuffix("T00:00:00")


def scale(source: str | None, target: str, *, where: str) -> float:
    """Factor that takes a *difference* (a standard deviation) from ``source`` to ``target`` units."""
    zero, one = convert(np.array([0.0, 1.0]), source, target, where=where)
    return float(one - zero)


def _unit(units: str, where: str) -> cf_units.Unit:
    try:
        return cf_units.Unit(str(units))
    except ValueError:
        raise DataError(f"{where}: units {units!r} are not a UDUNITS-2 units string") from None
