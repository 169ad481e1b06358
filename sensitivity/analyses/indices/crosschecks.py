"""Cross-checks between sensitivity methods: the DGSM bound on total Sobol' indices, and ranking agreement.

No single estimator is trustworthy on its own at a finite sample size. Two checks
that need no reference solution:

* :func:`dgsm_bound` — for independent inputs ``ST_i <= C_i nu_i / V`` must hold
  (Lamboni et al. 2013, doi:10.1016/j.matcom.2012.07.009); a total index above its
  DGSM bound beyond both confidence intervals means one of the two analyses is wrong
  (too few points, a Jacobian that disagrees with the values, a wrong marginal).
* :func:`rankings` — whether methods order the parameters alike, per output: Kendall's
  tau-b between the measures (Kendall 1945, doi:10.1093/biomet/33.3.239) and the
  overlap of their top-``k`` sets.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from sensitivity.errors import ConfigError, DataError
from sensitivity.outputs.labels import axis_coords, matrix_coords
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")
stats = lazy_import("scipy.stats")

#: ``dgsm_bound_check`` flag values.
CONSISTENT, WITHIN_INTERVALS, VIOLATION, NO_BOUND = 0, 1, 2, 3
#: Excesses of ST over its bound up to this much are consistent: an index below it is zero in practice, and the
#: rounding floor of a Sobol' estimate from float32 outputs, about ``(eps32 |y| / sd(y))^2`` (3e-15 for a field
#: cell 1e-7 as influential as the rest, its exact DGSM bound 4e-16; 4e-11 for an output 100 sd from zero),
#: lies below it.
BOUND_ATOL = 1e-9


def dgsm_bound(dgsm: xr.Dataset, sobol: xr.Dataset) -> xr.Dataset:
    """Compare total Sobol' indices with their DGSM upper bounds, for every parameter and output.

    Parameters
    ----------
    dgsm
        Result of :func:`sensitivity.analyses.indices.dgsm.analyze`.
    sobol
        Result of :func:`sensitivity.analyses.indices.sobol.analyze` without groups, on the same
        parameters and outputs.

    Returns
    -------
    xarray.Dataset
        ``dgsm_bound_margin (parameter, output)`` = bound - ST, and ``dgsm_bound_check``:
        0 ``ST <= bound`` (up to :data:`BOUND_ATOL`); 1 ``ST > bound`` but the intervals overlap (not
        significant); 2 the ST interval lies wholly above the bound's interval (a violation); 3 no
        bound (NaN Poincare constant or index).
    """
    for name, ds in (("dgsm", dgsm), ("sobol", sobol)):
        if "parameter" not in ds.dims or "output" not in ds.dims:
            raise DataError(f"`{name}` must have `parameter` and `output` dims (Sobol' without groups), got {dict(ds.sizes)}")
    for axis in ("parameter_name", "output_name"):
        if list(dgsm[axis].values) != list(sobol[axis].values):
            raise DataError(
                f"`dgsm` and `sobol` must share {axis}, got {list(dgsm[axis].values)} and {list(sobol[axis].values)}"
            )
    bound, total = dgsm["sobol_total_bound"].values, sobol["ST"].values
    # Without intervals (`intervals="none"`) every excess counts as a violation.
    bound_high = dgsm["sobol_total_bound_interval"].values[..., 1] if "sobol_total_bound_interval" in dgsm else bound
    total_low = sobol["ST_interval"].values[..., 0] if "ST_interval" in sobol else total
    flag = np.where(total <= bound + BOUND_ATOL, CONSISTENT,
                    np.where(total_low > bound_high + BOUND_ATOL, VIOLATION, WITHIN_INTERVALS))
    flag = np.where(np.isnan(bound) | np.isnan(total), NO_BOUND, flag).astype(np.int8)
    dims = ("parameter", "output")
    coords = {k: v for k, v in dgsm.coords.items() if set(v.dims) <= set(dims)}
    data = {
        "dgsm_bound_margin": xr.Variable(
            dims, bound - total, {"long_name": "DGSM bound minus total Sobol' index", "units": "1"}
        ),
        "dgsm_bound_check": xr.Variable(
            dims, flag,
            {
                "long_name": "total Sobol' index against its DGSM upper bound",
                "flag_values": np.array([CONSISTENT, WITHIN_INTERVALS, VIOLATION, NO_BOUND], np.int8),
                "flag_meanings": "consistent exceeds_within_intervals violation no_bound",
            },
        ),
    }
    return xr.Dataset(data, coords=coords, attrs={"references": "doi:10.1016/j.matcom.2012.07.009"})


def rankings(measures: Mapping[str, xr.DataArray], *, top_k: int = 3) -> xr.Dataset:
    """Agreement of parameter rankings across methods, per output.

    Parameters
    ----------
    measures
        ``{method: DataArray (parameter, output)}`` of importance measures where larger
        means more important (e.g. Sobol' ``ST``, the DGSM bound, Morris ``mu_star``,
        activity scores). Measures in different units rank alike as long as each is
        comparable across parameters (prefer the dimensionless DGSM bound to ``nu``).
    top_k
        Size of the top sets compared.

    Returns
    -------
    xarray.Dataset
        ``rank (measure, parameter, output)`` (1 = most important, ties averaged),
        ``kendall_tau (measure_i, measure_j, output)`` (tau-b) and ``top_k_agreement
        (measure_i, measure_j, output)``: shared fraction of the top-``k`` parameters.
        (The axis is ``measure``, not ``method``, which ``xarray.Dataset.sel`` reserves.)
    """
    if len(measures) < 2:
        raise ConfigError(f"`measures` must hold at least two methods, got {list(measures)}")
    names = list(measures)
    first = measures[names[0]]
    arrays = []
    for name in names:
        da = measures[name]
        if set(da.dims) != {"parameter", "output"} or da.sizes != first.sizes:
            raise DataError(f"`measures[{name!r}]` must have dims (parameter, output) of sizes {dict(first.sizes)}, got {dict(da.sizes)}")
        if "parameter_name" in da.coords and list(da["parameter_name"].values) != list(first["parameter_name"].values):
            raise DataError(f"`measures[{name!r}]` ranks parameters {list(da['parameter_name'].values)}, expected {list(first['parameter_name'].values)}")
        arrays.append(da.transpose("parameter", "output").values.astype(np.float64))
    values = np.stack(arrays)  # [M, n, m]
    n = values.shape[1]
    if not isinstance(top_k, (int, np.integer)) or not 1 <= top_k <= n:
        raise ConfigError(f"`top_k` must be an integer in [1, {n}], got {top_k!r}")

    ranks = stats.rankdata(-values, axis=1, method="average", nan_policy="omit")  # a NaN measure: a NaN rank
    top = np.argsort(-values, axis=1, kind="stable")[:, :top_k]  # [M, k, m]
    member = np.zeros(values.shape, dtype=bool)
    np.put_along_axis(member, top, True, axis=1)
    agreement = np.einsum("aim,bim->abm", member.astype(np.float64), member.astype(np.float64)) / top_k

    coords = {
        **{k: v for k, v in first.coords.items() if set(v.dims) <= {"parameter", "output"}},
        **axis_coords("measure", names),
        **matrix_coords("measure", names),
    }
    pair = ("measure_i", "measure_j", "output")
    data = {
        "rank": xr.Variable(("measure", "parameter", "output"), ranks, {"long_name": "importance rank (1 = most important)", "units": "1"}),
        "kendall_tau": xr.Variable(pair, _kendall_tau_b(values), {"long_name": "Kendall tau-b between parameter rankings", "units": "1"}),
        "top_k_agreement": xr.Variable(
            pair, agreement, {"long_name": f"fraction of top-{top_k} parameters shared", "units": "1", "top_k": top_k}
        ),
    }
    return xr.Dataset(data, coords=coords, attrs={"references": "doi:10.1093/biomet/33.3.239"})


def _kendall_tau_b(values: np.ndarray) -> np.ndarray:
    """``[M, M, m]`` Kendall tau-b between every pair of the ``M`` measures ``[M, n, m]``, per output.

    ``tau_b = sum_{i<j} s^a_ij s^b_ij / sqrt(sum_{i<j} |s^a_ij| sum_{i<j} |s^b_ij|)`` with
    ``s_ij = sign(v_i - v_j)``: concordant minus discordant pairs over the geometric mean
    of the untied pair counts, over the parameters both measures have (pairwise complete: a parameter
    without a DGSM bound, a NaN, leaves the others' ranking to compare). NaN when a measure is constant,
    or fewer than two parameters have both.
    """
    n = values.shape[1]
    i, j = np.triu_indices(n, 1)
    differences = values[:, i] - values[:, j]  # [M, pairs, m]
    valid = np.isfinite(differences).astype(np.float64)
    signs = np.sign(np.nan_to_num(differences, nan=0.0, posinf=0.0, neginf=0.0))
    concord = np.einsum("apm,bpm->abm", signs, signs)
    untied = np.einsum("apm,bpm->abm", np.abs(signs), valid)  # a's untied pairs among those b has too
    with np.errstate(divide="ignore", invalid="ignore"):
        return concord / np.sqrt(untied * np.swapaxes(untied, 0, 1))
