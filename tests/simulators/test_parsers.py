"""Output rules (sensitivity.simulators.parsers): each reads back what numpy, xarray or the csv module wrote, and a
missing or unreadable output is one line naming the output and the file."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from sensitivity.errors import ConfigError, DataError
from sensitivity.simulators.parsers import output_rule

SERIES = np.array([1.5, -2.25e-7, 3.0e12, 0.0])
REPORT = """ RESULTS (free format)
 PEAK LOAD  1.25D+03  kN
 next: -4.5e-3
 TABLE OF THE SERIES
   K        TIME       VALUE
""" + "".join(f"{k:4d}{k * 0.5:12.4f}{v:12.4E}\n" for k, v in enumerate(SERIES)) + " END\n"


def parse(folder, **rule):
    return output_rule(rule).read(folder)


def test_a_marker_reads_the_number_after_it_on_its_line_or_the_next(tmp_path):
    (tmp_path / "out.txt").write_text(REPORT)
    assert parse(tmp_path, kind="marker", name="peak", file="out.txt", marker="PEAK LOAD").tolist() == [1250.0]
    assert parse(tmp_path, kind="marker", name="n", file="out.txt", marker=r"ne\w+:", regex=True).tolist() == [-4.5e-3]


def test_a_table_column_reads_by_blank_separated_column_or_by_character_span(tmp_path):
    (tmp_path / "out.txt").write_text(REPORT)
    expected = np.array([float(f"{v:12.4E}") for v in SERIES])
    by_column = parse(tmp_path, kind="table", name="v", file="out.txt", after="TABLE OF", skip=1, column=3)
    by_span = parse(tmp_path, kind="table", name="v", file="out.txt", after="TABLE OF", skip=1, span=[17, 28])
    np.testing.assert_array_equal(by_column, expected)
    np.testing.assert_array_equal(by_span, expected)
    np.testing.assert_array_equal(
        parse(tmp_path, kind="table", name="t", file="out.txt", after="TABLE OF", skip=1, column=2, rows=2), [0, 0.5])
    with pytest.raises(DataError, match="row 5 of the table in out.txt has ' END', no number in column 3"):
        parse(tmp_path, kind="table", name="v", file="out.txt", after="TABLE OF", skip=1, column=3, rows=9)


def test_csv_netcdf_and_npy_read_what_their_own_libraries_wrote(tmp_path):
    import csv

    with open(tmp_path / "out.csv", "w", newline="") as f:
        csv.writer(f).writerows([["time", "value"], *([k, v] for k, v in enumerate(SERIES))])
    field = np.arange(12.0).reshape(3, 4) ** 1.5
    xr.Dataset({"h": (("y", "x"), field)}).to_netcdf(tmp_path / "out.nc")
    np.save(tmp_path / "out.npy", field)
    np.testing.assert_array_equal(parse(tmp_path, kind="csv", name="v", file="out.csv", column="value"), SERIES)
    np.testing.assert_array_equal(parse(tmp_path, kind="netcdf", name="h", file="out.nc", variable="h"),
                                  field.ravel())
    np.testing.assert_array_equal(parse(tmp_path, kind="npy", name="h", file="out.npy"), field.ravel())
    with pytest.raises(DataError, match=r"out.nc has no variable 'g' \(variables: \['h'\]\)"):
        parse(tmp_path, kind="netcdf", name="h", file="out.nc", variable="g")


def doubled_npy(folder):
    """A user's parser: the folder's ``out.npy``, doubled."""
    return 2 * np.load(folder / "out.npy")


def test_a_users_parser_is_called_with_the_run_folder(tmp_path):
    np.save(tmp_path / "out.npy", SERIES)
    rule = output_rule({"kind": "python", "name": "d", "parser": "tests.simulators.test_parsers:doubled_npy"})
    np.testing.assert_array_equal(rule.prepare(tmp_path).read(tmp_path), 2 * SERIES)
    with pytest.raises(ConfigError, match="cannot be imported"):
        output_rule({"kind": "python", "name": "d", "parser": "tests.simulators.test_parsers:nowhere"}).prepare(
            tmp_path)


@pytest.mark.parametrize("rule, problem", [
    ({"kind": "marker", "name": "a", "file": "gone.txt", "marker": "X"}, "output 'a': the file gone.txt is missing"),
    ({"kind": "marker", "name": "a", "file": "out.txt", "marker": "ABSENT"},
     "output 'a': the marker 'ABSENT' is not in out.txt"),
    ({"kind": "csv", "name": "a", "file": "out.txt", "column": "v"}, "output 'a': out.txt has no column 'v'"),
    ({"kind": "npy", "name": "a", "file": "out.txt"}, "output 'a': out.txt is not a .npy array of numbers"),
    ({"kind": "netcdf", "name": "a", "file": "out.txt", "variable": "v"},
     "output 'a': out.txt is not a readable netCDF file"),
])
def test_a_missing_or_unreadable_output_is_one_line(tmp_path, rule, problem):
    (tmp_path / "out.txt").write_text(REPORT)
    with pytest.raises(DataError) as err:
        parse(tmp_path, **rule)
    assert str(err.value).startswith(problem) and "\n" not in str(err.value)
