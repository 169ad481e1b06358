"""The model at the posterior: each output's mean and equal-tailed interval over the draws, beside the observations.

The draws of the kept chains go through the model the posterior was sampled with (no observation noise added: the
interval is the posterior's uncertainty of the model's output, not of a new observation). Of an ensemble, each
member's mean over the same draws and their spread are recorded beside the ensemble's
(:func:`sensitivity.outputs.members.with_member_spread`: ``predictive_mean_member``, ``predictive_mean_surrogate_std``,
``predictive_mean_combined_interval``). The outputs lie on the model's own dims, labelled and in its units, when its
output spec is given (:func:`~sensitivity.outputs.axes.flat_coords`, :func:`~sensitivity.outputs.axes.unstack_output`).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from sensitivity.analyses.calibration import ObservationModel
from sensitivity.outputs.axes import flat_coords, unstack_output
from sensitivity.outputs.labels import axis_coords, axis_units_attrs, flat_output_labels, output_coords
from sensitivity.outputs.members import with_member_spread
from sensitivity.outputs.spec import OutputSpec
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")

#: Draws per model call.
BLOCK = 4096


def model_at_draws(model: Callable, draws: np.ndarray, observations: ObservationModel, *, level: float,
                   model_dtype: str, output: OutputSpec | None = None,
                   members: Callable | None = None) -> xr.Dataset:
    """The model's outputs over the posterior ``draws`` and the observations, on the outputs.

    Parameters
    ----------
    model
        ``x [B, n] -> y [B, ...]`` (TF), as sampled.
    draws
        ``[N, n]`` the kept chains' draws [parameter units].
    observations
        The observations the posterior conditions on.
    level
        Probability of the equal-tailed interval and of the members' combined interval, in (0, 1).
    model_dtype
        The dtype ``model`` computes in.
    output
        The model's output spec (None: a flat ``output`` axis named ``y0 ..``, no units).
    members
        An ensemble's members ``x -> [K, B, ...]``.

    Returns
    -------
    xarray.Dataset
        ``predictive_mean(*out)`` and ``predictive_interval(bound, *out)`` [output units] over the draws,
        ``observed(*out)`` (NaN: not in the likelihood); with ``members`` the members' variables of
        ``predictive_mean``.
    """
    values = _evaluate(model, draws, model_dtype)[0]
    m = values.shape[-1]
    names, units = (output.flat_names(), output.flat_units()) if output is not None else \
        flat_output_labels(m, None, None)
    units_attrs = axis_units_attrs(units, "output")
    observed = np.full(m, np.nan)
    observed[observations.observed] = observations.y_obs[observations.observed]
    bounds = np.quantile(values, [(1 - level) / 2, (1 + level) / 2], axis=0).T
    ds = xr.Dataset({
        "predictive_mean": ("output", values.mean(axis=0), {
            "long_name": "mean of the model's output over the posterior draws", **units_attrs}),
        "predictive_interval": (("output", "bound"), bounds, {
            "long_name": f"{level:g} equal-tailed interval of the model's output over the posterior draws (no "
                         "observation noise)", "level": level, **units_attrs}),
        "observed": ("output", observed, {"long_name": "observation the posterior conditions on (NaN: none)",
                                          **units_attrs}),
    }, coords=axis_coords("bound", ["low", "high"]))
    if members is not None:
        each = _evaluate(members, draws, model_dtype, stacked=True)
        ds = with_member_spread(ds, [xr.Dataset({"predictive_mean": ("output", e.mean(axis=0))}) for e in each],
                                level, names=["predictive_mean"])
    if output is None:
        return ds.assign_coords(output_coords(names, units))
    return unstack_output(ds.assign_coords(flat_coords(output)), output)


def _evaluate(fn: Callable, x: np.ndarray, dtype: str, *, stacked: bool = False) -> np.ndarray:
    """``[K, N, m]``: ``fn`` at ``x`` in blocks of :data:`BLOCK`, flattened over its outputs; ``fn`` maps
    ``[B, n]`` to ``[B, ...]`` (K = 1), or to ``[K, B, ...]`` when ``stacked``."""
    import tensorflow as tf

    parts = []
    for start in range(0, len(x), BLOCK):
        block = np.asarray(fn(tf.constant(x[start:start + BLOCK], dtype)), float)
        b = min(BLOCK, len(x) - start)
        parts.append(block.reshape(len(block), b, -1) if stacked else block.reshape(1, b, -1))
    return np.concatenate(parts, axis=1)
