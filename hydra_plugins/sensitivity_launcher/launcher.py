"""Launch every job of a Hydra multirun as a fresh ``python -m workflows <workflow> ...`` process.

Why not Hydra's joblib launcher: it hard-codes joblib's loky backend, whose worker processes
are reused from job to job (measured: 4 shards with ``n_jobs=2`` ran in only 2 processes), so
TensorFlow state (graphs, XLA caches, allocator, Keras name counters) would leak from one job
into the next, and loky has no "one task per worker" setting. Here each job is its own
operating-system process started with ``subprocess`` (fork + immediate exec: no process ever
forks after TensorFlow ran), exactly the command a user would type, run with ``hydra.run.dir``
set to the job's multirun directory. At most ``n_jobs`` run at once (a thread pool waits on
them); a job that fails or is killed fails alone, its finished sweep parts stay on disk, and
the multirun exits non-zero after the others finished.

Config (``conf/hydra/launcher/local.yaml``): ``n_jobs`` jobs at once (default: the number of
CPUs), ``threads_per_job`` exported as ``TF_NUM_INTRAOP_THREADS`` (default: CPUs / n_jobs),
``env`` extra environment variables for every job (e.g. ``CUDA_VISIBLE_DEVICES``).
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Mapping, Sequence

from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, setup_globals
from hydra.errors import CompactHydraException
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict

log = logging.getLogger(__name__)

#: Hydra overrides of the launching command that a job does not inherit (it runs one job, in run mode).
NOT_FORWARDED = ("hydra/launcher", "hydra.launcher", "hydra/sweeper", "hydra.sweeper", "hydra.run.dir", "hydra.mode",
                 "hydra.job.num", "hydra.job.id")

#: Where each job's console output (stdout and stderr) goes, inside its directory.
CONSOLE = "job.out"


class _Job:
    """One job: its number, overrides, composed config, directory and command.

    (A plain class: Hydra's plugin scanner executes this module before it is in ``sys.modules``,
    where ``@dataclass`` with postponed annotations fails.)
    """

    def __init__(self, num: int, overrides: list[str], config: DictConfig, directory: Path, command: list[str]):
        self.num, self.overrides, self.config, self.directory, self.command = num, overrides, config, directory, command


class ProcessLauncher(Launcher):
    """Run multirun jobs ``n_jobs`` at a time, each in a fresh process.

    Parameters
    ----------
    n_jobs
        Jobs running at once; ``None`` or a value < 1 means the number of CPUs.
    threads_per_job
        TensorFlow intra-op threads of each job (``TF_NUM_INTRAOP_THREADS``); ``None``: CPUs // n_jobs.
    env
        Extra environment variables of every job.
    module
        The Python module run with ``-m`` (the application's command line).
    """

    def __init__(self, n_jobs: int | None = None, threads_per_job: int | None = None,
                 env: Mapping[str, Any] | None = None, module: str = "workflows") -> None:
        cpus = os.cpu_count() or 1
        self.n_jobs = int(n_jobs) if n_jobs and int(n_jobs) > 0 else cpus
        self.threads_per_job = int(threads_per_job) if threads_per_job else max(1, cpus // self.n_jobs)
        self.env = {str(k): str(v) for k, v in (env or {}).items()}
        self.module = module
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config = config
        self.hydra_context = hydra_context

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        """Run the jobs; return one :class:`JobReturn` per job, in order (failed ones with status FAILED)."""
        setup_globals()
        assert self.config is not None and self.hydra_context is not None
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        jobs = [self._job(initial_job_idx + i, list(o)) for i, o in enumerate(job_overrides)]
        log.info("Launching %d jobs, %d at a time, each in a fresh process with %d TensorFlow threads; sweep dir %s",
                 len(jobs), self.n_jobs, self.threads_per_job, self.config.hydra.sweep.dir)
        for job in jobs:
            log.info("\t#%d : %s", job.num, " ".join(filter_overrides(job.overrides)))
        with ThreadPoolExecutor(max_workers=self.n_jobs) as pool:
            return list(pool.map(self._run, jobs))

    def _job(self, num: int, overrides: list[str]) -> _Job:
        """The job's composed config, directory (as Hydra's own launchers name it) and command."""
        config = self.hydra_context.config_loader.load_sweep_config(self.config, overrides)
        with open_dict(config):
            config.hydra.job.id = f"{config.hydra.job.name}_{num}"
            config.hydra.job.num = num
        previous = HydraConfig.instance().cfg
        HydraConfig.instance().set_config(config)
        try:
            directory = Path(str(config.hydra.sweep.dir)) / str(config.hydra.sweep.subdir)
        finally:
            HydraConfig.instance().cfg = previous
        hydra_overrides = [o for o in self.config.hydra.overrides.hydra
                           if not o.lstrip("+~").startswith(NOT_FORWARDED)]
        command = [sys.executable, "-m", self.module, str(config.hydra.job.config_name), *overrides,
                   *hydra_overrides, f"hydra.run.dir={quote(str(directory.resolve()))}"]
        return _Job(num, overrides, config, directory, command)

    def _run(self, job: _Job) -> JobReturn:
        env = {**os.environ, "TF_NUM_INTRAOP_THREADS": str(self.threads_per_job), **self.env}
        job.directory.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        with open(job.directory / CONSOLE, "wb") as out:
            process = subprocess.Popen(job.command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env=env)
            log.info("#%d started: pid %d, %s", job.num, process.pid, job.directory)
            code = process.wait()
        task_cfg = OmegaConf.masked_copy(job.config, [k for k in job.config if k != "hydra"])
        ret = JobReturn(overrides=job.overrides, cfg=task_cfg, hydra_cfg=job.config, working_dir=os.getcwd(),
                        task_name=str(job.config.hydra.job.name))
        if code == 0:
            ret.status, ret.return_value = JobStatus.COMPLETED, str(job.directory)
            log.info("#%d done in %.1f s: %s", job.num, time.perf_counter() - start, job.directory)
        else:
            message = (f"job #{job.num} ({' '.join(job.overrides)}) exited with code {code}: "
                       f"{_last_line(job.directory / CONSOLE)} (console: {job.directory / CONSOLE})")
            ret.status, ret.return_value = JobStatus.FAILED, CompactHydraException(message)  # printed as one line
            log.error(message)
        return ret


def quote(value: str) -> str:
    """``value`` as a single-quoted Hydra override value (commas and ``=`` in job directories stay literal)."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _last_line(path: Path) -> str:
    """The last non-empty line of a job's console output (its error message, usually)."""
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1][-300:] if lines else ""
