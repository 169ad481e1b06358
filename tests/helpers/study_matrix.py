"""A scientist's own study of every output shape, written into a folder made by ``sensitivity init``.

For each of the five shapes of the output contract (:mod:`sensitivity.outputs.spec`) the study has what a
user writes: a model (TF, in the study's ``matrix_models.py``, with a numpy twin as the simulator that
``train`` learns), ``conf/model/<shape>.yaml``, one experiment file ``conf/experiment/<shape>.yaml``
that holds the settings of every workflow (small sizes), and observations ``obs_<shape>.nc`` at a known
truth in the documented format (``observed`` and ``sigma`` on the model's dims, the truth as the JSON
global attribute ``true_parameters``). The three inputs use scipy families with truncation.
"""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import xarray as xr

SHAPES = ("scalar", "named", "series", "labels_by_numbers", "field")

#: The truth of the observations (inside the space's bounds).
TRUTH = {"a": 0.9, "b": 1.1, "c": 1.2}

DAYS = np.arange(1, 13)
SPECIES = ["prey", "predator"]
LAT, LON = np.array([-30.0, 0.0, 30.0]), np.array([0.0, 90.0, 180.0, 270.0])

#: Observation noise (standard deviation) [output units].
SIGMA = 0.02

SPACE = """\
parameters:
  - {name: a, units: "1", long_name: level, distribution: {kind: uniform, loc: 0.5, scale: 1.0}}
  - {name: b, units: "1", long_name: rate, distribution: {kind: norm, loc: 1.0, scale: 0.2, truncate: [0.6, null]}}
  - {name: c, units: "1", long_name: shape, distribution: {kind: gumbel_r, loc: 1.0, scale: 0.3, truncate: [0.2, 2.5]}}
"""

OUTPUTS = {
    "scalar": "{name: y, units: '1', long_name: response}",
    "named": "{name: gauge, long_name: gauge readings, units: [m, m, s, s], names: [h1, h2, h3, h4]}",
    "series": "{name: count, units: '1', long_name: population, "
              "dims: [{name: day, values: {start: 1, stop: 13}, units: day, long_name: day of the season}]}",
    "labels_by_numbers": "{name: population, units: '1', long_name: population by species, "
                         "dims: [{name: species, values: [prey, predator], long_name: species}, "
                         "{name: day, values: {start: 1, stop: 13}, units: day, long_name: day of the season}]}",
    "field": "{name: height, units: m, long_name: surface height, "
             "dims: [{name: lat, values: [-30.0, 0.0, 30.0], units: degrees_north, long_name: latitude}, "
             "{name: lon, values: [0.0, 90.0, 180.0, 270.0], units: degrees_east, long_name: longitude}]}",
}

#: The study's model file: each shape as a TF function and as the numpy simulator ``train`` learns.
MODELS = '''\
"""The models of the study, one per output shape: TF for the surrogate, numpy for the simulator."""
import numpy as np
import tensorflow as tf

DAYS = np.arange(1.0, 13.0)
COS_LAT = np.cos(np.radians([-30.0, 0.0, 30.0]))[None, :, None]  # numpy constants: they take x's dtype in TF
SIN_LON = np.sin(np.radians([0.0, 90.0, 180.0, 270.0]))[None, None, :]


def _parts(x, lib):
    return x[:, 0], x[:, 1], x[:, 2]


def scalar(x, lib=tf):
    a, b, c = _parts(x, lib)
    return a + b ** 2 * c


def named(x, lib=tf):
    a, b, c = _parts(x, lib)
    return lib.stack([a + b, b * c, a * c + b ** 2, a - 0.5 * c], axis=1)


def series(x, lib=tf):
    t = DAYS[None, :]
    return x[:, :1] * lib.exp(-0.2 * x[:, 1:2] * t) + 0.1 * x[:, 2:3] * t


def labels_by_numbers(x, lib=tf):
    t = DAYS[None, :]
    prey = x[:, :1] * lib.exp(-0.1 * x[:, 1:2] * t) + 0.05 * x[:, 2:3] * t
    predator = x[:, 1:2] * lib.sin(0.3 * t * x[:, 2:3]) + x[:, :1]
    return lib.stack([prey, predator], axis=1)


def field(x, lib=tf):
    a, b, c = (x[:, j, None, None] for j in range(3))
    return a + b * COS_LAT + c * SIN_LON * COS_LAT


def simulate_scalar(x):
    return scalar(x, np)


def simulate_named(x):
    return named(x, np)


def simulate_series(x):
    return series(x, np)


def simulate_labels_by_numbers(x):
    return labels_by_numbers(x, np)


def simulate_field(x):
    return field(x, np)
'''

#: What every experiment sets: small sizes for every workflow (each takes its own keys).
SMALL = """\
grid: {n: 64}
jacobian: {dtype: float64, jit_compile: false}
progress: false
step_slice: {points: 5}
n_chains: 2
nuts: {num_warmup: 40, num_draws: 40, max_tree_depth: 4}
throw: false
jit_compile: false
propagation: {n_samples: 1024, n_replicates: 4, block_size: 256}
intervals: {replicates: 4}
bootstrap: {n_resamples: 20}
local: {sigma_points: 128}
dgsm: {n: 128}
sobol: {n: 128}
morris: {trajectories: 8}
active_subspaces: {n: 128}
export: {bench_seconds: 0.0, hessian: false, check_points: 32}
starts: {n: 16}
"""


def simulate(shape: str, x: np.ndarray) -> np.ndarray:
    """The numpy model of ``shape`` (the same code the study's file holds), for the test's own references."""
    namespace: dict = {}
    exec(compile(MODELS.replace("import tensorflow as tf\n", "tf = None\n"), "matrix_models.py", "exec"), namespace)
    return namespace[f"simulate_{shape}"](x)


def experiment(shape: str) -> str:
    """The one experiment file of ``shape``'s study."""
    prior = ""
    if shape == "scalar":  # one observation of three parameters: a Gaussian prior makes the fit proper
        prior = "prior: {mean: {a: 1.0, b: 1.0, c: 1.0}, std: {a: 0.3, b: 0.3, c: 0.5}}\n"
    return (f"# @package _global_\n# The study of the {shape} model: every workflow reads its own keys.\n"
            f"defaults:\n  - override /model: {shape}\n  - override /space: matrix\n"
            f"observations: {{path: obs_{shape}.nc}}\n{prior}{SMALL}"
            f"training: {{simulator: 'matrix_models:simulate_{shape}', hidden: [16], epochs: 30, patience: 30, "
            f"derivative_points: 8}}\n")


def observations(shape: str, seed: int = 0) -> xr.Dataset:
    """Noisy observations of ``shape`` at :data:`TRUTH`, on the model's dims, with the truth recorded."""
    truth = np.array([[TRUTH["a"], TRUTH["b"], TRUTH["c"]]])
    clean = simulate(shape, truth)[0]
    observed = clean + SIGMA * np.random.default_rng(seed).standard_normal(np.shape(clean))
    dims, coords = {
        "scalar": (("output",), {"output": ["y"]}),
        "named": (("output",), {"output": ["h1", "h2", "h3", "h4"]}),
        "series": (("day",), {"day": ("day", DAYS, {"units": "day"})}),
        "labels_by_numbers": (("species", "day"), {"species": SPECIES, "day": ("day", DAYS, {"units": "day"})}),
        "field": (("lat", "lon"), {"lat": ("lat", LAT, {"units": "degrees_north"}),
                                   "lon": ("lon", LON, {"units": "degrees_east"})}),
    }[shape]
    observed = np.atleast_1d(observed)  # the scalar model: one named output
    units = {} if shape == "named" else {"units": "m" if shape == "field" else "1"}  # named: the model's own units
    data = {"observed": (dims, observed, units), "sigma": (dims, np.full(observed.shape, SIGMA), units)}
    return xr.Dataset(data, coords=coords, attrs={"true_parameters": json.dumps(TRUTH)})


def write_study(folder: Path) -> None:
    """Add the models, configs and observations of every shape to a study folder made by ``sensitivity init``."""
    (folder / "matrix_models.py").write_text(MODELS)
    (folder / "conf" / "space" / "matrix.yaml").write_text(SPACE)
    for shape in SHAPES:
        (folder / "conf" / "model" / f"{shape}.yaml").write_text(
            textwrap.dedent(f"""\
                source: 'matrix_models:{shape}'
                output: {OUTPUTS[shape]}
                """))
        (folder / "conf" / "experiment" / f"{shape}.yaml").write_text(experiment(shape))
        observations(shape).to_netcdf(folder / f"obs_{shape}.nc")
