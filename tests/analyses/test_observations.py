"""Reading observations: alignment to the model's outputs (netCDF and CSV) and one-line errors for bad files."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from sensitivity.errors import DataError
from sensitivity.analyses.calibration.observations import read_observations, with_true_parameters
from sensitivity.outputs.spec import OutputSpec

SERIES = OutputSpec.from_dict({"name": "cases", "units": "1", "dims": [
    {"name": "day", "values": {"start": 1, "stop": 11}, "units": "day"}]})
FIELD = OutputSpec.from_dict({"name": "c", "units": "kg m-3", "dims": [
    {"name": "lat", "values": [10.0, 20.0, 30.0], "units": "degrees_north"},
    {"name": "lon", "values": [0.0, 5.0], "units": "degrees_east"}]})
NAMED = OutputSpec.from_dict({"name": "y", "units": ["m", "s"], "names": ["height", "duration"]})


def write_nc(tmp_path, variables, coords=None, attrs=None, name="obs.nc"):
    path = tmp_path / name
    xr.Dataset(variables, coords=coords or {}, attrs=attrs or {}).to_netcdf(path)
    return path


def write_csv(tmp_path, rows, name="obs.csv"):
    path = tmp_path / name
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_series_subset_in_any_order_is_aligned_with_nan_elsewhere(tmp_path):
    path = write_nc(tmp_path, {"observed": ("day", [30.0, 10.0, np.nan, 50.0]),
                               "sigma": ("day", [3.0, 1.0, 2.0, 5.0])}, {"day": [3, 1, 2, 5]})
    obs = read_observations(path, SERIES)
    expected = np.full(10, np.nan)
    expected[[0, 2, 4]] = [10.0, 30.0, 50.0]
    np.testing.assert_array_equal(obs.values, expected)
    np.testing.assert_array_equal(obs.sigma[[0, 2, 4]], [1.0, 3.0, 5.0])
    assert obs.n_observed == 3 and obs.model.observed.tolist() == [0, 2, 4] and obs.cov is None


def test_field_with_transposed_dims_matches_the_model_order(tmp_path):
    truth = np.arange(6.0).reshape(3, 2)  # [lat, lon]
    path = write_nc(tmp_path, {"observed": (("lon", "lat"), truth.T)}, {"lat": [10.0, 20.0, 30.0], "lon": [0.0, 5.0]})
    obs = read_observations(path, FIELD)
    np.testing.assert_array_equal(obs.values, truth.ravel())
    assert obs.model.known_noise is False


def test_covariance_rows_follow_the_file_order(tmp_path):
    a = np.random.default_rng(0).standard_normal((3, 3))
    cov = a @ a.T + 3 * np.eye(3)
    path = write_nc(tmp_path, {"observed": ("day", [7.0, 8.0, 9.0]), "covariance": (("output_i", "output_j"), cov)},
                    {"day": [9, 2, 4]})
    obs = read_observations(path, SERIES)
    order = [8, 1, 3]  # model positions of times 9, 2, 4
    np.testing.assert_array_equal(obs.cov[np.ix_(order, order)], cov)
    np.testing.assert_array_equal(obs.values[order], [7.0, 8.0, 9.0])
    # the whitening of the observed block is the inverse Cholesky factor of its covariance, in model order
    model_order = np.argsort(order)
    block = cov[np.ix_(model_order, model_order)]
    w = obs.model.whitening
    np.testing.assert_allclose(w @ block @ w.T, np.eye(3), atol=1e-12)


@pytest.mark.parametrize("layout", ["output_name", "string_coordinate", "csv"])
def test_named_outputs_by_name(tmp_path, layout):
    if layout == "csv":
        path = write_csv(tmp_path, {"output": ["duration", "height"], "value": [2.0, 1.0], "sigma": [0.2, 0.1]})
    elif layout == "output_name":
        path = write_nc(tmp_path, {"observed": ("output", [2.0, 1.0]), "sigma": ("output", [0.2, 0.1])},
                        {"output": [0, 1], "output_name": ("output", ["duration", "height"])})
    else:
        path = write_nc(tmp_path, {"observed": ("output", [2.0, 1.0]), "sigma": ("output", [0.2, 0.1])},
                        {"output": ["duration", "height"]})
    obs = read_observations(path, NAMED)
    np.testing.assert_array_equal(obs.values, [1.0, 2.0])
    np.testing.assert_array_equal(obs.sigma, [0.1, 0.2])


def test_csv_series_and_field(tmp_path):
    obs = read_observations(write_csv(tmp_path, {"day": [4, 2], "value": [1.5, 2.5]}), SERIES)
    assert obs.values[3] == 1.5 and obs.values[1] == 2.5 and np.isnan(obs.values[[0, 2, 4]]).all()
    assert obs.sigma is None
    rows = {"lat": [30.0, 10.0], "lon": [5.0, 0.0], "value": [6.0, 1.0], "sigma": [1.0, 1.0]}
    obs = read_observations(write_csv(tmp_path, rows, "field.csv"), FIELD)
    assert obs.values[5] == 6.0 and obs.values[0] == 1.0 and obs.n_observed == 2


def test_true_parameters_from_attributes_and_variable(tmp_path):
    path = write_nc(tmp_path, {"observed": ("day", np.ones(10)),
                               "true_parameter": ("parameter", [0.4, 3.0])},
                    {"day": np.arange(1, 11), "parameter_name": ("parameter", ["beta", "gamma"])},
                    {"true_parameters": json.dumps({"delta": 1.5}), "true_eps": 2.0})
    assert read_observations(path, SERIES).true_parameters == {"beta": 0.4, "gamma": 3.0, "delta": 1.5, "eps": 2.0}


def test_true_parameters_are_checked_against_the_interval_of_the_best_start():
    interval = np.array([[[0.0, 1.0], [2.0, 3.0]], [[0.5, 0.6], [9.0, 9.5]]])  # [start, parameter, bound]
    ds = xr.Dataset({"parameter_interval": (("start", "parameter", "bound"), interval, {"long_name": "95% interval"}),
                     "estimate": (("start", "parameter"), interval.mean(-1), {"units": "1"}),
                     "best_start": ((), 1)}, coords={"parameter_name": ("parameter", ["a", "b"])})
    out = with_true_parameters(ds, {"a": 0.55, "b": 2.5})
    assert out["true_in_interval"].values.tolist() == [1, 0]  # start 1: a in [0.5, 0.6], b not in [9, 9.5]
    assert with_true_parameters(ds, {"b": 9.2})["true_in_interval"].values.tolist() == [-1, 1]
    assert with_true_parameters(ds, {}) is ds


BAD_NC = [
    ("unknown output name", NAMED, {"observed": ("output", [1.0]), "sigma": ("output", [1.0])},
     {"output": ["weight"]}, "unknown label 'weight'"),
    ("time not in the model", SERIES, {"observed": ("day", [1.0, 2.0])}, {"day": [1, 150]},
     "day=150 in the `day` coordinate is not an output coordinate of the model"),
    ("nan sigma", SERIES, {"observed": ("day", [1.0, 2.0]), "sigma": ("day", [1.0, np.nan])}, {"day": [1, 2]},
     "`sigma` must be finite, got nan at observed output 'cases[day=2]'"),
    ("negative sigma", SERIES, {"observed": ("day", [1.0, 2.0]), "sigma": ("day", [-1.0, 1.0])}, {"day": [1, 2]},
     "`sigma` must be > 0, got -1.0 at output 'cases[day=1]'"),
    ("zero sigma", SERIES, {"observed": ("day", [1.0, 2.0]), "sigma": ("day", [1.0, 0.0])}, {"day": [1, 2]},
     "`sigma` must be > 0, got 0.0"),
    ("wrong dims", SERIES, {"observed": ("step", [1.0, 2.0])}, {"step": [1, 2]},
     "`observed` is on dims ['step'] with shape [2] but the model's outputs are on ['day'] with shape [10]"),
    ("wrong size without coordinate", SERIES, {"observed": ("day", np.ones(7))}, None,
     "has 7 entries along 'day' and no coordinate to align them, but the model has 10"),
    ("sigma on other dims", FIELD, {"observed": (("lat", "lon"), np.ones((3, 2))), "sigma": ("lat", np.ones(3))},
     {"lat": [10.0, 20.0, 30.0], "lon": [0.0, 5.0]}, "`sigma` must have the dims of `observed`"),
    ("duplicate time", SERIES, {"observed": ("day", [1.0, 2.0])}, {"day": [3, 3]},
     "'cases[day=3]' is given more than once"),
    ("not positive definite", SERIES, {"observed": ("day", [1.0, 2.0]),
                                       "covariance": (("output_i", "output_j"), [[1.0, 2.0], [2.0, 1.0]])},
     {"day": [1, 2]}, "`cov` on the observed outputs must be positive definite"),
    ("covariance shape", SERIES, {"observed": ("day", [1.0, 2.0]),
                                  "covariance": (("output_i", "output_j"), np.eye(3))}, {"day": [1, 2]},
     "`covariance` must be (output_i, output_j) of shape [2, 2]"),
    ("no observed variable", SERIES, {"values": ("day", [1.0])}, {"day": [1]}, "needs a variable `observed`"),
]


@pytest.mark.parametrize(("case", "spec", "variables", "coords", "message"), BAD_NC, ids=[c[0] for c in BAD_NC])
def test_bad_netcdf_files_give_one_line_errors(tmp_path, case, spec, variables, coords, message):
    path = write_nc(tmp_path, variables, coords)
    with pytest.raises(DataError) as info:
        read_observations(path, spec)
    assert message in str(info.value) and str(path) in str(info.value)
    assert "\n" not in str(info.value)


BAD_CSV = [
    ("unknown output name", NAMED, {"output": ["height", "weight"], "value": [1.0, 2.0]},
     "unknown label 'weight'"),
    ("missing column", FIELD, {"lat": [10.0], "value": [1.0]}, "missing column(s) ['lon']"),
    ("unknown column", SERIES, {"day": [1], "value": [1.0], "sigmaa": [1.0]}, "unknown column(s) ['sigmaa']"),
    ("negative sigma", SERIES, {"day": [1, 2], "value": [1.0, 2.0], "sigma": [0.1, -0.1]}, "`sigma` must be > 0"),
    ("nan sigma", SERIES, {"day": [1, 2], "value": [1.0, 2.0], "sigma": [0.1, None]}, "`sigma` must be finite"),
    ("text value", SERIES, {"day": [1, 2], "value": ["1.0", "many"]}, "column `value` must be numeric, got 'many'"),
    ("time not in the model", SERIES, {"day": [0.5], "value": [1.0]}, "day=0.5 in column `day` is not an output"),
]


@pytest.mark.parametrize(("case", "spec", "rows", "message"), BAD_CSV, ids=[c[0] for c in BAD_CSV])
def test_bad_csv_files_give_one_line_errors(tmp_path, case, spec, rows, message):
    path = write_csv(tmp_path, rows)
    with pytest.raises(DataError) as info:
        read_observations(path, spec)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_missing_file_and_unknown_suffix(tmp_path):
    with pytest.raises(DataError, match="observations file not found"):
        read_observations(tmp_path / "none.nc", SERIES)
    (tmp_path / "obs.txt").write_text("1 2 3")
    with pytest.raises(DataError, match="expected a .nc or .csv file"):
        read_observations(tmp_path / "obs.txt", SERIES)


def test_a_cf_time_axis_is_matched_by_its_numbers_not_decoded(tmp_path):
    spec = OutputSpec.from_dict({"name": "cases", "units": "1", "dims": [
        {"name": "time", "values": {"start": 1, "stop": 11}, "units": "days since 2020-01-01"}]})
    path = tmp_path / "obs.nc"
    xr.Dataset({"observed": ("time", [5.0, 6.0])},
               coords={"time": ("time", np.array([2, 4], np.int32), {"units": "days since 2020-01-01"})}).to_netcdf(path)
    obs = read_observations(path, spec)
    assert obs.values[1] == 5.0 and obs.values[3] == 6.0 and obs.n_observed == 2


GAUGED = OutputSpec.from_dict({"name": "discharge", "units": "mm day-1", "dims": [
    {"name": "station", "values": ["upper", "lower"]},
    {"name": "time", "values": {"start": 0, "stop": 365}, "units": "days since 2021-01-01"}]})


def test_csv_dates_on_a_cf_time_axis_become_its_numbers(tmp_path):
    import datetime as dt

    dates = ["2021-03-01", "2021-12-31", "2021-01-01T00:00", "2021-07-04T01:00+01:00"]
    rows = {"station": ["upper", "lower", "lower", "upper"], "time": dates, "value": [1.0, 2.0, 3.0, 4.0]}
    obs = read_observations(write_csv(tmp_path, rows), GAUGED)
    epoch = dt.datetime(2021, 1, 1, tzinfo=dt.timezone.utc)
    instants = [dt.datetime.fromisoformat(d) for d in dates]
    instants = [t if t.tzinfo else t.replace(tzinfo=dt.timezone.utc) for t in instants]
    days = [(t - epoch) / dt.timedelta(days=1) for t in instants]
    assert days == [59.0, 364.0, 0.0, 184.0]  # the UTC offset counts: 01:00+01:00 is midnight UTC
    values = obs.values.reshape(2, 365)
    assert values[0, 59] == 1.0 and values[1, 364] == 2.0 and values[1, 0] == 3.0 and values[0, 184] == 4.0
    assert obs.n_observed == 4


@pytest.mark.parametrize(("date", "message"), [
    ("2021-13-01", "column `time` must hold dates (ISO 8601, e.g. 2021-03-01) or numbers in the model's 'days since "
                   "2021-01-01', got '2021-13-01' in data row 2"),
    ("2021-03-01T12:00", "time=59.5 in column `time` is not an output coordinate"),
    ("2022-01-01", "time=365 in column `time` is not an output coordinate")])
def test_csv_dates_that_are_not_on_the_axis_are_refused(tmp_path, date, message):
    rows = {"station": ["upper", "upper"], "time": ["2021-01-05", date], "value": [1.0, 2.0]}
    with pytest.raises(DataError) as info:
        read_observations(write_csv(tmp_path, rows), GAUGED)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_csv_dates_on_an_axis_that_is_not_a_time_axis_are_refused(tmp_path):
    with pytest.raises(DataError, match="column `day` must be numeric like the model's 'day' coordinate"):
        read_observations(write_csv(tmp_path, {"day": ["2021-01-02"], "value": [1.0]}), SERIES)


def test_observed_and_time_units_are_converted_to_the_model_units(tmp_path):
    spec = OutputSpec.from_dict({"name": "cases", "units": "1e-5 day-1", "dims": [
        {"name": "day", "values": {"start": 1, "stop": 11}, "units": "day"}]})
    a = np.random.default_rng(0).standard_normal((2, 2))
    cov = a @ a.T + np.eye(2)
    path = write_nc(tmp_path, {"observed": ("day", [2e-5, 3e-5], {"units": "day-1"}),
                               "covariance": (("output_i", "output_j"), cov * 1e-10)},
                    {"day": ("day", [48.0, 96.0], {"units": "h"})})  # days 2 and 4, in hours
    obs = read_observations(path, spec)
    np.testing.assert_allclose(obs.values[[1, 3]], [2.0, 3.0], rtol=1e-12)  # 1 day-1 = 1e5 (1e-5 day-1)
    np.testing.assert_allclose(obs.cov[np.ix_([1, 3], [1, 3])], cov, rtol=1e-12)
    assert obs.n_observed == 2
    celsius = OutputSpec.from_dict({"name": "T", "units": "K", "dims": [
        {"name": "time", "values": {"start": 1, "stop": 3}, "units": "days since 2020-01-01"}]})
    path = write_nc(tmp_path, {"observed": ("time", [0.0, 10.0], {"units": "degC"}),
                               "sigma": ("time", [1.0, 2.0], {"units": "degC"})},
                    {"time": ("time", [24.0, 48.0], {"units": "hours since 2020-01-01"})}, name="t.nc")
    obs = read_observations(path, celsius)
    np.testing.assert_allclose(obs.values, [273.15, 283.15])  # an offset for values, none for sigma
    np.testing.assert_allclose(obs.sigma, [1.0, 2.0])


@pytest.mark.parametrize("variable_units, time_units, message", [
    ("m", "day", r"`observed`: units 'm' cannot be converted to the model's '1e-5 day-1'"),
    ("day-1", "hours since 2020-01-01", r"the `day` coordinate: units 'hours since 2020-01-01' cannot be converted"),
    ("bananas", "day", r"`observed`: units 'bananas' are not a UDUNITS-2 units string"),
])
def test_units_that_cannot_be_converted_are_refused(tmp_path, variable_units, time_units, message):
    spec = OutputSpec.from_dict({"name": "cases", "units": "1e-5 day-1", "dims": [
        {"name": "day", "values": {"start": 1, "stop": 11}, "units": "day"}]})
    path = write_nc(tmp_path, {"observed": ("day", [2.0], {"units": variable_units})},
                    {"day": ("day", [2.0], {"units": time_units})})
    with pytest.raises(DataError, match=message) as err:
        read_observations(path, spec)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("content", [b"\x89HDF\r\n\x1a\n" + bytes(range(256)) * 4,  # a netCDF-4 file renamed
                                     b"output,value\ny,1.0\n\x00\x00\x07\x01,2\n",    # text with NUL bytes
                                     "output,value\ny,1.0\n".encode("utf-16")],        # not UTF-8
                         ids=["netcdf", "nul", "utf16"])
def test_a_binary_file_given_as_csv_is_refused_in_one_line(tmp_path, content):
    path = tmp_path / "observations.csv"
    path.write_bytes(content)
    with pytest.raises(DataError) as caught:
        read_observations(path, NAMED)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"observations file {path}: a binary file, not CSV text (")
