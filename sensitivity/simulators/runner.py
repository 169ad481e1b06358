"""A checked simulator run over many points: batches across spawned worker processes or a Dask cluster, each
finished batch recorded, so a rerun after a kill runs only the batches that are not on disk.

:func:`run_simulator` cuts the points ``[N, n]`` into batches of :attr:`RunnerSettings.batch_size` and hands them
to the executor of :class:`~sensitivity.simulators.executors.ExecutorSettings`: by default
:attr:`RunnerSettings.workers` copies of a :class:`~sensitivity.surrogates.simulator.CheckedSimulator`, each
in a worker process started with ``spawn`` (never ``fork``: the parent may have run TensorFlow) by
:meth:`~sensitivity.surrogates.simulator.CheckedSimulator.replica` (one worker runs the simulator as it is, in
this process, or its own worker with a time limit); or the tasks of a Dask cluster (an existing scheduler, a
``LocalCluster``, a batch system's jobs), where a worker that dies has its batches run again elsewhere. Every
finished batch is written as a verified part of the
part store (:class:`~sensitivity.store.parts.PartStore`: the lock, the fingerprint of the simulator, its
keyword arguments and the points, a checksum per part), in whatever order the batches finish; when all are
there they are assembled atomically into one netCDF file of the points and the simulator's values, which a
later run with the same fingerprint reads instead of running anything. A simulator that raises, returns a NaN
or another shape stops the run with the checked simulator's one-line
:class:`~sensitivity.errors.ModelError`; the batches finished before stay on disk for the rerun.
"""
from __future__ import annotations

import logging
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sensitivity.errors import ConfigError, DataError
from sensitivity.runtime.lazy import lazy_import
from sensitivity.runtime.progress import progress_bar
from sensitivity.simulators.executors import ExecutorSettings, run_batches

if TYPE_CHECKING:
    from sensitivity.outputs.spec import OutputSpec
    from sensitivity.surrogates.simulator import CheckedSimulator

xr = lazy_import("xarray")

log = logging.getLogger(__name__)

#: The attribute of the assembled file that names the computation it holds.
FINGERPRINT_ATTR = "runner_fingerprint"
#: The attribute (a part's, summed into the file's) of the simulator's own time for its runs [microseconds].
TIME_ATTR = "simulator_microseconds"


@dataclass(frozen=True)
class SimulatorRuns:
    """The simulator's values at the points and its own time for them.

    Attributes
    ----------
    values
        ``[N, *out]`` float64, in the order of the points.
    seconds
        The simulator calls' summed duration [s], as recorded with each batch (a resumed or reread run reports
        the time its runs took when they ran); divided by ``N``: the cost of one run.
    """

    values: np.ndarray
    seconds: float


@dataclass(frozen=True)
class RunnerSettings:
    """How :func:`run_simulator` runs the simulator.

    Parameters
    ----------
    batch_size
        Points per simulator call, and per recorded part: a kill loses at most one batch per worker [points].
    workers
        Simulator calls run side by side, each in a worker process of its own (1: the simulator as it is given).
    """

    batch_size: int = 16
    workers: int = 1

    def check(self) -> RunnerSettings:
        """These settings, or a :class:`~sensitivity.errors.ConfigError` naming the bad field."""
        for name in ("batch_size", "workers"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ConfigError(f"`{name}` must be an integer >= 1, got {value!r}")
        return self


def run_simulator(simulator: CheckedSimulator, points: np.ndarray, path: str | Path,
                  settings: RunnerSettings = RunnerSettings(), *, progress: bool = False,
                  desc: str = "simulator", executor: ExecutorSettings = ExecutorSettings(),
                  output: OutputSpec | None = None) -> SimulatorRuns:
    """The simulator's values ``[N, *out]`` at ``points [N, n]`` and its time, run in recorded batches.

    Parameters
    ----------
    simulator
        The checked simulator (:func:`sensitivity.surrogates.simulator.simulator_from`); with ``workers > 1`` it
        must be importable (``"package.module:function"``, or a module-level function) or a picklable object (a
        :class:`~sensitivity.simulators.program.Program`); on a Dask cluster picklable.
    points
        ``[N, n]`` parameter points [the parameters' units].
    path
        The netCDF file of the runs; unfinished, its batches live in ``<path>.parts/`` (resumed by a rerun with
        the same simulator, keyword arguments, points and batch size, refused with another).
    settings
        Batch size and workers (of the local executor).
    progress
        Draw a progress bar of the runs done, the runs failed and the time left (tqdm, log lines printed above it).
    desc
        The bar's label.
    executor
        Where the batches run (:class:`~sensitivity.simulators.executors.ExecutorSettings`; default: processes of
        this machine). A cluster is started for the run and closed after it.
    output
        The simulator's output spec: the file's values ``y(sample, *out)`` are labelled by it (its dims, labels
        and units, :func:`sensitivity.outputs.axes.own_coords`); None: flat on ``value``.

    Returns
    -------
    SimulatorRuns
        The values ``[N, *out]`` float64 in the order of ``points``, and the simulator's recorded time.

    Raises
    ------
    ModelError
        A call of the simulator failed (one line from the checked simulator; on a Dask cluster after
        ``executor.retries`` reruns), or the cluster lost a batch; finished batches stay recorded.
    ConfigError
        The simulator cannot travel to the workers, or no scheduler answers at ``executor.address``.
    """
    from sensitivity.datasets import verify_checksum
    from sensitivity.store.parts import PartStore, digest

    s = settings.check()
    x = np.asarray(points, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 1 or not np.isfinite(x).all():
        raise DataError(f"`points` must be finite [N, n] parameter points with N >= 1, got shape {x.shape}")
    path = Path(path)
    if output is not None and simulator.output_shape is not None and tuple(simulator.output_shape) != output.shape:
        raise ConfigError(f"`output` has the shape {list(output.shape)}, the simulator's is "
                          f"{list(simulator.output_shape)}")
    fingerprint = digest(simulator.identity, simulator.kwargs, simulator.output_shape, s.batch_size,
                         x.shape, _hash(x), *([output.to_dict()] if output is not None else []))
    if path.is_file() and verify_checksum(path):
        with xr.open_dataset(path) as ds:
            if ds.attrs.get(FINGERPRINT_ATTR) == fingerprint:
                log.info("%s: all %d simulator runs are on disk; none is run again", path, len(x))
                return _runs(ds)
    blocks = [(a, min(a + s.batch_size, len(x))) for a in range(0, len(x), s.batch_size)]
    with PartStore(path, fingerprint, (0, len(x))) as store:
        todo = [b for b in blocks if b not in store.done()]
        if len(todo) < len(blocks):
            log.info("%s: %d of %d batches of simulator runs are on disk; running the other %d", path,
                     len(blocks) - len(todo), len(blocks), len(todo))
        _run_batches(simulator, x, todo, store, s.workers, executor, progress=progress, desc=desc, total=len(x),
                     output=output)
        store.finalize({FINGERPRINT_ATTR: fingerprint, "simulator": simulator.label,
                        "title": f"Runs of {simulator.label}"}, totals=(TIME_ATTR,))
    with xr.open_dataset(path) as ds:
        return _runs(ds)


def _run_batches(simulator: CheckedSimulator, x: np.ndarray, todo: list[tuple[int, int]], store, workers: int,
                 executor: ExecutorSettings, *, progress: bool, desc: str, total: int,
                 output: OutputSpec | None = None) -> None:
    """Run every batch of ``todo`` where ``executor`` says, writing each as it finishes (in this thread); the
    first failure stops the run (the batches finished before it are written)."""
    if not todo:
        return
    with progress_bar(total, initial=total - sum(b - a for a, b in todo), unit="run", enabled=progress,
                      desc=desc) as bar, closing(run_batches(simulator, x, todo, workers, executor)) as batches:
        bar.set_postfix(failed=0)
        for batch in batches:
            if batch.error is not None:
                bar.set_postfix(failed=batch.b - batch.a)
                raise batch.error
            store.write(_part(x[batch.a:batch.b], batch.values, batch.seconds, output), batch.a, batch.b)
            bar.update(batch.b - batch.a)


def _part(x: np.ndarray, y: np.ndarray, seconds: float, output: OutputSpec | None = None) -> xr.Dataset:
    """One batch as a dataset: its points, the simulator's values (on ``output``'s labelled dims, or flattened per
    point on ``value``), and its time."""
    from sensitivity.outputs.axes import own_coords
    from sensitivity.outputs.labels import units_attrs

    if output is None:
        values, coords = (("sample", "value"), y.reshape(len(y), -1), {"long_name": "simulator output, flattened "
                                                                                   "per point"}), {}
    else:
        values = (("sample", *output.dim_names), y.reshape(len(y), *output.shape),
                  {"long_name": f"simulated {output.long_name or output.name}",
                   **units_attrs(output.units, f"{output.units_dim.name}_units" if output.units_dim else None)})
        coords = own_coords(output)
    return xr.Dataset({"x": (("sample", "parameter"), x, {"long_name": "parameter point"}), "y": values},
                      coords=coords,
                      attrs={"output_shape": " ".join(map(str, y.shape[1:])), TIME_ATTR: int(round(seconds * 1e6))})


def _runs(ds: xr.Dataset) -> SimulatorRuns:
    shape = tuple(int(k) for k in str(ds.attrs.get("output_shape", "")).split())
    y = ds["y"].values
    return SimulatorRuns(y.reshape(len(y), *shape) if shape else y, int(ds.attrs.get(TIME_ATTR, 0)) * 1e-6)


def _hash(x: np.ndarray) -> str:
    import hashlib

    return hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()
