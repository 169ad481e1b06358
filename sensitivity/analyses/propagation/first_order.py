"""First-order (delta method) propagation: mean ``f(mu)``, covariance ``J S J^T``, ``J`` the Jacobian at ``mu``.

One value-and-Jacobian evaluation at the input mean; quantiles are the normal approximation.
"""
from __future__ import annotations

from typing import Sequence

from sensitivity.analyses.propagation.dataset import DEFAULT_QUANTILES, OutputLabels, checked_quantiles, moment_result
from sensitivity.analyses.propagation.evaluation import ValueAndJacobianFn, value_and_jacobian_at_mean
from sensitivity.inputs.uncertainty import InputUncertainty
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")


def first_order(
    inputs: InputUncertainty,
    value_and_jacobian: ValueAndJacobianFn,
    *,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
    output_names: Sequence[str] | None = None,
    output_units: Sequence[str] | None = None,
) -> xr.Dataset:
    """First-order (delta method) propagation: mean ``f(mu)``, covariance ``J S J^T``.

    Parameters
    ----------
    inputs
        Input uncertainty; only its ``mean`` and ``covariance`` are used.
    value_and_jacobian
        ``points [K, n] -> (values [K, m], jacobian [K, m, n])``, batched.
    quantiles
        Probabilities of the reported (normal-approximation) quantiles, in (0, 1).
    output_names, output_units
        Labels of the ``m`` outputs (default ``y0 ..``; no units).

    Returns
    -------
    xarray.Dataset
        ``output_mean``, ``output_std`` (output), ``output_covariance`` (output_i, output_j),
        ``output_quantile`` (quantile, output), their standard errors ``output_mean_se``, ... (NaN: no
        sampling), ``outside_bounds``, ``status``, ``status_message``.
    """
    probabilities = checked_quantiles(quantiles)
    value, jac = value_and_jacobian_at_mean(value_and_jacobian, inputs)
    outputs = OutputLabels.of(value.size, output_names, output_units)
    return moment_result(value, jac @ inputs.covariance @ jac.T, probabilities, outputs, 0.0)
