"""`sensitivity run experiment=study` on the study `init` writes: one command end to end, a rerun that does no
work and says so, a changed setting that reruns exactly the stages it reaches, and a kill mid-pipeline whose
rerun ends equal to an uninterrupted run."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import xarray as xr

from tests.helpers import CLI

pytestmark = pytest.mark.slow

#: The stages of init's template (workflows/init.py) and what each is fed: sweep -> propagate, sweep -> indices.
STAGES = ("sweep", "propagate", "indices")
#: Small, fast settings for every stage (command-line overrides of `run` are passed to every stage).
SMALL = ["grid.n=256", "sobol.n=256", "propagation.n_samples=2048", "plots=false", "progress=false"]


def study_folder(tmp_path: Path) -> Path:
    done = subprocess.run(CLI + ["init", str(tmp_path / "study")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return tmp_path / "study"


def run(study: Path, *extra: str, directory: str = "") -> subprocess.CompletedProcess:
    where = [f"hydra.run.dir={directory}"] if directory else []
    done = subprocess.run(CLI + ["run", "experiment=study", *SMALL, *where, *extra], cwd=study, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def published(run_dir: Path) -> dict[str, int]:
    """Stage -> when its manifest was last written [ns]: a stage that ran publishes a new one."""
    return {s: (run_dir / s / "manifest.json").stat().st_mtime_ns for s in STAGES}


def skipped(done: subprocess.CompletedProcess) -> list[str]:
    """The stages whose log line says they found their complete result (nothing to do)."""
    lines = (done.stdout + done.stderr).splitlines()
    return [s for s in STAGES if any(f"- {s}: " in line and "nothing to do" in line for line in lines)]


def data_of(path: Path) -> xr.Dataset:
    with xr.open_dataset(path) as ds:
        return ds.load().drop_attrs(deep=False)


def test_a_study_runs_end_to_end_then_skips_then_reruns_what_a_change_reaches(tmp_path):
    study = study_folder(tmp_path)
    first = run(study)
    run_dir = study / "outputs" / "run" / "study"
    assert skipped(first) == []
    assert (run_dir / "report.html").is_file()
    for stage, name in zip(STAGES, ("sweep.nc", "propagation.nc", "indices.nc")):
        assert (run_dir / stage / name).is_file()
    before = published(run_dir)

    second = run(study)
    assert skipped(second) == list(STAGES), second.stderr[-3000:]  # every stage says it has nothing to do
    assert published(run_dir) == before

    third = run(study, "propagation.n_samples=1024")  # a propagate setting: propagate alone reruns
    after = published(run_dir)
    assert skipped(third) == ["sweep", "indices"]
    assert [s for s in STAGES if after[s] != before[s]] == ["propagate"]

    fourth = run(study, "propagation.n_samples=1024", "grid.n=128")  # the sweep, and both stages it feeds
    assert skipped(fourth) == []
    assert all(published(run_dir)[s] != after[s] for s in STAGES)

    forced = run(study, "propagation.n_samples=1024", "grid.n=128", "force=[indices]")
    assert skipped(forced) == ["sweep", "propagate"]


def test_a_kill_mid_pipeline_then_a_rerun_equals_an_uninterrupted_run(tmp_path):
    study = study_folder(tmp_path)
    killed, clean = study / "killed", study / "clean"
    process = subprocess.Popen(CLI + ["run", "experiment=study", *SMALL, f"hydra.run.dir={killed}"], cwd=study,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while not (killed / "propagate").exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # the sweep is published, the next stage has started
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert (killed / "sweep" / "manifest.json").is_file() and not (killed / "indices" / "manifest.json").exists()
    resumed = run(study, directory=str(killed))
    assert "sweep" in skipped(resumed)
    run(study, directory=str(clean))
    for stage in STAGES:
        files = json.loads((killed / stage / "manifest.json").read_text())["files"]
        assert set(files) == set(json.loads((clean / stage / "manifest.json").read_text())["files"])
        for name in (n for n in files if n.endswith(".nc")):
            xr.testing.assert_allclose(data_of(killed / stage / name), data_of(clean / stage / name), rtol=0,
                                       atol=0)


def test_a_setting_that_a_later_stage_refuses_stops_the_study_before_its_first_stage(tmp_path):
    """Correlated inputs with Sobol' sampling (which assumes independence): the indices stage refuses them, and the
    study says so, naming the stage, before the sweep (its first stage) runs: exit 2, one error line, no stage's
    folder."""
    study = study_folder(tmp_path)
    done = subprocess.run(CLI + ["run", "experiment=study", *SMALL, "space.correlation=[[1,0.5,0],[0.5,1,0],[0,0,1]]",
                                 "hydra.run.dir=out"], cwd=study, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    said = done.stdout + done.stderr
    errors = [line for line in said.splitlines() if "ERROR" in line]
    assert len(errors) == 1 and "stage 'indices': " in errors[0] and "assumes independent inputs" in errors[0]
    assert [p.name for p in (study / "out").iterdir() if p.is_dir()] == [".hydra"]  # Hydra's own record
    assert "stage sweep" not in said


def test_an_edited_helper_module_or_declared_file_reruns_every_stage_that_reads_the_model(tmp_path):
    """model.py imports a helper of the study folder and the config declares a table it reads
    (``model.depends_on``): editing either reruns the three stages (each evaluates the model), with the new values;
    editing a file nothing reads reruns none."""
    study = study_folder(tmp_path)
    (study / "helpers.py").write_text("OFFSET = 0.0\n")
    (study / "table.txt").write_text("1\n")
    (study / "notes.txt").write_text("nothing reads this\n")
    model = (study / "model.py").read_text().replace("return a + b**2 * c", "return a + b**2 * c + OFFSET")
    (study / "model.py").write_text(model.replace("import tensorflow as tf\n",
                                                  "import tensorflow as tf\n\nfrom helpers import OFFSET\n"))
    declared = "model.depends_on=[table.txt]"
    run(study, declared)
    run_dir = study / "outputs" / "run" / "study"
    before = published(run_dir)
    mean = float(data_of(run_dir / "sweep" / "sweep.nc")["y"].mean())

    (study / "notes.txt").write_text("edited\n")
    assert skipped(run(study, declared)) == list(STAGES)

    (study / "helpers.py").write_text("OFFSET = 10.0\n")
    assert skipped(run(study, declared)) == []
    after = published(run_dir)
    assert all(after[s] != before[s] for s in STAGES)
    assert float(data_of(run_dir / "sweep" / "sweep.nc")["y"].mean()) == pytest.approx(mean + 10.0, rel=1e-6)

    (study / "table.txt").write_text("2\n")
    assert skipped(run(study, declared)) == []
