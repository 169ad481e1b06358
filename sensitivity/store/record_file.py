"""netCDF classic files laid out record by record: a block of samples is one byte range of the file.

In the netCDF classic formats every variable whose first dimension is the unlimited (record)
dimension is stored record by record: record ``i`` holds slab ``i`` of each record variable, in
header order, so the samples ``[a, b)`` of a dataset whose record dimension is ``sample`` are the one
contiguous byte range ``[records_at + a R, records_at + b R)`` of the file (``R`` the record size). A
writer that knows this layout puts each block's bytes straight into their final place and can
checksum the whole file in file order as it writes, with no copy and no second pass.

:func:`encode` lets the netCDF library encode a dataset with zero records (its variables, their CF
attributes and the non-record variables' data); :class:`RecordLayout` reads the layout off that
header and reserves a header area of fixed size, so :meth:`RecordLayout.header` can rewrite the
header for other global attributes (provenance, totals known only at the end) and the final record
count without moving a byte of data. The format is CDF-2 ("64-bit offset", ``NETCDF3_64BIT``): any
file size, up to 2^32 - 1 records; every netCDF reader opens it. Big-endian, as the format requires.

References
----------
Unidata, NetCDF Classic and 64-bit Offset Format Specification,
https://docs.unidata.ucar.edu/netcdf-c/current/file_format_specifications.html
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from sensitivity.datasets.write import coordinate_encoding
from sensitivity.errors import DataError
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")

#: The classic format written: CDF-2, 64-bit offsets.
FORMAT = "NETCDF3_64BIT"
_MAGIC = b"CDF\x02"
#: Header area reserved beyond the first header's size [bytes], for longer attributes on a later rewrite.
HEADER_SLACK = 64 * 2**10
_ALIGN = 4096
#: nc_type -> (bytes per value, numpy dtype of the stored, big-endian value).
_TYPES = {1: (1, "i1"), 2: (1, "S1"), 3: (2, ">i2"), 4: (4, ">i4"), 5: (4, ">f4"), 6: (8, ">f8")}


@dataclass(frozen=True)
class _Variable:
    name: str
    dtype: str
    shape: tuple[int, ...]  # lengths after the record dimension (all of them for a non-record variable)
    record: bool
    vsize: int
    begin: int
    begin_at: int  # offset of the 8-byte `begin` field in the header


@dataclass(frozen=True)
class Header:
    """A parsed classic header: its bytes, the record dimension and count, and where each variable begins."""

    raw: bytes
    variables: tuple[_Variable, ...]
    record_dim: str | None
    numrecs: int

    @property
    def data_begin(self) -> int:
        """Offset of the first data byte (the header and its padding lie before it)."""
        return min((v.begin for v in self.variables), default=len(self.raw))

    @property
    def records_begin(self) -> int | None:
        """Offset of record 0, or None without record variables."""
        return min((v.begin for v in self.variables if v.record), default=None)


def parse(raw: bytes) -> Header:
    """Parse the CDF-2 header at the start of ``raw`` (the whole header must be in it).

    Raises
    ------
    DataError
        Not a CDF-2 header, or cut short.
    """
    if raw[:4] != _MAGIC:
        raise DataError(f"not a netCDF 64-bit offset file (magic {raw[:4]!r})")
    reader = _Reader(raw, 4)
    try:
        numrecs = reader.u32()
        dims = [(reader.name(), reader.u32()) for _ in range(reader.list_count())]
        reader.skip_attributes()
        variables = []
        for _ in range(reader.list_count()):
            name = reader.name()
            ids = [reader.u32() for _ in range(reader.u32())]
            reader.skip_attributes()
            nc_type, vsize, begin_at = reader.u32(), reader.u32(), reader.pos
            begin = reader.u64()
            record = bool(ids) and dims[ids[0]][1] == 0
            variables.append(_Variable(name, _TYPES[nc_type][1], tuple(dims[i][1] for i in ids[record:]), record,
                                       vsize, begin, begin_at))
    except (IndexError, KeyError, ValueError) as e:
        raise DataError(f"damaged netCDF header ({type(e).__name__}: {e})") from None
    record_dim = next((name for name, length in dims if length == 0), None)
    return Header(raw[: reader.pos], tuple(variables), record_dim, numrecs)


class _Reader:
    """Big-endian fields of a classic header, read in order."""

    def __init__(self, raw: bytes, pos: int) -> None:
        self.raw, self.pos = raw, pos

    def u32(self) -> int:
        if self.pos + 4 > len(self.raw):
            raise IndexError("header cut short")
        value = int.from_bytes(self.raw[self.pos : self.pos + 4], "big")
        self.pos += 4
        return value

    def u64(self) -> int:
        return (self.u32() << 32) | self.u32()

    def name(self) -> str:
        n = self.u32()
        text = self.raw[self.pos : self.pos + n].decode("utf-8")
        self.pos += -(-n // 4) * 4  # names are padded to 4 bytes
        return text

    def list_count(self) -> int:
        """Entries of a dimension/attribute/variable list (``ABSENT`` is a zero tag and a zero count)."""
        self.u32()
        return self.u32()

    def skip_attributes(self) -> None:
        for _ in range(self.list_count()):
            self.name()
            size = _TYPES[self.u32()][0]
            nbytes = self.u32() * size  # read before `pos` moves past the values
            self.pos += -(-nbytes // 4) * 4


def encode(template: xr.Dataset, dim: str, attrs: Mapping[str, Any]) -> tuple[Header, bytes]:
    """The header and the data bytes of ``template`` (zero records along ``dim``) with global ``attrs``.

    The netCDF library encodes it (CF attributes, strings as character arrays); the data bytes are
    those of the non-record variables, up to where record 0 would begin.
    """
    ds = template.isel({dim: slice(0, 0)}).drop_attrs(deep=False).assign_attrs(attrs)
    raw = bytes(ds.to_netcdf(None, engine="netcdf4", format=FORMAT, unlimited_dims=[dim],
                             encoding=coordinate_encoding(ds)))
    header = parse(raw)
    end = header.records_begin if header.records_begin is not None else len(raw)
    return header, raw[header.data_begin : end].ljust(end - header.data_begin, b"\0")


@dataclass(frozen=True)
class RecordLayout:
    """Where the bytes of a record file go: ``[0, header_space)`` the header and its zero padding,
    then the non-record variables (``fixed``), then the records, ``record.itemsize`` bytes each."""

    header_space: int
    fixed: bytes
    record: np.dtype

    @property
    def padded(self) -> bool:
        """Whether a record holds padding bytes between (or after) its variables."""
        return self.record.itemsize != sum(self.record.fields[name][0].itemsize for name in self.record.names)

    @property
    def records_at(self) -> int:
        """Offset of record 0."""
        return self.header_space + len(self.fixed)

    def offset(self, i: int) -> int:
        """Offset of record ``i``."""
        return self.records_at + i * self.record.itemsize

    @classmethod
    def of(cls, header: Header, fixed: bytes, header_space: int | None = None) -> RecordLayout:
        """The layout of an :func:`encode` result, with ``header_space`` (default: its header plus
        :data:`HEADER_SLACK`, rounded up to 4 KiB) reserved for the header."""
        if header_space is None:
            header_space = -(-(len(header.raw) + HEADER_SLACK) // _ALIGN) * _ALIGN
        return cls(header_space, fixed, _record_dtype(header))

    @classmethod
    def read(cls, head: bytes) -> tuple[RecordLayout, Header]:
        """The layout of an existing record file from its first bytes (at least up to record 0)."""
        header = parse(head)
        begin = header.records_begin if header.records_begin is not None else header.data_begin
        if len(head) < begin:
            raise DataError("file cut short before its first record")
        return cls(header.data_begin, head[header.data_begin : begin], _record_dtype(header)), header

    def header(self, header: Header, n_records: int) -> bytes:
        """``header`` (from :func:`encode`, same variables) for this layout and ``n_records`` records,
        zero-padded to ``header_space`` bytes.

        Raises
        ------
        DataError
            The header does not fit the reserved space, or ``n_records`` does not fit the format.
        """
        if len(header.raw) > self.header_space:
            raise DataError(f"the header ({len(header.raw)} bytes) outgrew its reserved {self.header_space} bytes")
        if not 0 <= n_records < 2**32 - 1:
            raise DataError(f"{n_records} records do not fit a netCDF 64-bit offset file (< 2^32 - 1)")
        raw = bytearray(header.raw)
        raw[4:8] = n_records.to_bytes(4, "big")
        shift = self.header_space - header.data_begin
        for v in header.variables:
            raw[v.begin_at : v.begin_at + 8] = (v.begin + shift).to_bytes(8, "big")
        return bytes(raw.ljust(self.header_space, b"\0"))


def read_layout(fd: int) -> tuple[RecordLayout, Header] | None:
    """The layout and header of the classic file open as ``fd``, or None when it is none (or is cut short)."""
    size, n = os.fstat(fd).st_size, 2**20
    if os.pread(fd, len(_MAGIC), 0) != _MAGIC:
        return None
    while True:
        try:
            return RecordLayout.read(os.pread(fd, min(n, size), 0))
        except DataError:
            if n >= size:
                return None
            n *= 4


def memory_map(path: str | Path, dim: str = "sample") -> np.ndarray | None:
    """The records of ``path`` as a read-only memory map (a structured array, big-endian fields), when it
    is a classic file with record dimension ``dim`` and at least one record; None otherwise."""
    with open(path, "rb") as f:
        found = read_layout(f.fileno())
        size = os.fstat(f.fileno()).st_size
    if found is None or found[1].record_dim != dim or not found[0].record.names:
        return None
    layout, header = found
    count = header.numrecs if header.numrecs != 2**32 - 1 else (size - layout.records_at) // layout.record.itemsize
    if count == 0 or layout.offset(count) > size:
        return None
    return np.memmap(path, layout.record, "r", layout.records_at, (count,))


def _record_dtype(header: Header) -> np.dtype:
    """One record as a structured dtype: a field per record variable at its offset in the record."""
    records = [v for v in header.variables if v.record]
    if not records:
        return np.dtype([])
    first = records[0].begin
    size = (sum(v.vsize for v in records) if len(records) > 1  # one record variable: no padding (the spec)
            else int(np.prod(records[0].shape, dtype=np.int64)) * np.dtype(records[0].dtype).itemsize)
    return np.dtype({"names": [v.name for v in records], "formats": [(v.dtype, v.shape) for v in records],
                     "offsets": [v.begin - first for v in records], "itemsize": size})
