"""The model at the posterior's draws (sensitivity.analyses.posterior.outputs): a model linear in its one parameter,
whose mean over the draws is the model at the draws' mean and whose quantiles are the model at the draws' quantiles
(a monotone map), labelled by the output spec; an ensemble's members scaled copies of it, whose spread is closed
form."""
from __future__ import annotations

import numpy as np
import pytest

from sensitivity.analyses.calibration import ObservationModel
from sensitivity.analyses.posterior.outputs import model_at_draws
from sensitivity.outputs.spec import OutputDim, OutputSpec

SLOPE = np.array([[1.0, 2.0, 3.0], [-1.0, 0.5, 4.0]])  # [species, day]
SPEC = OutputSpec("count", "m", (OutputDim("species", ("prey", "predator")), OutputDim("day", (1.0, 2.0, 3.0), "day")))
EPS = 0.02


def model(x):
    """``[B, 1] -> [B, 2, 3]``: ``x SLOPE``, increasing in ``x`` for the positive slopes."""
    import tensorflow as tf

    return x[:, :, None] * tf.constant(SLOPE[None], x.dtype)


def members(x):
    import tensorflow as tf

    return tf.stack([(1 - EPS) * model(x), (1 + EPS) * model(x)])


@pytest.fixture(scope="module")
def draws():
    return np.random.default_rng(0).gamma(2.0, 1.0, size=(4000, 1))


def test_the_mean_and_interval_are_the_model_at_the_draws_mean_and_quantiles_on_the_spec_dims(draws):
    y_obs = np.arange(6.0)
    y_obs[4] = np.nan  # one output not observed
    ds = model_at_draws(model, draws, ObservationModel.from_arrays(y_obs, sigma=1.0), level=0.9,
                        model_dtype="float64", output=SPEC)
    assert ds["predictive_mean"].dims == ("species", "day") and ds["predictive_mean"].attrs["units"] == "m"
    assert list(ds["species_name"].values) == ["prey", "predator"] and ds["day"].attrs["units"] == "day"
    np.testing.assert_allclose(ds["predictive_mean"].values, draws.mean() * SLOPE, rtol=1e-12)
    low, high = np.quantile(draws[:, 0], [0.05, 0.95])
    np.testing.assert_allclose(ds["predictive_interval"].transpose("bound", ...).values[:, 0],
                               [low * SLOPE[0], high * SLOPE[0]], rtol=1e-12)
    np.testing.assert_array_equal(ds["observed"].values.ravel(), y_obs)


def test_an_ensembles_member_means_and_spread_are_closed_form(draws):
    """Members ``f (1 -+ e)``: means ``(1 -+ e) mean``; sd over the two ``sqrt(2) e |mean|``."""
    ds = model_at_draws(model, draws, ObservationModel.from_arrays(np.zeros(6), sigma=1.0), level=0.95,
                        model_dtype="float64", output=SPEC, members=members)
    mean = draws.mean() * SLOPE
    np.testing.assert_allclose(ds["predictive_mean_member"].transpose("member", ...).values,
                               [(1 - EPS) * mean, (1 + EPS) * mean], rtol=1e-12)
    np.testing.assert_allclose(ds["predictive_mean_surrogate_std"].values, np.sqrt(2) * EPS * np.abs(mean),
                               rtol=1e-9)
    assert ds.sizes["member"] == 2 and "predictive_mean_combined_interval" in ds
