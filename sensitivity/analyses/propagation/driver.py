"""Propagate one input uncertainty with several methods side by side, and compare them with a reference.

The methods (:mod:`~sensitivity.analyses.propagation.first_order`, ``second_order``, ``unscented``,
``monte_carlo``) each return one labeled dataset on a flat ``output`` axis; :func:`propagate` stacks them on
``propagation_method`` (not ``method``: a keyword of ``xarray``'s ``sel``), records
the propagated input mean and covariance, and adds the linearity verdict
(:mod:`~sensitivity.analyses.propagation.verdict`). Given MCMC ``draws`` of the parameters' posterior, a
fifth method ``posterior`` pushes them through the model
(:func:`~sensitivity.analyses.propagation.predictive.posterior_predictive`) and becomes the verdict's
reference: the moment methods and Monte Carlo of the (Gaussian) input uncertainty are then judged
against the posterior predictive. Given the model's :class:`~sensitivity.outputs.spec.OutputSpec`, the result is
put back on the model's own output dims (:func:`~sensitivity.outputs.axes.unstack_output`).
"""
from __future__ import annotations

import numpy as np

from sensitivity.analyses.callables import BatchedModel
from sensitivity.analyses.propagation.dataset import METHOD_DIM, input_variables
from sensitivity.analyses.propagation.first_order import first_order
from sensitivity.analyses.propagation.monte_carlo import monte_carlo
from sensitivity.analyses.propagation.second_order import second_order
from sensitivity.analyses.propagation.settings import METHODS, Propagation
from sensitivity.analyses.propagation.unscented import unscented
from sensitivity.analyses.propagation.verdict import nonlinearity_verdict
from sensitivity.errors import ConfigError
from sensitivity.inputs.uncertainty import InputUncertainty
from sensitivity.outputs.axes import unstack_output
from sensitivity.outputs.labels import axis_coords
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")


def propagate(
    model: BatchedModel,
    inputs: InputUncertainty,
    settings: Propagation = Propagation(),
    *,
    seed: int | np.random.Generator | None = None,
    draws: np.ndarray | None = None,
) -> xr.Dataset:
    """Propagate ``inputs`` through ``model`` with several methods and compare them with a reference.

    Parameters
    ----------
    model
        The batched model (:meth:`BatchedModel.of` a compiled surrogate): ``values`` for ``unscented``,
        ``monte_carlo`` and ``posterior``, ``value_and_jacobian`` for ``first_order`` and ``second_order``,
        ``hessian`` for ``second_order``. Its ``output`` spec labels the flat outputs and puts the result back on
        the model's dims (``output_mean(propagation_method, species, day)``; covariances stay on
        ``output_i``/``output_j`` with each dim's coordinates, ``day_i(output_i)``); without one, a flat ``output``
        axis labeled ``y0 ..``.
    inputs
        Input uncertainty (:func:`~sensitivity.inputs.uncertainty.inputs_from_space` or
        :func:`~sensitivity.inputs.uncertainty.gaussian_inputs`).
    settings
        The methods, quantiles, and the unscented, Monte Carlo and verdict settings
        (:class:`~sensitivity.analyses.propagation.settings.Propagation`).
    seed
        Seed of the Monte Carlo sample.
    draws
        ``[chain, draw, parameter]`` MCMC draws of the posterior: adds the method ``posterior`` (the
        posterior predictive, needs ``values``), last on ``propagation_method``, and makes it the verdict's
        reference unless ``settings.verdict.reference`` names another (give ``monte_carlo`` when ``inputs`` are
        not an approximation of that posterior: the space's distributions, a prior). When ``inputs`` are these
        draws' empirical distribution, ``monte_carlo``'s standard errors include the draws' own (autocorrelated)
        error (:func:`~sensitivity.analyses.propagation.predictive.with_chain_error`).

    Returns
    -------
    xarray.Dataset
        The methods' results stacked on ``propagation_method`` (labels in ``propagation_method_name``), the
        input ``input_mean(parameter)`` and ``input_covariance(parameter_i, parameter_j)``, and the verdict
        ``output_mean_discrepancy``, ``output_std_discrepancy``, ``nonlinear`` on ``(propagation_method, output)``
        (the model's dims in place of ``output`` when the model has an output spec). Of an ensemble
        (``model.members``, :meth:`BatchedModel.of` a compiled ensemble): that of the members' mean with each
        member's results, their spread and the combined intervals beside it
        (:func:`~sensitivity.analyses.propagation.ensemble.propagate_ensemble`).
    """
    if not isinstance(settings, Propagation):
        raise ConfigError(f"`settings` must be Propagation(...), got {settings!r}")
    if model.members is not None:  # an ensemble: the mean's propagation, each member's, their spread
        from sensitivity.analyses.propagation.ensemble import propagate_ensemble

        return propagate_ensemble(model, inputs, settings, seed=seed, draws=draws)
    methods = list(settings.methods)
    _check_methods(methods, model)
    reference = settings.verdict.reference or ("posterior" if draws is not None else "monte_carlo")
    if reference not in (*METHODS, "posterior") or (reference == "posterior" and draws is None):
        raise ConfigError(f"`reference` must be one of {list(METHODS)}, or 'posterior' with draws, got {reference!r}")
    labels = dict(quantiles=settings.quantiles, **model.labels())
    mc = settings.monte_carlo
    run = {
        "first_order": lambda: first_order(inputs, model.value_and_jacobian, **labels),
        "second_order": lambda: second_order(inputs, model.value_and_jacobian, model.hessian, **labels),
        "unscented": lambda: unscented(inputs, model.values, **settings.unscented.kwargs(), **labels),
        "monte_carlo": lambda: monte_carlo(inputs, model.values, **mc.kwargs(), seed=seed, **labels),
    }
    if draws is not None:
        from sensitivity.analyses.propagation.predictive import posterior_predictive

        if model.values is None:
            raise ConfigError("`draws` (the posterior predictive) needs the model's `values`, got None")
        run["posterior"] = lambda: posterior_predictive(draws, model.values, bounds=inputs.bounds,
                                                        block_size=mc.block_size, **labels)
        methods.append("posterior")
    results = [run[name]() for name in methods]
    if draws is not None and "monte_carlo" in methods and _resamples(inputs, draws):
        from sensitivity.analyses.propagation.predictive import with_chain_error

        at = methods.index("monte_carlo")
        results[at] = with_chain_error(results[at], results[-1])
    mc_attrs = results[methods.index("monte_carlo")].attrs if "monte_carlo" in methods else {}
    ds = xr.concat([xr.Dataset(r.data_vars, r.coords) for r in results], dim=METHOD_DIM, data_vars="all",
                   coords="minimal", compat="override", join="override")
    ds = ds.assign_coords(axis_coords(METHOD_DIM, methods))
    ds = ds.assign(input_variables(inputs))
    ds = nonlinearity_verdict(ds, reference=reference, k_sigma=settings.verdict.k_sigma, rtol=settings.verdict.rtol)
    ds["nonlinear"].attrs["verdict_reference_description"] = {
        "posterior": "the posterior predictive: every MCMC draw through the model",
        "monte_carlo": f"Monte Carlo of the input uncertainty ({inputs.description})"}.get(reference, reference)
    ds.attrs.update(
        input_distribution=inputs.description,
        **{f"unscented_{k}": float(v) for k, v in settings.unscented.kwargs().items()},
        seed=str(seed) if seed is None or isinstance(seed, (int, np.integer)) else "generator",
        **{f"monte_carlo_{k}": v for k, v in mc_attrs.items()},
        **{f"posterior_{k}": v for k, v in results[-1].attrs.items() if draws is not None},
    )
    return ds if model.output is None else unstack_output(ds, model.output)


def _resamples(inputs: InputUncertainty, draws: np.ndarray) -> bool:
    """True when ``inputs`` is the empirical distribution of these MCMC ``draws`` (Monte Carlo resamples them)."""
    own = getattr(inputs, "draws", None)
    return own is not None and own.shape == (draws.shape[0] * draws.shape[1], draws.shape[2]) and \
        np.array_equal(own, draws.reshape(own.shape))


def _check_methods(methods: list[str], model: BatchedModel) -> None:
    if not isinstance(model, BatchedModel):
        raise ConfigError(f"`model` must be BatchedModel(...) (BatchedModel.of(engine) for a compiled surrogate), "
                          f"got {type(model).__name__}")
    if not methods or len(set(methods)) != len(methods):
        raise ConfigError(f"`methods` must list distinct methods from {METHODS}, got {list(methods)}")
    needs = {"first_order": ("value_and_jacobian",), "second_order": ("value_and_jacobian", "hessian"),
             "unscented": ("values",), "monte_carlo": ("values",)}
    for method in methods:
        if method not in needs:
            raise ConfigError(f"`methods` entries must be one of {METHODS}, got {method!r}")
        for arg in needs[method]:
            if getattr(model, arg) is None:
                raise ConfigError(f"method {method!r} needs `{arg}`, got None")
