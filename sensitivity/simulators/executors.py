"""Where the simulator's batches run: processes of this machine (the default), or an existing Dask cluster.

The runner (:func:`sensitivity.simulators.runner.run_simulator`) hands an executor the batches ``[a, b)`` of its
points still to run and writes each :class:`Batch` the executor yields, in whatever order they finish. This module
builds that executor from :class:`ExecutorSettings`:

- ``local``: :attr:`RunnerSettings.workers <sensitivity.simulators.runner.RunnerSettings.workers>` copies of the
  simulator side by side, each in a worker process started with ``spawn``
  (:meth:`~sensitivity.surrogates.simulator.CheckedSimulator.replica`), or the simulator as it is for one worker;
- ``dask``: Dask distributed [1]_, the engine of xarray, on the scheduler at :attr:`ExecutorSettings.address` or
  on a ``LocalCluster`` of :attr:`ExecutorSettings.n_workers` worker processes started for the run. Every batch
  is one task (``Client.submit(..., retries=..., pure=False)``, collected with ``as_completed``) that rebuilds the
  checked simulator inside the Dask worker (once per worker thread) from its picklable recipe: an importable
  ``"package.module:function"`` source, or any object ``cloudpickle`` can send. A worker that dies mid-run has its
  tasks run again by the scheduler on another; the values do not depend on where a batch ran;
- ``slurm``, ``pbs``, ``sge``, ``lsf``: the same Dask route on a batch system's
  jobs through dask-jobqueue [2]_ (an extra: ``pip install sensitivity[cluster]``), :attr:`ExecutorSettings.n_workers`
  jobs of :attr:`~ExecutorSettings.cores` cores, :attr:`~ExecutorSettings.memory` and
  :attr:`~ExecutorSettings.walltime`; :func:`job_cluster` builds it (and its ``job_script()``) without submitting.

A cluster is started only when a run needs one, and closed with the run; a scheduler given by address is left as
it was (only this run's tasks are cancelled).

References
----------
.. [1] Dask Development Team, "Dask: Library for dynamic task scheduling", https://dask.org (2016);
   ``distributed``: https://distributed.dask.org
.. [2] dask-jobqueue: deploying Dask on job queuing systems, https://jobqueue.dask.org
"""
from __future__ import annotations

import contextlib
import math
import threading
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

import numpy as np

from sensitivity.errors import ConfigError, ModelError

if TYPE_CHECKING:
    from sensitivity.surrogates.simulator import CheckedSimulator

#: The batch systems dask-jobqueue reaches, by the name :attr:`ExecutorSettings.kind` gives them.
JOB_CLUSTERS = {"slurm": "SLURMCluster", "pbs": "PBSCluster", "sge": "SGECluster", "lsf": "LSFCluster"}
KINDS = ("local", "dask", *JOB_CLUSTERS)


@dataclass(frozen=True)
class ExecutorSettings:
    """Where :func:`~sensitivity.simulators.runner.run_simulator` runs the simulator's batches.

    Parameters
    ----------
    kind
        ``local``: processes of this machine
        (:attr:`RunnerSettings.workers <sensitivity.simulators.runner.RunnerSettings.workers>`); ``dask``: a Dask
        cluster (the scheduler at ``address``, else a ``LocalCluster`` of ``n_workers`` processes); a batch system
        (``slurm``, ``pbs``, ``sge``, ``lsf``): ``n_workers`` jobs through dask-jobqueue.
    address
        ``dask`` only: an existing scheduler (``tcp://host:8786``); None: start a ``LocalCluster``.
    n_workers
        Worker processes of the ``LocalCluster``, or jobs of the batch system.
    threads_per_worker
        Batches one ``LocalCluster`` worker process runs side by side.
    retries
        Times the Dask route reruns a batch whose simulator call failed before its error stops the run (a worker
        that dies is not a failure of the batch: the scheduler reruns its tasks anyway).
    connect_timeout
        Seconds to wait for the scheduler at ``address`` to answer [s].
    cores, memory, walltime, queue, account, job_extra_directives
        A batch system's job: cores and memory (``"4GB"``) of one job, its wall-clock limit (``"01:00:00"``), the
        queue (partition) and account to charge (None: the system's default), further scheduler directives
        (``["--constraint=haswell"]``, written after ``#SBATCH``/``#PBS``...). One job is one Dask worker that runs
        ``cores`` batches side by side.
    """

    kind: str = "local"
    address: str | None = None
    n_workers: int = 2
    threads_per_worker: int = 1
    retries: int = 2
    connect_timeout: float = 30.0
    cores: int = 1
    memory: str = "4GB"
    walltime: str = "01:00:00"
    queue: str | None = None
    account: str | None = None
    job_extra_directives: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError(f"`executor.kind` must be one of {', '.join(KINDS)}, got {self.kind!r}")
        for name, least in (("n_workers", 1), ("threads_per_worker", 1), ("retries", 0), ("cores", 1)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
                raise ConfigError(f"`executor.{name}` must be an integer >= {least}, got {value!r}")
        t = self.connect_timeout
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t) or t <= 0:
            raise ConfigError(f"`executor.connect_timeout` must be a number of seconds > 0, got {t!r}")
        if self.address is not None and (self.kind != "dask" or not isinstance(self.address, str)
                                         or not self.address.strip()):
            raise ConfigError(f"`executor.address` names a Dask scheduler (a string, with kind: dask), got "
                              f"{self.address!r} with kind {self.kind!r}")
        if isinstance(self.job_extra_directives, str):
            raise ConfigError("`executor.job_extra_directives` must be a list of directives, got the string "
                              f"{self.job_extra_directives!r}")
        object.__setattr__(self, "job_extra_directives", tuple(str(d) for d in self.job_extra_directives))


@dataclass(frozen=True)
class Batch:
    """One finished batch ``[a, b)``: the checked simulator's values ``[b - a, *out]`` and its time [s], or the
    error (a one-line :class:`~sensitivity.errors.ModelError`) it failed with."""

    a: int
    b: int
    values: np.ndarray | None = None
    seconds: float = 0.0
    error: BaseException | None = None


def run_batches(simulator: CheckedSimulator, x: np.ndarray, blocks: Sequence[tuple[int, int]], workers: int,
                settings: ExecutorSettings) -> Iterator[Batch]:
    """Every batch ``x[a:b]`` of ``blocks`` run by ``simulator`` where ``settings`` say, yielded as they finish (of
    batches finished together, the good ones first). Closing the iterator (or leaving the loop) cancels the
    batches not yet run and stops what was started for them.

    Parameters
    ----------
    simulator
        The checked simulator; on the Dask route it must be picklable (see the module's text).
    x
        ``[N, n]`` points.
    blocks
        The ``[a, b)`` ranges of ``x`` to run.
    workers
        The local route's worker processes (1: the simulator as it is, in a thread of this process).
    settings
        Where to run them.
    """
    if not blocks:
        return iter(())
    if settings.kind == "local":
        return _local(simulator, x, blocks, workers)
    return _dask(simulator, x, blocks, settings)


def _timed(simulator: Callable[[np.ndarray], np.ndarray], points: np.ndarray) -> tuple[np.ndarray, float]:
    started = time.perf_counter()
    values = simulator(points)
    return values, time.perf_counter() - started


def _local(simulator: CheckedSimulator, x: np.ndarray, blocks: Sequence[tuple[int, int]],
           workers: int) -> Iterator[Batch]:
    import queue

    copies = [simulator] if workers == 1 else [simulator.replica("`workers` > 1")
                                              for _ in range(min(workers, len(blocks)))]
    free: queue.SimpleQueue = queue.SimpleQueue()
    for copy in copies:
        free.put(copy)

    def run(a: int, b: int) -> tuple[np.ndarray, float]:
        copy = free.get()
        try:
            return _timed(copy, x[a:b])
        finally:
            free.put(copy)

    pool = ThreadPoolExecutor(max_workers=len(copies), thread_name_prefix="simulator")
    try:
        pending: dict[Future, tuple[int, int]] = {pool.submit(run, a, b): (a, b) for a, b in blocks}
        while pending:
            finished, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in sorted(finished, key=lambda f: (f.exception() is not None, pending[f])):
                a, b = pending.pop(future)
                yield Batch(a, b, error=future.exception()) if future.exception() is not None else \
                    Batch(a, b, *future.result())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        for copy in copies:
            if copy is not simulator:
                copy.close()


# ----------------------------------------------------------------------------------------------- the Dask route

@dataclass(frozen=True)
class _Recipe:
    """What a Dask worker rebuilds the checked simulator from (never its worker process, which cannot travel)."""

    source: Any
    kwargs: dict
    label: str
    output_shape: tuple[int, ...] | None
    settings: Any
    token: str

    def build(self) -> CheckedSimulator:
        """The checked simulator, built once per worker thread (a simulator with a time limit keeps its own
        worker process there)."""
        from sensitivity.surrogates.simulator import simulator_from

        key = (self.token, threading.get_ident())
        with _BUILT_LOCK:
            built = _BUILT.get(key)
        if built is None:
            built = simulator_from(self.source, self.kwargs, output_shape=self.output_shape, settings=self.settings)
            built.label = self.label
            with _BUILT_LOCK:
                _BUILT[key] = built
        return built


_BUILT: dict[tuple[str, int], Any] = {}
_BUILT_LOCK = threading.Lock()


def _dask_task(recipe: _Recipe, points: np.ndarray) -> tuple[np.ndarray, float]:
    """One batch inside a Dask worker: the checked values and the simulator's time [s]."""
    return _timed(recipe.build(), points)


def _dask(simulator: CheckedSimulator, x: np.ndarray, blocks: Sequence[tuple[int, int]],
          settings: ExecutorSettings) -> Iterator[Batch]:
    from distributed import as_completed
    from distributed.protocol.pickle import dumps

    recipe = _Recipe(simulator.source, dict(simulator.kwargs), simulator.label, simulator.output_shape,
                     simulator.settings, uuid.uuid4().hex)
    try:
        dumps(recipe)
    except Exception as err:  # noqa: BLE001 (pickle raises many types)
        raise ConfigError(f"`executor.kind` = {settings.kind!r} sends the simulator to Dask workers, so it must be "
                          f"picklable ('package.module:function', or a picklable object); {simulator.label} is not "
                          f"({type(err).__name__}: {_first_line(err)})") from None
    with _client(settings, worker_children=simulator.settings.timeout is not None) as client:
        run = f"simulator-{recipe.token[:8]}"
        futures = {client.submit(_dask_task, recipe, x[a:b], retries=settings.retries, pure=False,
                                 key=f"{run}-{a}-{b}"): (a, b) for a, b in blocks}
        try:
            for finished in as_completed(futures).batches():
                for future in sorted(finished, key=lambda f: (f.status != "finished", futures[f])):
                    a, b = futures.pop(future)
                    try:
                        done = Batch(a, b, *future.result())
                    except ModelError as err:  # the checked simulator's one line
                        done = Batch(a, b, error=err)
                    except Exception as err:  # noqa: BLE001 (the cluster's own: KilledWorker, a cancelled task)
                        done = Batch(a, b, error=ModelError(
                            f"{simulator.label}: its batch of points [{a}, {b}) was not run by the Dask cluster "
                            f"({type(err).__name__}: {_first_line(err)})"))
                    future.release()
                    yield done
        finally:
            if futures:
                client.cancel(list(futures))


@contextlib.contextmanager
def _client(settings: ExecutorSettings, *, worker_children: bool) -> Iterator[Any]:
    """A ``distributed.Client`` for the run: to the scheduler at ``address``, or to a cluster started (and closed)
    here. ``worker_children``: the simulator starts a process of its own (a time limit), which a daemonic Dask
    worker may not."""
    import dask
    from distributed import Client, LocalCluster

    with dask.config.set({"distributed.worker.daemon": not worker_children}), contextlib.ExitStack() as stack:
        stack.enter_context(_quiet("distributed"))  # the scheduler's and nannies' INFO lines, not the user's
        if settings.address is not None:
            try:
                client = Client(settings.address, timeout=f"{settings.connect_timeout}s")
            except (OSError, TimeoutError, ValueError) as err:
                raise ConfigError(f"`executor.address` = {settings.address!r}: no Dask scheduler answered within "
                                  f"{settings.connect_timeout:g} s ({type(err).__name__}: {_first_line(err)})") \
                    from None
        else:
            if settings.kind == "dask":
                cluster = LocalCluster(n_workers=settings.n_workers, threads_per_worker=settings.threads_per_worker,
                                       processes=True, dashboard_address=None)
            else:
                cluster = job_cluster(settings)
                cluster.scale(jobs=settings.n_workers)
            stack.enter_context(cluster)
            client = Client(cluster)
        stack.enter_context(client)
        yield client


@contextlib.contextmanager
def _quiet(name: str) -> Iterator[None]:
    """The logger ``name`` at WARNING (or above, as it was) while inside."""
    import logging

    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(max(level, logging.WARNING))
    try:
        yield
    finally:
        logger.setLevel(level)


def job_cluster(settings: ExecutorSettings) -> Any:
    """The dask-jobqueue cluster of ``settings`` (``kind``: a batch system), not yet scaled: no job is submitted
    until it is (its ``job_script()`` is the script each job would run).

    Raises
    ------
    ConfigError
        ``kind`` is not a batch system, or dask-jobqueue is not installed.
    """
    if settings.kind not in JOB_CLUSTERS:
        raise ConfigError(f"`executor.kind` = {settings.kind!r} is not a batch system ({', '.join(JOB_CLUSTERS)})")
    try:
        import dask_jobqueue
    except ImportError:
        raise ConfigError(f"`executor.kind` = {settings.kind!r} needs dask-jobqueue: pip install "
                          "'sensitivity[cluster]'") from None
    cls = getattr(dask_jobqueue, JOB_CLUSTERS[settings.kind])
    options: dict[str, Any] = {
        "cores": settings.cores, "memory": settings.memory, "processes": 1, "walltime": settings.walltime,
        "job_extra_directives": list(settings.job_extra_directives),
        # a simulator with a time limit starts a process of its own, which a daemonic worker may not
        "job_script_prologue": ["export DASK_DISTRIBUTED__WORKER__DAEMON=False"]}
    if settings.queue is not None:
        options["queue"] = settings.queue
    if settings.account is not None:
        options["account" if settings.kind in ("slurm", "pbs") else "project"] = settings.account
    return cls(**options)


def _first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__
