"""Propagation through an ensemble surrogate: every method's output mean and standard deviation per member.

:func:`member_moments` propagates the input uncertainty once through all ``K`` members at once: the members'
outputs side by side are one model of ``K m`` outputs (the member-major views of
:class:`~sensitivity.engine.ensemble.CompiledEnsemble`, column ``k m + j`` member ``k``'s output ``j``), so
every method (first/second order, unscented, Monte Carlo, the posterior predictive) evaluates each sample once
for all members, on the same samples. Their means and standard deviations go back onto a ``member`` axis; their
spread over the members, beside the Monte Carlo standard errors of the ensemble mean's propagation, says how
much of a propagated moment is the surrogate.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from sensitivity.analyses.callables import BatchedModel
from sensitivity.analyses.propagation.driver import propagate
from sensitivity.analyses.propagation.settings import Propagation
from sensitivity.inputs.uncertainty import InputUncertainty
from sensitivity.outputs.axes import flat_coords, unstack_output
from sensitivity.outputs.members import MEMBER, member_coords
from sensitivity.outputs.spec import FLAT, OutputDim, OutputSpec
from sensitivity.errors import ConfigError
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")

#: The moments reported per member.
MOMENTS = ("output_mean", "output_std")


def member_moments(
    stacked_model: BatchedModel,
    inputs: InputUncertainty,
    members: int,
    settings: Propagation = Propagation(),
    *,
    seed: int | np.random.Generator | None = None,
    draws: np.ndarray | None = None,
) -> xr.Dataset:
    """Each member's output mean and standard deviation by every method, and their spread over the members.

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
        ``output_mean_member`` and ``output_std_member`` on ``(propagation_method, member, *out)``, their standard
        deviations over the members ``output_mean_surrogate_std`` and ``output_std_surrogate_std`` on
        ``(propagation_method, *out)``, on the model's own output dims.
    """
    output = stacked_model.output
    if output is None:
        raise ConfigError("`stacked_model.output` must be one member's OutputSpec, got None")
    names = [f"member_{k}:{name}" for k in range(members) for name in output.flat_names()]
    side_by_side = OutputSpec(name=output.name, units=tuple(output.flat_units()) * members,
                              dims=(OutputDim(FLAT, tuple(names)),), long_name=output.long_name)
    stacked = propagate(replace(stacked_model, output=side_by_side), inputs, settings, seed=seed, draws=draws)
    m = output.size
    flat = stacked.drop_dims([d for d in stacked.dims if d not in ("propagation_method", "output")])
    out = xr.Dataset(coords={k: v for k, v in flat.coords.items() if "output" not in v.dims})
    for name in MOMENTS:
        var = flat[name]
        values = var.transpose("propagation_method", "output").values.reshape(-1, members, m)
        attrs = {key: value for key, value in var.attrs.items() if key != "long_name"}
        long_name = var.attrs.get("long_name", name)
        per_member = xr.DataArray(values, dims=("propagation_method", MEMBER, "output"),
                                  attrs={**attrs, "long_name": f"{long_name} of each member"})
        out[f"{name}_member"] = per_member
        out[f"{name}_surrogate_std"] = per_member.std(MEMBER, ddof=1).assign_attrs(
            {**attrs, "long_name": f"{long_name}, standard deviation over the members (surrogate uncertainty)"})
    out = out.assign_coords(member_coords(members))
    return unstack_output(out.assign_coords(flat_coords(output)), output)


def merge_members(primary: xr.Dataset, members: xr.Dataset) -> xr.Dataset:
    """The ensemble mean's propagation with the members' moments beside it (one ``propagation_method`` axis)."""
    return primary.assign_coords(member_coords(members.sizes[MEMBER])).assign(
        {name: members[name] for name in members.data_vars})

