"""Shards and checkpoints of the one-pass Sobol' analysis: four shards merged through their files equal one run
and the in-memory estimator on the same design; shards of another design or rows covered twice or not at all are
refused in one line; a run killed after some groups resumes without evaluating them again, to the same bytes."""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.analyses.indices import shards, sobol, sobol_onepass
from sensitivity.analyses.indices.intervals import IntervalPlan
from sensitivity.datasets import open_result, write_atomic
from sensitivity.errors import DataError
from sensitivity.store.checkpoints import DatasetCheckpoints
from tests.helpers.functions import ishigami_and_offset as two_outputs
from tests.helpers.functions import uniform_space

ISHIGAMI = uniform_space(3, -np.pi, np.pi)
N, SEED, PLAN = 1024, 4, IntervalPlan("rqmc", replicates=8)
OPTIONS = {"seed": SEED, "intervals": PLAN, "convergence_start": 32, "calc_second_order": True, "model_id": "m"}


def shard_files(tmp_path, count=4, **changed):
    """The statistics of ``count`` equal shards, each written to and read back from its own file."""
    options = {**OPTIONS, **changed}
    n = options.pop("n", N)
    paths = []
    for k in range(count):
        acc = sobol_onepass.statistics(two_outputs, ISHIGAMI, n, rows=shards.rows_of(k, count, n), block=16,
                                       group=64, **options)
        ident = sobol_onepass.identity(ISHIGAMI, n, **options)
        paths.append(write_atomic(shards.labelled(acc, ident), tmp_path / f"shard{k}{''.join(f'_{v}' for v in changed.values())}.nc"))
    return paths


def merged(paths):
    datasets = shards.read(paths)
    acc = shards.merge(datasets, sobol_onepass.identity(ISHIGAMI, N, **OPTIONS), [str(p) for p in paths])
    return sobol_onepass.analyze_statistics(acc, ISHIGAMI, calc_second_order=True, intervals=PLAN)


@pytest.mark.parametrize("count, group, tol", [(4, 64, 1e-12), (3, 1 << 16, 1e-11)])
def test_shards_merged_equal_one_run_and_the_in_memory_estimator(tmp_path, count, group, tol):
    # Four shards kept in the single run's groups of blocks; three that cut blocks and segments, against a single
    # run in one group: the statistics are joined in another order, S2 (a difference of ratios) shows round-off.
    ds = merged(shard_files(tmp_path, count)[::-1])  # in any order
    whole = sobol_onepass.analyze_model(two_outputs, ISHIGAMI, N, block=16, group=group, **OPTIONS)
    points = sobol.sample(ISHIGAMI, N, seed=SEED, calc_second_order=True, replicates=8)
    held = sobol.analyze(two_outputs(points), ISHIGAMI, calc_second_order=True, intervals=PLAN, convergence_start=32)
    assert set(ds.data_vars) == set(whole.data_vars) == set(held.data_vars)
    for name, var in whole.data_vars.items():
        np.testing.assert_allclose(ds[name].values, var.values, rtol=tol, atol=tol, err_msg=name)
        np.testing.assert_allclose(ds[name].values, held[name].values, rtol=1e-10, atol=1e-10, err_msg=name)


@pytest.mark.parametrize("changed, message", [
    ({"seed": 5}, "statistics of another design (seed '5', this run's '4')"),
    ({"model_id": "other"}, "statistics of another design (model 'other', this run's 'm')"),
    ({"n": 2048}, "statistics of another design (base_rows '2048', this run's '1024')"),
])
def test_a_shard_of_another_design_is_refused_in_one_line(tmp_path, changed, message):
    paths = shard_files(tmp_path)
    stranger = shard_files(tmp_path, **changed)[1]
    with pytest.raises(DataError) as info:
        merged([paths[0], stranger, *paths[2:]])
    assert message in str(info.value) and str(stranger) in str(info.value) and "\n" not in str(info.value)


def test_rows_covered_twice_or_not_at_all_are_refused(tmp_path):
    paths = shard_files(tmp_path)
    with pytest.raises(DataError, match=r"rows \[256, 512\) of the design's \[0, 1024\) are in no shard"):
        merged([paths[0], *paths[2:]])
    with pytest.raises(DataError, match=r"rows \[768, 1024\) of the design's \[0, 1024\) are in no shard"):
        merged(paths[:3])
    with pytest.raises(DataError, match=r"rows \[256, 512\) overlap .*'s, which end at 512"):
        merged([*paths, paths[1]])


class Killed(Exception):
    pass


def test_a_killed_run_resumes_from_its_kept_groups_without_evaluating_them_again(tmp_path):
    calls = []

    def model(points, fail_after=None):
        if fail_after is not None and len(calls) == fail_after:
            raise Killed
        calls.append(len(points))
        return two_outputs(points)

    options = {**OPTIONS, "block": 16, "group": 64}  # 4 calls a group, 16 groups
    kept = DatasetCheckpoints(tmp_path / "kept", "fingerprint")
    with pytest.raises(Killed):
        sobol_onepass.analyze_model(lambda x: model(x, fail_after=22), ISHIGAMI, N, kept=kept, **options)
    assert len(calls) == 22  # 5 groups finished and kept, the sixth lost at its third block
    calls.clear()
    resumed = sobol_onepass.analyze_model(model, ISHIGAMI, N, kept=kept, **options)
    assert len(calls) == 64 - 20  # the 5 kept groups (20 calls) were read, not evaluated
    calls.clear()
    whole = sobol_onepass.analyze_model(model, ISHIGAMI, N, **options)
    assert len(calls) == 64
    for name, var in whole.data_vars.items():  # the kept statistics round-trip exactly: the same operations
        np.testing.assert_array_equal(resumed[name].values, var.values, err_msg=name)


def test_kept_groups_of_another_design_are_refused(tmp_path):
    kept = DatasetCheckpoints(tmp_path / "kept", "fingerprint")
    sobol_onepass.statistics(two_outputs, ISHIGAMI, 256, block=16, group=64, kept=kept, **OPTIONS)
    assert open_result(tmp_path / "kept" / "rows-0-64" / "unit.nc").attrs["design_seed"] == "4"
    with pytest.raises(DataError, match=r"rows-0-64: statistics of another design \(seed '4', this run's '5'\)"):
        sobol_onepass.statistics(two_outputs, ISHIGAMI, 256, block=16, group=64, kept=kept,
                                 **{**OPTIONS, "seed": 5})
