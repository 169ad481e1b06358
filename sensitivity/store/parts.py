"""The resumable, verified part store: long computations written as checked parts, assembled only when whole.

A computation over a range of samples ``[start, stop)`` (a sweep, a step map, a local propagation)
is cut into blocks; every finished block is written as one *part* of ``<path>.parts/``. The store
guarantees that no rerun, resume, crash or concurrent run ever yields a wrong ``path`` that looks
complete:

- **one run at a time**: a run holds an exclusive ``flock`` on ``<path>.lock`` from start to end; a
  second run on the same path is refused with a one-line error naming the holder (pid, host, start
  time). The kernel drops the lock when its process dies, even by ``kill -9``, so a stale lock file
  never blocks a later run.
- **fingerprints**: the store's ``fingerprint`` must cover everything that changes the bytes (config,
  surrogate hash, grid content, block layout, dtype); it is written to ``FINGERPRINT`` and into every
  part (its attributes and its sidecar). Parts of another fingerprint are never adopted: the run is
  refused, naming the folder to delete — also when ``FINGERPRINT`` itself is gone.
- **integrity**: each part's SHA-256, size, fingerprint and ``[a, b)`` range are recorded in a sidecar
  ``part-<a>-<b>.nc.sha256`` written *before* the part is renamed into place, and verified on resume
  and again at assembly. A damaged, truncated or unrecorded part is removed with a warning and
  recomputed, never assembled. Parts are not ``fsync``-ed one by one (a killed process loses none of
  its writes; a machine's crash may tear the last ones, which this check then reruns): the assembled
  result is.
- **coverage**: assembly proves that the parts tile ``[start, stop)`` exactly (no gap, no overlap) and
  that each holds ``b - a`` samples, or refuses.
- **atomic result**: the final file is written to a temporary sibling and renamed into place, so a
  kill during assembly leaves either no ``path`` or a complete one; the parts are removed only after.

:func:`run_blocks` is the resumable block loop: it computes every block not verified on disk and
writes it through the store (a writer thread overlaps writing block k with computing block k + 1).

:class:`~sensitivity.store.records.RecordStore` writes a result's records in place on top of it;
:mod:`sensitivity.sweep.stored` uses :func:`run_blocks`.
"""
from __future__ import annotations

import logging

import hashlib
import json
import shutil
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from sensitivity.datasets import ENCODING_ENGINE, content_hash, record_checksum, write_atomic, write_bytes_atomic
from sensitivity.datasets.run_lock import RunLock
from sensitivity.errors import DataError, disk_error
from sensitivity.runtime.lazy import lazy_import
from sensitivity.runtime.progress import progress_bar

xr = lazy_import("xarray")

log = logging.getLogger(__name__)

Block = tuple[int, int]

#: Part files open at once while :meth:`PartStore.finalize` concatenates them (xarray keeps 128 by default: with
#: 2,000 simulator runs in parts of 16, a 93 MiB peak; with 8, 19 MiB).
OPEN_PARTS = 8


def digest(*parts: Any) -> str:
    """SHA-256 (hex) of JSON-serialisable ``parts`` (keys sorted): the fingerprint of a computation."""
    payload = json.dumps(list(parts), sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


class PartStore:
    """Resumable, verified parts of one computation over samples ``[start, stop)`` of ``path``.

    The lock is taken on construction and released by :meth:`finalize`, :meth:`close` or leaving a
    ``with`` block; the kernel drops it if the process dies.

    Parameters
    ----------
    path
        The final netCDF file; parts live in ``<path>.parts/``, the lock is ``<path>.lock``.
    fingerprint
        Identity of the computation: everything that changes the bytes of the result.
    span
        The sample range ``[start, stop)`` the parts must tile exactly; when omitted, the parts must be
        contiguous from the first one's start (callers that know their range should pass it).
    """

    def __init__(self, path: str | Path, fingerprint: str, span: Block | None = None) -> None:
        self.path = Path(path)
        self.parts = self.path.with_name(self.path.name + ".parts")
        self.fingerprint = fingerprint
        self.span = span
        self._lock = RunLock(self.path.with_name(self.path.name + ".lock"))
        self._lock.acquire()
        try:
            self._adopt()
        except BaseException:
            self._lock.release()
            raise

    def __enter__(self) -> PartStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the lock (the parts stay for a later run)."""
        self._lock.release()

    # ------------------------------------------------------------------------- resume

    def _adopt(self) -> None:
        """Check the folder belongs to this computation, then record its fingerprint."""
        try:
            self.parts.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise disk_error(self.parts, e) from None
        marker = self.parts / "FINGERPRINT"
        recorded = marker.read_text().strip() if marker.exists() else None
        if recorded is not None and recorded != self.fingerprint:
            raise self._foreign(recorded)
        if recorded is None:
            for part in self._files():
                other = _recorded_fingerprint(part)
                if other is not None and other != self.fingerprint:
                    raise self._foreign(other)
        write_bytes_atomic(self.fingerprint.encode(), marker)

    def _foreign(self, other: str) -> DataError:
        return DataError(f"{self.parts} holds unfinished work of a different computation (its fingerprint "
                         f"{other[:12]}..., this run {self.fingerprint[:12]}...: another config, surrogate, grid "
                         "content or block layout); rerun with the same settings, or delete it to start over")

    def _files(self) -> list[Path]:
        return sorted(self.parts.glob("part-*.nc"))

    def done(self) -> set[Block]:
        """The blocks already on disk and verified; damaged ones are removed with a warning."""
        return {block for block, _, _ in self._verified()}

    def _verified(self) -> list[tuple[Block, Path, dict[str, Any]]]:
        """``(block, part, its global attributes)`` of every sound part; the others removed with a warning."""
        good = []
        for part in self._files():
            block = _block_of(part)
            problem = self._check(part, block)
            if isinstance(problem, dict):
                good.append((block, part, problem))
                continue
            if problem.startswith("foreign"):
                raise self._foreign(problem.split()[1])
            log.warning("%s: %s; it will be recomputed", part, problem)
            for p in (part, sidecar_of(part)):
                p.unlink(missing_ok=True)
        for orphan in self.parts.glob("part-*.nc.sha256"):  # a sidecar whose part never landed
            if not orphan.with_suffix("").exists():
                orphan.unlink(missing_ok=True)
        return good

    def _check(self, part: Path, block: Block | None) -> str | dict[str, Any]:
        """Why ``part`` cannot be used (``"foreign <fp>"`` for another computation's), or its attributes."""
        if block is None:
            return "not a part name"
        try:
            record = json.loads(sidecar_of(part).read_text())
        except (OSError, ValueError):
            return "no valid checksum record"
        if record.get("fingerprint") != self.fingerprint:
            return f"foreign {record.get('fingerprint')}"
        if (record.get("start"), record.get("stop")) != block:
            return f"its record says [{record.get('start')}, {record.get('stop')}), its name {list(block)}"
        if part.stat().st_size != record.get("bytes"):
            return f"size {part.stat().st_size} bytes, recorded {record.get('bytes')} (truncated?)"
        if content_hash(part) != record.get("sha256"):
            return "checksum mismatch (damaged)"
        try:
            import netCDF4

            with netCDF4.Dataset(part) as nc:
                attrs = {k: nc.getncattr(k) for k in nc.ncattrs()}
                samples = len(nc.dimensions[record.get("dim", "sample")])
        except (OSError, KeyError) as e:
            return f"unreadable ({e})"
        if attrs.get("fingerprint") != self.fingerprint or str(attrs.get("part_range")) != f"{block[0]} {block[1]}":
            return "its attributes disagree with its record"
        if samples != block[1] - block[0]:
            return f"holds {samples} samples for [{block[0]}, {block[1]})"
        return attrs

    # ------------------------------------------------------------------------- writing

    def write(self, ds: xr.Dataset, start: int, stop: int, dim: str = "sample") -> None:
        """Write block ``[start, stop)`` as a part: data, then its checksum record, then the rename."""
        part = self.parts / f"part-{start:012d}-{stop:012d}.nc"

        def record(tmp: Path) -> None:
            write_bytes_atomic(json.dumps({"sha256": content_hash(tmp), "bytes": tmp.stat().st_size,
                                           "fingerprint": self.fingerprint, "start": start, "stop": stop,
                                           "dim": dim}).encode(), sidecar_of(part), durable=False)

        write_atomic(ds.assign_attrs(fingerprint=self.fingerprint, part_range=f"{start} {stop}"), part,
                     before_rename=record)

    # ------------------------------------------------------------------------- assembly

    def finalize(self, attrs: Mapping[str, Any], dim: str = "sample", totals: Sequence[str] = ()) -> Path:
        """Verify every part, prove they tile the span, write ``path`` atomically, remove the parts.

        ``totals`` names per-part integer attributes (e.g. counts) whose sum becomes a global attribute. At
        most :data:`OPEN_PARTS` parts are open at a time while they are concatenated (xarray's file cache).
        """
        parts = self._verified()
        self._check_coverage([b for b, _, _ in parts])
        attrs = {**attrs, **{k: sum(int(a.get(k, 0)) for _, _, a in parts) for k in totals}}
        with xr.set_options(file_cache_maxsize=OPEN_PARTS), xr.open_mfdataset([p for _, p, _ in parts], combine="nested", concat_dim=dim, data_vars="minimal",
                               coords="minimal", compat="override", join="override", engine=ENCODING_ENGINE,
                               parallel=False, chunks={}) as ds:
            ds.attrs = {k: v for k, v in ds.attrs.items() if k not in ("fingerprint", "part_range", *totals)}
            write_atomic(ds.assign_attrs(attrs), self.path, before_rename=lambda tmp: record_checksum(self.path, tmp))
        shutil.rmtree(self.parts)
        self.close()
        return self.path

    def _check_coverage(self, blocks: Sequence[Block]) -> None:
        if not blocks:
            raise DataError(f"{self.parts}: no finished parts to assemble; rerun the command to compute them")
        start, stop = self.span if self.span is not None else (blocks[0][0], blocks[-1][1])
        at = start
        for a, b in sorted(blocks):
            if a != at:
                what = "gap" if a > at else "overlap"
                raise DataError(f"{self.parts}: parts do not cover [{start}, {stop}) exactly ({what} at sample "
                                f"{min(a, at)}); rerun the command to recompute, or delete the folder")
            at = b
        if at != stop:
            raise DataError(f"{self.parts}: parts cover [{start}, {at}) of [{start}, {stop}); rerun the command "
                            "to compute the rest")


def sidecar_of(part: Path) -> Path:
    return part.with_name(part.name + ".sha256")


def _block_of(part: Path) -> Block | None:
    try:
        _, a, b = part.stem.split("-")
        return int(a), int(b)
    except ValueError:
        return None


def _recorded_fingerprint(part: Path) -> str | None:
    """The fingerprint a part claims (its record, else its attributes), or None when unreadable."""
    try:
        return json.loads(sidecar_of(part).read_text()).get("fingerprint")
    except (OSError, ValueError):
        pass
    try:
        import netCDF4

        with netCDF4.Dataset(part) as nc:
            return str(nc.getncattr("fingerprint"))
    except (OSError, AttributeError):
        return None


def run_blocks(store: PartStore, blocks: Sequence[Block], compute: Callable[[int, int], xr.Dataset], *,
               progress: bool = False, desc: str = "") -> int:
    """Compute every block of ``blocks`` not verified in ``store`` and write it; return the samples computed.

    ``compute(a, b)`` returns the labeled dataset of block ``[a, b)``. One writer thread overlaps
    writing block k with computing block k + 1 (TensorFlow and netCDF release the GIL); at most one
    block is in flight, so memory stays about two blocks.
    """
    done = store.done()
    todo = [blk for blk in blocks if blk not in done]
    return pipeline(blocks, todo, todo, compute, store.write, progress=progress, desc=desc)


def pipeline(blocks: Sequence[Block], todo: Sequence[Block], units: Sequence[Block],
              compute: Callable[[int, int], Any], write: Callable[[Any, int, int], None], *, progress: bool,
              desc: str, depth: int = 1) -> int:
    """``write(compute(a, b), a, b)`` for every unit ``[a, b)`` (the blocks ``todo`` of ``blocks``, or
    slices of them), in order: one writer thread beside the computation, at most ``depth`` writes
    pending while a unit is computed; return the samples computed.

    A write that fails stops every write queued after it (nothing may land past a failed unit); the error is
    raised in the computing thread at its next wait.
    """
    total = sum(b - a for a, b in blocks)
    computed = 0
    with ThreadPoolExecutor(max_workers=1) as pool, progress_bar(
            total, initial=total - sum(b - a for a, b in todo), unit="pt", enabled=progress, desc=desc) as bar:
        pending: deque[Future] = deque()
        failed: list[BaseException] = []

        def write_in_order(result: Any, a: int, b: int) -> None:
            if failed:
                return
            try:
                write(result, a, b)
            except BaseException as err:
                failed.append(err)
                raise

        for a, b in units:
            while len(pending) > depth:
                pending.popleft().result()  # re-raises a failed write
            result = compute(a, b)
            pending.append(pool.submit(write_in_order, result, a, b))
            computed += b - a
            bar.update(b - a)
        while pending:
            pending.popleft().result()
    if len(todo) < len(blocks):
        log.info("resumed: %d of %d parts were already on disk", len(blocks) - len(todo), len(blocks))
    return computed
