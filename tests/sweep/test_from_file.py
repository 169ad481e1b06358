"""Points and samples read from a file: a binary file given as CSV is refused in one line."""
from __future__ import annotations

import re

import numpy as np
import pytest

from sensitivity.errors import DataError
from sensitivity.sweep.from_file import read_points, read_samples

NAMES = ["a", "b"]


@pytest.mark.parametrize("content, reason", [
    (b"CDF\x01\x00\x00\x00\x00\x00\x00\x00\nx,y\n" + b"1,2,3,4,5\n" * 3, r"NUL byte at offset 4"),   # netCDF renamed
    (b"\x89PNG\r\n\x1a\n\xff\xfe", r"byte 0x89 at offset 0 is not UTF-8"),                               # an image
])
@pytest.mark.parametrize("reader", ["points", "samples"])
def test_a_binary_file_given_as_csv_is_refused_in_one_line(tmp_path, content, reason, reader):
    """A netCDF file renamed ``.csv`` reached pandas, whose message spans two lines ("Error tokenizing data ...\\n");
    now both readers name the key, the file and the first binary byte, in one line."""
    path = tmp_path / "design.csv"
    path.write_bytes(content)
    key = "grid.path" if reader == "points" else "training.data"
    with pytest.raises(DataError) as caught:
        if reader == "points":
            read_points(path, NAMES, key)
        else:
            read_samples(path, NAMES, None, key=key)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"{key} {path}: a binary file, not CSV text (")
    assert re.search(reason, message)


def test_malformed_csv_text_is_one_line_naming_the_key_and_the_file(tmp_path):
    path = tmp_path / "design.csv"
    path.write_text("a,b\n1,2\n3,4,5,6\n")
    with pytest.raises(DataError) as caught:
        read_points(path, NAMES, "grid.path")
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith(f"grid.path {path} cannot be read as CSV: Error tokenizing data")


def test_a_csv_design_is_read_in_the_names_order(tmp_path):
    path = tmp_path / "design.csv"
    path.write_text("b,a,other\n2.5,1.0,x\n-1,0.25,y\n")
    np.testing.assert_array_equal(read_points(path, NAMES, "grid.path"), [[1.0, 2.5], [0.25, -1.0]])
