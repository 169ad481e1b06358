"""Propagation through an ensemble surrogate: every method's output mean, standard deviation and quantiles per
member, their spread over the members, and the interval that combines it with the sampling one.

:func:`propagate_ensemble` is :func:`~sensitivity.analyses.propagation.driver.propagate` of an ensemble (its
``model.members``, :meth:`~sensitivity.analyses.callables.BatchedModel.of` a compiled ensemble).
:func:`member_moments` propagates the input uncertainty once through all ``K`` members at once: the members'
outputs side by side are one model of ``K m`` outputs (the member-major views of
:class:`~sensitivity.engine.ensemble.CompiledEnsemble`, column ``k m + j`` member ``k``'s output ``j``), so
every method (first/second order, unscented, Monte Carlo, the posterior predictive) evaluates each sample once
for all members, on the same samples. Their results go back onto a ``member`` axis. :func:`merge_members` puts
them beside the ensemble mean's propagation with, for ``X`` each of ``output_mean``, ``output_std`` and
``output_quantile``:

``X_member``, ``X_surrogate_std``
    each member's ``X`` and their standard deviation over the members (the surrogate's uncertainty);
``X_interval(..., bound)``
    the sampling interval of the ensemble mean's ``X``: ``X -+ q se`` with ``se`` the method's Monte Carlo
    standard error (``X_se``), ``q`` Student's ``t`` quantile with ``R - 1`` degrees of freedom for Monte Carlo's
    ``R`` replicates, the normal quantile for the posterior predictive; NaN for the moment methods, which do not
    sample;
``X_combined_interval(..., bound)``
    that interval widened by the members' spread, the same definition as the indices'
    (:func:`~sensitivity.outputs.members.combined_bounds`): each side's half-width the root sum of squares of
    the sampling and the surrogate half-widths (the surrogate's alone for a moment method).

and, for the band of the outputs themselves (the posterior predictive band, with ``propagate=posterior``):

``output_band(..., bound)``
    each method's band between its lowest and highest quantile (probability ``p_high - p_low``, attribute
    ``level``), the output's spread under the input (or posterior) uncertainty through the ensemble mean;
``output_band_surrogate_std``
    the members' standard deviation at each input sample, root mean square over the samples:
    ``s^2 = E_x[sd_k(y_k(x))^2]``, each sample pushed through every member; from the members' joint output mean
    ``mu_k`` and covariance ``C_kj`` over the samples exactly, ``s^2 = (sum_k C_kk - sum_kj C_kj / K +
    sum_k (mu_k - mu)^2) / (K - 1)``;
``output_band_combined_interval(..., bound)``
    the band widened by that spread, the same definition (:func:`~sensitivity.outputs.members.combined_bounds`
    about the mean, at the band's probability): where the surrogate's error at a sample is one more member's
    deviation, independent of the input's, the output's spread and the surrogate's add in variance.
"""
from __future__ import annotations

import logging
from dataclasses import replace

import numpy as np

from sensitivity.analyses.callables import BatchedModel
from sensitivity.analyses.propagation.dataset import METHOD_DIM
from sensitivity.analyses.propagation.driver import propagate
from sensitivity.analyses.propagation.settings import Propagation
from sensitivity.inputs.uncertainty import InputUncertainty
from sensitivity.outputs.axes import flat_coords, unstack_output
from sensitivity.outputs.labels import axis_coords
from sensitivity.outputs.members import MEMBER, combined_bounds, member_coords
from sensitivity.outputs.spec import FLAT, OutputDim, OutputSpec
from sensitivity.errors import ConfigError
from sensitivity.runtime.lazy import lazy_import

log = logging.getLogger(__name__)

xr = lazy_import("xarray")
stats = lazy_import("scipy.stats")

#: The results reported per member, with their spread and combined interval.
MOMENTS = ("output_mean", "output_std", "output_quantile")


def propagate_ensemble(
    model: BatchedModel,
    inputs: InputUncertainty,
    settings: Propagation = Propagation(),
    *,
    seed: int | np.random.Generator | None = None,
    draws: np.ndarray | None = None,
) -> xr.Dataset:
    """:func:`~sensitivity.analyses.propagation.driver.propagate` of an ensemble: its members' mean propagated, then
    the same samples through every member (:func:`member_moments`) and both merged (:func:`merge_members`).

    Parameters
    ----------
    model
        The members' mean with its ``members`` (:meth:`BatchedModel.of` a compiled ensemble).
    inputs, settings, seed, draws
        As :func:`~sensitivity.analyses.propagation.driver.propagate`'s; a generator (or None) is drawn from once
        for one integer seed, so that the mean and the members see the same samples.

    Returns
    -------
    xarray.Dataset
        :func:`merge_members` of the two.
    """
    if model.members is None:
        raise ConfigError("`model.members` must be an ensemble's Members (BatchedModel.of a compiled ensemble), "
                          "got None")
    if seed is None or isinstance(seed, np.random.Generator):
        seed = int(np.random.default_rng(seed).integers(2**32))
    primary = propagate(replace(model, members=None), inputs, settings, seed=seed, draws=draws)
    log.info("propagate: the same inputs through each of the %d members", model.members.count)
    members = member_moments(model.members.model, inputs, model.members.count, settings, seed=seed, draws=draws)
    return merge_members(primary, members, settings.level)


def member_moments(
    stacked_model: BatchedModel,
    inputs: InputUncertainty,
    members: int,
    settings: Propagation = Propagation(),
    *,
    seed: int | np.random.Generator | None = None,
    draws: np.ndarray | None = None,
) -> xr.Dataset:
    """Each member's output mean, standard deviation and quantiles by every method, and their spread over the members.

    Parameters
    ----------
    stacked_model
        The members side by side: callables ``[N, n] -> [N, K m]`` (and ``[N, K m, n]``, ``[N, K m, n, n]``),
        member-major (:meth:`~sensitivity.engine.ensemble.CompiledEnsemble.stacked_values`), and the ``output``
        spec of one member (``m`` outputs).
    inputs
        The input uncertainty.
    members
        ``K``.
    settings, seed, draws
        As :func:`~sensitivity.analyses.propagation.driver.propagate`'s.

    Returns
    -------
    xarray.Dataset
        ``X_member`` on ``(propagation_method, member, [quantile,] *out)`` and its standard deviation over the
        members ``X_surrogate_std`` on ``(propagation_method, [quantile,] *out)``, for ``X`` each of
        :data:`MOMENTS`, and ``output_band_surrogate_std`` on ``(propagation_method, *out)``
        (:func:`pointwise_spread`) [output units], on the model's own output dims.
    """
    output = stacked_model.output
    if output is None:
        raise ConfigError("`stacked_model.output` must be one member's OutputSpec, got None")
    names = [f"member_{k}:{name}" for k in range(members) for name in output.flat_names()]
    side_by_side = OutputSpec(name=output.name, units=tuple(output.flat_units()) * members,
                              dims=(OutputDim(FLAT, tuple(names)),), long_name=output.long_name)
    stacked = propagate(replace(stacked_model, output=side_by_side), inputs, settings, seed=seed, draws=draws)
    m = output.size
    flat = stacked.drop_dims([d for d in stacked.dims if d not in (METHOD_DIM, "quantile", "output")])
    out = xr.Dataset(coords={k: v for k, v in flat.coords.items() if "output" not in v.dims})
    for name in MOMENTS:
        var = flat[name]
        inner = [d for d in var.dims if d not in (METHOD_DIM, "output")]  # the quantile's
        values = var.transpose(METHOD_DIM, *inner, "output").values
        values = np.moveaxis(values.reshape(*values.shape[:-1], members, m), -2, 1)
        attrs = {key: value for key, value in var.attrs.items() if key != "long_name"}
        long_name = var.attrs.get("long_name", name)
        per_member = xr.DataArray(values, dims=(METHOD_DIM, MEMBER, *inner, "output"),
                                  attrs={**attrs, "long_name": f"{long_name} of each member"})
        out[f"{name}_member"] = per_member
        out[f"{name}_surrogate_std"] = per_member.std(MEMBER, ddof=1).assign_attrs(
            {**attrs, "long_name": f"{long_name}, standard deviation over the members (surrogate uncertainty)"})
    out["output_band_surrogate_std"] = xr.DataArray(
        pointwise_spread(stacked["output_mean"].transpose(METHOD_DIM, "output").values,
                         stacked["output_covariance"].transpose(METHOD_DIM, "output_i", "output_j").values, members),
        dims=(METHOD_DIM, "output"), attrs={
            **{k: v for k, v in flat["output_mean"].attrs.items() if k.startswith("units")},
            "long_name": "standard deviation over the members at each input sample, root mean square over the "
                         "samples (surrogate uncertainty of the output band)"})
    out = out.assign_coords(member_coords(members))
    return unstack_output(out.assign_coords(flat_coords(output)), output)


def pointwise_spread(mean: np.ndarray, covariance: np.ndarray, members: int) -> np.ndarray:
    """``[..., m]``: ``sqrt(E_x[var_k y_k(x)])`` (``ddof=1`` over the members) of the members side by side, from
    their outputs' mean ``[..., K m]`` and covariance ``[..., K m, K m]`` over the samples (member-major columns):
    ``(sum_k C_kk - sum_kj C_kj / K + sum_k (mu_k - mu)^2) / (K - 1)`` per output, the module docstring's."""
    lead, m = mean.shape[:-1], mean.shape[-1] // members
    mu = mean.reshape(*lead, members, m)
    c = covariance.reshape(*lead, members, m, members, m)
    blocks = np.moveaxis(np.diagonal(c, axis1=-3, axis2=-1), -1, -3)  # [..., m, K, K]: C_kj of each output
    within = np.trace(blocks, axis1=-2, axis2=-1) - blocks.sum(axis=(-2, -1)) / members
    between = ((mu - mu.mean(axis=-2, keepdims=True)) ** 2).sum(axis=-2)
    return np.sqrt(np.clip(within + between, 0.0, None) / (members - 1))


def merge_members(primary: xr.Dataset, members: xr.Dataset, level: float = Propagation.level) -> xr.Dataset:
    """The ensemble mean's propagation with the members' results beside it, and the sampling and combined interval
    of its every mean, std and quantile (the module docstring's ``X_interval``, ``X_combined_interval``).

    Parameters
    ----------
    primary
        :func:`~sensitivity.analyses.propagation.driver.propagate` of the ensemble mean.
    members
        :func:`member_moments` on the same inputs and settings (one ``propagation_method`` axis).
    level
        Probability of both intervals [1].

    Returns
    -------
    xarray.Dataset
        ``primary`` with ``members``' variables, ``X_interval`` and ``X_combined_interval`` (on ``X``'s dims and
        ``bound``, attribute ``level``), ``output_band`` and ``output_band_combined_interval``, the ``member`` and
        ``bound`` coordinates and the attribute ``ensemble_members``.
    """
    k = members.sizes[MEMBER]
    out = primary.assign_coords({**member_coords(k), **axis_coords("bound", ["low", "high"])}).assign(
        {name: members[name] for name in members.data_vars})
    factor = sampling_factor(primary, level)
    for name in MOMENTS:
        estimate = primary[name]
        dims = estimate.dims
        half = (factor * primary[f"{name}_se"]).transpose(*dims).values  # NaN: the method does not sample
        sampled = np.nan_to_num(half, nan=0.0)
        std = members[f"{name}_surrogate_std"].transpose(*dims).values
        bounds = combined_bounds(estimate.values, estimate.values - sampled, estimate.values + sampled, std, k, level)
        long_name = estimate.attrs.get("long_name", name)
        units = {key: value for key, value in estimate.attrs.items() if key.startswith("units")}
        out[f"{name}_interval"] = xr.DataArray(
            np.stack([estimate.values - half, estimate.values + half], axis=-1), dims=(*dims, "bound"),
            attrs={**units, "level": level,
                   "long_name": f"{long_name}, {level:g} sampling interval (NaN: the method does not sample)"})
        out[f"{name}_combined_interval"] = xr.DataArray(bounds, dims=(*dims, "bound"), attrs={
            **units, "level": level, "long_name": f"{long_name}, {level:g} interval of sampling and surrogate error "
                                                  "combined"})
    out = out.assign(_band_intervals(primary, members["output_band_surrogate_std"], k))
    out.attrs["ensemble_members"] = k
    return out


def _band_intervals(primary: xr.Dataset, std: xr.DataArray, k: int) -> dict[str, xr.DataArray]:
    """``output_band`` and ``output_band_combined_interval`` of every method (the module docstring's)."""
    p = primary["quantile"].values
    low, high = (primary["output_quantile"].isel(quantile=int(i)) for i in (np.argmin(p), np.argmax(p)))
    level = float(p.max() - p.min())
    mean = primary["output_mean"]
    dims = mean.dims
    low, high = low.transpose(*dims).values, high.transpose(*dims).values
    units = {key: value for key, value in mean.attrs.items() if key.startswith("units")}
    bounds = combined_bounds(mean.values, low, high, std.transpose(*dims).values, k, level)
    return {"output_band": xr.DataArray(np.stack([low, high], axis=-1), dims=(*dims, "bound"), attrs={
                **units, "level": level, "long_name": f"{level:g} band of the output, its quantiles "
                                                      f"{p.min():g} and {p.max():g} (no surrogate error)"}),
            "output_band_combined_interval": xr.DataArray(bounds, dims=(*dims, "bound"), attrs={
                **units, "level": level, "long_name": f"{level:g} band of the output, its spread and the members' "
                                                      "spread combined (surrogate error included)"})}


def sampling_factor(ds: xr.Dataset, level: float) -> xr.DataArray:
    """Per method, the half-width of the sampling interval per standard error: Student's ``t`` with ``R - 1``
    degrees of freedom for Monte Carlo's ``R`` replicates (the spread of which gives its standard errors), the normal
    quantile for any other method (the posterior predictive's chain-based errors; the moment methods' are NaN)."""
    methods = [str(name) for name in ds[f"{METHOD_DIM}_name"].values]
    replicates = ds.attrs.get("monte_carlo_n_replicates")
    normal = float(stats.norm.ppf(0.5 + level / 2))
    student = float(stats.t.ppf(0.5 + level / 2, int(replicates) - 1)) if replicates else normal
    return xr.DataArray([student if name == "monte_carlo" else normal for name in methods], dims=METHOD_DIM)
