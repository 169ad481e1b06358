"""Local derivative-based sensitivities of every output at one point or across a sweep of points.

From the exact Jacobian ``J_kj = d y_k / d x_j`` at a point ``x`` with outputs ``y``:

* raw derivatives ``J_kj`` [output units / parameter units];
* elasticities ``J_kj x_j / y_k`` [1] (relative change of ``y_k`` per relative change
  of ``x_j``; NaN where ``y_k = 0``);
* sigma-normalised sensitivities ``J_kj sigma_j / sigma_k`` [1], ``sigma_j`` the standard
  deviation of the parameter's input distribution and ``sigma_k`` a given output spread
  or the standard deviation of an output sample (Saltelli et al. 2008, Global
  Sensitivity Analysis: The Primer, doi:10.1002/9780470725184, Sec. 1.2.1);
* dimensionless and composite scaled sensitivities (Hill & Tiedeman 2007, Effective
  Groundwater Model Calibration, doi:10.1002/0470041080, Ch. 4)::

      dss_kj = J_kj x_j w_k^(1/2),      css_j = ( sum_k dss_kj^2 / m )^(1/2)

  with ``w_k`` the weight of output ``k`` (typically ``1 / variance`` of its
  observation error, in output units^-2, which makes ``dss`` dimensionless).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from sensitivity.analyses.indices import dataset, design
from sensitivity.errors import ConfigError, DataError
from sensitivity.outputs.labels import common_units
from sensitivity.runtime.lazy import lazy_import
from sensitivity.inputs.space import ParameterSpace

xr = lazy_import("xarray")


def analyze(
    points: np.ndarray,
    values: np.ndarray,
    jacobian: np.ndarray,
    space: ParameterSpace,
    *,
    sigma_y: Sequence[float] | None = None,
    output_sample: np.ndarray | None = None,
    weights: Sequence[float] | None = None,
    output_names: Sequence[str] | None = None,
    output_units: Sequence[str] | None = None,
) -> xr.Dataset:
    """Local sensitivities at one point (``points [n]``) or across a sweep (``points [K, n]``).

    Parameters
    ----------
    points
        ``[n]`` one point or ``[K, n]`` points in physical units.
    values
        ``[m]`` or ``[K, m]`` model outputs at the points.
    jacobian
        ``[m, n]`` or ``[K, m, n]`` exact d(output)/d(parameter) at the points.
    space
        The parameter space (names, units, input spreads ``sigma_x``).
    sigma_y
        ``[m]`` output standard deviations for the sigma-normalised sensitivities.
    output_sample
        ``[N, m]`` outputs on a sample of the input distribution; ``sigma_y`` is then its
        standard deviation (``ddof=1``). Give at most one of ``sigma_y`` and ``output_sample``;
        with neither, ``sigma_normalized`` is left out.
    weights
        ``[m]`` non-negative output weights ``w_k`` of the scaled sensitivities (all 1 by default).
    output_names, output_units
        Labels and UDUNITS-2 units of the ``m`` outputs.

    Returns
    -------
    xarray.Dataset
        ``x (sample, parameter)``, ``y (sample, output)``, ``derivative``, ``elasticity``,
        ``sigma_normalized``, ``dss`` ``(sample, output, parameter)`` and ``css (sample,
        parameter)``; without the ``sample`` dim for a single point.
    """
    single = np.ndim(points) == 1
    x = np.atleast_2d(np.asarray(points, dtype=np.float64))
    if x.shape[1] != len(space):
        raise DataError(f"`points` must have {len(space)} parameters per point, got shape {list(np.shape(points))}")
    y = design.as_values(np.atleast_2d(values))
    jac = np.asarray(jacobian, dtype=np.float64)
    jac = design.as_jacobian(jac[None] if single else jac, len(space))
    design.check_rows(y.shape[0], x.shape[0], what="values")
    design.check_rows(jac.shape[0], x.shape[0], what="jacobian")
    if jac.shape[1] != y.shape[1]:
        raise DataError(f"`jacobian` must have {y.shape[1]} outputs like `values`, got {jac.shape[1]}")
    m = y.shape[1]
    names = dataset.output_axis(m, output_names, output_units)["output_name"].values
    w = _checked_positive(np.ones(m) if weights is None else weights, "weights", names, allow_zero=True)

    with np.errstate(divide="ignore", invalid="ignore"):
        elasticity = np.where(y[:, :, None] != 0, jac * x[:, None, :] / y[:, :, None], np.nan)
    dss = jac * x[:, None, :] * np.sqrt(w)[None, :, None]
    css = np.sqrt(np.mean(dss**2, axis=1))

    out_units = common_units(output_units)
    out_ref = None if output_units is None else "output_units"
    dss_units = "1" if weights is not None else out_units
    jac_units, jac_coords = dataset.units_table(
        "derivative_units", ("output", "parameter"), dataset.derivative_table(output_units, space.units),
        "units of dy/dx",
    )
    full = ("sample", "output", "parameter")
    data = {
        "x": dataset.variable(
            ("sample", "parameter"), x, "parameter value", common_units(space.units),
            units_coordinate="parameter_units",
        ),
        "y": dataset.variable(("sample", "output"), y, "output value", out_units, units_coordinate=out_ref),
        "derivative": dataset.variable(
            full, jac, "local derivative dy/dx", jac_units, units_coordinate=next(iter(jac_coords), None)
        ),
        "elasticity": dataset.variable(full, elasticity, "elasticity (x/y) dy/dx", "1"),
        "dss": dataset.variable(
            full, dss, "dimensionless scaled sensitivity (dy/dx) x w^(1/2)", dss_units, units_coordinate=out_ref
        ),
        "css": dataset.variable(
            ("sample", "parameter"), css, "composite scaled sensitivity (mean over outputs of dss^2)^(1/2)", dss_units
        ),
    }
    spread = _output_spread(sigma_y, output_sample, m, names)
    if spread is not None:
        sigma_x = np.array([p.frozen_distribution().std() for p in space.parameters])
        data["sigma_normalized"] = dataset.variable(
            full, jac * sigma_x[None, None, :] / spread[None, :, None], "sigma-normalised sensitivity (sigma_x/sigma_y) dy/dx", "1"
        )
    coords = {**dataset.parameter_axis(space), **dataset.output_axis(m, output_names, output_units), **jac_coords}
    attrs = {
        "method": "local sensitivities from exact Jacobians; scaled sensitivities of Hill & Tiedeman 2007",
        "references": "doi:10.1002/0470041080 doi:10.1002/9780470725184",
    }
    ds = xr.Dataset(data, coords=coords, attrs=attrs)
    return ds.isel(sample=0) if single else ds


def _output_spread(
    sigma_y: Sequence[float] | None, output_sample: np.ndarray | None, m: int, names: Sequence[str]
) -> np.ndarray | None:
    """``[m]`` output standard deviations from ``sigma_y`` or an output sample, None with neither."""
    if sigma_y is not None and output_sample is not None:
        raise ConfigError("give at most one of `sigma_y` and `output_sample`, got both")
    if output_sample is not None:
        sample = design.as_values(output_sample, what="output_sample")
        if sample.shape[1] != m or sample.shape[0] < 2:
            raise DataError(f"`output_sample` must have shape [N >= 2, {m}], got {list(sample.shape)}")
        spread = sample.std(axis=0, ddof=1)  # an output constant over the sample (a field's fixed cell): NaN
        return np.where(spread > 0, spread, np.nan)
    return None if sigma_y is None else _checked_positive(sigma_y, "sigma_y", names, allow_zero=False)


def _checked_positive(array: Sequence[float], what: str, names: Sequence[str], *, allow_zero: bool) -> np.ndarray:
    """``[m]`` finite values > 0 (>= 0 with ``allow_zero``), else a :class:`ConfigError` naming the output."""
    a = np.asarray(array, dtype=np.float64)
    if a.shape != (len(names),):
        raise ConfigError(f"`{what}` must give one value per output ({len(names)}), got shape {list(a.shape)}")
    bad = ~np.isfinite(a) | ((a < 0) if allow_zero else (a <= 0))
    if bad.any():
        k = int(np.argmax(bad))
        raise ConfigError(f"`{what}` must be {'>=' if allow_zero else '>'} 0, got {a[k]} at output {names[k]!r}")
    return a
