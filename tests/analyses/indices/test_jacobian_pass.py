"""DGSM and active subspaces run together share one pass of Jacobians (issue 59): one engine call per block of the
common draws feeds both methods' statistics, each result equal to the method run alone, and to the closed forms of a
linear model (``nu_ik = w_ki^2``; ``C = g g^T`` with ``g = w (b - a) / 2``: one eigenvalue ``|g|^2`` along ``g``)."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import sensitivity
from sensitivity.analyses import indices
from sensitivity.analyses.indices import onepass
from sensitivity.engine.ensemble import compile_ensemble
from sensitivity.engine.jacobian import compile_jacobian
from sensitivity.surrogates.ensemble import write_ensemble
from tests.helpers.functions import uniform_space
from tests.helpers.models import linear_members

W = np.array([[1.0, -2.0, 0.5], [0.25, 3.0, 1.0]])  # [m, n]: exactly representable in float32
OUTPUT = {"name": "y", "units": "1", "names": ["first", "second"]}
SPACE = uniform_space(3, 0.0, 2.0)
N = 2 * onepass.BLOCK_POINTS


class Counted:
    """A compiled surrogate (or ensemble) that counts its Jacobian calls (points per call)."""

    def __init__(self, engine: Any):
        self.engine, self.calls = engine, []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)

    def __call__(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.calls.append(len(points))
        return self.engine(points)


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    path = tmp_path_factory.mktemp("linear") / "linear.keras"
    linear_members(W[None], np.array([[1.0, -1.0]]), ["x1", "x2", "x3"], OUTPUT)[0].save(path)
    return compile_jacobian(sensitivity.load_surrogate(path, dtype="float64"))


def methods(dgsm_n: int = N) -> dict[str, Any]:
    quantity = indices.Quantity(name="total", weights="sum")
    return {"dgsm": indices.Dgsm(n=dgsm_n), "active_subspaces": indices.ActiveSubspaces(n=N, quantity=quantity)}


def assert_equal_alone(together, engine, chosen, intervals) -> None:
    """Every variable of each method run alone, in the run of both, to 1e-12."""
    for name, method in chosen.items():
        alone = indices.compute(engine, SPACE, {name: method}, seed=3, intervals=intervals)
        for key in alone.data_vars:
            if key.startswith(("dgsm_", "active_subspace")):
                np.testing.assert_allclose(together[key].values, alone[key].values, rtol=1e-12, atol=0, err_msg=key)


@pytest.mark.parametrize("intervals", [indices.Intervals(), indices.Intervals(method="none")], ids=["rqmc", "none"])
def test_dgsm_and_active_subspaces_share_one_call_per_block_and_equal_each_alone(engine, intervals):
    counted = Counted(engine)
    together = indices.compute(counted, SPACE, methods(), seed=3, intervals=intervals)
    assert counted.calls == [onepass.BLOCK_POINTS] * (N // onepass.BLOCK_POINTS)  # three results, one pass
    assert_equal_alone(together, engine, methods(), intervals)

    np.testing.assert_allclose(together["dgsm_nu"].values, (W**2).T, rtol=1e-14)  # [parameter, output]
    g = W * 1.0  # (b - a) / 2 = 1: the normalised gradient of each output
    np.testing.assert_allclose(together["active_subspace_eigenvalue"].isel(direction=0).values,
                               (g**2).sum(axis=1), rtol=1e-12)
    total = g.sum(axis=0)  # the quantity y1 + y2
    np.testing.assert_allclose(together["active_subspace_quantity_eigenvalue"].isel(direction=0).values,
                               [total @ total], rtol=1e-12)
    w1 = together["active_subspace_quantity_eigenvector"].isel(direction=0, quantity=0).values
    np.testing.assert_allclose(w1, total / np.linalg.norm(total), atol=1e-12)  # its largest component positive


def test_different_sizes_make_one_pass_each(engine):
    counted = Counted(engine)
    together = indices.compute(counted, SPACE, methods(dgsm_n=N // 2), seed=3)
    assert sorted(counted.calls) == sorted([onepass.BLOCK_POINTS] * (N // onepass.BLOCK_POINTS)
                                           + [N // 2] * max(1, N // 2 // onepass.BLOCK_POINTS))
    assert together.attrs["dgsm_n_points"] == N // 2 and together.attrs["active_subspace_n_points"] == N
    assert_equal_alone(together, engine, methods(dgsm_n=N // 2), indices.Intervals())


def test_bootstrap_intervals_hold_one_shared_sample(engine):
    intervals = indices.Intervals(method="bootstrap", n_resamples=20)
    counted = Counted(engine)
    together = indices.compute(counted, SPACE, methods(), seed=3, intervals=intervals)
    assert counted.calls == [N]  # the held sample (indices.Context.input_sample), evaluated once
    assert "quantity" in together["active_subspace_quantity_eigenvalue"].dims
    assert_equal_alone(together, engine, methods(), intervals)


def test_an_ensemble_side_by_side_shares_the_pass_too(tmp_path, engine):
    # three members of one linear model: the mean's and every member's indices are the one model's
    models = linear_members(np.repeat(W[None], 3, axis=0), np.zeros((3, 2)), ["x1", "x2", "x3"], OUTPUT)
    path = write_ensemble(tmp_path / "l.ensemble", lambda k, f: models[k].save(f), [{"seed": k} for k in range(3)])
    counted = Counted(compile_ensemble(sensitivity.load_surrogate(path, dtype="float64")))
    chosen = {"dgsm": indices.Dgsm(n=N), "active_subspaces": indices.ActiveSubspaces(n=N)}
    ds = indices.compute(counted, SPACE, chosen, seed=3)
    assert counted.calls == [onepass.BLOCK_POINTS] * (N // onepass.BLOCK_POINTS)
    np.testing.assert_allclose(ds["dgsm_nu_member"].values, np.repeat((W**2).T[None], 3, axis=0), rtol=1e-14)
    assert_equal_alone(ds, engine, chosen, indices.Intervals())
