"""The one units rule of every dataset writer (sensitivity.outputs.labels.units_attrs / cost_units)."""
from __future__ import annotations

import cf_units
import numpy as np
import pytest

from sensitivity.analyses.calibration import gauss_newton_map
from sensitivity.outputs.labels import axis_units_attrs, cost_units, units_attrs


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


def test_a_position_on_a_cf_time_axis_is_labelled_by_its_date_in_its_calendar():
    """Day 234 of 'days since 2021-01-01' is 23 August (datetime arithmetic), day 59.25 the 1st of March at 06:00; in
    a 360-day calendar (twelve 30-day months) day 59 is 30 February; a decoded axis gives the same labels."""
    import datetime as dt

    import xarray as xr

    from sensitivity.outputs.labels import position_label

    days = [0.0, 234.0, 59.25]
    da = xr.DataArray(np.zeros(3), dims="time", coords={"time": ("time", days, {"units": "days since 2021-01-01"})})
    expected = [(dt.datetime(2021, 1, 1) + dt.timedelta(days=d)).isoformat() for d in days]
    assert expected == ["2021-01-01T00:00:00", "2021-08-23T00:00:00", "2021-03-01T06:00:00"]
    labels = [e.removesuffix("T00:00:00") for e in expected]
    assert [position_label(da, "time", i) for i in range(3)] == labels
    assert [position_label(xr.decode_cf(da.to_dataset(name="v")), "time", i) for i in range(3)] == labels
    days_360 = xr.DataArray(np.zeros(2), dims="time", coords={"time": (
        "time", [59.0, 60.0], {"units": "days since 2021-01-01", "calendar": "360_day"})})
    assert [position_label(days_360, "time", i) for i in range(2)] == ["2021-02-30", "2021-03-01"]
