"""A sweep of 10^7 points in bounded memory: sharded streaming sweep, merge, chunked read, side by side.

Model: an MLP 8 -> [64, 64] tanh -> 16 (float32, forward mode), grid: scrambled Sobol' over [-1, 1]^8.
Each step runs in a fresh process so its peak RSS (``getrusage``) is its own:

1. ``--shards`` shards of the grid, one after the other, each streamed to disk by
   :func:`sensitivity.sweep.stream.sweep` (what every job of ``sensitivity sweep -m grid.shard=...`` does);
   after every 4th part the in-memory engine is timed on one chunk, so the two throughputs are
   compared in pairs measured back to back under the same machine load (:class:`PairedTimer`);
2. :mod:`sensitivity.sweep.merge` checks the shards and writes one netCDF file chunked along ``sample``;
3. a pass over the merged file block by block (:meth:`sensitivity.sweep.stored.StoredSweep.blocks`, as the
   analyses that consume a sweep read it) computing mean |J| per output and parameter.

Usage: python benchmarks/bench_scale.py [--points 10000000] [--shards 2] [--dir /tmp] [--keep]
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import child_process

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

N_IN, HIDDEN, N_OUT = 8, [64, 64], 16


def peak_rss_mib() -> float:
    """Peak resident set size of this process [MiB]."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def engine():
    """The compiled engine of the benchmark model (same weights in every process) and its space."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_jacobian import mlp

    import sensitivity
    from sensitivity.inputs.space import ParameterSpace

    model = mlp(N_IN, HIDDEN, N_OUT)
    space = ParameterSpace.from_records([dict(name=f"p{i}", units="1", low=-1, high=1) for i in range(N_IN)])
    surrogate = sensitivity.load_surrogate(lambda t: model(t), input_names=space.names, input_units=space.units,
                                           output={"name": "y", "names": [f"y{i}" for i in range(N_OUT)]})
    return sensitivity.compile_jacobian(surrogate), space


def in_memory_rate(jac, points, seconds: float = 5.0) -> float:
    """Jacobians/s of the engine called again and again on one chunk held in memory (after a warm-up)."""
    jac(points)
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        jac(points)
        calls += 1
    return calls * len(points) / (time.perf_counter() - t0)


class PairedTimer:
    """Times each part of a streamed sweep and, right after every ``every``-th part, the in-memory engine.

    On a shared machine the load drifts by 2x within minutes, so the two throughputs are compared as
    pairs measured back to back (median of the ratios), not as two long averages taken at different
    times. Wraps :meth:`RecordStore.commit` (the end of a part) and :meth:`RecordStore.finalize`.
    """

    def __init__(self, jac, chunk, every: int = 4, seconds: float = 1.5) -> None:
        self.jac, self.chunk, self.every, self.seconds = jac, chunk, every, seconds
        self.parts: list[tuple[int, float]] = []  # (points, seconds) of each part: compute + write
        self.ratios: list[float] = []
        self.engine: list[float] = []
        self.finalize_seconds = 0.0
        self._last = None

    def install(self) -> None:
        from sensitivity.store.records import RecordStore

        commit, finalize = RecordStore.commit, RecordStore.finalize
        timer = self

        def timed_commit(writer, start, stop):
            commit(writer, start, stop)
            now = time.perf_counter()
            seconds = now - (timer._last if timer._last is not None else timer._start)
            timer.parts.append((stop - start, seconds))
            if len(timer.parts) % timer.every == 0:
                rate = in_memory_rate(timer.jac, timer.chunk, timer.seconds)
                timer.engine.append(rate)
                timer.ratios.append((stop - start) / seconds / rate)
            timer._last = time.perf_counter()

        def timed_finalize(writer, *args, **kwargs):
            t0 = time.perf_counter()
            try:
                return finalize(writer, *args, **kwargs)
            finally:
                timer.finalize_seconds = time.perf_counter() - t0

        RecordStore.commit, RecordStore.finalize = timed_commit, timed_finalize
        self._start = time.perf_counter()


def child_sweep(n: int, shard: int, shards: int, path: str) -> dict:
    import numpy as np

    from sensitivity.sweep.designs import make_grid
    from sensitivity.sweep.stream import sweep

    jac, space = engine()
    grid = make_grid(space, "sobol", n=n)
    chunk = grid.block(0, jac.chunk_size)
    jac(chunk)
    timer = PairedTimer(jac, chunk)
    timer.install()
    t0 = time.perf_counter()
    summary = sweep(jac, grid, path, attrs={"config": "bench_scale", "surrogate_hash": "bench_scale"},
                    fingerprint="bench_scale", shard=shard, num_shards=shards, progress=False)
    total = time.perf_counter() - t0
    points, seconds = np.sum(timer.parts, axis=0)
    return dict(points=summary.points, loop_rate=points / seconds, total=total, finalize=timer.finalize_seconds,
                engine=float(np.median(timer.engine)), ratio=float(np.median(timer.ratios)),
                ratio_range=[float(np.min(timer.ratios)), float(np.max(timer.ratios))], pairs=len(timer.ratios),
                rss=peak_rss_mib(), bytes=os.path.getsize(summary.path), chunk=jac.chunk_size, mode=jac.mode,
                parts=len(timer.parts))


def child_merge(root: str, path: str) -> dict:
    from sensitivity.sweep.merge import merge
    from sensitivity.sweep.merge_plan import plan_merge
    from workflows.plumbing.multirun import find_runs

    t0 = time.perf_counter()
    plan = plan_merge(find_runs(root), root)
    out = merge(plan, path, attrs={"Conventions": "CF-1.8", "title": "bench_scale merge"})
    return dict(seconds=time.perf_counter() - t0, rss=peak_rss_mib(), bytes=os.path.getsize(out))


def child_read(path: str) -> dict:
    import numpy as np

    from sensitivity.sweep.stored import StoredSweep

    t0, total, n = time.perf_counter(), None, 0
    with StoredSweep(path) as sweep:
        for block in sweep.blocks(65536, variables=["jacobian"]):
            part = np.abs(block.data["jacobian"].values).sum(axis=0, dtype=np.float64)
            total = part if total is None else total + part
            n += block.stop - block.start
    return dict(seconds=time.perf_counter() - t0, rss=peak_rss_mib(), points=n,
                mean_abs_j=float((total / n).mean()))


CHILDREN = {"sweep": child_sweep, "merge": child_merge, "read": child_read}


def run_child(role: str, *args) -> dict:
    return child_process.run(__file__, role, *args)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=10_000_000, help="grid points of the sweep")
    parser.add_argument("--shards", type=int, default=2, help="shards, run one after the other, then merged")
    parser.add_argument("--dir", default=None, help="where the files go (default: a temporary directory)")
    parser.add_argument("--keep", action="store_true", help="keep the files")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if child_process.serve(args.child, CHILDREN):
        return
    work = Path(tempfile.mkdtemp(prefix="bench_scale_", dir=args.dir))
    try:
        report(args.points, args.shards, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def report(n: int, shards: int, work: Path) -> None:
    print(f"sweep of {n:,} points, {N_IN} -> {HIDDEN} tanh -> {N_OUT} float32, {shards} shard(s), "
          f"{os.cpu_count()} CPUs, files in {work}")
    runs, t0 = [], time.perf_counter()
    for i in range(shards):
        r = run_child("sweep", n, i, shards, str(work / f"shard-{i}" / "sweep.nc"))
        runs.append(r)
        print(f"  shard {i}: {r['points']:,} points in {r['parts']} parts ({r['mode']} mode, chunk {r['chunk']}): "
              f"streamed {r['loop_rate']:,.0f} Jacobians/s (in-memory engine on one chunk {r['engine']:,.0f}/s); "
              f"paired ratio {100 * r['ratio']:.0f}% (median of {r['pairs']}, range "
              f"{100 * r['ratio_range'][0]:.0f}-{100 * r['ratio_range'][1]:.0f}%); final file {r['finalize']:.0f} s; "
              f"peak RSS {r['rss']:,.0f} MiB; {r['bytes'] / 2**30:.2f} GiB")
    sweep_s = time.perf_counter() - t0
    m = run_child("merge", str(work), str(work / "merged.nc"))
    print(f"  merge: {m['seconds']:.0f} s ({n / m['seconds']:,.0f} points/s, {m['bytes'] / 2**30 / m['seconds']:.2f} GiB/s), "
          f"peak RSS {m['rss']:,.0f} MiB, {m['bytes'] / 2**30:.2f} GiB")
    rd = run_child("read", str(work / "merged.nc"))
    print(f"  chunked read of the merged file (StoredSweep.blocks, 65,536 samples a block): {rd['seconds']:.0f} s "
          f"({rd['points'] / rd['seconds']:,.0f} points/s), peak RSS {rd['rss']:,.0f} MiB")
    loop = sum(r["points"] for r in runs) / sum(r["points"] / r["loop_rate"] for r in runs)
    engine_rate = sum(r["engine"] for r in runs) / len(runs)
    ratio = sum(r["ratio"] * r["points"] for r in runs) / n
    print(f"\nstreamed sweep {loop:,.0f} Jacobians/s, in-memory engine on one chunk {engine_rate:,.0f}/s: paired ratio "
          f"{100 * ratio:.0f}%; peak RSS {max(r['rss'] for r in runs):,.0f} MiB (sweep), {m['rss']:,.0f} MiB (merge), "
          f"{rd['rss']:,.0f} MiB (read); wall {sweep_s:.0f} s sweep (of which {sum(r['finalize'] for r in runs):.0f} s "
          f"writing the shards' final files) + {m['seconds']:.0f} s merge + {rd['seconds']:.0f} s read")

if __name__ == "__main__":
    main()
