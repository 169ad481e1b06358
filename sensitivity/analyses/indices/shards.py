"""Shards of a one-pass Sobol' analysis: the identity of the design their statistics carry, and their exact merge.

A study of ``n`` base rows split into ``K`` shards (base rows ``[k n / K, (k + 1) n / K)`` of one design, each
computed anywhere: a Hydra multirun, a SLURM array) keeps each shard's statistics
(:meth:`~sensitivity.analyses.indices.pickfreeze.Accumulator.to_dataset`: the means and co-moments of every
segment of the design the shard touches) with the identity of the design (:func:`identity`: the space, the model,
the seed, ``n``, the scramblings, the factors, the convergence record) as ``design_*`` attributes. :func:`merge`
joins them by Chan et al.'s pairwise update segment by segment, so the merged statistics give the indices and
intervals of one run over all the rows to float64 round-off, and refuses in one line shards of another design or
rows covered twice or not at all. The checkpointed groups of blocks of one run
(:func:`~sensitivity.analyses.indices.sobol_onepass.statistics`) are the same datasets.

References
----------
Terraz, T., Ribes, A., Fournier, Y., Iooss, B. & Raffin, B. (2017), Melissa: large scale in transit sensitivity
analysis avoiding intermediate files, SC17, doi:10.1145/3126908.3126922.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Mapping, Protocol, Sequence

from sensitivity.analyses.indices.pickfreeze import Accumulator
from sensitivity.errors import ConfigError, DataError
from sensitivity.inputs.space import ParameterSpace
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")

#: Prefix of the identity attributes of a statistics dataset.
PREFIX = "design_"


class Kept(Protocol):
    """Where a run keeps the statistics of its finished groups of blocks, by name (e.g.
    :class:`sensitivity.store.checkpoints.DatasetCheckpoints`): ``load`` gives None for a group not kept."""

    def load(self, name: str) -> xr.Dataset | None: ...

    def save(self, name: str, ds: xr.Dataset) -> None: ...


def identity(space: ParameterSpace, n: int, *, seed: object, groups: Mapping[str, Sequence[str]] | None,
             second_order: bool, replicates: int, convergence_start: int, model: str = "") -> dict[str, str]:
    """What makes two sets of statistics rows of one design: ``{name: value}`` as strings.

    ``model`` identifies the model evaluated (a surrogate's content hash; empty when the caller has none).
    """
    space_hash = hashlib.sha256(json.dumps(space.records(), sort_keys=True, default=str).encode()).hexdigest()
    return {"space": space_hash, "model": model, "seed": str(seed), "base_rows": str(n), "replicates": str(replicates),
            "groups": json.dumps({k: list(v) for k, v in groups.items()}) if groups is not None else "",
            "second_order": str(bool(second_order)), "convergence_start": str(convergence_start)}


def labelled(acc: Accumulator, design: Mapping[str, str]) -> xr.Dataset:
    """``acc``'s statistics as a dataset carrying the identity ``design`` (:func:`identity`)."""
    return acc.to_dataset().assign_attrs({PREFIX + k: v for k, v in design.items()})


def check(ds: xr.Dataset, design: Mapping[str, str], source: str) -> None:
    """Refuse statistics ``ds`` (read from ``source``) that are not of the design ``design``, in one line."""
    for key, ours in design.items():
        theirs = ds.attrs.get(PREFIX + key)
        if theirs is None or str(theirs) != ours:
            shown = "missing" if theirs is None else repr(_short(str(theirs)))
            raise DataError(f"{source}: statistics of another design ({key} {shown}, this run's {_short(ours)!r}); "
                            "merge only the shards of one study, run with the same settings")


def merge(datasets: Sequence[xr.Dataset], design: Mapping[str, str], sources: Sequence[str]) -> Accumulator:
    """The statistics of the whole design from its shards' (:func:`labelled`), checked to be of ``design`` and to
    cover every base row once; ``sources`` name them in errors."""
    if not datasets:
        raise DataError("no shard statistics to merge")
    for ds, source in zip(datasets, sources):
        check(ds, design, source)
    order = sorted(range(len(datasets)), key=lambda i: int(datasets[i].attrs["rows_start"]))
    n, expected, previous, parts = int(design["base_rows"]), 0, "", []
    for i in order:
        start, stop = int(datasets[i].attrs["rows_start"]), int(datasets[i].attrs["rows_stop"])
        if start < expected:
            raise DataError(f"{sources[i]}: rows [{start}, {stop}) overlap {previous}'s, which end at {expected}; "
                            "each row must be in one shard")
        if start > expected:
            raise DataError(f"rows [{expected}, {start}) of the design's [0, {n}) are in no shard (missing shards?)")
        parts.append(Accumulator.from_dataset(datasets[i]))
        expected, previous = stop, sources[i]
    if expected < n:
        raise DataError(f"rows [{expected}, {n}) of the design's [0, {n}) are in no shard (missing shards?)")
    total = parts[0]
    for part in parts[1:]:
        total = total.merge(part)
    return total


def check_settings(n: int, shards: int, shard: int, merge: Sequence[str] | None, intervals: str) -> None:
    """Refuse, in one line, a shard that is not one of ``shards`` of ``n`` base rows, a merge with shards, and
    either under bootstrap intervals (which resample the whole design at once)."""
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= n:
        raise ConfigError(f"`shards` must be an integer in [1, n = {n}], got {shards!r}")
    if isinstance(shard, bool) or not isinstance(shard, int) or not 0 <= shard < shards:
        raise ConfigError(f"`shard` must be an integer in [0, shards = {shards}), got {shard!r}")
    if merge is not None and shards > 1:
        raise ConfigError(f"give `shards` (compute one shard's statistics) or `merge` (join them), not both; got "
                          f"shards = {shards} and merge = {list(merge)}")
    if (shards > 1 or merge is not None) and intervals == "bootstrap":
        raise ConfigError("shards of a design join into randomised-QMC intervals or none, got `intervals.method` = "
                          "'bootstrap'")


def files(paths: Sequence[str | Path], key: str) -> list[Path]:
    """The statistics files ``<key>_statistics.nc`` among ``paths``: files by that name, and every such file under a
    directory (a shard's run folder, or a multirun's); a path that is neither is refused in one line."""
    name, found = f"{key}_statistics.nc", []
    for given in paths:
        path = Path(given).expanduser()
        if path.is_dir():
            found += sorted(path.rglob(name))
        elif path.is_file():
            if not path.name.endswith("_statistics.nc"):
                raise DataError(f"`merge`: {path} is not a shard's statistics file (<method>_statistics.nc)")
            found += [path] if path.name == name else []
        else:
            raise DataError(f"`merge`: not found: {path}")
    if not found:
        raise DataError(f"`merge`: no {name} in {[str(p) for p in paths]}")
    return found


def read(paths: Sequence[Path]) -> list[xr.Dataset]:
    """The statistics datasets of ``paths``, read into memory (the files closed)."""
    from sensitivity.datasets import open_result

    out = []
    for path in paths:
        with open_result(path) as ds:
            out.append(ds.load())
    return out


def rows_of(shard: int, shards: int, n: int) -> tuple[int, int]:
    """Base rows ``[start, stop)`` of shard ``shard`` of ``shards`` equal shards of ``n`` rows."""
    return shard * n // shards, (shard + 1) * n // shards


def _short(text: str) -> str:
    return text if len(text) <= 40 else text[:16] + "..."
