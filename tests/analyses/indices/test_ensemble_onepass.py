"""The one-pass indices of an ensemble (issue 59): one evaluation per block of the design, reduced into the mean's and
every member's statistics at once, equal to the in-memory estimator of the mean's values on the same rows and to each
member's indices computed as a surrogate of its own."""
from __future__ import annotations

import numpy as np
import pytest

import sensitivity
from sensitivity.analyses import indices
from sensitivity.analyses.indices import sobol
from sensitivity.engine.ensemble import compile_ensemble
from sensitivity.engine.jacobian import compile_jacobian
from sensitivity.surrogates.ensemble import write_ensemble
from tests.helpers.functions import uniform_space
from tests.helpers.models import linear_members

WEIGHTS = np.array([[[1.0, 2.0, 0.5], [0.0, 1.0, 1.0]],
                    [[1.2, 1.8, 0.4], [0.1, 0.9, 1.2]],
                    [[0.9, 2.3, 0.6], [-0.1, 1.1, 0.8]]])  # [K, m, n]
BIASES = np.array([[0.0, 1.0], [0.1, 0.9], [-0.2, 1.2]])
OUTPUT = {"name": "y", "units": "1", "names": ["first", "second"]}
N, BLOCK = 1024, 64
METHODS = {"sobol": indices.Sobol(n=N, block=BLOCK, checkpoint_rows=256), "dgsm": indices.Dgsm(n=512),
           "morris": indices.Morris(trajectories=32), "active_subspaces": indices.ActiveSubspaces(n=512)}


@pytest.fixture(scope="module")
def members(tmp_path_factory):
    """The ensemble and each member saved as a surrogate of its own."""
    folder = tmp_path_factory.mktemp("linear")
    models = linear_members(WEIGHTS, BIASES, ["x1", "x2", "x3"], OUTPUT)
    path = write_ensemble(folder / "l.ensemble", lambda k, f: models[k].save(f), [{"seed": k} for k in range(3)])
    alone = []
    for k, model in enumerate(models):
        model.save(folder / f"member{k}.keras")
        alone.append(sensitivity.load_surrogate(folder / f"member{k}.keras", dtype="float64"))
    return sensitivity.load_surrogate(path, dtype="float64"), alone


def test_ensemble_one_pass_indices_equal_the_in_memory_estimator_and_each_members_own(members):
    ensemble, alone = members
    space = uniform_space(3, -1.0, 1.0)
    engine = compile_ensemble(ensemble)
    calls = []
    values = engine.values
    engine.values = lambda points: calls.append(len(points)) or values(points)  # the members' evaluations
    ds = indices.compute_ensemble(engine, space, METHODS, seed=3)
    assert calls == [BLOCK * (3 + 2)] * (N // BLOCK) + [32 * (3 + 1)]  # once per Sobol' block, once for Morris'

    x = sobol.sample(space, N, seed=3)  # the same rows, held
    w, b = (np.float32(a).astype(np.float64) for a in (WEIGHTS, BIASES))  # as the Keras layers hold them
    mean = sobol.analyze(x @ w.mean(axis=0).T + b.mean(axis=0), space)  # the mean's values, in memory
    for name in ("S1", "ST", "S1_interval", "ST_interval"):
        np.testing.assert_allclose(ds[f"sobol_{name}"].values, mean[name].values, rtol=0, atol=1e-10)
    for k, member in enumerate(alone):
        own = indices.compute(compile_jacobian(member), space, METHODS, seed=3)
        shared = [v for v in own.data_vars if f"{v}_member" in ds]
        assert {"sobol_S1", "sobol_ST", "dgsm_nu", "morris_mu_star"} <= set(shared)
        for v in shared:
            np.testing.assert_allclose(ds[f"{v}_member"].isel(member=k).values, own[v].values, rtol=0, atol=1e-10,
                                       err_msg=v)
