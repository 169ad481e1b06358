"""Sharded sweeps as Hydra multiruns: the `local` launcher, `merge`, a failed shard rerun alone, the SLURM config."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import yaml

from sensitivity.store.parts import PartStore
from sensitivity.errors import ConfigError, DataError
from tests.helpers import ROOT
from tests.helpers.cf import cf_errors
from tests.helpers.functions import ishigami_jacobian
from workflows import merge, sweep

CLI = [sys.executable, "-m", "workflows"]
#: 512 points, 4 parts of 64 per shard: enough to kill a shard between parts.
GRID = ["grid.n=512", "jacobian.chunk_size=64", "points_per_part=64", "plots=false", "progress=false"]


def at(path) -> str:
    """An ``output_dir`` override for a job directory (its name holds ``=`` and ``,``: quote it)."""
    return f"output_dir='{path}'"


def values(path) -> xr.Dataset:
    """A result without its global attributes (provenance differs between runs by design)."""
    with xr.open_dataset(path) as ds:
        return ds.load().drop_attrs(deep=False)


@pytest.mark.slow
def test_local_multirun_then_merge_equals_one_process_and_a_failed_shard_reruns_alone(compose_config, tmp_path,
                                                                                       monkeypatch):
    multirun = tmp_path / "multirun"
    launched = subprocess.run(CLI + ["sweep", "-m", "grid.shard=0,1", "grid.num_shards=2", *GRID,
                                     "hydra/launcher=local", "hydra.launcher.n_jobs=2", f"hydra.sweep.dir={multirun}"],
                              cwd=ROOT, capture_output=True, text=True)
    assert launched.returncode == 0, launched.stderr[-2000:]
    pids = re.findall(r"#\d started: pid (\d+)", launched.stdout + launched.stderr)
    assert len(set(pids)) == 2, "each job runs in its own fresh process"
    jobs = sorted(multirun.glob("*grid.shard-*"))
    assert len(jobs) == 2 and all((j / "sweep.nc").is_file() for j in jobs)

    whole = sweep.run(compose_config("sweep", GRID, output_dir=tmp_path / "whole"))
    merged = merge.run(compose_config("merge", [f"input_dir={multirun}"], output_dir=tmp_path / "merged"))
    xr.testing.assert_identical(values(merged), values(whole))
    assert cf_errors(merged) == []

    # shard 1 dies after its first part: the merge is refused, naming it and how to rerun it alone
    failed = jobs[1]
    (failed / "sweep.nc").unlink()
    write = PartStore.write

    def crash_after_one_part(self, ds, start, stop):
        write(self, ds, start, stop)
        raise KeyboardInterrupt("killed")

    monkeypatch.setattr(PartStore, "write", crash_after_one_part)
    overrides = yaml.safe_load((failed / ".hydra" / "overrides.yaml").read_text())
    with pytest.raises(KeyboardInterrupt):
        sweep.run(compose_config("sweep", [*overrides, at(failed)]))
    monkeypatch.undo()
    with pytest.raises(DataError, match=r"missing shard\(s\) 1 of 2 \(1: unfinished, 1 part\(s\) on disk") as err:
        merge.run(compose_config("merge", [f"input_dir={multirun}"], output_dir=tmp_path / "refused"))
    assert not (tmp_path / "refused" / "sweep.nc").exists()
    rerun = shlex.split(str(err.value).split("rerun them alone (finished parts are kept): ")[1])
    assert rerun[:3] == ["sensitivity", "sweep", "-m"] and "grid.shard=1" in rerun
    resumed = subprocess.run(CLI + rerun[1:], cwd=ROOT, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resumed: 1 of 4 parts" in (failed / "sweep.log").read_text()
    merged = merge.run(compose_config("merge", [f"input_dir={multirun}"], output_dir=tmp_path / "merged2"))
    xr.testing.assert_identical(values(merged), values(whole))


@pytest.mark.slow
def test_multirun_flag_after_the_overrides_and_the_merge_hint_repeats_the_study(tmp_path):
    """``-m`` written after an override still launches the multirun (argparse alone would leave the overrides
    after it unread), and merge's next command names the shards' study, so that it runs as printed."""
    multirun, work = tmp_path / "multirun", tmp_path / "work"
    work.mkdir()
    launched = subprocess.run(CLI + ["sweep", "experiment=ishigami", "-m", "grid.shard=0,1", "grid.num_shards=2",
                                     *GRID, f"hydra.sweep.dir={multirun}"], cwd=work, capture_output=True, text=True)
    assert launched.returncode == 0, launched.stderr[-2000:]
    assert len(list(multirun.glob("*/sweep.nc"))) == 2
    merged = subprocess.run(CLI + ["merge", str(multirun)], cwd=work, capture_output=True, text=True)
    assert merged.returncode == 0, merged.stderr[-2000:]
    hint = re.search(r"next: sensitivity (.*)", merged.stdout + merged.stderr).group(1).split()
    assert hint[:2] == ["indices", "experiment=ishigami"], hint
    followed = subprocess.run(CLI + hint + ["methods=[dgsm]", "plots=false", "progress=false"], cwd=work,
                              capture_output=True, text=True)
    assert followed.returncode == 0, followed.stderr[-2000:]


@pytest.mark.slow
def test_a_config_sweep_merges_along_its_swept_keys(compose_config, tmp_path):
    multirun = tmp_path / "multirun"
    for n in (48, 32):
        for shard in (0, 1):
            overrides = [f"grid.n={n}", f"grid.shard={shard}", "grid.num_shards=2", "jacobian=float64", "plots=false"]
            job = multirun / ",".join(overrides)
            sweep.run(compose_config("sweep", [*overrides, at(job)]))
            (job / ".hydra").mkdir()
            (job / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    ds = xr.open_dataset(merge.run(compose_config("merge", [f"input_dir={multirun}"], output_dir=tmp_path / "m")))
    assert list(ds["grid_n"].values) == [32, 48] and ds["grid_n"].attrs["override_key"] == "grid.n"
    assert ds.sizes["sample"] == 48 and list(ds["n_samples"].values) == [32, 48]
    x = ds["x"].values
    np.testing.assert_array_equal(x[0, :32], x[1, :32])  # a Sobol' design of 32 points is the first 32 of 48
    assert np.isnan(x[0, 32:]).all() and np.isnan(ds["jacobian"].values[0, 32:]).all()
    for i, n in enumerate((32, 48)):
        np.testing.assert_allclose(ds["jacobian"].values[i, :n], ishigami_jacobian(x[i, :n]), rtol=1e-10, atol=1e-10)
    assert cf_errors(Path(ds.encoding["source"])) == []


@pytest.mark.slow
def test_merge_bad_input_fails_clearly(compose_config, tmp_path):
    out = subprocess.run(CLI + ["merge", f"input_dir={tmp_path / 'nowhere'}", f"hydra.run.dir={tmp_path / 'out'}"],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode != 0 and f"input_dir: not a directory: {tmp_path / 'nowhere'}" in out.stdout + out.stderr
    assert not (tmp_path / "out" / "sweep.nc").exists()
    with pytest.raises(ConfigError, match=r"`format` must be one of \['netcdf', 'zarr'\], got 'parquet'"):
        merge.run(compose_config("merge", [f"input_dir={tmp_path}", "format=parquet"]))


@pytest.mark.parametrize("launcher, target", [
    ("local", "hydra_plugins.sensitivity_launcher.launcher.ProcessLauncher"),
    ("slurm", "hydra_plugins.hydra_submitit_launcher.submitit_launcher.SlurmLauncher"),
])
def test_launcher_configs_compose(launcher, target):
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.plugins import Plugins
    from hydra.plugins.launcher import Launcher

    from workflows.plumbing.registry import CONF_DIR
    from workflows.plumbing.schema import register

    if launcher == "slurm":
        pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="the `slurm` extra is not installed")
    register()
    GlobalHydra.instance().clear()
    with initialize_config_dir(str(CONF_DIR), version_base=None):
        cfg = compose("sweep", overrides=[f"hydra/launcher={launcher}", "hydra.launcher.n_jobs=3"
                                          if launcher == "local" else "hydra.launcher.partition=gpu"],
                      return_hydra_config=True)
    GlobalHydra.instance().clear()
    assert cfg.hydra.launcher._target_ == target
    assert target in {f"{c.__module__}.{c.__name__}" for c in Plugins.instance().discover(Launcher)}
    if launcher == "slurm":
        assert (cfg.hydra.launcher.partition, cfg.hydra.launcher.gpus_per_node) == ("gpu", 1)
        assert cfg.hydra.launcher.array_parallelism == 64 and cfg.hydra.launcher.max_num_timeout == 3
    else:
        assert cfg.hydra.launcher.n_jobs == 3
