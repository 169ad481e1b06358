"""Units of derived quantities: plain strings where the inputs are products of powers, equal to UDUNITS' own."""
from __future__ import annotations

import cf_units
import pytest

from sensitivity.units import product, quotient


@pytest.mark.parametrize("a, b, expected_product, expected_quotient", [
    ("m", "m", "m2", "1"),
    ("1e-5 day-1", "1e-5 day-1", "1e-10 day-2", "1"),
    ("s", "m", "s m", "s m-1"),
    ("m3 s-1", "mm h-1", "m3 s-1 mm h-1", "m3 s-1 mm-1 h"),
    ("m.s-1", "s", "m", "m s-2"),
    ("1", "m", "m", "m-1"),
    ("days since 2000-01-01", "m", "(days since 2000-01-01) (m)", "(days since 2000-01-01)/(m)"),
])
def test_products_and_quotients_are_plain_and_equal_udunits(a, b, expected_product, expected_quotient):
    assert product(a, b) == expected_product
    assert quotient(a, b) == expected_quotient
    if "since" not in a:  # UDUNITS: the plain string is the same unit as the bracketed product / quotient
        assert cf_units.Unit(product(a, b)).convert(1.0, cf_units.Unit(f"({a}) ({b})")) == pytest.approx(1.0)
        assert cf_units.Unit(quotient(a, b)).convert(1.0, cf_units.Unit(f"({a})/({b})")) == pytest.approx(1.0)
