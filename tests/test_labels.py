"""The one units rule of every dataset writer (sensitivity.labels.units_attrs / cost_units)."""
from __future__ import annotations

import cf_units
import numpy as np
import pytest

from sensitivity.analyses.calibration import gauss_newton_map
from sensitivity.labels import axis_units_attrs, cost_units, units_attrs


@pytest.mark.parametrize("units, squared, expected", [
    ("m", False, {"units": "m"}),
    (["m s-1", "m s-1"], True, {"units": "m2 s-2"}),
    (["m", "s"], False, {"units_coordinate": "parameter_units"}),
    (["m", "s"], True, {"units_coordinate": "parameter_units"}),
    (None, False, {"units_coordinate": "parameter_units"}),  # known to differ: the coordinate holds them
])
def test_one_unit_or_the_units_coordinate(units, squared, expected):
    got = units_attrs(units, "parameter_units", squared=squared)
    assert got.keys() == expected.keys()
    if "units" in got:  # the same unit as UDUNITS-2 reads it, whatever the spelling
        assert cf_units.Unit(got["units"]) == cf_units.Unit(expected["units"])
    else:
        assert got == expected


def test_an_axis_without_units_gives_no_units_attribute():
    assert axis_units_attrs(None, "parameter") == {}
    assert axis_units_attrs(["m", "s"], "output") == {"units_coordinate": "output_units"}


def test_a_whitened_cost_is_dimensionless_an_unweighted_one_in_squared_output_units():
    assert cost_units("m", whitened=True) == {"units": "1"}
    assert cf_units.Unit(cost_units(["m", "m"], whitened=False)["units"]) == cf_units.Unit("m2")
    assert set(cost_units(["m", "K"], whitened=False)) == {"units_note"}


def test_step_map_cost_without_noise_scales_with_the_square_of_the_output_unit():
    # The same residuals in mm instead of m: an unweighted cost grows by 1e6 = (m/mm)^2, so it is not
    # dimensionless; with sigma given in the same unit it does not change.
    rng = np.random.default_rng(3)
    values, jac, y = rng.standard_normal((4, 5)), rng.standard_normal((4, 5, 2)), rng.standard_normal(5)
    in_m = gauss_newton_map(values, jac, y)
    in_mm = gauss_newton_map(1e3 * values, 1e3 * jac, 1e3 * y)
    np.testing.assert_allclose(in_mm.cost, 1e6 * in_m.cost, rtol=1e-12)
    ds = in_m.to_dataset(["a", "b"], ["s", "s"], output_units="m")
    assert cf_units.Unit(ds["cost"].attrs["units"]) == cf_units.Unit("m2")
    assert ds["predicted_decrease"].attrs["units"] == ds["cost"].attrs["units"]
    whitened = gauss_newton_map(values, jac, y, sigma=0.1).to_dataset(["a", "b"], ["s", "s"], output_units="m")
    np.testing.assert_allclose(gauss_newton_map(1e3 * values, 1e3 * jac, 1e3 * y, sigma=100.0).cost,
                               gauss_newton_map(values, jac, y, sigma=0.1).cost, rtol=1e-12)
    assert whitened["cost"].attrs["units"] == "1"
