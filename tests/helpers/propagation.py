"""Shared pieces of the propagation workflow tests: a linear model on a 2-day series, a six-parameter space."""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import xarray as xr

W = np.array([[1.0, 2.0, -3.0, 0.5, 1.5, -1.0], [0.5, -1.0, 0.0, 2.0, 0.0, 1.0]])
C = np.array([1.0, -2.0])
FAST = ["jacobian=float64", "jacobian.jit_compile=false", "propagation.n_samples=4096", "propagation.block_size=256",
        "plots=false"]


def linear_model(weights: np.ndarray = W, offset: np.ndarray = C) -> list[str]:
    """``y(time) = W x + c`` on a 2-day series: the model's own `time` dim must survive."""
    return ["model=function", "model.source=sensitivity.simulators.analytic:linear",
            f"++model.kwargs={{weights: {weights.tolist()}, offset: {offset.tolist()}}}",
            "model.output={name: y, long_name: linear output, units: m, "
            "dims: [{name: day, values: [1.0, 2.0], units: day, long_name: day of the series}]}"]


def space(params: list[str], correlation: list[list[float]] | None = None) -> list[str]:
    overrides = [f"space.parameters=[{', '.join(params)}]"]
    return overrides + ([f"space.correlation={correlation}"] if correlation else [])


def by_method(ds: xr.Dataset, name: str) -> xr.Dataset:
    return ds.isel(propagation_method=list(ds["propagation_method_name"].values).index(name))


def sha256(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


SIX = [f"{{name: {n}, units: m, low: -10, high: 10}}" for n in ("p0", "p1", "p2", "p3", "p4", "p5")]
