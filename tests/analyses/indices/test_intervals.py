"""Randomised-QMC intervals: scramblings as replicates, Student-t bounds (scipy as the oracle), none, bad settings."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from sensitivity.analyses.indices import active_subspaces, design, dgsm, morris, sobol
from sensitivity.analyses.indices.intervals import IntervalPlan
from sensitivity.errors import ConfigError, DataError
from tests.helpers.functions import ishigami, ishigami_jacobian, uniform_space

ISHIGAMI = uniform_space(3, -np.pi, np.pi)


def t_interval(estimate: np.ndarray, replicates: np.ndarray, level: float) -> np.ndarray:
    """scipy's Student-t interval around ``estimate`` with the standard error of the replicates' mean."""
    r = replicates.shape[0]
    scale = replicates.std(axis=0, ddof=1) / np.sqrt(r)
    return np.stack(stats.t.interval(level, r - 1, loc=estimate, scale=scale), axis=-1)


def test_each_scrambling_is_a_balanced_net_of_its_own():
    # A scrambled Sobol' net of n = 2^k points puts exactly one point in each of the n equal
    # slices of every coordinate; the stacked scramblings each keep that, and differ.
    u = design.sobol_base(3, 256, seed=4, replicates=4)
    blocks = u.reshape(4, 64, 3)
    for block in blocks:
        counts = np.stack([np.bincount((block[:, j] * 64).astype(int), minlength=64) for j in range(3)])
        assert (counts == 1).all()
    assert not np.allclose(blocks[0], blocks[1])
    np.testing.assert_array_equal(design.sobol_base(3, 256, seed=4, replicates=4), u)  # seeded


def test_sobol_rqmc_interval_is_the_t_interval_of_the_scramblings():
    r, n = 8, 512
    x = sobol.sample(ISHIGAMI, n, seed=7, replicates=r)
    y = ishigami(x)
    ds = sobol.analyze(y, ISHIGAMI, intervals=IntervalPlan("rqmc", replicates=r, level=0.9))
    rows = y.reshape(r, -1, 1)  # the rows of each scrambling, one after the other
    reps = [sobol.analyze(rows[k], ISHIGAMI, intervals=IntervalPlan("none")) for k in range(r)]
    for key in ("S1", "ST"):
        replicate = np.stack([rep[key].values for rep in reps])
        np.testing.assert_allclose(ds[f"{key}_interval"].values, t_interval(ds[key].values, replicate, 0.9),
                                   rtol=1e-10, atol=1e-12)
    # The estimate is the pooled one: the same as on all rows with no intervals (to round-off: it is the merge of
    # the scramblings' statistics).
    np.testing.assert_allclose(ds.S1.values, sobol.analyze(y, ISHIGAMI, intervals=IntervalPlan("none")).S1.values,
                               rtol=0, atol=1e-14)
    assert ds.attrs["intervals"] == "rqmc" and ds.attrs["replicates"] == r


def test_dgsm_and_eigenvalue_replicates_are_means_over_each_scrambling():
    r, n = 4, 1024
    x = dgsm.sample(ISHIGAMI, n, seed=3, replicates=r)
    jac = ishigami_jacobian(x)
    ds = dgsm.analyze(jac, ishigami(x), ISHIGAMI, intervals=IntervalPlan("rqmc", replicates=r))
    nu = (jac[:, 0, :] ** 2).reshape(r, n // r, 3).mean(axis=1)  # [R, n] E[(dy/dx)^2] on each scrambling
    np.testing.assert_allclose(ds.nu.values[:, 0], (jac[:, 0, :] ** 2).mean(axis=0), rtol=1e-12)
    np.testing.assert_allclose(ds.nu_interval.values[:, 0], t_interval(ds.nu.values[:, 0], nu, 0.95), rtol=1e-10)
    # Active subspaces: the eigenvalues of C = E[g g^T] on each scrambling (g in [-1, 1]-scaled inputs).
    eig = active_subspaces.analyze(jac, ISHIGAMI, intervals=IntervalPlan("rqmc", replicates=r))
    g = (jac[:, 0, :] * np.pi).reshape(r, n // r, 3)
    lam = np.linalg.eigvalsh(np.einsum("rni,rnj->rij", g, g) / (n // r))[:, ::-1]
    np.testing.assert_allclose(eig.eigenvalue_interval.values[:, 0],
                               t_interval(eig.eigenvalue.values[:, 0], lam, 0.95), rtol=1e-9)


def test_no_intervals_cost_nothing_and_leave_no_interval_variables():
    x = sobol.sample(ISHIGAMI, 64, seed=0, replicates=2)
    for ds in (sobol.analyze(ishigami(x), ISHIGAMI, intervals=IntervalPlan("none")),
               sobol.analyze(ishigami(x), ISHIGAMI, intervals=IntervalPlan("bootstrap", n_resamples=0))):
        assert not [v for v in ds.data_vars if v.endswith("_interval")] and ds.attrs["intervals"] == "none"
    p = dgsm.sample(ISHIGAMI, 64, seed=0)
    assert "nu_interval" not in dgsm.analyze(ishigami_jacobian(p), ishigami(p), ISHIGAMI,
                                             intervals=IntervalPlan("none"))
    t = morris.sample(ISHIGAMI, 8, seed=0)
    assert "mu_star_interval" not in morris.analyze(t, ishigami(t), ISHIGAMI, intervals=IntervalPlan("bootstrap",
                                                    n_resamples=0))
    assert IntervalPlan("none").weights(5).shape == (1, 5)


@pytest.mark.parametrize("plan, error, message", [
    (IntervalPlan("rqmc", replicates=3), ConfigError, "`replicates` must be a power of two >= 2, got 3"),
    (IntervalPlan("rqmc", replicates=1), ConfigError, "`replicates` must be a power of two >= 2, got 1"),
    (IntervalPlan("rqmc", level=1.0), ConfigError, "`level` must lie in (0, 1), got 1.0"),
    (IntervalPlan("jackknife"), ConfigError, "`intervals` must be one of ('rqmc', 'bootstrap', 'none')"),
    (IntervalPlan("bootstrap", n_resamples=1), ConfigError, "`n_resamples` must be 0 (no intervals) or an integer"),
])
def test_bad_settings_are_clear_errors(plan, error, message):
    with pytest.raises(error) as info:
        plan.check()
    assert message in str(info.value)


def test_rows_that_do_not_split_into_the_scramblings_are_refused():
    x = sobol.sample(ISHIGAMI, 16, seed=0, replicates=2)
    with pytest.raises(DataError, match="16 base rows must split into `replicates` = 16 scramblings of >= 2 rows"):
        sobol.analyze(ishigami(x), ISHIGAMI, intervals=IntervalPlan("rqmc", replicates=16))
    with pytest.raises(ConfigError, match="`n` must be a power of two >= 16, got 8"):
        sobol.sample(ISHIGAMI, 8, replicates=8)
