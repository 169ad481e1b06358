"""One tiny model per output shape, and the result datasets the library verbs make of it.

The five shapes of the output contract (:mod:`sensitivity.outputs.spec`): a scalar ``y[B]``, a named
vector (``output = [H, Q, R]`` with a unit per name), a series (``day``), labels by numbers
(``species x day``) and a 2-D field (``lat x lon``). Every model is a smooth function of three
parameters ``a [m]``, ``k [day-1]``, ``c [m]``; :func:`results` writes ``sweep.nc``,
``calibration.nc``, ``propagation.nc`` and ``indices.nc`` of one shape through the same library
calls as the workflows (small sizes), for the figure tests.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import tensorflow as tf

from sensitivity.outputs.spec import OutputDim, OutputSpec
from sensitivity.inputs.space import ParameterSpace

SHAPES = ("scalar", "named", "series", "labels_by_series", "field")

DAYS = tuple(float(d) for d in range(1, 9))
SPECIES = ("prey", "predator")
NAMES = ("H", "Q", "R")
LAT = (40.0, 45.0, 50.0, 55.0)
LON = (-10.0, -5.0, 0.0, 5.0, 10.0)
TRUTH = np.array([1.2, 0.3, 0.1])

_DAY = OutputDim("day", DAYS, "day", "day of the season")
SPECS = {
    "scalar": OutputSpec("level", "m", (OutputDim("output", ("level",)),), "water level"),
    "named": OutputSpec("gauge", ("m", "m3 s-1", "m"), (OutputDim("output", NAMES),), "gauge readings"),
    "series": OutputSpec("count", "m", (_DAY,), "population"),
    "labels_by_series": OutputSpec("count", "m", (OutputDim("species", SPECIES, long_name="species"), _DAY),
                                   "population"),
    "field": OutputSpec("height", "m", (OutputDim("lat", LAT, "degrees_north", "latitude"),
                                        OutputDim("lon", LON, "degrees_east", "longitude")), "surface height"),
}
#: Beyond the five: three numeric dims with the long names of a real study (a map per year), for the figures'
#: legibility; not among :data:`SHAPES`.
YEARS = (2000.0, 2050.0, 2100.0)
SPECS["cube"] = OutputSpec("warming", "K", (
    OutputDim("year", YEARS, "year", "year of the emission scenario"),
    OutputDim("lat", LAT, "degrees_north", "latitude of the grid cell centre"),
    OutputDim("lon", LON, "degrees_east", "longitude of the grid cell centre")),
    "surface air temperature change since the pre-industrial mean")


def space() -> ParameterSpace:
    """The three inputs ``a``, ``k``, ``c``, uniform."""
    return ParameterSpace.from_records([dict(name="a", units="m", low=0.5, high=2.0),
                                        dict(name="k", units="day-1", low=0.1, high=0.6),
                                        dict(name="c", units="m", low=-0.5, high=0.5)])


def model(shape: str):
    """The TF function of ``shape``: ``x [B, 3] -> y [B, *SPECS[shape].shape]`` (``[B]`` for the scalar)."""
    t = tf.constant(DAYS, tf.float64)

    def scalar(x):
        return x[:, 0] * tf.exp(-3.0 * x[:, 1]) + x[:, 2]

    def named(x):
        a, k, c = x[:, 0], x[:, 1], x[:, 2]
        return tf.stack([a + c, 10.0 * a * k, a * tf.exp(-k) - c], axis=1)

    def series(x):
        return x[:, :1] * tf.exp(-x[:, 1:2] * t) + x[:, 2:3]

    def labels_by_series(x):
        decay = x[:, :1] * tf.exp(-x[:, 1:2] * t)
        return tf.stack([decay + x[:, 2:3], x[:, :1] - decay + 0.5 * x[:, 2:3]], axis=1)

    def field(x):
        lat = tf.constant(LAT, tf.float64)[:, None] / 10.0
        lon = tf.constant(LON, tf.float64)[None, :] / 10.0
        a, k, c = (x[:, j, None, None] for j in range(3))
        return a * tf.exp(-k * (lat - 4.0)) * tf.cos(lon) + c * lon

    def cube(x):
        growth = tf.constant(YEARS, tf.float64)[None, :, None, None] / 2000.0
        return growth * field(x)[:, None]

    return {"scalar": scalar, "named": named, "series": series, "labels_by_series": labels_by_series,
            "field": field, "cube": cube}[shape]


def engine(shape: str):
    """The compiled float64 engine of ``shape`` (no XLA: the tests compile many small models)."""
    from sensitivity.engine.jacobian import compile_jacobian
    from sensitivity.surrogates.load import load_surrogate

    s = space()
    spec = SPECS[shape]
    surrogate = load_surrogate(model(shape), input_names=s.names, input_units=s.units, dtype="float64",
                               output=spec.to_dict() if shape == "scalar" else spec)
    return compile_jacobian(surrogate, jit_compile=False)


def results(shape: str, out_dir: Path) -> dict[str, Path]:
    """``sweep``, ``calibration``, ``propagation``, ``indices`` and ``multifidelity`` datasets of ``shape`` written
    to ``out_dir``."""
    jac = engine(shape)
    out_dir.mkdir(parents=True, exist_ok=True)
    return {"sweep": _sweep(jac, out_dir), "calibration": _calibration(jac, out_dir),
            "propagation": _propagation(jac, out_dir), "indices": _indices(jac, out_dir),
            "multifidelity": _multifidelity(jac, out_dir)}


def _attrs(workflow: str, jac) -> dict[str, str]:
    from sensitivity.datasets import provenance

    return provenance(title=f"{workflow} of {jac.surrogate.source}", workflow=workflow, config_yaml="{}",
                      surrogate_source=jac.surrogate.source, surrogate_hash=jac.surrogate.content_hash, seed=0)


def _sweep(jac, out_dir: Path) -> Path:
    from sensitivity.sweep.designs import make_grid
    from sensitivity.sweep.stream import sweep

    grid = make_grid(space(), "sobol", n=32, seed=0)
    return sweep(jac, grid, out_dir / "sweep.nc", attrs=_attrs("sweep", jac), fingerprint="figures",
                 progress=False).path


def _calibration(jac, out_dir: Path) -> Path:
    """A fit to the model at :data:`TRUTH` plus 2 % noise, one observation missing."""
    from sensitivity.analyses.calibration import BatchedModel, ObservationModel, calibrate
    from sensitivity.datasets import index_string_dims, write_atomic
    from sensitivity.outputs.axes import unstack_output

    s, spec = space(), jac.surrogate.output
    clean = jac.flat_values(TRUTH[None, :])[0]
    sigma = 0.02 * np.abs(clean) + 0.01
    y_obs = clean + sigma * np.random.default_rng(0).standard_normal(clean.size)
    if y_obs.size > 3:
        y_obs[1] = np.nan
    starts = np.array([[1.0, 0.2, 0.0], [1.5, 0.4, 0.2]])
    ds = calibrate(BatchedModel.of(jac), ObservationModel.from_arrays(y_obs, sigma=sigma), starts=starts, space=s)
    ds = index_string_dims(unstack_output(ds, spec))
    ds.attrs = {**{k: str(v) for k, v in ds.attrs.items()}, **_attrs("calibrate", jac),
                "output_variable": spec.name, "output_long_name": spec.long_name}
    return write_atomic(ds, out_dir / "calibration.nc")


def _propagation(jac, out_dir: Path) -> Path:
    from sensitivity.analyses.callables import BatchedModel
    from sensitivity.analyses.propagation import MonteCarlo, Propagation, propagate
    from sensitivity.inputs.uncertainty import inputs_from_space
    from sensitivity.datasets import write_atomic

    spec = jac.surrogate.output
    ds = propagate(BatchedModel.of(jac), inputs_from_space(space()), Propagation(
        methods=("first_order", "unscented", "monte_carlo"),
        monte_carlo=MonteCarlo(n_samples=1024, n_replicates=4, block_size=512)), seed=0)
    ds.attrs.update(_attrs("propagate", jac), output_variable=spec.name, output_long_name=spec.long_name)
    return write_atomic(ds, out_dir / "propagation.nc")


def _indices(jac, out_dir: Path) -> Path:
    from sensitivity.analyses import indices
    from sensitivity.datasets import write_atomic

    methods = {"local": indices.LocalDerivatives(sigma_points=256), "dgsm": indices.Dgsm(n=256),
               "sobol": indices.Sobol(n=256, convergence_start=64), "morris": indices.Morris(trajectories=16),
               "active_subspaces": indices.ActiveSubspaces(n=256)}
    ds = indices.compute(jac, space(), methods, intervals=indices.Intervals("rqmc", replicates=4, n_resamples=50))
    ds.attrs.update(_attrs("indices", jac))
    return write_atomic(ds, out_dir / "indices.nc")


def _multifidelity(jac, out_dir: Path) -> Path:
    """The model anchored on a 'simulator' that is the model times 1.1 plus a day-dependent shift (a biased
    surrogate), at a small budget."""
    from sensitivity.analyses.callables import BatchedModel
    from sensitivity.analyses.multifidelity import MultifidelityStudy, multifidelity
    from sensitivity.datasets import write_atomic

    def simulator(x: np.ndarray, stage: str) -> np.ndarray:
        y = jac.flat_values(x)
        return 1.1 * y + 0.05 * np.sin(np.arange(y.shape[1]))

    ds = multifidelity(BatchedModel(values=jac.flat_values, output=jac.surrogate.output), space(),
                       MultifidelityStudy(budget=200, pilot=20, surrogate_rows=256, n_resamples=20, cost_ratio=100.0),
                       simulator=simulator, seed=0)
    ds.attrs.update(_attrs("multifidelity", jac))
    return write_atomic(ds, out_dir / "multifidelity.nc")


def posterior(out_dir: Path) -> Path:
    """``posterior.nc`` of the series model: four short NUTS chains from its calibration's Laplace approximation."""
    import xarray as xr

    from sensitivity.analyses.calibration import ObservationModel
    from sensitivity.analyses.posterior import NUTS, Sampling, sample_posterior, space_prior
    from sensitivity.datasets import write_atomic

    jac = engine("series")
    out_dir.mkdir(parents=True, exist_ok=True)
    with xr.open_dataset(_calibration(jac, out_dir)) as fit:
        best = fit.isel(start=int(fit["best_start"])).load()
        obs = ObservationModel.from_arrays(fit["y_obs"].values.ravel(), sigma=fit["observation_std"].values.ravel())
    mean, cov = best["estimate"].values, best["covariance"].values
    initial = mean + 0.2 * np.sqrt(np.diag(cov)) * np.array([[-1.0], [1.0], [0.5], [-0.5]])
    s = space()
    ds = sample_posterior(model("series"), obs, Sampling(sampler=NUTS(num_draws=30, num_warmup=20, max_tree_depth=4),
                          throw=False, jit_compile=True), prior=space_prior(s), initial=initial, space=s,
                          laplace_mean=mean, laplace_cov=cov)
    return write_atomic(ds, out_dir / "posterior.nc")
