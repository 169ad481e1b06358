"""The resumable, verified block store: long computations written as checked parts, assembled only when whole.

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
  recomputed, never assembled.
- **coverage**: assembly proves that the parts tile ``[start, stop)`` exactly (no gap, no overlap) and
  that each holds ``b - a`` samples, or refuses.
- **atomic result**: the final file is written to a temporary sibling and renamed into place, so a
  kill during assembly leaves either no ``path`` or a complete one; the parts are removed only after.

:func:`run_blocks` is the one resumable block loop: it computes every block not verified on disk and
writes it through the store (a writer thread overlaps writing block k with computing block k + 1).
:mod:`sensitivity.sweep` and :mod:`sensitivity.stored_sweep` both use it.
"""
from __future__ import annotations

import datetime as _dt
import fcntl
import hashlib
import json
import logging
import os
import shutil
import socket
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import xarray as xr

from sensitivity.datasets import (ENCODING_ENGINE, content_hash, record_checksum, write_atomic,
                                  write_bytes_atomic)
from sensitivity.errors import DataError, disk_error

log = logging.getLogger(__name__)

Block = tuple[int, int]


def digest(*parts: Any) -> str:
    """SHA-256 (hex) of JSON-serialisable ``parts`` (keys sorted): the fingerprint of a computation."""
    payload = json.dumps(list(parts), sort_keys=True, default=str)
    return hashlib.sha256(payload.encode()).hexdigest()


class RunBusy(DataError):
    """Another live process holds the lock of the file this run would write."""


class RunLock:
    """An exclusive, non-blocking ``flock`` on ``path`` held by this process; stale files never block.

    The lock file holds the holder's pid, host and start time for the refusal message. Locks are
    re-entrant within one process (counted), so a caller that failed mid-run can retry in the same
    interpreter.
    """

    _held: dict[Path, tuple[int, int]] = {}  # path -> (fd, count), this process's locks

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).absolute()

    def acquire(self) -> None:
        """Take the lock or raise :class:`DataError` naming the holder."""
        if self.path in self._held:
            fd, count = self._held[self.path]
            self._held[self.path] = (fd, count + 1)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:
                raise disk_error(self.path, e) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                raise RunBusy(f"{self.path.with_suffix('')} is being written by another run ({holder}); wait for "
                                "it to finish or stop it, or write elsewhere") from None
            try:  # the file may have been unlinked by the previous holder between our open and flock
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        info = f"pid {os.getpid()} on {socket.gethostname()} since {_dt.datetime.now().isoformat(timespec='seconds')}"
        os.ftruncate(fd, 0)
        os.write(fd, info.encode())
        self._held[self.path] = (fd, 1)

    def release(self) -> None:
        """Release one hold; the last one removes the file and drops the lock."""
        if self.path not in self._held:
            return
        fd, count = self._held.pop(self.path)
        if count > 1:
            self._held[self.path] = (fd, count - 1)
            return
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        os.close(fd)


def _read_holder(fd: int) -> str:
    try:
        return os.pread(fd, 256, 0).decode(errors="replace").strip() or "holder unknown"
    except OSError:
        return "holder unknown"


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
            for p in (part, _sidecar(part)):
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
            record = json.loads(_sidecar(part).read_text())
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
                                           "dim": dim}).encode(), _sidecar(part))

        write_atomic(ds.assign_attrs(fingerprint=self.fingerprint, part_range=f"{start} {stop}"), part,
                     before_rename=record)

    # ------------------------------------------------------------------------- assembly

    def finalize(self, attrs: Mapping[str, Any], dim: str = "sample", totals: Sequence[str] = ()) -> Path:
        """Verify every part, prove they tile the span, write ``path`` atomically, remove the parts.

        ``totals`` names per-part integer attributes (e.g. counts) whose sum becomes a global attribute.
        """
        parts = self._verified()
        self._check_coverage([b for b, _, _ in parts])
        attrs = {**attrs, **{k: sum(int(a.get(k, 0)) for _, _, a in parts) for k in totals}}
        with xr.open_mfdataset([p for _, p, _ in parts], combine="nested", concat_dim=dim, data_vars="minimal",
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


def _sidecar(part: Path) -> Path:
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
        return json.loads(_sidecar(part).read_text()).get("fingerprint")
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
    from tqdm import tqdm
    from tqdm.contrib.logging import logging_redirect_tqdm

    done = store.done()
    todo = [blk for blk in blocks if blk not in done]
    total = sum(b - a for a, b in blocks)
    computed = 0
    with ThreadPoolExecutor(max_workers=1) as pool, logging_redirect_tqdm(), \
            tqdm(total=total, initial=total - sum(b - a for a, b in todo), unit="pt", unit_scale=True,
                 disable=not progress, desc=desc, file=sys.stderr) as bar:
        in_flight: Future | None = None
        for a, b in todo:
            ds = compute(a, b)
            if in_flight is not None:
                in_flight.result()  # re-raises a failed write
            in_flight = pool.submit(store.write, ds, a, b)
            computed += b - a
            bar.update(b - a)
        if in_flight is not None:
            in_flight.result()
    if len(todo) < len(blocks):
        log.info("resumed: %d of %d parts were already on disk", len(blocks) - len(todo), len(blocks))
    return computed
