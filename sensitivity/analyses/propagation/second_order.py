"""Second-order propagation with the Hessians at the mean.

Mean ``f_k(mu) + 1/2 tr(H_k S)`` and covariance ``J S J^T + 1/2 tr(H_k S H_l S)`` with ``H_k`` the
Hessian of output ``k`` at ``mu``. Exact for a quadratic model of Gaussian inputs; for other inputs
the mean term is still exact for a quadratic, while the covariance term assumes Gaussian third
(zero) and fourth moments (Gustafsson & Hendeby 2012).

References
----------
Gustafsson, F. & Hendeby, G. (2012), Some relations between extended and unscented Kalman filters,
IEEE Trans. Signal Process. 60, 545-555, doi:10.1109/TSP.2011.2172431.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from sensitivity.analyses.propagation.dataset import DEFAULT_QUANTILES, OutputLabels, checked_quantiles, moment_result
from sensitivity.analyses.propagation.evaluation import (
    HessianFn,
    ValueAndJacobianFn,
    checked_array,
    value_and_jacobian_at_mean,
)
from sensitivity.inputs.uncertainty import InputUncertainty
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")


def second_order(
    inputs: InputUncertainty,
    value_and_jacobian: ValueAndJacobianFn,
    hessian: HessianFn,
    *,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
    output_names: Sequence[str] | None = None,
    output_units: Sequence[str] | None = None,
) -> xr.Dataset:
    """Second-order propagation with the Hessians at the mean.

    Mean ``f_k(mu) + 1/2 tr(H_k S)``; covariance ``J S J^T + 1/2 tr(H_k S H_l S)`` (Gaussian inputs).
    See :func:`~sensitivity.analyses.propagation.first_order` for the other parameters and the result.

    Parameters
    ----------
    hessian
        ``points [K, n] -> hessians [K, m, n, n]``, e.g. :func:`sensitivity.engine.hessian.compile_hessian`.
    """
    probabilities = checked_quantiles(quantiles)
    value, jac = value_and_jacobian_at_mean(value_and_jacobian, inputs)
    m, n = jac.shape
    hess = checked_array(hessian(inputs.mean[None, :]), (1, m, n, n), "hessian")[0]
    outputs = OutputLabels.of(m, output_names, output_units)
    h_s = hess @ inputs.covariance  # [m, n, n]: H_k S
    mean = value + 0.5 * np.trace(h_s, axis1=1, axis2=2)
    # tr(A_k A_l) = vec(A_k) . vec(A_l^T), one matrix product for all (k, l)
    quadratic = 0.5 * h_s.reshape(m, n * n) @ h_s.transpose(0, 2, 1).reshape(m, n * n).T
    return moment_result(mean, jac @ inputs.covariance @ jac.T + quadratic, probabilities, outputs, 0.0)
