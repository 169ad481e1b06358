"""Verification of a propagation's Monte Carlo moments: the simulator's own mean and standard deviation of every
output, anchored by control variates on a few of the sample's points, against the surrogate's.

A propagation through an ensemble reports each moment with an interval of its sampling and its members' spread;
when every member shares one bias (they learnt the same training runs), the spread cannot show it and the interval
misses the simulator's value. :func:`verify_propagation` runs the simulator on the first ``runs`` points of the
propagation's Monte Carlo sample (redrawn: :func:`~sensitivity.analyses.propagation.monte_carlo.sample_points`)
and the surrogate on all ``N`` of them, and estimates the simulator's mean and variance of every output by control
variates with the surrogate (:mod:`sensitivity.analyses.multifidelity.control_variates`: unbiased for the simulator
whatever the surrogate's error; its std is the square root of the variance, its interval the square roots of the
variance's bounds).

The surrogate's error in a moment is its value on the whole sample minus the anchored one. Both stand on the same
``N`` points, so the sample's own sampling error, common to both, cancels in the error (as the paired Sobol'
indices of :func:`~sensitivity.analyses.verify.checks.verify_sobol` do); what is left of the anchored estimate's
uncertainty is that of its correction, the surrogate's bias on the ``runs`` paired points (the control-variate
core's ``bias_standard_error``; of the std by the delta method, ``se(var) / (2 std)``). The anchored interval
itself counts the whole sample's sampling error as if its points were independent, far above a randomised QMC
sample's, and is reported, not judged by. A moment is flagged (:data:`~.verdict.ERROR`) when

    |surrogate - simulator| > max(sqrt(h_error^2 + h_surrogate^2), moment_tolerance * std_simulator)

with ``h_error`` the error's half-width (``z`` times the bias's standard error) and ``h_surrogate`` the half-width
of the surrogate's own interval as the propagation reports it (its combined interval on an ensemble, else its
sampling interval): the error is flagged where the surrogate's interval, widened by the error's own uncertainty,
does not reach the simulator's value, and the error exceeds the absolute tolerance
(:attr:`~.verdict.VerdictSettings.moment_tolerance`).

References
----------
Peherstorfer, B., Willcox, K. & Gunzburger, M. (2016), Optimal model management for multifidelity Monte Carlo
estimation, SIAM J. Sci. Comput. 38, A3163-A3194, doi:10.1137/15M1046472.
Qian, E., Peherstorfer, B., O'Malley, D., Vesselinov, V. V. & Willcox, K. (2018), Multifidelity Monte Carlo
estimation of variance and sensitivity indices, SIAM/ASA J. Uncertain. Quantif. 6, 683-706, doi:10.1137/17M1151006.
"""
from __future__ import annotations

import numpy as np

from sensitivity.analyses.multifidelity.checks import z_value
from sensitivity.analyses.multifidelity.control_variates import ControlVariate, estimate_mean, estimate_variance
from sensitivity.analyses.verify.checks import VERDICT, FlatFn, MembersFn, labelled, member_values, with_members
from sensitivity.analyses.verify.verdict import FLAGS, VerdictSettings, shift_flags
from sensitivity.errors import DataError
from sensitivity.outputs.labels import axis_coords, axis_units_attrs
from sensitivity.outputs.spec import OutputSpec
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")

#: The moments verified, in the order reported.
MOMENTS = ("mean", "std")


def verify_propagation(simulate: FlatFn, surrogate: FlatFn, points: np.ndarray, runs: int,
                       half_widths: dict[str, np.ndarray], *, level: float = 0.95,
                       settings: VerdictSettings = VerdictSettings(), members: MembersFn | None = None,
                       output: OutputSpec | None = None) -> xr.Dataset:
    """The simulator's mean and std of every output, anchored by control variates, against the surrogate's.

    Parameters
    ----------
    simulate, surrogate
        ``[P, n] -> [P, m]``; the simulator runs on ``points[:runs]`` only.
    points
        ``[N, n]`` the propagation's Monte Carlo sample, in its order.
    runs
        Simulator runs, the first ``runs`` points (3 <= runs <= N).
    half_widths
        ``{"mean": [m], "std": [m]}`` half-widths of the surrogate's own intervals of its mean and std as the
        propagation reports them [output units].
    level
        Probability of the anchored intervals, of the error's half-width and of the members' combined interval [1].
    settings
        The absolute tolerance of a moment (:attr:`VerdictSettings.moment_tolerance`).
    members
        An ensemble's members ``[P, n] -> [K, P, m]``: each member's mean and std on the whole sample and their
        spread beside the ensemble's.
    output
        The model's output spec: the outputs on its dims, labelled, in its units (None: a flat ``output`` axis).

    Returns
    -------
    xarray.Dataset
        On ``output`` for ``M`` each of ``mean`` and ``std``: ``propagation_M_simulator`` (anchored) with
        ``propagation_M_simulator_interval(output, bound)``, ``propagation_M_surrogate`` (on all ``N`` points) with
        ``propagation_M_surrogate_half_width``, ``propagation_M_error`` (surrogate minus simulator) with
        ``propagation_M_error_half_width``, ``propagation_M_error_ratio`` (``|error|`` / the combined half-width),
        ``propagation_M_flag`` (:data:`~.verdict.ERROR`); ``propagation_tolerance``, ``propagation_correlation``
        (of the two models' outputs on the runs), ``propagation_runs``, ``propagation_sample_size``,
        ``propagation_verdict`` (no flag); with ``members``, of ``propagation_M_surrogate``: ``..._member``,
        ``..._member_mean``, ``..._surrogate_std`` and ``..._combined_interval`` (the members' spread alone:
        :func:`~sensitivity.analyses.verify.checks.with_members`).
    """
    points = np.atleast_2d(np.asarray(points, float))
    if isinstance(runs, bool) or not isinstance(runs, (int, np.integer)) or not 3 <= runs <= len(points):
        raise DataError(f"`propagation_runs` must be an integer in [3, {len(points)}] (the sample's points), got "
                        f"{runs!r}")
    approx = np.asarray(surrogate(points), float).reshape(len(points), -1)
    truth = np.asarray(simulate(points[:runs]), float).reshape(runs, -1)
    cv = ControlVariate(level=level)
    mean, variance = estimate_mean(truth, approx, cv), estimate_variance(truth, approx, cv)
    std = np.sqrt(np.maximum(variance.estimate, 0.0))
    z = z_value(level)
    with np.errstate(divide="ignore", invalid="ignore"):
        anchored = {
            "mean": (mean.estimate, mean.interval, mean.bias_standard_error),
            "std": (std, np.sqrt(np.maximum(variance.interval, 0.0)), variance.bias_standard_error / (2 * std)),
        }
    own = {"mean": approx.mean(axis=0), "std": approx.std(axis=0, ddof=1)}
    tolerance = settings.moment_tolerance * std
    units, own_units = {"units": "1"}, ({} if output is None else axis_units_attrs(output.flat_units(), "output"))
    data, flagged = {}, False
    for key in MOMENTS:
        simulator, interval, se = anchored[key]
        error = own[key] - simulator
        error_half = z * se
        combined = np.sqrt(error_half**2 + np.asarray(half_widths[key], float) ** 2)
        flags = shift_flags(error, combined, tolerance)
        flagged = flagged or bool(flags.any())
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.abs(error) / combined
        data.update({
            f"propagation_{key}_simulator": ("output", simulator, {
                "long_name": f"the simulator's output {key}, control variates with the surrogate on the sample",
                **own_units}),
            f"propagation_{key}_simulator_interval": (("output", "bound"), interval, {
                "long_name": f"{level:g} interval of the simulator's output {key} (independent sample points)",
                "level": level, **own_units}),
            f"propagation_{key}_surrogate": ("output", own[key], {
                "long_name": f"the surrogate's output {key} on the whole sample", **own_units}),
            f"propagation_{key}_surrogate_half_width": ("output", np.asarray(half_widths[key], float), {
                "long_name": f"half-width of the propagation's own interval of the output {key}", **own_units}),
            f"propagation_{key}_error": ("output", error, {
                "long_name": f"the surrogate's output {key} minus the simulator's", **own_units}),
            f"propagation_{key}_error_half_width": ("output", error_half, {
                "long_name": f"{level:g} half-width of the error of the output {key} (the bias on the paired runs)",
                "level": level, **own_units}),
            f"propagation_{key}_error_ratio": ("output", ratio, {
                "long_name": f"|{key} error| / root sum of squares of its half-width and the propagation's", **units}),
            f"propagation_{key}_flag": ("output", flags, {
                "long_name": f"why the surrogate's output {key} is flagged", **FLAGS}),
        })
    data.update(
        propagation_tolerance=("output", tolerance, {
            "long_name": "absolute error of a moment below which it is not flagged (moment_tolerance x std)",
            **own_units}),
        propagation_correlation=("output", mean.correlation, {
            "long_name": "correlation of the simulator's and the surrogate's outputs on the runs", **units}),
        propagation_runs=((), np.int64(runs), {"long_name": "simulator runs: the sample's first points", **units}),
        propagation_sample_size=((), np.int64(len(points)), {"long_name": "points of the propagation's Monte Carlo "
                                                                         "sample, each through the surrogate",
                                                             **units}),
        propagation_verdict=((), np.int8(not flagged), {
            "long_name": "no output's mean or std is flagged: every surrogate error is within the propagation's "
                         "interval widened by the error's own uncertainty, or the absolute tolerance", **VERDICT}),
    )
    ds = xr.Dataset(data, coords=axis_coords("bound", ["low", "high"]))
    if members is not None:
        each = member_values(members, points)
        ds = with_members(ds, {"propagation_mean_surrogate": each.mean(axis=1),
                               "propagation_std_surrogate": each.std(axis=1, ddof=1)}, level)
    return labelled(ds, output)


def recorded_half_widths(ds: xr.Dataset, dims: tuple[str, ...], level: float) -> dict[str, np.ndarray]:
    """``{"mean": [m], "std": [m]}`` the half-widths of a propagation result's Monte Carlo mean and std on the flat
    outputs (``dims``: the model's output dims, C order): of their combined interval (an ensemble's), else
    ``sampling_factor x`` their Monte Carlo standard error at ``level``
    (:func:`~sensitivity.analyses.propagation.ensemble.sampling_factor`)."""
    from sensitivity.analyses.propagation.dataset import METHOD_DIM
    from sensitivity.analyses.propagation.ensemble import sampling_factor

    methods = [str(name) for name in ds[f"{METHOD_DIM}_name"].values]
    at = {METHOD_DIM: methods.index("monte_carlo")}
    out = {}
    for key in MOMENTS:
        name = f"output_{key}"
        if f"{name}_combined_interval" in ds:
            bounds = ds[f"{name}_combined_interval"].isel(at).transpose(*dims, "bound").values.reshape(-1, 2)
            out[key] = 0.5 * (bounds[:, 1] - bounds[:, 0])
        else:
            factor = float(sampling_factor(ds, level).isel(at))
            out[key] = factor * ds[f"{name}_se"].isel(at).transpose(*dims).values.reshape(-1)
    return out
