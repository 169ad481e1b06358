"""The run-directory protocol of every workflow that writes, tried as a demanding user would.

Each case ends in a one-line refusal or in a result set equal to an uninterrupted run (compared variable
by variable), never in a traceback or a mixed set: a rerun with other settings, a rerun with the same
settings (nothing to do), a kill -9 while a multi-file set is being published, two runs at once, a
consumer fed a result from another surrogate, an edited one or one without its record, SIGINT and SIGTERM,
and a run directory this user cannot write.
"""
from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import xarray as xr

from sensitivity.datasets import open_result
from sensitivity.datasets.publish import MANIFEST, OtherSettings, ResultSet, Unverified, verified
from sensitivity.errors import DataError
from tests.helpers import CLI, ROOT
from tests.helpers.calibration_models import LINEAR, linear_observations
from workflows import calibrate, posterior

#: The variables of two result files compared, the provenance attributes (times, paths) left out.
def assert_same_data(a, b) -> None:
    with xr.open_dataset(a) as left, xr.open_dataset(b) as right:
        xr.testing.assert_allclose(left.load().drop_attrs(deep=False), right.load().drop_attrs(deep=False),
                                   rtol=0, atol=0)


def fitted(compose_config, tmp_path, directory, *extra):
    path, _, _ = linear_observations(tmp_path)
    return calibrate.run(compose_config("calibrate", [*LINEAR, f"observations.path={path}", "step_slice.points=3",
                                                      *extra], output_dir=tmp_path / directory))


def test_a_rerun_with_other_settings_is_refused_and_the_same_settings_do_no_work(compose_config, tmp_path):
    first = fitted(compose_config, tmp_path, "run")
    manifest = json.loads((first.parent / MANIFEST).read_text())
    stamps = {name: (first.parent / name).stat().st_mtime_ns for name in manifest["files"]}
    again = fitted(compose_config, tmp_path, "run")  # the same settings: the complete set, untouched
    assert again == first and {n: (first.parent / n).stat().st_mtime_ns for n in stamps} == stamps
    with pytest.raises(OtherSettings, match=r"holds a calibrate result of other settings; write into another run "
                                            r"directory") as err:
        fitted(compose_config, tmp_path, "run", "level=0.9")
    assert "\n" not in str(err.value)
    assert json.loads((first.parent / MANIFEST).read_text()) == manifest  # nothing of the refused run written


PUBLISH_AND_DIE = textwrap.dedent("""
    import os, signal, sys
    sys.path.insert(0, {root!r})
    from sensitivity.datasets import publish
    real, moved = os.replace, []
    def replace(src, dst):
        real(src, dst)
        if ".staging-" in str(src) and ".staging-" not in str(dst):  # a file of the set moving in
            moved.append(dst)
            if len(moved) == 2:  # one file of the new set in place, the rest still staged
                os.kill(os.getpid(), signal.SIGKILL)
    publish.os.replace = replace
    from workflows.cli import main
    main(sys.argv[1:])
""")


@pytest.mark.slow
def test_a_kill_while_a_set_is_published_leaves_no_set_that_looks_complete(tmp_path):
    """kill -9 after the first files of a set moved in: no manifest, so every reader refuses the files; the same
    command then publishes the whole set, equal to an uninterrupted run."""
    obs, _, _ = linear_observations(tmp_path)
    command = ["calibrate", *LINEAR, f"observations.path={obs}", "step_slice.points=3", "plots=true"]
    run_dir, clean_dir = tmp_path / "killed", tmp_path / "clean"
    script = PUBLISH_AND_DIE.format(root=str(ROOT))
    died = subprocess.run([sys.executable, "-c", script, *command, f"hydra.run.dir={run_dir}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert died.returncode == -signal.SIGKILL, died.stderr[-2000:]
    assert not (run_dir / MANIFEST).exists()
    in_place = [p for p in run_dir.glob("*") if p.suffix in (".nc", ".png")]
    assert in_place, "the kill came after files of the new set moved in"
    for path in in_place:
        with pytest.raises(Unverified, match="has no checksum record"):
            verified(path)
    resumed = subprocess.run(CLI + [*command, f"hydra.run.dir={run_dir}"], cwd=ROOT, capture_output=True, text=True,
                             timeout=600)
    clean = subprocess.run(CLI + [*command, f"hydra.run.dir={clean_dir}"], cwd=ROOT, capture_output=True, text=True,
                           timeout=600)
    assert resumed.returncode == 0 and clean.returncode == 0, resumed.stderr[-2000:] + clean.stderr[-2000:]
    files = json.loads((run_dir / MANIFEST).read_text())["files"]
    assert set(files) == set(json.loads((clean_dir / MANIFEST).read_text())["files"])
    assert not list(run_dir.glob(".staging-*"))
    for name in files:
        verified(run_dir / name)
        if name.endswith(".nc"):
            assert_same_data(run_dir / name, clean_dir / name)


HOLD = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r})
    from sensitivity.datasets.publish import ResultSet
    with ResultSet(sys.argv[1], workflow="calibrate", fingerprint="other"):
        print("held", flush=True)
        time.sleep(120)
""")


@pytest.mark.slow
def test_a_second_run_into_a_busy_directory_is_refused_in_one_line(tmp_path):
    obs, _, _ = linear_observations(tmp_path)
    run_dir = tmp_path / "busy"
    holder = subprocess.Popen([sys.executable, "-c", HOLD.format(root=str(ROOT)), str(run_dir)], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        second = subprocess.run(CLI + ["calibrate", *LINEAR, f"observations.path={obs}",
                                       f"hydra.run.dir={run_dir}"], cwd=ROOT, capture_output=True, text=True,
                                timeout=600)
    finally:
        holder.kill()
        holder.wait()
    assert second.returncode == 2 and "Traceback" not in second.stderr
    assert "is being written by another run (pid" in second.stdout + second.stderr
    assert not (run_dir / "calibration.nc").exists()


@pytest.mark.slow
def test_a_consumer_refuses_an_edited_result_one_without_its_record_or_of_other_observations(compose_config,
                                                                                            tmp_path):
    first = fitted(compose_config, tmp_path, "cal")
    obs, _, _ = linear_observations(tmp_path)
    sample = ["n_chains=2", "nuts.num_warmup=20", "nuts.num_draws=20", "throw=false", "plots=false",
              "jacobian.jit_compile=false", "jit_compile=false"]

    def run_posterior(calibration, directory, *extra, observations=obs):
        return posterior.run(compose_config("posterior", [*LINEAR, f"observations.path={observations}",
                                                          f"calibration={calibration}", *sample, *extra],
                                            output_dir=tmp_path / directory))

    edited = tmp_path / "edited"
    shutil.copytree(first.parent, edited)
    with xr.open_dataset(edited / "calibration.nc") as ds:
        changed = ds.load()
    changed["estimate"] = changed["estimate"] * 1.01
    changed.to_netcdf(edited / "calibration.nc")
    with pytest.raises(Unverified, match="does not match its run's manifest"):
        run_posterior(edited / "calibration.nc", "p1")
    (edited / MANIFEST).unlink()
    with pytest.raises(Unverified, match="has no checksum record .* or accept it as it is with allow_unverified=true"):
        run_posterior(edited / "calibration.nc", "p2")
    assert open_result(run_posterior(edited / "calibration.nc", "p3", "allow_unverified=true"))["draws"].size
    other_obs = tmp_path / "other_obs.csv"
    lines = obs.read_text().splitlines()
    other_obs.write_text("\n".join([lines[0], *[l.replace(l.split(",")[1], str(float(l.split(",")[1]) + 0.5))
                                                 for l in lines[1:]]]) + "\n")
    with pytest.raises(DataError, match=r"was computed from other observations than .*allow_other_sources=true"):
        run_posterior(first, "p4", observations=other_obs)
    for directory in ("p1", "p2", "p4"):
        assert not (tmp_path / directory / "posterior.nc").exists()


@pytest.mark.slow
@pytest.mark.parametrize("sig, code, word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_sigint_and_sigterm_end_in_one_line_and_the_rerun_resumes(tmp_path, sig, code, word):
    run_dir = tmp_path / "run"
    command = CLI + ["sweep", "grid.n=4194304", "jacobian=float64", "points_per_part=32768", "plots=false",
                     "progress=false", f"hydra.run.dir={run_dir}"]  # 128 parts: the first lands early
    # A process started with SIGINT ignored keeps it ignored (the CLI too, as POSIX has it): a test suite run as a
    # shell's background job (`... &`) ignores SIGINT, and so would the sweep. Started with a handler in place, which
    # exec resets to the default, the sweep gets SIGINT whatever the suite's own disposition.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    finally:
        signal.signal(signal.SIGINT, previous)
    deadline = time.monotonic() + 300
    while not list((run_dir / "sweep.nc.parts").glob("part-*.nc")) and time.monotonic() < deadline \
            and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, "the sweep ended before its first part was seen: make the grid larger"
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == code, err[-2000:]
    assert f"sweep: {word}; rerun the same command to resume" in out + err and "Traceback" not in err
    assert list((run_dir / "sweep.nc.parts").glob("part-*.nc")) and not (run_dir / "sweep.nc").exists()


@pytest.mark.slow
def test_a_run_directory_this_user_cannot_write_is_refused_in_one_line(tmp_path):
    """As a non-root user: a folder without write permission; as root (who writes anywhere): an immutable one."""
    import os

    locked = tmp_path / "locked"
    locked.mkdir()
    if os.geteuid() == 0:
        if subprocess.run(["chattr", "+i", str(locked)], capture_output=True).returncode != 0:
            pytest.skip("root, and this file system cannot make a folder immutable (chattr +i)")
    else:
        locked.chmod(0o555)
    try:
        done = subprocess.run(CLI + ["sweep", "grid.n=4"], cwd=locked, capture_output=True, text=True, timeout=300)
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(locked)], capture_output=True)
        else:
            locked.chmod(0o755)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if "cannot write the run directory" in line]
    assert len(lines) == 1 and "is not writable by this user" in lines[0]
    assert list(locked.iterdir()) == []


def test_a_result_set_publishes_whole_and_verifies(tmp_path):
    """The protocol alone: staged files appear only with their manifest, a changed byte is caught."""
    with ResultSet(tmp_path / "run", workflow="test", fingerprint="a") as results:
        assert not results.complete
        (results.staging / "one.txt").write_text("1")
        (results.staging / "artifact").mkdir()
        (results.staging / "artifact" / "two.txt").write_text("2")
        assert not (tmp_path / "run" / "one.txt").exists()
        results.publish()
    files = json.loads((tmp_path / "run" / MANIFEST).read_text())["files"]
    assert set(files) == {"one.txt", "artifact/two.txt"}
    assert verified(tmp_path / "run" / "one.txt") == tmp_path / "run" / "one.txt"
    with ResultSet(tmp_path / "run", workflow="test", fingerprint="a") as again:
        assert again.complete
    (tmp_path / "run" / "one.txt").write_text("changed")
    with pytest.raises(Unverified, match="does not match its run's manifest"):
        verified(tmp_path / "run" / "one.txt")
    with ResultSet(tmp_path / "run", workflow="test", fingerprint="a") as damaged:
        assert not damaged.complete  # a changed file: the set is computed again
    assert np.all([not p.name.startswith(".staging") for p in (tmp_path / "run").iterdir()])
