"""Pointwise linear propagation of a stored sweep: closed form, resume after a kill, a changed sweep refused."""
from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from sensitivity.analyses.propagation import pointwise, pointwise_analysis
from sensitivity.inputs.uncertainty import gaussian_inputs
from sensitivity.datasets import record_checksum
from sensitivity.errors import DataError
from sensitivity.sweep.stored import StoredSweep
from tests.helpers.blocks import sweep_file


def sweep_and_inputs(tmp_path):
    rng = np.random.default_rng(11)
    points, values, jac = rng.uniform(size=(9, 3)), rng.standard_normal((9, 4)), rng.standard_normal((9, 4, 3))
    path = sweep_file(tmp_path / "sweep.nc", points, values, jac)
    record_checksum(path)
    a = rng.standard_normal((3, 3))
    inputs = gaussian_inputs([0.0, 0.0, 0.0], a @ a.T + np.eye(3), names=["c", "a", "b"], units=["s"] * 3)
    return path, points, values, jac, inputs


def test_a_killed_pointwise_propagation_resumes_to_the_closed_form_and_the_uninterrupted_result(tmp_path, monkeypatch):
    path, points, _, jac, inputs = sweep_and_inputs(tmp_path)
    computed, killed = [], []
    block_dataset = pointwise._block_dataset

    def killed_at_second_block(ds, *args):
        if computed == [0] and not killed:
            killed.append(True)
            raise KeyboardInterrupt("killed")
        computed.append(int(ds["sample"][0]))
        return block_dataset(ds, *args)

    monkeypatch.setattr(pointwise, "_block_dataset", killed_at_second_block)
    options = dict(attrs={"title": "pointwise"}, fingerprint="key", block=4)
    with StoredSweep(path) as sweep:
        with pytest.raises(KeyboardInterrupt):
            sweep.map_to(tmp_path / "local.nc", pointwise_analysis(sweep, inputs), **options)
        assert not (tmp_path / "local.nc").exists()
        resumed = sweep.map_to(tmp_path / "local.nc", pointwise_analysis(sweep, inputs), **options)
        assert computed == [0, 4, 8]  # the finished first block is not computed again
        monkeypatch.undo()
        uninterrupted = sweep.map_to(tmp_path / "whole.nc", pointwise_analysis(sweep, inputs), **options)
    order = [2, 0, 1]  # the inputs' (c, a, b) in the sweep's (a, b, c)
    s = inputs.covariance
    expected = np.sqrt(np.einsum("kmi,ij,kmj->km", jac[:, :, order], s, jac[:, :, order]))
    with xr.open_dataset(resumed) as ds, xr.open_dataset(uninterrupted) as whole:
        xr.testing.assert_identical(ds, whole)
        np.testing.assert_allclose(ds["output_std"].values, expected, rtol=1e-12)
        np.testing.assert_array_equal(ds["x"].values, points[:, order])
        assert ds["output_std"].dims == ("sample", "day") and ds["output_std"].attrs["units"] == "m"


def test_pointwise_propagation_refuses_a_sweep_changed_after_its_checksum(tmp_path):
    path, points, values, jac, inputs = sweep_and_inputs(tmp_path)
    sweep_file(path, points, values, 2.0 * jac)  # rewritten; the record is the old file's
    with StoredSweep(path) as sweep, pytest.raises(DataError, match="does not match its checksum record sweep.nc"):
        sweep.map_to(tmp_path / "local.nc", pointwise_analysis(sweep, inputs), attrs={}, fingerprint="key")
    assert not (tmp_path / "local.nc").exists() and not (tmp_path / "local.nc.parts").exists()
