"""The Sobol' method's settings on a compiled surrogate: in memory, in one pass (resumable), as shards, merged.

Part of :mod:`~sensitivity.analyses.indices.methods`' set of method settings (the :class:`Context` it runs in
is that module's), kept in its own module for its one-pass, checkpoint and shard wiring.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Mapping, Sequence

import numpy as np

from sensitivity.analyses.indices import shards, sobol, sobol_onepass
from sensitivity.analyses.indices.design import check_power_of_two
from sensitivity.analyses.indices.methods import Context, Intervals, timed
from sensitivity.inputs.space import ParameterSpace
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")


@dataclass(frozen=True)
class Sobol:
    """Sobol' first/total (and second) order indices per parameter, and per group when ``groups`` are given.

    With randomised-QMC intervals or none the design is generated, evaluated and reduced ``block`` base rows at a
    time (:mod:`~sensitivity.analyses.indices.sobol_onepass`): memory does not grow with ``n``; the statistics of
    each ``checkpoint_rows`` base rows are kept where the run says (:attr:`Context.keep`), so a killed run resumes.
    ``shards > 1`` makes shard ``shard``'s statistics only (:meth:`statistics`); ``merge`` (paths of those files or
    of folders holding them) joins them into the indices (:mod:`~sensitivity.analyses.indices.shards`). Bootstrap
    intervals resample the whole design, which is then drawn in :meth:`design` and held.
    """

    n: int = 1024
    second_order: bool = False
    groups: Mapping[str, Sequence[str]] | None = None
    convergence_start: int = 64
    block: int = sobol_onepass.BLOCK_ROWS
    checkpoint_rows: int = sobol_onepass.GROUP_ROWS
    shards: int = 1
    shard: int = 0
    merge: Sequence[str] | None = None

    def design(self, space: ParameterSpace, seed: int, intervals: Intervals) -> dict[str, np.ndarray | None]:
        check_power_of_two(self.convergence_start, what="convergence_start")
        check_power_of_two(self.checkpoint_rows, what="checkpoint_rows", minimum=check_power_of_two(
            self.block, what="block", minimum=1))
        intervals.check_size(self.n, what="n")
        shards.check_settings(self.n, self.shards, self.shard, self.merge, intervals.method)
        keys = ["sobol"] + (["sobol_groups"] if self.groups is not None else [])
        kwargs = {"seed": seed, "calc_second_order": self.second_order, "replicates": intervals.replicates_of(qmc=True)}
        sobol.check(space, self.groups)  # every setting checked now; the points drawn in `run`, unless the
        if self.merge is not None:
            return {key: shards.files(self.merge, key) for key in keys}
        if intervals.plan(qmc=True).kind != "bootstrap":  # bootstrap needs them whole
            return dict.fromkeys(keys)
        return {key: sobol.sample(space, self.n, groups=self.groups if key == "sobol_groups" else None, **kwargs)
                for key in keys}

    def run(self, ctx: Context, design: dict[str, Any]) -> dict[str, xr.Dataset]:
        out = {}
        for key, points in design.items():
            groups = self.groups if key == "sobol_groups" else None
            options = self._options(ctx, groups)
            if self.merge is not None:
                acc = shards.merge(shards.read(points), sobol_onepass.identity(ctx.space, self.n, **options),
                                   [str(p) for p in points])
                ds = sobol_onepass.analyze_statistics(acc, ctx.space, groups=groups, intervals=options["intervals"],
                                                      calc_second_order=self.second_order, **ctx.model.labels)
            elif points is None:
                ds = timed(f"{key}: {self.n} base rows evaluated and reduced {self.block} at a time",
                           partial(sobol_onepass.analyze_model, ctx.model.values, ctx.space, self.n, block=self.block,
                                   group=self.checkpoint_rows, kept=ctx.kept(key), **options, **ctx.model.labels))
            else:
                values = timed(f"{key}: {len(points)} evaluations", ctx.model.values, points)
                ds = sobol.analyze(values, ctx.space, groups=groups, calc_second_order=self.second_order,
                                   intervals=options["intervals"], convergence_start=options["convergence_start"],
                                   **ctx.model.labels)
            out[key] = ds.rename({"group_member": "member"}) if groups is not None else ds
        return out

    def statistics(self, ctx: Context, design: dict[str, Any]) -> dict[str, xr.Dataset]:
        """The statistics of shard ``shard`` of ``shards`` of the design (one per key of :meth:`design`), each
        carrying the design's identity, for :func:`~sensitivity.analyses.indices.shards.merge`."""
        rows, out = shards.rows_of(self.shard, self.shards, self.n), {}
        for key in design:
            options = self._options(ctx, self.groups if key == "sobol_groups" else None)
            acc = timed(f"{key}: base rows [{rows[0]}, {rows[1]}) of {self.n}", partial(
                sobol_onepass.statistics, ctx.model.values, ctx.space, self.n, rows=rows, block=self.block,
                group=self.checkpoint_rows, kept=ctx.kept(key), **options))
            out[key] = shards.labelled(acc, sobol_onepass.identity(ctx.space, self.n, **options))
        return out

    def _options(self, ctx: Context, groups: Mapping[str, Sequence[str]] | None) -> dict[str, Any]:
        """The design's settings of one key: what its statistics' identity holds."""
        return {"seed": ctx.seed, "groups": groups, "calc_second_order": self.second_order,
                "intervals": ctx.intervals.plan(qmc=True, seed=ctx.seed),
                "convergence_start": min(self.convergence_start, self.n), "model_id": ctx.model.identity}
