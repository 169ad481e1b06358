"""Write data/seir/observations.nc: noisy daily counts from the SEIR simulator at documented true parameters.

Usage: python data/make_seir_observations.py [PATH]   (default: data/seir/observations.nc next to this script)
The noise model and the truth are sensitivity.simulators.seir.synthetic_observations / TRUE_PARAMETERS.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import xarray as xr
import yaml

from sensitivity.datasets import provenance, write_atomic
from sensitivity.outputs.axes import own_coords
from sensitivity.outputs.labels import parameter_coords
from sensitivity.simulators import seir

SETTINGS = {"truth": seir.TRUE_PARAMETERS, "relative_noise": 0.1, "floor": 1.0, "observed_days": 70, "seed": 20240601}


def observations_dataset() -> xr.Dataset:
    """The synthetic observations with their truth, labeled like the model's output."""
    space, spec = seir.space(), seir.output_spec()
    truth = np.array([SETTINGS["truth"][name] for name in space.names])
    clean, observed, sigma = seir.synthetic_observations(
        truth, relative_noise=SETTINGS["relative_noise"], floor=SETTINGS["floor"],
        observed_days=SETTINGS["observed_days"], seed=SETTINGS["seed"])
    units, (dim,) = spec.units, spec.dim_names
    data = {
        "observed": (dim, observed, {"long_name": f"observed {spec.long_name} (NaN: not observed)", "units": units}),
        "sigma": (dim, sigma, {"long_name": "standard deviation of the observation error", "units": units}),
        "true_value": (dim, clean, {"long_name": f"noise-free {spec.long_name} at the true parameters",
                                       "units": units}),
        "true_parameter": ("parameter", truth, {"long_name": "true parameter value",
                                                "units_metadata": "see coordinate parameter_units"}),
    }
    coords = {**own_coords(spec), **parameter_coords(space.names, space.units)}
    noise = (f"observed = true_value + sigma * eps, sigma = {SETTINGS['relative_noise']} * true_value + "
             f"{SETTINGS['floor']} [{units}], eps ~ N(0, 1) independent per day from "
             f"numpy.random.default_rng({SETTINGS['seed']}); days after {SETTINGS['observed_days']} are missing (NaN)")
    attrs = provenance(title="Synthetic SEIR observations", workflow="data/make_seir_observations.py",
                       config_yaml=yaml.safe_dump(SETTINGS, sort_keys=False), seed=SETTINGS["seed"])
    attrs.update(source="sensitivity.simulators.seir:simulate (DOP853, rtol 1e-10)", noise_model=noise,
                 true_parameters=json.dumps(SETTINGS["truth"]))
    return xr.Dataset(data, coords=coords, attrs=attrs)


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "seir" / "observations.nc"
    print(write_atomic(observations_dataset(), target))
