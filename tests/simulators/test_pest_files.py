"""PEST template (.tpl) and instruction (.ins) files (sensitivity.simulators.pest_files) against pyEMU, the
test-only oracle: the same input file layout with at least pyEMU's precision, and the same observations read."""
from __future__ import annotations

import shutil
import subprocess
import warnings

import numpy as np
import pytest

from sensitivity.errors import ConfigError, DataError
from sensitivity.simulators.pest_files import (format_field, read_instructions, read_observations, read_template,
                                               render_template)
from tests.helpers import ROOT

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # pyemu warns about its optional flopy-based legacy module
    pyemu = pytest.importorskip("pyemu")

EXAMPLE = ROOT / "examples" / "legacy_program"
VALUES = {"E": 2.1e11, "I": 8.333333333333333e-06, "L": 2.5, "P": 1234.5678}
#: Reads beam.out with every instruction this reader runs: primary and secondary markers, l<n>, w, !free!,
#: [fixed]s:e, (semi-fixed)s:e and dum.
INSTRUCTIONS = """pif ~
~TIP DEFLECTION~ ~=~ !tip_w!
l1 ~=~ w !tip_slope!
~DEFLECTION ALONG THE BEAM~
l2 !dum! !x00! !w00!
l1 [x01]9:28 [w01]29:48
l1 (x02)9:28 (w02)29:48
l1 w w !w03!
l7 !dum! !dum! w !w10!
"""


def test_a_template_writes_the_input_file_pyemu_writes_with_at_least_its_precision(tmp_path):
    tpl = tmp_path / "deck.tpl"
    tpl.write_text("ptf $\n* a comment line, copied\nYOUNGS    $ E                $\n"
                   "PAIR      $ i      $ and $   L    $ end\nLOAD      $ p                $\n")
    mine, theirs = tmp_path / "mine.in", tmp_path / "pyemu.in"
    template = read_template(tpl)
    mine.write_text(render_template(template, VALUES))
    pyemu.pst_utils.write_to_template({k.lower(): v for k, v in VALUES.items()}, str(tpl), str(theirs))
    ours, oracle = mine.read_text().splitlines(), theirs.read_text().splitlines()
    assert [len(line) for line in ours] == [len(line) for line in oracle]  # every field in its width
    assert ours[0] == oracle[0] and ours[2].endswith(" end") and ours[2][20:25] == " and "
    expected = [[VALUES["E"]], [VALUES["I"], VALUES["L"]], [VALUES["P"]]]
    for line, reference, spans, values in zip(ours[1:], oracle[1:], template.fields[1:], expected):
        assert [line[:a] for a, _, _ in spans] [:1] == [reference[:a] for a, _, _ in spans][:1]
        for (a, b, _), v in zip(spans, values):
            assert abs(float(line[a:b]) - v) <= abs(float(reference[a:b]) - v)  # at least pyEMU's precision
            assert float(line[a:b]) == v or b - a < 20  # 20 characters hold every float exactly


@pytest.mark.parametrize("value, width, expected", [
    (8.333333333333333e-06, 8, "8.333E-6"),  # '8.33E-06' is the best of Python's E format: one digit less
    (-1234567.891, 9, " -1234568"),  # nearer than '-1.2346E6'
    (0.1, 3, "0.1"), (1e-300, 6, "1E-300"), (2.5, 20, " " * 17 + "2.5"),
])
def test_a_field_holds_the_nearest_number_that_fits(value, width, expected):
    assert format_field(value, width) == expected


def test_a_number_too_wide_for_its_field_is_one_line():
    with pytest.raises(ConfigError, match="does not fit in a field of 2 characters"):
        format_field(-1234.5, 2)


def test_instructions_read_what_pyemu_reads(tmp_path):
    deck = tmp_path / "beam.in"
    deck.write_text(render_template(read_template(EXAMPLE / "beam.tpl"), VALUES))
    subprocess.run(["sh", str(EXAMPLE / "beam.sh"), str(deck), str(tmp_path / "beam.out")], check=True)
    ins = tmp_path / "beam.ins"
    ins.write_text(INSTRUCTIONS)
    ours = read_observations(read_instructions(ins), (tmp_path / "beam.out").read_text(), "beam.out")
    oracle = pyemu.pst_utils.InstructionFile(str(ins)).read_output_file(str(tmp_path / "beam.out"))
    assert list(ours) == read_instructions(ins).names == ["tip_w", "tip_slope", "x00", "w00", "x01", "w01", "x02",
                                                          "w02", "w03", "w10"]
    assert ours == oracle["obsval"].to_dict()
    E, I, L, P = (VALUES[k] for k in "EILP")
    np.testing.assert_allclose([ours["tip_w"], ours["w10"], ours["tip_slope"], ours["x02"]],
                               [P * L**3 / (3 * E * I), P * L**3 / (3 * E * I), P * L**2 / (2 * E * I), 2 * L / 10],
                               rtol=1e-11)


def test_a_marker_not_in_the_output_is_one_line_naming_the_instruction_line(tmp_path):
    ins = tmp_path / "a.ins"
    ins.write_text("pif ~\n~TIP~ !tip!\n~NOWHERE~ !x!\n")
    with pytest.raises(DataError) as err:
        read_observations(read_instructions(ins), "TIP 1.5\nother\n", "out.txt")
    assert str(err.value) == ("out.txt (instruction line 3 of a.ins): the marker 'nowhere' is not found before the "
                              "end of the file")


@pytest.mark.parametrize("text, problem", [
    ("pif\n", "first line must be 'pif"),
    ("pif ~\n!x!\n", "must start with 'l<n>' or a primary marker"),
    ("pif ~\nl1 t10 !x!\n", "tabs (t<n>) and continuations (&) are not supported"),
    ("pif ~\nl1 [x]5:2\n", "must be 1 <= s <= e"),
    ("pif ~\nl1 !x! ~y\n", "an unmatched marker"),
    ("pif ~\nl1 !x!\nl1 !x!\n", "observation 'x' is read twice"),
])
def test_a_bad_instruction_file_is_one_line_naming_its_line(tmp_path, text, problem):
    ins = tmp_path / "bad.ins"
    ins.write_text(text)
    with pytest.raises(ConfigError) as err:
        read_instructions(ins)
    assert problem in str(err.value) and "\n" not in str(err.value) and "bad.ins" in str(err.value)


def test_the_shipped_template_is_a_pest_template_pyemu_reads(tmp_path):
    shutil.copy(EXAMPLE / "beam.tpl", tmp_path)
    assert sorted(pyemu.pst_utils.parse_tpl_file(str(tmp_path / "beam.tpl"))) == sorted(
        read_template(EXAMPLE / "beam.tpl").names) == ["e", "i", "l", "p"]


def test_a_program_with_the_shipped_tpl_and_ins_files_reads_what_pyemu_reads_of_its_run(tmp_path):
    from sensitivity.simulators.program import program_from

    program = program_from(dict(
        command=["sh", "beam.sh"], parameters=["E", "I", "L", "P"], base_dir=str(EXAMPLE), files=["beam.sh"],
        pest_templates={"beam.in": "beam.tpl"}, run_root=str(tmp_path / "runs"), keep_runs=True,
        outputs=[{"kind": "pest", "name": "report", "file": "beam.out", "instructions": "beam.ins"}]))
    x = np.array([[VALUES[k] for k in "EILP"]])
    values = program(x)[0]
    oracle = pyemu.pst_utils.InstructionFile(str(EXAMPLE / "beam.ins")).read_output_file(
        str(tmp_path / "runs" / "run_000000" / "beam.out"))["obsval"]
    names = ["tip_w", "tip_slope"] + [f"w{k:02d}" for k in range(11)]
    np.testing.assert_array_equal(values, oracle[names].to_numpy())
    E, I, L, P = x[0]
    s = np.linspace(0, L, 11)
    np.testing.assert_allclose(values, [P * L**3 / (3 * E * I), P * L**2 / (2 * E * I),
                                        *(P * s**2 * (3 * L - s) / (6 * E * I))], rtol=1e-11, atol=1e-300)
