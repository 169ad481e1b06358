"""The one-pass Sobol' analysis: the design generated, evaluated and reduced block by block, resumable, sharded.

:func:`statistics` evaluates base rows of :func:`~sensitivity.analyses.indices.sobol.sample`'s design (all of
them, or a shard's range) ``block`` base rows per model call into the one-pass statistics of
:class:`~sensitivity.analyses.indices.pickfreeze.Accumulator`, group by group, keeping each finished group's
statistics where the caller says (so a killed run resumes); :func:`analyze_statistics` turns the statistics of
every row (one run's, or the merge of its shards': :func:`~sensitivity.analyses.indices.shards.merge`) into
:func:`~sensitivity.analyses.indices.sobol.analyze`'s dataset; :func:`analyze_model` is the two in one. No
array of the design's size is made: memory does not grow with ``N``. With ``dependent=True`` the design is
:func:`~sensitivity.analyses.indices.sobol_dependent.sample`'s (the ``2 d`` full and independent pick-freeze
columns of a space with a correlation matrix) and the dataset
:func:`~sensitivity.analyses.indices.sobol_dependent.analyze`'s.
"""
from __future__ import annotations

import logging
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Callable, Sequence

import numpy as np

from sensitivity.analyses.indices import design, pickfreeze, shards, sobol_dependent, tails
from sensitivity.analyses.indices.design import Seed
from sensitivity.analyses.indices.intervals import RQMC, IntervalPlan
from sensitivity.analyses.indices.sobol import (DEPENDENT, Groups, convergence_sizes, indices_dataset, membership,
                                                sample_rows)
from sensitivity.errors import ConfigError
from sensitivity.inputs.space import ParameterSpace
from sensitivity.inputs.uncertainty import CopulaInputs, inputs_from_space
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")

log = logging.getLogger(__name__)

#: Base rows per model call of the one-pass analysis (:func:`analyze_model`).
BLOCK_ROWS = 1 << 10
#: Base rows per group of blocks whose statistics a one-pass run keeps as it goes (:func:`statistics`).
GROUP_ROWS = 1 << 16


def analyze_model(
    model: Callable[[np.ndarray], np.ndarray],
    space: ParameterSpace,
    n: int,
    *,
    seed: Seed = None,
    groups: Groups | None = None,
    calc_second_order: bool = False,
    intervals: IntervalPlan = RQMC,
    convergence_start: int = 64,
    block: int = BLOCK_ROWS,
    group: int = GROUP_ROWS,
    kept: shards.Kept | None = None,
    model_id: str = "",
    output_names: Sequence[str] | None = None,
    output_units: Sequence[str] | None = None,
    dependent: bool = False,
) -> xr.Dataset:
    """:func:`~sensitivity.analyses.indices.sobol.analyze` of ``model`` on the design of
    :func:`~sensitivity.analyses.indices.sobol.sample`, in one pass: memory independent of ``n``.

    The design's base rows are generated (:func:`~sensitivity.analyses.indices.sobol.sample_rows`), evaluated and reduced into one-pass statistics
    (:func:`statistics`) ``block`` base rows at a time; no array of the design's size is made. The result is
    :func:`~sensitivity.analyses.indices.sobol.analyze`'s of ``model(sample(space, n, ...))`` (the same rows, the same estimators) to float64
    round-off, with randomised-QMC intervals or none; bootstrap intervals resample the whole design and are
    refused here (:func:`~sensitivity.analyses.indices.sobol.analyze` makes them).

    Parameters
    ----------
    model
        Values ``[rows, m]`` at points ``[rows, d]`` in physical units (one column per output).
    space, n, seed, groups, calc_second_order
        As :func:`~sensitivity.analyses.indices.sobol.sample`'s (the replicates are ``intervals``').
    intervals, convergence_start, output_names, output_units
        As :func:`~sensitivity.analyses.indices.sobol.analyze`'s.
    block, group, kept, model_id, dependent
        As :func:`statistics`' (``dependent``: :func:`~sensitivity.analyses.indices.sobol_dependent.analyze`'s
        dataset).
    """
    plan = intervals.check()
    acc = statistics(model, space, n, seed=seed, groups=groups, calc_second_order=calc_second_order,
                     intervals=plan, convergence_start=convergence_start, block=block, group=group, kept=kept,
                     model_id=model_id, dependent=dependent)
    return analyze_statistics(acc, space, groups=groups, calc_second_order=calc_second_order, intervals=plan,
                              output_names=output_names, output_units=output_units, dependent=dependent)


def statistics(
    model: Callable[[np.ndarray], np.ndarray],
    space: ParameterSpace,
    n: int,
    *,
    seed: Seed = None,
    groups: Groups | None = None,
    calc_second_order: bool = False,
    intervals: IntervalPlan = RQMC,
    convergence_start: int = 64,
    block: int = BLOCK_ROWS,
    rows: tuple[int, int] | None = None,
    group: int = GROUP_ROWS,
    kept: shards.Kept | None = None,
    model_id: str = "",
    dependent: bool = False,
) -> pickfreeze.Accumulator:
    """The one-pass statistics of ``model`` on base rows ``rows`` (default all) of :func:`~sensitivity.analyses.indices.sobol.sample`'s design.

    The rows are evaluated ``block`` base rows per model call, in groups of ``group`` base rows whose statistics
    (:class:`~sensitivity.analyses.indices.pickfreeze.Accumulator`) join in order; with ``kept``
    (:class:`~sensitivity.analyses.indices.shards.Kept`) each finished group is kept under ``rows-<a>-<b>`` and a
    group found there (of the same design: :func:`~sensitivity.analyses.indices.shards.identity`, with
    ``model_id`` naming the model) is read instead of evaluated, so a killed run resumes at its first unfinished
    group with the same result. The statistics of the shards of a design merge exactly
    (:func:`~sensitivity.analyses.indices.shards.merge`; :func:`analyze_statistics` makes the indices).

    Parameters
    ----------
    model, space, n, seed, groups, calc_second_order, intervals, convergence_start
        As :func:`analyze_model`'s.
    block
        Base rows per model call, a power of two (each then ``block (G + 2)`` points).
    rows
        Base rows ``[start, stop)`` of the design (a shard: :func:`~sensitivity.analyses.indices.shards.rows_of`).
    group
        Base rows per kept group, a power of two.
    dependent
        The design of :func:`~sensitivity.analyses.indices.sobol_dependent.sample` (any space; no ``groups`` or
        second order) instead of Saltelli's (independent inputs).
    """
    if dependent and (groups is not None or calc_second_order):
        raise ConfigError("the dependent Sobol' design has no `groups` or second order, got "
                          f"groups={groups!r}, calc_second_order={calc_second_order!r}")
    if not dependent:
        design.require_independent(space, method="Sobol' analysis", instead=DEPENDENT)
    plan = intervals.check()
    if plan.kind == "bootstrap":
        raise ConfigError("the one-pass Sobol' analysis makes randomised-QMC intervals or none, got `intervals` = "
                          "'bootstrap' (analyze the design's values in memory for it)")
    block = design.check_power_of_two(block, what="block", minimum=1)
    group = design.check_power_of_two(group, what="checkpoint_rows", minimum=block)
    replicates = plan.check_rows(n) if plan.kind == "rqmc" else 1
    start, stop = (0, n) if rows is None else rows
    sizes = convergence_sizes(convergence_start, n)
    ident = identity(space, n, seed=seed, groups=groups, calc_second_order=calc_second_order, intervals=plan,
                     convergence_start=convergence_start, model_id=model_id, dependent=dependent)
    base = design.SobolBase(2 * len(space), n, seed, replicates)
    total, resumed, count = None, 0, -(-(stop - start) // group)
    for lo in range(start, stop, group):
        hi, name = min(stop, lo + group), f"rows-{lo}-{min(stop, lo + group)}"
        found = kept.load(name) if kept is not None else None
        if found is not None:
            shards.check(found, ident, name)
            part, resumed = pickfreeze.Accumulator.from_dataset(found), resumed + 1
        else:
            part = _evaluated(model, space, base, (lo, hi), groups=groups, calc_second_order=calc_second_order,
                              block=block, sizes=sizes, dependent=dependent)
            if kept is not None:
                kept.save(name, shards.labelled(part, ident))
        total = part if total is None else total.merge(part)
    if kept is not None:
        log.info("base rows [%d, %d): %d of %d groups of %d read from an earlier run's kept statistics, %d evaluated",
                 start, stop, resumed, count, group, count - resumed)
    return total


def identity(space: ParameterSpace, n: int, *, seed: Seed = None, groups: Groups | None = None,
             calc_second_order: bool = False, intervals: IntervalPlan = RQMC, convergence_start: int = 64,
             model_id: str = "", dependent: bool = False) -> dict[str, str]:
    """The identity of :func:`statistics`' design (:func:`~sensitivity.analyses.indices.shards.identity`), which
    its kept groups and its shards' statistics carry and a merge checks (the dependent design's names itself)."""
    plan = intervals.check()
    ident = shards.identity(space, n, seed=seed, groups=groups, second_order=calc_second_order,
                            replicates=plan.check_rows(n) if plan.kind == "rqmc" else 1,
                            convergence_start=convergence_sizes(convergence_start, n)[0], model=model_id)
    return {**ident, "design": "dependent"} if dependent else ident


def _evaluated(model: Callable[[np.ndarray], np.ndarray], space: ParameterSpace, base: design.SobolBase,
               rows: tuple[int, int], *, groups: Groups | None, calc_second_order: bool, block: int,
               sizes: Sequence[int], dependent: bool = False) -> pickfreeze.Accumulator:
    """The statistics of base rows ``rows`` of ``base``'s design, evaluated ``block`` base rows at a time.

    One background thread makes the next block's points and the last block's statistics while the model
    evaluates this block (the model and NumPy release the GIL; on two cores the model then runs as it does
    alone), in the blocks' order: the same numbers as one step after the other, at most two blocks' points and
    values held. A second one makes the heavy-tail check (:mod:`~sensitivity.analyses.indices.tails`, order
    statistics of the design's first values: ~0.05 CPU s on the demo's 41,943 x 100) as soon as those values are
    in, rather than after the last block.
    """
    g = 2 * len(space) if dependent else membership(space, groups).shape[0]
    per_block, acc, inputs = 2 * g + 2 if calc_second_order else g + 2, None, inputs_from_space(space)
    starts = range(rows[0], rows[1], block)

    def points(lo: int) -> np.ndarray:
        return design_rows(space, base, lo, min(rows[1], lo + block), groups=groups,
                           calc_second_order=calc_second_order, dependent=dependent, inputs=inputs)

    with (ThreadPoolExecutor(max_workers=1, thread_name_prefix="sobol-onepass") as worker,
          ThreadPoolExecutor(max_workers=1, thread_name_prefix="sobol-tails") as checker):
        upcoming, added, checked = worker.submit(points, starts[0]), None, None
        for k in range(len(starts)):
            x = upcoming.result()
            if k + 1 < len(starts):
                upcoming = worker.submit(points, starts[k + 1])
            y = design.as_values(model(x), dtype=None)
            if acc is None:
                acc = pickfreeze.Accumulator(base.n, g, calc_second_order, y.shape[1],
                                             replicates=len(base.engines), sizes=sizes, span=rows)
            if added is not None:
                added.result()
                checked = checked or _check_tail(checker, acc)
            added = worker.submit(acc.update, y.reshape(len(x) // per_block, per_block, -1))
        added.result()
        checked = checked or _check_tail(checker, acc)
        acc.tail_check = None if checked is None else checked.result()
    return acc


def _check_tail(checker: ThreadPoolExecutor, acc: pickfreeze.Accumulator) -> Future | None:
    """The heavy-tail check of ``acc``'s values, started on ``checker`` once they are the design's whole sample
    (the blocks fed later add none: the values are read there, joined there)."""
    return checker.submit(lambda: tails.tail_variables(acc.tail_values())) if acc.tail_complete else None


def design_rows(space: ParameterSpace, base: design.SobolBase, start: int, stop: int, *, groups: Groups | None = None,
                calc_second_order: bool = False, dependent: bool = False,
                inputs: CopulaInputs | None = None) -> np.ndarray:
    """The points of base rows ``[start, stop)`` of Saltelli's design
    (:func:`~sensitivity.analyses.indices.sobol.sample_rows`, with the marginals ``inputs`` built once per run) or,
    ``dependent``, of the dependent one (:func:`~sensitivity.analyses.indices.sobol_dependent.sample_rows`)."""
    if dependent:
        return sobol_dependent.sample_rows(space, base, start, stop)
    return sample_rows(space, base, start, stop, groups=groups, calc_second_order=calc_second_order, inputs=inputs)


def analyze_statistics(acc: pickfreeze.Accumulator, space: ParameterSpace, *, groups: Groups | None = None,
                       calc_second_order: bool = False, intervals: IntervalPlan = RQMC,
                       output_names: Sequence[str] | None = None,
                       output_units: Sequence[str] | None = None, dependent: bool = False) -> xr.Dataset:
    """:func:`~sensitivity.analyses.indices.sobol.analyze`'s dataset from the statistics of every row of the
    design (:func:`statistics`, or the merge of its shards': :func:`~sensitivity.analyses.indices.shards.merge`),
    with randomised-QMC intervals over its scramblings or none."""
    plan = intervals.check()
    replicates = plan.check_rows(acc.n) if plan.kind == "rqmc" else acc.replicates
    if plan.kind == "bootstrap" or replicates != acc.replicates:
        raise ConfigError(f"statistics of {acc.replicates} scrambling(s) give randomised-QMC intervals over them or "
                          f"none, got `intervals` = {plan.kind!r} with {plan.replicates} replicates")
    if dependent:
        return sobol_dependent.indices_dataset(acc.replicate_estimates(), acc.tail_values(), space, acc.n, plan=plan,
                                               output_names=output_names, output_units=output_units)
    return indices_dataset(acc, acc.replicate_estimates(), acc.tail_values(), space, groups=groups,
                    calc_second_order=calc_second_order, plan=plan, output_names=output_names,
                    output_units=output_units)
