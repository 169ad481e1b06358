"""Records written in place: the part store's guarantees, every byte of a result written once.

:class:`RecordStore` keeps these guarantees and writes every byte once: the result is a netCDF
classic file whose record dimension is ``sample`` (:mod:`sensitivity.store.record_file`), so a block of
samples is one byte range of it, written in place into ``<path>.parts/records.nc`` (the result
before its rename) and hashed in file order as it is written: no assembly step re-reads the data,
and the checksum record of the result is that running SHA-256. Each block leaves a small *receipt*
part (its non-finite counts and the file's SHA-256 up to the block's end) through the part store (:class:`~sensitivity.store.parts.PartStore`),
so the lock, the fingerprint refusal, the verified receipts and the coverage proof are the same;
on resume the records are read once, in order, against the receipts' digests, and the blocks up to
the first damaged or missing one are kept. :func:`run_records` is its loop (blocks in slices of a few
MiB in a few record buffers: the engine fills one while the writer thread writes the others);
:mod:`sensitivity.sweep.stream` uses it.

"""
from __future__ import annotations

import logging

import errno
import hashlib
import mmap
import os
import shutil
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from sensitivity.datasets import checksum_path, sample_dtype, write_text_atomic
from sensitivity.errors import DataError, disk_error
from sensitivity.runtime.lazy import lazy_import
from sensitivity.store.parts import Block, PartStore, pipeline, sidecar_of
from sensitivity.store.record_file import Header, RecordLayout, encode, read_layout

xr = lazy_import("xarray")

log = logging.getLogger(__name__)

#: Bytes read at a time when the records are checked on resume.
_READ_BYTES = 8 * 2**20
#: Alignment of direct (``O_DIRECT``) writes: offsets, lengths and buffer addresses [bytes].
_ALIGN = 4096
#: Record buffers of a store: one being filled, the others' writes pending (a direct write waits for the
#: device, whose latency varies: a few slices queued absorb its stalls).
BUFFERS = 4


class RecordStore:
    """Samples ``[start, stop)`` written once, in place, into the final netCDF file, hashed as written.

    Parameters
    ----------
    path
        The final file: netCDF classic (64-bit offset) with ``sample`` as its record dimension. Until
        every block is written it is ``<path>.parts/records.nc``; receipts and the lock are those of
        :class:`PartStore`.
    fingerprint
        Identity of the computation (as for :class:`PartStore`).
    span
        The sample range ``[start, stop)``: the file holds ``stop - start`` records.
    template
        The result's variables and coordinates with zero samples: the header and the non-record
        variables are encoded from it once; every variable on ``sample`` must have it first.
    attrs
        The result's global attributes (known up front: the header precedes the data).
    totals
        Integer per-block counts (passed to :meth:`write_records`) whose sums become global attributes.

    Notes
    -----
    Records are filled in buffers from :meth:`records`, written in sample order and committed a
    block at a time (:func:`run_records`). The file's SHA-256 runs over its bytes as they are written; when the
    totals are not all zero the header changes at the end and the file is hashed once more. Records
    go to disk with direct I/O (``O_DIRECT``, 4 KiB-aligned; the partial first and last pages of each block
    written through the page cache), which on the development VM wrote 1.8-2.5 GB/s with no kernel
    time where page-cache writes of fresh pages ran at 270-490 MB/s and cost ~2.6 s of kernel time per
    GB; a filesystem without direct I/O gets ordinary writes. The lock is released by :meth:`finalize`,
    :meth:`close` or leaving a ``with`` block.
    """

    def __init__(self, path: str | Path, fingerprint: str, span: Block, *, template: xr.Dataset,
                 attrs: Mapping[str, Any], totals: Sequence[str] = ()) -> None:
        self.path, self.span = Path(path), span
        self._template, self._attrs, self._totals = template, dict(attrs), tuple(totals)
        self._parts = PartStore(path, fingerprint, span)
        self.data = self._parts.parts / "records.nc"
        self._fd = self._direct = None
        self._buffers: list[mmap.mmap | None] = [None] * BUFFERS
        self._handed = self._written = 0
        self._pending: dict[str, int] = {}
        try:
            header, fixed = encode(template, "sample", self._header_attrs({k: 0 for k in self._totals}))
            self._fd = os.open(self.data, os.O_RDWR | os.O_CREAT, 0o644)
            self.layout = self._reuse(header, fixed) or RecordLayout.of(header, fixed)
            self._header = self.layout.header(header, span[1] - span[0])  # the one on disk, after _resume
            self._done = self._resume()
            self._direct = _open_direct(self.data)
        except OSError as e:
            self.close()
            raise disk_error(self.data, e) from None
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> RecordStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the records file and release the lock (receipts and records stay for a later run)."""
        self.close_files()
        self._parts.close()

    def close_files(self) -> None:
        """Close the records file's descriptors (the lock stays held)."""
        for fd in (self._fd, self._direct):
            if fd is not None:
                os.close(fd)
        self._fd = self._direct = None

    def done(self) -> set[Block]:
        """The blocks already on disk whose records were verified on opening the store."""
        return set(self._done)

    def _header_attrs(self, totals: Mapping[str, int]) -> dict[str, Any]:
        return {**self._attrs, **{k: int(v) for k, v in totals.items()}}

    def _begin(self, sample: int) -> int:
        """File offset of the record of ``sample``."""
        return self.layout.offset(sample - self.span[0])

    # ------------------------------------------------------------------------- resume

    def _reuse(self, header: Header, fixed: bytes) -> RecordLayout | None:
        """The layout of a records file an earlier run of this computation left, when this run can go on
        writing it; otherwise the file is emptied (its blocks are then recomputed)."""
        if not os.fstat(self._fd).st_size:
            return None
        found = read_layout(self._fd)
        if found is None:
            why = "its header is unreadable"
        elif (found[0].fixed, found[0].record) != (fixed, RecordLayout.of(header, fixed).record):
            why = "it is laid out differently from this run's result"
        elif len(header.raw) > found[0].header_space:
            why = "this run's header outgrows the space reserved for it"
        else:
            return found[0]
        log.warning("%s: %s; its blocks will be recomputed", self.data, why)
        os.ftruncate(self._fd, 0)
        return None

    def _resume(self) -> set[Block]:
        """Check the records of every receipt in file order against the receipt's running digest and keep
        the blocks up to the first bad one (the later receipts are removed); the running hash goes on
        from there. The header on disk stays while blocks are kept (their digests cover it; the final
        header replaces it at the end), else this run's header and non-record variables are written."""
        parts = sorted(self._parts._verified())
        sha = hashlib.sha256(os.pread(self._fd, self.layout.records_at, 0))  # as the earlier run wrote it
        kept: list[Block] = []
        for block, part, attrs in parts:
            if block[0] != (kept[-1][1] if kept else self.span[0]):
                break
            end, through = self._begin(block[1]), sha.copy()  # the running hash goes on only over a sound block
            for offset in range(self._begin(block[0]), end, _READ_BYTES):
                through.update(os.pread(self._fd, min(_READ_BYTES, end - offset), offset))
            if through.hexdigest() != attrs.get("stream_sha256"):
                log.warning("%s: records [%d, %d) do not match their receipt %s (damaged or missing); they and "
                            "the blocks after them will be recomputed", self.data, *block, part.name)
                break
            sha = through
            kept.append(block)
        for block, part, _ in parts[len(kept):]:
            for p in (part, sidecar_of(part)):
                p.unlink(missing_ok=True)
        if kept:
            self._sha, self._next = sha, kept[-1][1]
            self._header = os.pread(self._fd, self.layout.header_space, 0)
        else:
            self._sha, self._next = hashlib.sha256(self._header + self.layout.fixed), self.span[0]
            _pwrite(self._fd, self._header + self.layout.fixed, 0)
        os.ftruncate(self._fd, self._begin(self._next))
        return set(kept)

    # ------------------------------------------------------------------------- writing

    def records(self, start: int, stop: int) -> np.ndarray:
        """The buffer to fill with samples ``[start, stop)`` and pass to :meth:`write_records`: a record
        array whose fields are the record variables (e.g. ``records["jacobian"]``), padding zeroed.
        The :data:`BUFFERS` buffers take turns, so records may be filled while earlier ones are written."""
        pre = self._begin(start) % _ALIGN  # room for the partial page before the block's first record
        size = (stop - start) * self.layout.record.itemsize
        turn = self._handed % len(self._buffers)
        if self._buffers[turn] is None or len(self._buffers[turn]) < pre + size:
            self._buffers[turn] = mmap.mmap(-1, -(-(pre + size) // _ALIGN) * _ALIGN)  # page-aligned, for direct I/O
        self._handed += 1
        if self.layout.padded:  # a buffer reused at another offset holds old bytes where the padding falls
            np.frombuffer(self._buffers[turn], np.uint8, size, pre)[:] = 0
        return np.frombuffer(self._buffers[turn], self.layout.record, stop - start, pre)

    def write_records(self, records: np.ndarray, start: int, stop: int, totals: Mapping[str, int]) -> None:
        """Write the filled ``records`` (from :meth:`records`) of samples ``[start, stop)`` in place and add
        ``totals`` (their counts) to the part's; ``start`` must be where the previous records ended."""
        buffer = self._buffers[self._written % len(self._buffers)]
        base = np.frombuffer(buffer, np.uint8).ctypes.data if buffer is not None else None
        pre, begin = self._begin(start) % _ALIGN, self._begin(start)
        if start != self._next or len(records) != stop - start or records.ctypes.data != (base or 0) + pre:
            raise DataError(f"{self.data}: records [{start}, {stop}) are not the next records' buffer "
                            f"(the next records start at {self._next})")
        self._written += 1
        data = memoryview(records).cast("B")
        self._sha.update(data)
        try:
            self._write(memoryview(buffer), begin - pre, pre + len(data))
        except OSError as e:
            raise disk_error(self.path, e) from None
        self._next = stop
        for k in self._totals:
            self._pending[k] = self._pending.get(k, 0) + int(totals.get(k, 0))

    def commit(self, start: int, stop: int) -> None:
        """Record part ``[start, stop)``, whose records are all written, as a receipt: its totals and the
        file's running SHA-256 up to its end (through :meth:`PartStore.write`)."""
        if stop != self._next:
            raise DataError(f"{self.data}: part [{start}, {stop}) committed with records written up to {self._next}")
        index = np.arange(start, stop, dtype=sample_dtype(stop))
        receipt = xr.Dataset(coords={"sample": ("sample", index)},
                             attrs={**{k: int(self._pending.get(k, 0)) for k in self._totals},
                                    "stream_sha256": self._sha.hexdigest(), "stream_bytes": self._begin(stop)})
        self._parts.write(receipt, start, stop)
        self._pending = {}

    def _write(self, buffer: memoryview, offset: int, length: int) -> None:
        """``buffer[:length]`` at the page-aligned ``offset``, the records starting at ``self._next``'s offset.

        The pages this block owns whole go directly; the page it shares with the bytes before it (the previous
        block's last page, or the header's) and its own partial last page go through the page cache, so no page
        is ever written both ways (open(2): direct and cached writes to overlapping bytes are not coherent on
        every filesystem)."""
        begin, end = self._begin(self._next), offset + length
        first = offset if begin == offset else offset + _ALIGN  # the first page no earlier write touched
        last = end - end % _ALIGN  # the end of the last whole page
        if self._direct is not None and last > first:
            try:
                _pwrite(self._direct, buffer[first - offset : last - offset], first)
            except OSError as e:
                if e.errno != errno.EINVAL:  # a filesystem that refuses direct I/O here: write through the cache
                    raise
                os.close(self._direct)
                self._direct = None
            else:
                _pwrite(self._fd, buffer[begin - offset : first - offset], begin)
                _pwrite(self._fd, buffer[last - offset : length], last)
                return
        _pwrite(self._fd, buffer[begin - offset : length], begin)

    # ------------------------------------------------------------------------- publishing

    def finalize(self) -> Path:
        """Check the receipts tile the span and end at this file's hash, write the final header, record the
        checksum, rename the records file onto ``path`` and remove the parts.

        Nothing here reads the records again unless the totals are not all zero (the header changed).
        """
        parts = self._parts._verified()
        self._parts._check_coverage([b for b, _, _ in parts])
        if self._next != self.span[1] or parts[-1][2].get("stream_sha256") != self._sha.hexdigest():
            raise DataError(f"{self.data}: the records written end at sample {self._next}, not at the last "
                            "receipt's; rerun the command to recompute, or delete the folder")
        totals = {k: sum(int(a.get(k, 0)) for _, _, a in parts) for k in self._totals}
        header = self.layout.header(encode(self._template, "sample", self._header_attrs(totals))[0],
                                    self.span[1] - self.span[0])
        sha = self._sha
        try:
            if header != self._header:
                _pwrite(self._fd, header, 0)
                sha = _rehash(self._fd, header + self.layout.fixed, self.layout.records_at,
                              os.fstat(self._fd).st_size)
            write_text_atomic(f"{sha.hexdigest()}  {self.path.name}\n", checksum_path(self.path))
            self.close_files()
            os.replace(self.data, self.path)
        except OSError as e:
            raise disk_error(self.path, e) from None
        shutil.rmtree(self._parts.parts)
        self.close()
        return self.path


def run_records(store: RecordStore, blocks: Sequence[Block], fill: Callable[[int, int, np.ndarray], None],
                check: Callable[[np.ndarray], Mapping[str, int]] = lambda records: {}, *, slice_size: int | None = None,
                progress: bool = False, desc: str = "") -> int:
    """Fill and write every block of ``blocks`` not on disk in ``store``, in order; return the samples computed.

    Each block (a part: what a resume keeps or recomputes) goes through in slices of ``slice_size``
    samples (default: the whole block). ``fill(a, b, records)`` writes samples ``[a, b)`` into the
    record buffer ``records`` (:meth:`RecordStore.records`; its fields are the record variables, e.g.
    ``records["jacobian"]``); the writer thread then runs ``check(records)`` (it may edit them; it
    returns their totals), hashes and writes them while the next slices are filled (up to
    ``BUFFERS - 1`` pending), and commits the block after its last slice. Slices of a few MiB keep the
    buffers small and the data in cache.
    """
    done = store.done()
    todo = [blk for blk in blocks if blk not in done]
    slices = [(a, min(a + (slice_size or stop - start), stop))
              for start, stop in todo for a in range(start, stop, slice_size or stop - start)]
    ends = {b: (a, b) for a, b in todo}

    def compute(a: int, b: int) -> np.ndarray:
        records = store.records(a, b)
        fill(a, b, records)
        return records

    def write(records: np.ndarray, a: int, b: int) -> None:
        store.write_records(records, a, b, check(records))
        if b in ends:
            store.commit(*ends[b])

    return pipeline(blocks, todo, slices, compute, write, progress=progress, desc=desc, depth=BUFFERS - 1)


def _open_direct(path: Path) -> int | None:
    """A write descriptor of ``path`` with direct I/O, or None where the platform or filesystem has none."""
    try:
        return os.open(path, os.O_WRONLY | os.O_DIRECT)
    except (AttributeError, OSError):
        return None


def _rehash(fd: int, head: bytes, start: int, stop: int) -> Any:
    """SHA-256 of ``head`` followed by the file's bytes ``[start, stop)``."""
    sha = hashlib.sha256(head)
    for offset in range(start, stop, _READ_BYTES):
        sha.update(os.pread(fd, min(_READ_BYTES, stop - offset), offset))
    return sha


def _pwrite(fd: int, data: bytes | memoryview, offset: int) -> None:
    """All of ``data`` at ``offset`` (``os.pwrite`` may write less than asked)."""
    view = memoryview(data).cast("B")
    while view:
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n
