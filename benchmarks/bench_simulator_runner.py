"""The simulator runner's throughput against the ideal, its bookkeeping and its memory, on both executors.

  (1) a program of ~0.05 s (``sh -c 'sleep 0.05; echo ...'``, one process per run, its output parsed), ``--runs``
      runs on 2 workers: wall / ideal, ideal = runs x seconds per run / workers, the seconds per run measured by
      running the program directly (serially, here), and against the in-run ideal, the simulator's own time as
      the runner recorded it / workers (on a loaded machine the runs themselves slow down; this ratio is what
      the runner adds). On the local route (2 spawned worker processes, their start
      included) and on the Dask route (a LocalCluster of 2 worker processes: once on a cluster already running, an
      existing scheduler's case, once with the cluster's start and stop in the run). Target: <= 1.3x;
  (2) the bookkeeping of ``--book-runs`` runs of a simulator that costs nothing (every batch checked, written as a
      verified part, the parts assembled), at each ``--book-batch``: its wall time per run, as a fraction of the
      runs' time had they been the program of (1) on 2 workers (an upper bound: with a real simulator the parts
      are written while the next batches run), and this process's CPU time. Target: < 5 %;
  (3) peak memory: the peak RSS of a fresh process running ``n`` and ``10 n`` trivial runs of 16 outputs each,
      above its RSS before the run, beside the size of the values it returns. Bounded by the batch, not the
      run count: the two peaks are alike.

Nothing here is asserted: the tests check correctness, this prints figures.

Usage: python benchmarks/bench_simulator_runner.py [--runs 400] [--batch 10] [--book-runs 10000]
       [--book-batch 16 64] [--memory-runs 2000]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # child_process, and this module for the workers

import child_process  # noqa: E402

from sensitivity.simulators.executors import ExecutorSettings  # noqa: E402
from sensitivity.simulators.runner import RunnerSettings, run_simulator  # noqa: E402
from sensitivity.surrogates.simulator import simulator_from  # noqa: E402

SECONDS = 0.05
SOURCE = "bench_simulator_runner:program"


def program(x: np.ndarray) -> np.ndarray:
    """One run of an external program per point: ``sh`` sleeps 0.05 s and prints the point's sum, read back."""
    out = [subprocess.run(["sh", "-c", f"sleep {SECONDS}; echo $0", f"{p.sum():.17g}"], capture_output=True,
                          text=True, check=True).stdout for p in x]
    return np.array([float(v) for v in out])[:, None]


def trivial(x: np.ndarray, width: int = 1) -> np.ndarray:
    """A simulator that costs nothing: ``width`` outputs per point."""
    return np.repeat(x.sum(axis=1, keepdims=True), width, axis=1)


def per_run(repeats: int = 20) -> float:
    """The program's seconds per run, run directly (the median of ``repeats`` serial runs)."""
    x = np.zeros((1, 3))
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        program(x)
        times.append(time.perf_counter() - started)
    return float(np.median(times))


def throughput(runs: int, batch: int) -> None:
    from distributed import LocalCluster

    x = np.random.default_rng(0).uniform(size=(runs, 3))
    one = per_run()
    ideal = runs * one / 2
    print(f"(1) program: {one * 1e3:.1f} ms per run run directly (sh, sleep {SECONDS} s), {runs} runs on 2 workers, "
          f"batches of {batch}; ideal {ideal:.2f} s; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"    {'route':<44} {'wall [s]':>9} {'/ ideal':>8} {'/ in-run ideal':>15}")
    sim = simulator_from(SOURCE)
    with tempfile.TemporaryDirectory() as tmp:
        def timed(name: str, **kwargs) -> None:
            started = time.perf_counter()
            done = run_simulator(sim, x, Path(tmp) / f"{name.split()[0]}-{time.time_ns()}.nc",
                                 RunnerSettings(batch_size=batch, workers=2), **kwargs)
            wall = time.perf_counter() - started
            assert np.allclose(done.values[:, 0], x.sum(axis=1))
            # in-run ideal: the simulator's own time as recorded with its batches (the machine's load included)
            print(f"    {name:<44} {wall:9.2f} {wall / ideal:7.2f}x {wall / (done.seconds / 2):14.2f}x")

        timed("local (2 spawned processes, start included)")
        timed("dask (LocalCluster started for the run)", executor=ExecutorSettings(kind="dask", n_workers=2))
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
            timed("dask (a running scheduler, by address)",
                  executor=ExecutorSettings(kind="dask", address=cluster.scheduler_address))


def bookkeeping(runs: int, batches: list[int], seconds_per_run: float) -> None:
    from distributed import LocalCluster

    x = np.random.default_rng(1).uniform(size=(runs, 3))
    sim = simulator_from(trivial)
    budget = runs * seconds_per_run / 2
    print(f"(2) bookkeeping of {runs} runs of a simulator that costs nothing; the fraction is of {runs} x "
          f"{seconds_per_run * 1e3:.1f} ms / 2 workers = {budget:.0f} s; load average {os.getloadavg()[0]:.1f}")
    print(f"    {'route':<38} {'batch':>5} {'wall [s]':>9} {'per run':>10} {'fraction':>9} {'CPU here [s]':>13}")
    with tempfile.TemporaryDirectory() as tmp:
        def timed(name: str, batch: int, **kwargs) -> None:
            started, cpu = time.perf_counter(), time.process_time()
            run_simulator(sim, x, Path(tmp) / f"{name.split()[0]}-{time.time_ns()}.nc",
                          RunnerSettings(batch_size=batch), **kwargs)
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
            print(f"    {name:<38} {batch:5d} {wall:9.2f} {wall / runs * 1e3:7.2f} ms {wall / budget:8.1%} "
                  f"{cpu:13.2f}")

        for batch in batches:
            timed("local (the simulator in this process)", batch)
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
            for batch in batches:
                timed("dask (a running scheduler, 2 workers)", batch,
                      executor=ExecutorSettings(kind="dask", address=cluster.scheduler_address))


def memory_child(runs: int, batch: int, width: int) -> dict:
    """In a fresh process: the peak RSS above the RSS before ``runs`` trivial runs [MiB]."""
    import functools
    import resource

    x = np.random.default_rng(2).uniform(size=(runs, 3))
    sim = simulator_from(functools.partial(trivial, width=width))
    with tempfile.TemporaryDirectory() as tmp:
        run_simulator(sim, x[:batch], Path(tmp) / "warm.nc", RunnerSettings(batch_size=batch))  # imports, caches
        before = _rss_mib()
        values = run_simulator(sim, x, Path(tmp) / "runs.nc", RunnerSettings(batch_size=batch)).values
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"peak_above": peak - before, "result": values.nbytes / 2**20}


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def memory(runs: int, batch: int, width: int = 16) -> None:
    print(f"(3) peak memory of trivial runs of {width} outputs, batches of {batch}, each size in a fresh process")
    print(f"    {'runs':>7} {'peak above start [MiB]':>23} {'values returned [MiB]':>22}")
    for n in (runs, 10 * runs):
        r = child_process.run(__file__, "memory", n, batch, width)
        print(f"    {n:7d} {r['peak_above']:23.1f} {r['result']:22.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--batch", type=int, default=10)
    parser.add_argument("--book-runs", type=int, default=10_000)
    parser.add_argument("--book-batch", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--memory-runs", type=int, default=2000)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if child_process.serve(args.child, {"memory": memory_child}):
        return
    throughput(args.runs, args.batch)
    bookkeeping(args.book_runs, args.book_batch, per_run(5))
    memory(args.memory_runs, args.book_batch[0])


if __name__ == "__main__":
    main()
