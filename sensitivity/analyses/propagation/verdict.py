"""The linearity verdict: where a moment method disagrees with the Monte Carlo reference, per output."""
from __future__ import annotations

import numpy as np

from sensitivity.analyses.propagation.dataset import METHOD_DIM, STATUS_OK
from sensitivity.analyses.propagation.settings import Verdict
from sensitivity.errors import ConfigError
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")

VERDICT_NOT_ASSESSED, VERDICT_CONSISTENT, VERDICT_NONLINEAR = -1, 0, 1
#: A method with more than this share of its model evaluations outside the parameter bounds (the unscented
#: transform's sigma points of wide uniform inputs) is judged on the surrogate's extrapolation, which its verdict
#: line says rather than calling the gap nonlinearity.
EXTRAPOLATED = 0.25
#: Rounding allowance of the verdict, in units of eps * |mean| (so exact methods are never flagged).
_ROUNDING_ULPS = 64.0


def nonlinearity_verdict(ds: xr.Dataset, *, reference: str = "monte_carlo", k_sigma: float = Verdict.k_sigma,
                         rtol: float = Verdict.rtol) -> xr.Dataset:
    """Flag, per method and output, where a moment method disagrees with the Monte Carlo reference.

    Method ``M`` is ``nonlinear`` at output ``k`` when its mean or its std differs from the
    reference's by more than the reference's error band plus a tolerance::

        |mean_M - mean_MC| > k_sigma * mean_se_MC + rtol * std_MC      (or the same for std)

    (plus a rounding allowance of 64 eps |mean_MC|). The disagreements are reported in units of
    the reference std (``output_mean_discrepancy``, ``output_std_discrepancy``; NaN where that std is 0).

    Parameters
    ----------
    ds
        Propagation results stacked on ``propagation_method`` with ``propagation_method_name``, on a flat
        ``output`` axis.
    reference
        The method to compare with; when absent, every flag is ``not_assessed``.
    k_sigma
        Width of the error band in standard errors, > 0.
    rtol
        Tolerance relative to the reference std, >= 0.

    Returns
    -------
    xarray.Dataset
        ``ds`` with ``output_mean_discrepancy``, ``output_std_discrepancy`` [1] and ``nonlinear`` (flags -1
        not_assessed: the reference itself, a failed method, no reference, or the posterior predictive
        when it is not the reference (the draws of another distribution than the methods'); 0 consistent;
        1 nonlinear) on ``(propagation_method, output)``.
    """
    if not (isinstance(k_sigma, (int, float)) and k_sigma > 0):
        raise ConfigError(f"`k_sigma` must be > 0, got {k_sigma!r}")
    if not (isinstance(rtol, (int, float)) and rtol >= 0):
        raise ConfigError(f"`rtol` must be >= 0, got {rtol!r}")
    names = list(ds[f"{METHOD_DIM}_name"].values)
    shape = (ds.sizes[METHOD_DIM], ds.sizes["output"])
    mean_gap, std_gap = np.full(shape, np.nan), np.full(shape, np.nan)
    flags = np.full(shape, VERDICT_NOT_ASSESSED, dtype=np.int8)
    if reference in names:
        ref = ds.isel({METHOD_DIM: names.index(reference)})
        scale = ref["output_std"].values
        floor = _ROUNDING_ULPS * np.finfo(float).eps * np.abs(ref["output_mean"].values)
        band_mean = k_sigma * ref["output_mean_se"].values + rtol * scale + floor
        band_std = k_sigma * ref["output_std_se"].values + rtol * scale + floor
        for i, name in enumerate(names):
            judged = name not in (reference, "posterior")  # the predictive is the reference, or another law
            if not judged or ds["status"].values[i] != STATUS_OK or ref["status"].values != STATUS_OK:
                continue
            d_mean = ds["output_mean"].values[i] - ref["output_mean"].values
            d_std = ds["output_std"].values[i] - scale
            with np.errstate(divide="ignore", invalid="ignore"):
                mean_gap[i] = np.where(scale > 0, d_mean / scale, np.nan)
                std_gap[i] = np.where(scale > 0, d_std / scale, np.nan)
            flags[i] = np.where((np.abs(d_mean) > band_mean) | (np.abs(d_std) > band_std),
                                VERDICT_NONLINEAR, VERDICT_CONSISTENT)
    dims = (METHOD_DIM, "output")
    where = f"relative to {reference}, in units of its std"
    return ds.assign(
        output_mean_discrepancy=(dims, mean_gap,
                                 {"long_name": f"mean minus the mean of {reference}, {where}", "units": "1"}),
        output_std_discrepancy=(dims, std_gap,
                                {"long_name": f"std minus the std of {reference}, {where}", "units": "1"}),
        nonlinear=(dims, flags, {
            "long_name": f"mean or std outside {k_sigma:g} standard errors + {rtol:g} std of {reference}",
            "flag_values": np.array([VERDICT_NOT_ASSESSED, VERDICT_CONSISTENT, VERDICT_NONLINEAR], np.int8),
            "flag_meanings": "not_assessed consistent nonlinear",
            "verdict_k_sigma": float(k_sigma), "verdict_rtol": float(rtol), "verdict_reference": reference,
        }),
    )


def summary_lines(ds: xr.Dataset, *, bounds_hint: str = "") -> list[tuple[str, str]]:
    """``(severity, line)`` pairs summing up a :func:`~sensitivity.analyses.propagation.propagate` result.

    A ``"warning"`` per failed method and per method with more than 1% of its model evaluations
    outside the parameter bounds (followed by ``bounds_hint``, a remedy for the sampling methods: truncating the
    inputs keeps draws inside, not the unscented transform's sigma points); an ``"info"`` line per assessed method:
    on how many outputs it disagrees with the verdict's reference (``monte_carlo`` or ``posterior``), and the
    largest gap in units of the reference's std.
    """
    reference = ds["nonlinear"].attrs.get("verdict_reference", "monte_carlo")
    described = ds["nonlinear"].attrs.get("verdict_reference_description")
    lines = [("info", f"verdict reference: {reference}" + (f", {described}" if described else ""))]
    for i, name in enumerate(ds[f"{METHOD_DIM}_name"].values):
        outside = float(ds["outside_bounds"].values[i])
        if ds["status"].values[i] != STATUS_OK:
            lines.append(("warning", f"{name} failed: {ds['status_message'].values[i]}"))
        if outside > 0.01:
            remedy = (": its sigma points lie beyond them, where the surrogate extrapolates (a smaller "
                      "propagation.alpha keeps them nearer the mean)" if name == "unscented" else bounds_hint)
            lines.append(("warning", f"{name}: {100 * outside:.0f}% of model evaluations outside the parameter "
                                     f"bounds{remedy}"))
        flags = ds["nonlinear"].values[i]
        if (flags < 0).all():
            continue
        gaps = np.stack([ds["output_mean_discrepancy"].values[i], ds["output_std_discrepancy"].values[i]])
        gap = np.nanmax(np.abs(gaps))
        why = (f"; with {100 * outside:.0f}% of its evaluations outside the bounds the gap is the surrogate's "
               "extrapolation as much as the model's nonlinearity" if outside > EXTRAPOLATED and (flags == 1).any()
               else "")
        lines.append(("info", f"verdict: {name} disagrees with {reference} on {int((flags == 1).sum())} of "
                              f"{flags.size} outputs (largest gap {gap:.3g} std){why}"))
    return lines
