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

from typing import Literal, Sequence

import numpy as np

from sensitivity.analyses.propagation.dataset import DEFAULT_QUANTILES, METHOD_DIM, input_variables
from sensitivity.analyses.propagation.evaluation import HessianFn, ValueAndJacobianFn, ValuesFn
from sensitivity.analyses.propagation.first_order import first_order
from sensitivity.inputs.uncertainty import InputUncertainty, Sampler
from sensitivity.analyses.propagation.monte_carlo import monte_carlo
from sensitivity.analyses.propagation.second_order import second_order
from sensitivity.analyses.propagation.unscented import unscented
from sensitivity.analyses.propagation.verdict import nonlinearity_verdict
from sensitivity.errors import ConfigError
from sensitivity.outputs.labels import axis_coords
from sensitivity.runtime.lazy import lazy_import
from sensitivity.outputs.axes import unstack_output
from sensitivity.outputs.spec import OutputSpec

xr = lazy_import("xarray")

Method = Literal["first_order", "second_order", "unscented", "monte_carlo"]
METHODS: tuple[str, ...] = ("first_order", "second_order", "unscented", "monte_carlo")


def propagate(
    inputs: InputUncertainty,
    *,
    values_fn: ValuesFn | None = None,
    value_and_jacobian: ValueAndJacobianFn | None = None,
    hessian: HessianFn | None = None,
    methods: Sequence[Method] = METHODS,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
    output: OutputSpec | None = None,
    output_names: Sequence[str] | None = None,
    output_units: Sequence[str] | None = None,
    alpha: float = 1.0,
    beta: float = 2.0,
    kappa: float = 0.0,
    n_samples: int = 2**16,
    n_replicates: int = 16,
    sampler: Sampler = "sobol",
    block_size: int = 4096,
    max_bytes: int = 2**28,
    seed: int | np.random.Generator | None = None,
    k_sigma: float = 3.0,
    rtol: float = 0.05,
    draws: np.ndarray | None = None,
    reference: str | None = None,
) -> xr.Dataset:
    """Propagate ``inputs`` with several methods and compare them with Monte Carlo.

    Parameters
    ----------
    inputs
        Input uncertainty (:func:`~sensitivity.inputs.uncertainty.inputs_from_space` or
        :func:`~sensitivity.inputs.uncertainty.gaussian_inputs`).
    values_fn
        Batched ``[K, n] -> [K, m]``; needed by ``unscented`` and ``monte_carlo``.
    value_and_jacobian
        Batched ``[K, n] -> ([K, m], [K, m, n])``; needed by ``first_order`` and ``second_order``.
    hessian
        Batched ``[K, n] -> [K, m, n, n]``; needed by ``second_order``.
    methods
        Any of ``first_order``, ``second_order``, ``unscented``, ``monte_carlo``, in output order.
    output
        The model's output description: the flat outputs are labeled by it and the result is put back on its
        dims (``output_mean(propagation_method, species, day)``; covariances stay on ``output_i``/``output_j``
        with each dim's coordinates, ``day_i(output_i)``). None: a flat ``output`` axis labeled by
        ``output_names`` (default ``y0 ..``) and ``output_units``.
    alpha, beta, kappa
        Unscented transform settings (:func:`~sensitivity.analyses.propagation.unscented`).
    n_samples, n_replicates, sampler, block_size, max_bytes, seed
        Monte Carlo settings (:func:`~sensitivity.analyses.propagation.monte_carlo`).
    k_sigma, rtol
        Verdict settings (:func:`~sensitivity.analyses.propagation.nonlinearity_verdict`).
    draws
        ``[chain, draw, parameter]`` MCMC draws of the posterior: adds the method ``posterior`` (the
        posterior predictive, needs ``values_fn``), last on ``method``, and makes it the verdict's reference
        (else ``monte_carlo``). When ``inputs`` are these draws' empirical distribution, ``monte_carlo``'s
        standard errors include the draws' own (autocorrelated) error
        (:func:`~sensitivity.analyses.propagation.predictive.with_chain_error`).
    reference
        The verdict's reference method; None: ``posterior`` with ``draws``, else ``monte_carlo``. Give
        ``monte_carlo`` when ``inputs`` are not an approximation of that posterior (the space's distributions,
        a prior): the posterior predictive then stands beside the methods without judging them. A reference
        that is not among the methods leaves every method not assessed.

    Returns
    -------
    xarray.Dataset
        The methods' results stacked on ``propagation_method`` (labels in ``propagation_method_name``), the
        input ``input_mean(parameter)`` and ``input_covariance(parameter_i, parameter_j)``, and the verdict
        ``output_mean_discrepancy``, ``output_std_discrepancy``, ``nonlinear`` on ``(propagation_method, output)``
        (the model's dims in place of ``output`` when ``output`` is given).
    """
    _check_methods(methods, values_fn, value_and_jacobian, hessian)
    reference = reference or ("posterior" if draws is not None else "monte_carlo")
    if reference not in (*METHODS, "posterior") or (reference == "posterior" and draws is None):
        raise ConfigError(f"`reference` must be one of {list(METHODS)}, or 'posterior' with draws, got {reference!r}")
    if output is not None:
        output_names = output.flat_names() if output_names is None else output_names
        output_units = output.flat_units() if output_units is None else output_units
    labels = dict(quantiles=quantiles, output_names=output_names, output_units=output_units)
    run = {
        "first_order": lambda: first_order(inputs, value_and_jacobian, **labels),
        "second_order": lambda: second_order(inputs, value_and_jacobian, hessian, **labels),
        "unscented": lambda: unscented(inputs, values_fn, alpha=alpha, beta=beta, kappa=kappa, **labels),
        "monte_carlo": lambda: monte_carlo(inputs, values_fn, n_samples=n_samples, n_replicates=n_replicates,
                                           sampler=sampler, block_size=block_size, max_bytes=max_bytes, seed=seed,
                                           **labels),
    }
    methods = list(methods)
    if draws is not None:
        from sensitivity.analyses.propagation.predictive import posterior_predictive

        if values_fn is None:
            raise ConfigError("`draws` (the posterior predictive) needs `values_fn`, got None")
        run["posterior"] = lambda: posterior_predictive(draws, values_fn, bounds=inputs.bounds,
                                                        block_size=block_size, **labels)
        methods.append("posterior")
    results = [run[name]() for name in methods]
    if draws is not None and "monte_carlo" in methods and _resamples(inputs, draws):
        from sensitivity.analyses.propagation.predictive import with_chain_error

        at = methods.index("monte_carlo")
        results[at] = with_chain_error(results[at], results[-1])
    mc_attrs = results[list(methods).index("monte_carlo")].attrs if "monte_carlo" in methods else {}
    ds = xr.concat([xr.Dataset(r.data_vars, r.coords) for r in results], dim=METHOD_DIM, data_vars="all", coords="minimal",
                   compat="override", join="override")
    ds = ds.assign_coords(axis_coords(METHOD_DIM, list(methods)))
    ds = ds.assign(input_variables(inputs))
    ds = nonlinearity_verdict(ds, reference=reference, k_sigma=k_sigma, rtol=rtol)
    ds["nonlinear"].attrs["verdict_reference_description"] = {
        "posterior": "the posterior predictive: every MCMC draw through the model",
        "monte_carlo": f"Monte Carlo of the input uncertainty ({inputs.description})"}.get(reference, reference)
    ds.attrs.update(
        input_distribution=inputs.description,
        unscented_alpha=float(alpha), unscented_beta=float(beta), unscented_kappa=float(kappa),
        seed=str(seed) if seed is None or isinstance(seed, (int, np.integer)) else "generator",
        **{f"monte_carlo_{k}": v for k, v in mc_attrs.items()},
        **{f"posterior_{k}": v for k, v in results[-1].attrs.items() if draws is not None},
    )
    return ds if output is None else unstack_output(ds, output)


def _resamples(inputs: InputUncertainty, draws: np.ndarray) -> bool:
    """True when ``inputs`` is the empirical distribution of these MCMC ``draws`` (Monte Carlo resamples them)."""
    own = getattr(inputs, "draws", None)
    return own is not None and own.shape == (draws.shape[0] * draws.shape[1], draws.shape[2]) and \
        np.array_equal(own, draws.reshape(own.shape))


def _check_methods(methods: Sequence[str], values_fn: ValuesFn | None, value_and_jacobian: ValueAndJacobianFn | None,
                   hessian: HessianFn | None) -> None:
    if not methods or len(set(methods)) != len(methods):
        raise ConfigError(f"`methods` must list distinct methods from {METHODS}, got {list(methods)}")
    needs = {"first_order": ("value_and_jacobian",), "second_order": ("value_and_jacobian", "hessian"),
             "unscented": ("values_fn",), "monte_carlo": ("values_fn",)}
    given = {"values_fn": values_fn, "value_and_jacobian": value_and_jacobian, "hessian": hessian}
    for method in methods:
        if method not in needs:
            raise ConfigError(f"`methods` entries must be one of {METHODS}, got {method!r}")
        for arg in needs[method]:
            if given[arg] is None:
                raise ConfigError(f"method {method!r} needs `{arg}`, got None")
