"""A simulator that is a program (sensitivity.simulators.program): the shipped legacy program (POSIX sh + awk) run
through it equals a direct run of the program and the closed form it computes, through the runner too; each failure
is one line naming the run, its point and its kept folder; the fingerprint follows what the program reads;
templates run no code; bad settings are one line."""
from __future__ import annotations

import pickle
import re
import shutil
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from sensitivity.errors import ConfigError, ModelError
from sensitivity.simulators.program import Program, ProgramSettings, program_from
from sensitivity.simulators.runner import RunnerSettings, run_simulator
from sensitivity.surrogates.simulator import simulator_from
from tests.helpers import ROOT

EXAMPLE = ROOT / "examples" / "legacy_program"
NAMES = ["E", "I", "L", "P"]
#: Steel to aluminium, 10 to 100 cm deep square-ish sections, 1 to 3 m, 0.1 to 5 kN [Pa, m^4, m, N].
POINTS = np.random.default_rng(57).uniform([7e10, 1e-6, 1.0, 100.0], [2.1e11, 1e-4, 3.0, 5000.0], (7, 4))
OUTPUTS = [{"kind": "marker", "name": "tip_slope", "file": "beam.out", "marker": "TIP SLOPE (RAD)"},
           {"kind": "table", "name": "deflection", "file": "beam.out", "after": "DEFLECTION ALONG THE BEAM",
            "skip": 1, "column": 3}]


def beam(tmp_path: Path, **changes) -> Program:
    """The shipped example as a program simulator, its runs under ``tmp_path/runs``."""
    settings = dict(command=["sh", "beam.sh"], parameters=NAMES, base_dir=str(EXAMPLE),
                    templates={"beam.in": "beam.in.j2"}, files=["beam.sh"],
                    units={"E": "Pa", "I": "m4", "L": "m", "P": "N"}, outputs=OUTPUTS,
                    run_root=str(tmp_path / "runs"))
    return program_from({**settings, **changes})


def closed_form(x: np.ndarray) -> np.ndarray:
    """Euler-Bernoulli cantilever under a tip load: the tip slope P L^2 / (2 E I), then w(x_k) = P x^2 (3 L - x) /
    (6 E I) at x_k = k L / 10, k = 0..10."""
    E, I, L, P = x.T
    s = np.linspace(0.0, 1.0, 11)[None, :] * L[:, None]
    w = P[:, None] * s**2 * (3 * L[:, None] - s) / (6 * (E * I)[:, None])
    return np.column_stack([P * L**2 / (2 * E * I), w])


def run_by_hand(x: np.ndarray, folder: Path) -> np.ndarray:
    """The program run directly: the deck written and the report parsed here, independently of the library."""
    rows = []
    for k, (E, I, L, P) in enumerate(x):
        folder.mkdir(parents=True, exist_ok=True)
        deck = "".join(f"{key:<10}{value:20.12E}\n" for key, value in
                       [("YOUNGS", E), ("INERTIA", I), ("LENGTH", L), ("LOAD", P)]) + f"{'STATIONS':<10}{10:20d}\n"
        (folder / f"deck{k}.in").write_text(deck)
        subprocess.run(["sh", str(EXAMPLE / "beam.sh"), f"deck{k}.in", f"report{k}.out"], cwd=folder, check=True)
        report = (folder / f"report{k}.out").read_text()
        slope = float(re.search(r"TIP SLOPE \(RAD\)\s*=\s*(\S+)", report).group(1))
        table = report.split("DEFLECTION ALONG THE BEAM")[1].splitlines()[2:13]
        rows.append([slope] + [float(line[28:48]) for line in table])
    return np.array(rows)


def alive(pid: int) -> bool:
    """Whether the process ``pid`` still runs after a moment for a SIGKILL sent to it to land (a zombie waiting for
    its reaper does not run); a process that was not killed runs on."""
    for _ in range(100):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        if state in ("Z", "X"):
            return False
        time.sleep(0.05)
    return True


def test_the_legacy_program_through_the_simulator_equals_a_direct_run_and_its_closed_form(tmp_path):
    program = beam(tmp_path)
    values = program(POINTS)
    direct = run_by_hand(POINTS, tmp_path / "by_hand")
    np.testing.assert_array_equal(values, direct)
    np.testing.assert_allclose(values, closed_form(POINTS), rtol=1e-11, atol=1e-300)
    assert values.shape == (7, 12)
    assert [p.name for p in (tmp_path / "runs").iterdir() if p.is_dir()] == []  # each removed after success


def test_outputs_are_laid_onto_the_output_shape_and_kept_runs_hold_their_inputs(tmp_path):
    program = beam(tmp_path, keep_runs=True, output_shape=[3, 4])
    values = program(POINTS[:2])
    np.testing.assert_allclose(values, closed_form(POINTS[:2]).reshape(2, 3, 4), rtol=1e-11, atol=1e-300)
    folders = sorted(p for p in (tmp_path / "runs").iterdir() if p.is_dir())
    assert [p.name for p in folders] == ["run_000000", "run_000001"]
    deck = (folders[1] / "beam.in").read_text()
    assert "RUN 1 " in deck and "E IN Pa, I IN m4" in deck and f"{POINTS[1, 2]:20.12E}" in deck
    assert (folders[1] / "exit_status.txt").read_text() == "0\n" and (folders[1] / "stdout.txt").is_file()


@pytest.mark.parametrize("workers", [1, 2])
def test_the_runner_runs_the_program_and_a_rerun_runs_nothing(tmp_path, workers):
    sim = simulator_from(beam(tmp_path, keep_runs=True), what="`training.simulator`", output_shape=(12,))
    path = tmp_path / "runs.nc"
    settings = RunnerSettings(batch_size=3, workers=workers)
    values = run_simulator(sim, POINTS, path, settings).values
    np.testing.assert_array_equal(values, run_by_hand(POINTS, tmp_path / "by_hand"))
    runs = sorted(p.name for p in (tmp_path / "runs").iterdir() if p.is_dir())
    assert len(runs) == len(POINTS) == len(set(runs))  # one folder per run, none shared by the workers
    again = run_simulator(sim, POINTS, path, settings).values
    assert sorted(p.name for p in (tmp_path / "runs").iterdir() if p.is_dir()) == runs  # nothing run again
    np.testing.assert_array_equal(again, values)


def test_the_program_pickles_and_its_runner_fingerprint_is_the_programs(tmp_path):
    program = beam(tmp_path)
    twin = pickle.loads(pickle.dumps(program))
    assert twin == program and twin.fingerprint() == program.fingerprint()
    assert simulator_from(program).identity == program.fingerprint()
    assert simulator_from(program).label == "simulator program 'sh beam.sh' (`training.simulator`)"


def test_an_edited_template_or_script_changes_the_fingerprint_and_where_runs_go_does_not(tmp_path):
    base = tmp_path / "study"
    shutil.copytree(EXAMPLE, base)
    first = beam(tmp_path, base_dir=str(base)).fingerprint()
    assert beam(tmp_path / "elsewhere", base_dir=str(base), keep_runs=True, timeout=60).fingerprint() == first
    template = base / "beam.in.j2"
    template.write_text(template.read_text().replace("format(10)", "format(20)"))
    edited = beam(tmp_path, base_dir=str(base)).fingerprint()
    assert edited != first
    (base / "beam.sh").write_text((base / "beam.sh").read_text() + "\n# a comment\n")
    assert beam(tmp_path, base_dir=str(base)).fingerprint() not in (first, edited)


def failing(tmp_path: Path, script: str, **changes) -> tuple[str, Path]:
    """The one-line error of a program ``sh -c script`` (a beam.out rule) at one point, and its kept folder."""
    program = program_from(dict(command=["sh", "-c", script], parameters=["a", "b"], outputs=OUTPUTS[:1],
                                run_root=str(tmp_path / "runs"), **changes))
    with pytest.raises(ModelError) as err:
        program(np.array([[1.5, -2.0]]))
    message = str(err.value)
    folder = Path(message.rsplit("its folder is kept: ", 1)[1])
    assert "\n" not in message and "run 0 at {a = 1.5, b = -2}" in message
    assert folder.is_dir() and folder.parent == tmp_path / "runs"
    assert {"stdout.txt", "stderr.txt", "exit_status.txt"} <= {p.name for p in folder.iterdir()}
    return message, folder


def test_a_non_zero_exit_is_one_line_with_the_last_line_of_stderr(tmp_path):
    message, folder = failing(tmp_path, "echo started; echo 'BEAM: no deck' >&2; exit 3")
    assert "exited with status 3 (stderr: BEAM: no deck)" in message
    assert (folder / "exit_status.txt").read_text() == "3\n" and (folder / "stdout.txt").read_text() == "started\n"


def test_a_missing_output_is_one_line(tmp_path):
    message, _ = failing(tmp_path, "true")
    assert "output 'tip_slope': the file beam.out is missing" in message


def test_an_unparseable_output_is_one_line(tmp_path):
    message, _ = failing(tmp_path, "echo 'TIP SLOPE (RAD) = ?????' > beam.out")
    assert "no number after the marker 'TIP SLOPE (RAD)' in beam.out" in message


def test_a_nan_is_one_line(tmp_path):
    message, _ = failing(tmp_path, "echo 'TIP SLOPE (RAD) = NaN' > beam.out")
    assert "output 'tip_slope' is nan at position 0 of 1" in message


def test_a_run_past_its_time_is_killed_with_its_whole_process_group(tmp_path):
    message, folder = failing(tmp_path, "sleep 60 & echo $! > child.pid; wait", timeout=0.5)
    assert "did not finish within `timeout` = 0.5 s; its process group" in message
    assert not alive(int((folder / "child.pid").read_text()))  # the program's child, not only the program
    assert (folder / "exit_status.txt").read_text().startswith("killed")


def test_a_failure_through_a_worker_process_keeps_its_one_line(tmp_path):
    program = program_from(dict(command=["sh", "-c", "exit 4"], parameters=["a", "b"], outputs=OUTPUTS[:1],
                                run_root=str(tmp_path / "runs")))
    sim = simulator_from(program, what="`verify.simulator`")
    with pytest.raises(ModelError) as err:
        run_simulator(sim, np.array([[1.0, 2.0]] * 4), tmp_path / "runs.nc", RunnerSettings(batch_size=2, workers=2))
    message = str(err.value)
    assert message.startswith("simulator program \"sh -c 'exit 4'\" (`verify.simulator`): program")
    assert "exited with status 4" in message and "\n" not in message
    assert Path(message.rsplit("its folder is kept: ", 1)[1]).is_dir()


@pytest.mark.parametrize("text, problem", [
    ("{{ ''.__class__.__mro__ }}", "SecurityError"),
    ("{{ cycler.__init__.__globals__ }}", "SecurityError"),
    ("{{ E.__class__.__subclasses__() }}", "SecurityError"),
])
def test_a_template_cannot_run_code(tmp_path, text, problem):
    (tmp_path / "t.j2").write_text(text)
    with pytest.raises(ConfigError) as err:
        program_from(dict(command=["true"], parameters=["E"], templates={"in": "t.j2"}, outputs=OUTPUTS[:1],
                          base_dir=str(tmp_path)))
    assert problem in str(err.value) and "unsafe" in str(err.value) and "\n" not in str(err.value)


def test_a_misspelt_name_in_a_template_is_one_line_naming_its_line(tmp_path):
    (tmp_path / "t.j2").write_text("first line\nvalue {{ Ee }}\n")
    with pytest.raises(ConfigError, match=r"^template .*t\.j2 line 2: UndefinedError: 'Ee' is undefined$"):
        program_from(dict(command=["true"], parameters=["E"], templates={"in": "t.j2"}, outputs=OUTPUTS[:1],
                          base_dir=str(tmp_path)))


@pytest.mark.parametrize("changes, problem", [
    ({"command": "sh beam.sh"}, "`command` must be an argument list"),
    ({"command": ["no-such-program-57"]}, "`command[0]` 'no-such-program-57' is not a program on PATH"),
    ({"parameters": ["E", "E"]}, "`parameters` must be a non-empty list of distinct names"),
    ({"parameters": ["index"]}, "'index' is a name templates reserve"),
    ({"outputs": [{"kind": "marker", "name": "a", "file": "o"}]}, "`marker` must be non-empty text"),
    ({"outputs": [{"kind": "colum", "name": "a"}]}, "`kind` must be one of"),
    ({"outputs": [{"kind": "table", "name": "a", "file": "o", "colum": 2}]}, "'colum' is not a setting of a 'table'"),
    ({"outputs": [{"kind": "table", "name": "a", "file": "o", "column": 0}]}, "`column` must be an integer >= 1"),
    ({"timeout": -1}, "`timeout` must be a number of seconds > 0"),
    ({"keep_runs": "yes"}, "`keep_runs` must be true or false"),
    ({"templates": {"beam.in": "nowhere.j2"}}, "nowhere.j2 cannot be read"),
    ({"files": ["beam.sh", "missing.dat"]}, "`files`: 'missing.dat' is not found"),
    ({"templates": {"../beam.in": "beam.in.j2"}}, "must be a relative path inside the run folder"),
    ({"units": {"Q": "m"}}, "`units`: 'Q' is not one of `parameters`"),
    ({"output_shape": [0]}, "`output_shape` must be a list of integers >= 1"),
    ({"runs": "x"}, "'runs' is not a setting of a program simulator"),
])
def test_a_bad_setting_is_one_line_naming_it(tmp_path, changes, problem):
    with pytest.raises(ConfigError) as err:
        beam(tmp_path, **changes)
    assert problem in str(err.value) and "\n" not in str(err.value)


def test_settings_map_from_a_plain_mapping_by_keyword(tmp_path):
    settings = ProgramSettings(command=["sh", "beam.sh"], parameters=NAMES, outputs=OUTPUTS)
    assert settings.command == ("sh", "beam.sh") and settings.outputs[1].kind == "table"
    assert settings.run_root == "program_runs" and settings.keep_runs is False and settings.timeout is None


def test_the_shipped_yaml_settings_map_onto_the_program_by_keyword(tmp_path):
    import yaml

    settings = yaml.safe_load((EXAMPLE / "beam.yaml").read_text())
    program = program_from({**settings, "base_dir": str(EXAMPLE), "run_root": str(tmp_path / "runs")})
    assert program.settings.timeout == 60 and [r.name for r in program.outputs] == ["tip_slope", "deflection"]
    np.testing.assert_allclose(program(POINTS[:2]), closed_form(POINTS[:2]), rtol=1e-11, atol=1e-300)
