"""A result records the library settings its verb ran with, and :func:`settings_of` rebuilds them as written: every
study's settings type, at its defaults and with nested dataclasses, tuples, mappings, arrays and paths set, through
a netCDF file and back."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from sensitivity.analyses.calibration import Fit
from sensitivity.analyses.calibration.solvers import GaussNewton
from sensitivity.analyses.indices import ActiveSubspaces, Aggregated, Dgsm, LocalDerivatives, Sobol
from sensitivity.analyses.indices.methods import Quantity
from sensitivity.analyses.propagation import Propagation
from sensitivity.analyses.propagation.settings import MonteCarlo
from sensitivity.analyses.reliability import ReliabilitySettings
from sensitivity.analyses.reliability.form import FormSettings
from sensitivity.analyses.worth import WorthSettings
from sensitivity.datasets import open_result, provenance, settings_of, write_atomic
from sensitivity.errors import DataError
from sensitivity.inputs.space import ParameterSpace
from sensitivity.outputs.functionals import Functional
from sensitivity.settings import ConvTrunk, Thresholds, TrainingPlan, TrainSettings
from sensitivity.studies import STUDIES, public, resolve
from sensitivity.sweep.designs import Grid, GridDesign

#: Settings entries of the studies that are not settings dataclasses: the design object itself (a sweep records
#: its :class:`GridDesign`, which the sweep study lists beside it).
NOT_SETTINGS = {Grid}

#: Types whose fields have no defaults, as a study runs them.
REQUIRED = {GridDesign: GridDesign("sobol", n=64), ReliabilitySettings: ReliabilitySettings(thresholds=(1.0,))}

SPACE = ParameterSpace.from_records([
    {"name": "k", "units": "m s-1", "low": 1e-3, "high": 1.0, "scale": "log"},
    {"name": "q", "units": "1", "low": -1.0, "high": 2.0,
     "distribution": {"kind": "norm", "loc": 0.5, "scale": 0.5, "truncate": [None, 1.5]}}],
    correlation=[[1.0, 0.3], [0.3, 1.0]])

#: Settings with their nested dataclasses, tuples, mappings, arrays, paths and unions set away from the defaults.
SET = [
    ReliabilitySettings(thresholds=(1.0, 2.5), direction="below", output={"time": 3, "station": "B"},
                        output_range=(0.0, 4.0), methods=("form", "monte_carlo"), form=FormSettings(union="sum")),
    ReliabilitySettings(thresholds=(1.0,), methods=("form",), functionals=(Functional("peak", kind="max", over=("time",)),)),
    Propagation(methods=("monte_carlo",), quantiles=(0.1, 0.9), monte_carlo=MonteCarlo(n_samples=1024)),
    Sobol(n=256, groups={"soil": ("k", "q")}), Dgsm(sweep=Path("runs/sweep.nc")),
    LocalDerivatives(points=np.array([[0.1, 0.2], [0.3, 0.4]]), weights=(0.25, 0.75)),
    ActiveSubspaces(quantity=Quantity(weights=(1.0, 2.0), units="m")), Aggregated(weights={"time": (1.0, 2.0)}),
    Fit(solver=GaussNewton(max_iter=3)), WorthSettings(candidates={"well": ("a", "b")}),
    TrainSettings(hidden=(8,), log_inputs=("k",), conv=ConvTrunk(field="f", shape=(4, 4))),
    TrainingPlan(members=2), Thresholds(r2=0.9), GridDesign("factorial", levels=(3, 2), through="distribution"),
    SPACE,
]


def _study_settings() -> list:
    types = [resolve(public(entry)[1]) for study in STUDIES for entry in study.settings]
    return [REQUIRED.get(cls) or cls() for cls in types if cls not in NOT_SETTINGS]


def _equal(a, b) -> bool:
    """Field by field, arrays by value (a dataclass holding an array has no usable ``==``)."""
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and all(_equal(getattr(a, f.name), getattr(b, f.name))
                                          for f in dataclasses.fields(a))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_equal, a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and list(a) == list(b) and all(_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _written(tmp_path: Path, settings) -> xr.Dataset:
    ds = xr.Dataset({"x": ("i", np.zeros(2), {"long_name": "x", "units": "1"})})
    ds.attrs.update(provenance(title="settings", workflow="test", config_yaml="", settings=settings))
    return open_result(write_atomic(ds, tmp_path / "result.nc"))


def test_every_study_settings_type_is_a_frozen_dataclass():
    for settings in _study_settings():
        assert dataclasses.is_dataclass(settings) and type(settings).__dataclass_params__.frozen, type(settings)


@pytest.mark.parametrize("settings", _study_settings() + SET, ids=lambda s: type(s).__name__)
def test_a_result_gives_back_the_settings_it_was_written_with(tmp_path, settings):
    with _written(tmp_path, settings) as ds:
        assert _equal(settings_of(ds, type(settings)), settings)


def test_a_result_records_several_settings_and_each_is_read_by_its_type(tmp_path):
    with _written(tmp_path, (GridDesign("lhs", n=32, seed=7), SPACE)) as ds:
        assert settings_of(ds, GridDesign) == GridDesign("lhs", n=32, seed=7)
        assert _equal(settings_of(ds, ParameterSpace), SPACE)


def test_a_result_without_the_settings_asked_for_is_one_line_naming_the_file(tmp_path):
    with _written(tmp_path, Sobol()) as ds:
        with pytest.raises(DataError, match=r"result.nc records no settings of Propagation; rerun it with this "
                                            r"version$"):
            settings_of(ds, Propagation)
    ds = xr.Dataset(attrs={"config": "propagation: {methods: [monte_carlo]}"})  # a result of an earlier version
    with pytest.raises(DataError, match="^old.nc records no settings of Propagation; rerun"):
        settings_of(ds, Propagation, where="old.nc")


def test_a_result_of_the_previous_version_reads_its_conf_level_and_confidence_as_level():
    """Before one name per concept, the interval's level was recorded as ``conf_level`` (indices, multifidelity) and
    ``confidence`` (reliability's sampling methods): such a record, nested or not, reads as ``level``."""
    from sensitivity.analyses.indices import Intervals
    from sensitivity.analyses.reliability.sampling import ImportanceSettings, SubsetSettings
    from sensitivity.datasets.settings import recorded_attr

    intervals = Intervals(method="rqmc", replicates=4, level=0.9)
    reliability = ReliabilitySettings(thresholds=(1.0,), importance=ImportanceSettings(n_samples=500, level=0.99),
                                      subset=SubsetSettings(n_per_level=1000, level=0.8))
    old = json.dumps([{"type": "sensitivity.analyses.indices.methods.Intervals",
                       "value": {"method": "rqmc", "replicates": 4, "conf_level": 0.9}},
                      {"type": "sensitivity.analyses.reliability.settings.ReliabilitySettings",
                       "value": {"thresholds": {"tuple": [1.0]},
                                 "importance": {"type": "sensitivity.analyses.reliability.sampling.ImportanceSettings",
                                                "value": {"n_samples": 500, "confidence": 0.99}},
                                 "subset": {"type": "sensitivity.analyses.reliability.sampling.SubsetSettings",
                                            "value": {"n_per_level": 1000, "confidence": 0.8}}}}])
    ds = xr.Dataset(attrs={"settings": old, "conf_level": 0.9})
    assert settings_of(ds, Intervals) == intervals
    assert settings_of(ds, ReliabilitySettings) == reliability
    assert recorded_attr(ds, "level") == 0.9 and recorded_attr(xr.Dataset(), "level", 0.95) == 0.95
