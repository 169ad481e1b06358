"""The plan of a merge: which shards of a multirun form one computation, checked before anything is read.

The application (``workflows.plumbing.multirun``) reads a multirun's job directories into :class:`Run` objects;
:func:`plan_merge` checks that they are one computation split cleanly -- every grid index exactly once (no gap, no
overlap), the same resolved config except the shard keys, the same surrogate -- and refuses with a one-line
:class:`~sensitivity.errors.DataError` naming the missing or mismatched shards. When the multirun also swept
configuration keys, every combination of their values is a *cell* (:class:`Cell`), merged from its own shards;
the cells must form the full product of the swept values. :mod:`sensitivity.sweep.merge` opens and writes the
planned merge.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import yaml

from sensitivity.datasets import checksum_path, verify_checksum
from sensitivity.errors import DataError
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")

SHARD_KEY = "grid.shard"
NUM_SHARDS_KEY = "grid.num_shards"
#: Keys that change where or how a run reports, not what it computes: never compared, never a dim.
RUN_ONLY_KEYS = ("output_dir", "progress", "plots")

_SHARD_ATTR = re.compile(r"^\s*(\d+)\s+of\s+(\d+)\s*$")
#: The YAML loader of the runs' configs and overrides (libyaml's when installed).
YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


# ----------------------------------------------------------------------------- what is on disk


@dataclass(frozen=True)
class Run:
    """One job directory of a multirun.

    Attributes
    ----------
    directory
        The job directory.
    result
        Its finished result file, or None when the job did not finish.
    overrides
        Its command-line overrides (``.hydra/overrides.yaml``), empty when unknown.
    parts
        Part files an unfinished sweep left in ``<result>.parts/`` (a rerun resumes from them).
    """

    directory: Path
    result: Path | None
    overrides: tuple[str, ...]
    parts: int

    def values(self) -> dict[str, str]:
        """The overrides as ``{key: value}`` (``+``/``~`` prefixes dropped)."""
        return dict(split_override(o) for o in self.overrides)


@dataclass(frozen=True)
class Shard:
    """A finished shard: its run, position ``index of count`` and global sample range ``[start, stop)``."""

    run: Run
    index: int
    count: int
    start: int
    stop: int
    attrs: Mapping[str, Any]
    config: Mapping[str, Any]
    dims: tuple[str, ...] = ()

    @property
    def path(self) -> Path:
        assert self.run.result is not None
        return self.run.result


@dataclass(frozen=True)
class Cell:
    """One configuration of the multirun: the swept keys' values and its shards in sample order."""

    values: tuple[str, ...]
    shards: tuple[Shard, ...]

    @property
    def size(self) -> int:
        """Grid points of this configuration."""
        return self.shards[-1].stop


@dataclass(frozen=True)
class Plan:
    """A checked merge: the swept override keys (empty for a plain sharded sweep) and the cells."""

    root: Path
    keys: tuple[str, ...]
    cells: tuple[Cell, ...]
    shard_key: str = SHARD_KEY
    num_shards_key: str = NUM_SHARDS_KEY

    @property
    def files(self) -> list[Path]:
        """Every shard file, cell by cell, in sample order."""
        return [s.path for c in self.cells for s in c.shards]

    @property
    def reference(self) -> Shard:
        """The first shard of the first cell (titles, surrogate, history come from it)."""
        return self.cells[0].shards[0]

    @property
    def dims(self) -> tuple[str, ...]:
        """The new dims, one per swept key: ``grid.n`` -> ``grid_n`` (``override_<name>`` if a file has that dim)."""
        names = []
        for key in self.keys:
            name = re.sub(r"\W", "_", key).strip("_") or "override"
            names.append(f"override_{name}" if name in self.reference.dims or name in names else name)
        return tuple(names)

    @property
    def axes(self) -> list[list[str]]:
        """The values of each swept key, numbers in numeric order, others as text."""
        return [sorted({c.values[i] for c in self.cells}, key=_value_key) for i in range(len(self.keys))]

    def label(self, cell: Cell) -> str:
        """``"grid.n=100 model=a"``: the cell's swept overrides."""
        return " ".join(f"{k}={v}" for k, v in zip(self.keys, cell.values))


def split_override(override: str) -> tuple[str, str]:
    """``"+grid.n=10"`` -> ``("grid.n", "10")``; a deletion ``"~key"`` has the value ``""``."""
    key, _, value = override.partition("=")
    return key.lstrip("+~"), value


# ----------------------------------------------------------------------------- checking


def plan_merge(runs: Sequence[Run], root: str | Path, *, shard_key: str = SHARD_KEY,
               num_shards_key: str = NUM_SHARDS_KEY, ignore_keys: Sequence[str] = RUN_ONLY_KEYS) -> Plan:
    """Check that ``runs`` are complete, consistent shards of one sweep (or of a config sweep).

    Parameters
    ----------
    runs
        The jobs (``workflows.plumbing.multirun.find_runs`` reads a Hydra multirun's).
    root
        The multirun directory (named in messages).
    shard_key, num_shards_key
        The override keys that split a grid (``grid.shard``, ``grid.num_shards``); they may differ
        between shards, and are never a dim.
    ignore_keys
        Config keys that do not change results (never compared, never a dim).

    Raises
    ------
    MissingShards
        A missing or unfinished shard (a :class:`DataError` that lists them).
    DataError
        No runs; runs that override different keys; a duplicated (overlapping) or
        unfinished shard; a gap or overlap of sample indices; shards whose configs differ in a key
        other than the shard keys, or whose surrogate hashes differ; cells that do not form the
        full product of the swept values.
    """
    root = Path(root)
    if not runs:
        raise DataError(f"{root}: no runs found (no job directory with a result, its parts or .hydra/overrides.yaml)")
    skip = (shard_key, num_shards_key, *ignore_keys)
    fixed = [{k: v for k, v in r.values().items() if not _under(k, skip)} for r in runs]
    if len({frozenset(f) for f in fixed}) > 1:
        everywhere = set.intersection(*(set(f) for f in fixed))
        odd = sorted({k for f in fixed for k in f} - everywhere)
        raise DataError(f"{root}: the runs do not override the same keys (only some set {odd}); "
                        "merge the runs of one multirun at a time")
    order = list(fixed[0])
    keys = tuple(k for k in order if len({f[k] for f in fixed}) > 1)
    groups: dict[tuple[str, ...], list[Run]] = {}
    for run, f in zip(runs, fixed):
        groups.setdefault(tuple(f[k] for k in keys), []).append(run)
    context = dict(shard_key=shard_key, num_shards_key=num_shards_key, skip=skip)
    cells = tuple(_cell(values, members, label=_label(keys, values), **context)
                  for values, members in sorted(groups.items(), key=lambda item: _sort_key(item[0])))
    plan = Plan(root, keys, cells, shard_key, num_shards_key)
    _check_product(plan)
    return plan


def _cell(values: tuple[str, ...], runs: list[Run], *, label: str, shard_key: str, num_shards_key: str,
          skip: tuple[str, ...]) -> Cell:
    shards = [_read_shard(r, shard_key, num_shards_key) for r in runs if r.result is not None]
    unfinished = [r for r in runs if r.result is None]
    counts = {s.count for s in shards} | {int(r.values()[num_shards_key]) for r in unfinished
                                          if r.values().get(num_shards_key, "").isdigit()}
    if len(counts) > 1:
        where = ", ".join(f"{s.run.directory.name}: {s.count}" for s in shards)
        raise DataError(f"{label}shards of different splits (num_shards {sorted(counts)}: {where}); "
                        "merge shards of one split")
    count = counts.pop() if counts else 1
    seen: dict[int, Shard] = {}
    for s in shards:
        if s.index in seen:
            raise DataError(f"{label}shard {s.index} of {count} twice (overlapping samples): "
                            f"{seen[s.index].path} and {s.path}")
        seen[s.index] = s
    missing = [i for i in range(count) if i not in seen]
    if missing:
        raise _missing(label, missing, count, runs, shard_key)
    ordered = sorted(shards, key=lambda s: s.start)
    _check_contiguous(ordered, label)
    _check_same(ordered, label, skip)
    return Cell(values, tuple(ordered))


def _check_contiguous(shards: list[Shard], label: str) -> None:
    """The shards' sample ranges, in order, tile ``[0, size)``: every index exactly once."""
    expected = 0
    for s in shards:
        if s.start != expected:
            what = "gap" if s.start > expected else "overlap"
            raise DataError(f"{label}{what} in sample indices: {s.path} starts at {s.start}, expected {expected}")
        expected = s.stop


def _read_shard(run: Run, shard_key: str, num_shards_key: str) -> Shard:
    """Attributes, sample range and position of a finished shard (reads the small ``sample`` coordinate only)."""
    import netCDF4

    path = run.result
    try:
        with netCDF4.Dataset(path) as nc:
            attrs = {k: nc.getncattr(k) for k in nc.ncattrs()}
            if "sample" not in nc.variables:
                raise DataError(f"{path}: no `sample` coordinate; not a sweep result")
            sample = np.asarray(nc.variables["sample"][:], dtype=np.int64)
            dims = tuple(nc.dimensions)
    except OSError as err:
        raise DataError(f"{path}: unreadable ({err})") from None
    if sample.size == 0 or not np.array_equal(sample, np.arange(sample[0], sample[0] + sample.size)):
        raise DataError(f"{path}: its sample indices are not one contiguous range")
    recorded = str(attrs.get("sample_range", f"{sample[0]} {sample[-1] + 1}"))
    if recorded != f"{sample[0]} {sample[-1] + 1}":
        raise DataError(f"{path}: holds samples [{sample[0]}, {sample[-1] + 1}) but records sample_range {recorded}; "
                        "rerun that shard")
    if verify_checksum(path) is False:
        raise DataError(f"{path}: does not match its checksum record {checksum_path(path).name} (damaged or changed "
                        "since it was written); rerun that shard")
    match = _SHARD_ATTR.match(str(attrs.get("shard", "")))
    values = run.values()
    if match:
        index, count = int(match[1]), int(match[2])
    elif values.get(shard_key, "").isdigit():
        index, count = int(values[shard_key]), int(values.get(num_shards_key, "1"))
    else:
        index, count = 0, 1
    config = _flatten(yaml.load(str(attrs.get("config", "")), Loader=YAML_LOADER) or {})
    return Shard(run, index, count, int(sample[0]), int(sample[-1]) + 1, attrs, config, dims)


class MissingShards(DataError):
    """Shards of a cell are missing or unfinished: ``message`` names each and why; ``missing`` and ``runs`` let the
    caller say how to rerun them (the command line knows its own syntax, the library does not)."""

    def __init__(self, message: str, missing: list[int], runs: list[Run], shard_key: str) -> None:
        super().__init__(message)
        self.missing, self.runs, self.shard_key = missing, runs, shard_key


def _missing(label: str, missing: list[int], count: int, runs: list[Run], shard_key: str) -> MissingShards:
    """The refusal naming each missing shard and why it is missing."""
    by_index = {r.values().get(shard_key): r for r in runs if r.result is None}
    details = []
    for i in missing:
        run = by_index.get(str(i))
        if run is None:
            details.append(f"{i}: never ran")
        elif run.parts:
            details.append(f"{i}: unfinished, {run.parts} part(s) on disk in {run.directory}")
        else:
            details.append(f"{i}: no result in {run.directory}")
    message = f"{label}missing shard(s) {', '.join(map(str, missing))} of {count} ({'; '.join(details)})"
    return MissingShards(message, missing, runs, shard_key)


def _check_same(shards: list[Shard], label: str, skip: tuple[str, ...]) -> None:
    """Same resolved config except ``skip`` keys, and the same surrogate, in every shard."""
    ref = shards[0]
    for s in shards[1:]:
        for key in sorted(set(ref.config) | set(s.config)):
            if _under(key, skip):
                continue
            a, b = ref.config.get(key, "<absent>"), s.config.get(key, "<absent>")
            if a != b:
                raise DataError(f"{label}{s.path} is not a shard of the same sweep as {ref.path}: "
                                f"config `{key}` is {b!r} there, {a!r} here")
        if s.attrs.get("surrogate_hash") != ref.attrs.get("surrogate_hash"):
            raise DataError(f"{label}{s.path} was computed with another surrogate than {ref.path} "
                            f"(surrogate_hash {s.attrs.get('surrogate_hash')!r} != {ref.attrs.get('surrogate_hash')!r})")


def _check_product(plan: Plan) -> None:
    """Every combination of the swept values has a cell (a missing one never ran at all)."""
    have = {c.values for c in plan.cells}
    axes = plan.axes
    lacking = [" ".join(f"{k}={a[j]}" for k, a, j in zip(plan.keys, axes, index))
               for index in np.ndindex(*map(len, axes)) if tuple(a[j] for a, j in zip(axes, index)) not in have]
    if lacking:
        raise DataError(f"{plan.root}: the runs do not form the full product of the swept values; "
                        f"no run for {'; '.join(lacking)}")


# ----------------------------------------------------------------------------- helpers


def _under(key: str, prefixes: Sequence[str]) -> bool:
    return any(key == p or key.startswith(p + ".") for p in prefixes)


def _flatten(node: Any, prefix: str = "") -> dict[str, Any]:
    """Nested dicts and lists as ``{"a.b.0.c": leaf}``."""
    if isinstance(node, dict):
        items = [(str(k), v) for k, v in node.items()]
    elif isinstance(node, list):
        items = [(str(i), v) for i, v in enumerate(node)]
    else:
        return {prefix: node}
    flat: dict[str, Any] = {}
    for k, v in items:
        flat.update(_flatten(v, f"{prefix}.{k}" if prefix else k))
    if not items and prefix:
        flat[prefix] = node
    return flat


def _label(keys: tuple[str, ...], values: tuple[str, ...]) -> str:
    """Message prefix naming a cell of a config sweep (``"grid.n=100 model=a: "``), empty for a plain sweep."""
    return " ".join(f"{k}={v}" for k, v in zip(keys, values)) + ": " if keys else ""


def _value_key(value: str) -> tuple:
    """Sort override values numerically when they are numbers, else as text."""
    parsed = yaml.load(value, Loader=YAML_LOADER) if value else None
    if isinstance(parsed, (int, float)) and not isinstance(parsed, bool):
        return (0, float(parsed), value)
    return (1, 0.0, value)


def _sort_key(values: tuple[str, ...]) -> tuple:
    return tuple(_value_key(v) for v in values)
