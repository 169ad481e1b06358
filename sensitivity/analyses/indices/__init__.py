"""Sensitivity indices: one module per method, their shared design, bootstrap and labels, and the driver.

Methods, each with ``sample`` (where it has its own design) and ``analyze`` on arrays:
:mod:`~sensitivity.analyses.indices.derivatives` (local derivative-based sensitivities at given points),
:mod:`~sensitivity.analyses.indices.dgsm` (derivative-based global measures and the total-Sobol' bound),
:mod:`~sensitivity.analyses.indices.sobol` (Sobol' first/total/second-order indices),
:mod:`~sensitivity.analyses.indices.morris` (elementary effects),
:mod:`~sensitivity.analyses.indices.active_subspaces`, and for dependent inputs and whole outputs
:mod:`~sensitivity.analyses.indices.shapley` (Shapley effects),
:mod:`~sensitivity.analyses.indices.sobol_dependent` (full and independent Sobol' indices),
:mod:`~sensitivity.analyses.indices.aggregated` (aggregated and PCA-based indices over output dims) and
:mod:`~sensitivity.analyses.indices.given_data` (first-order indices of any sample); cross-checks between them in
:mod:`~sensitivity.analyses.indices.crosschecks`. Shared: :mod:`~sensitivity.analyses.indices.design`
(points and input checks), :mod:`~sensitivity.analyses.indices.bootstrap` (resampling and intervals),
:mod:`~sensitivity.analyses.indices.intervals` (randomised-QMC, bootstrap or no intervals),
:mod:`~sensitivity.analyses.indices.tails` (heavy-tail checks of the outputs),
:mod:`~sensitivity.inputs.copula` (the space's Gaussian copula in normal scores),
:mod:`~sensitivity.analyses.indices.dataset` (labels and units).

The driver runs them on a compiled surrogate: settings objects in
:mod:`~sensitivity.analyses.indices.methods` (``LocalDerivatives``, ``Dgsm``, ``Sobol`` (in
:mod:`~sensitivity.analyses.indices.sobol_method`: one pass, resumable, sharded), ``Morris``,
``ActiveSubspaces``, ``Shapley``, ``SobolDependent``, ``Aggregated``, ``GivenData``), :func:`plan` and
:func:`compute` in :mod:`~sensitivity.analyses.indices.driver`, and DGSM and given-data indices from a
stored sweep in :mod:`~sensitivity.analyses.indices.dgsm_sweep`; of an ensemble surrogate, every index per member,
their spread and a combined interval, by :func:`compute_ensemble` (:mod:`~sensitivity.analyses.indices.ensemble`). The method names (:data:`METHODS`:
``local``, ``dgsm``, ``sobol``, ``morris``, ``active_subspaces``, ``shapley``, ``sobol_dependent``,
``aggregated``, ``given_data``; the first five are :data:`DEFAULT_METHODS`) key the config sections and
prefix the variables of the combined dataset.
"""
from __future__ import annotations

from sensitivity.analyses.indices.dgsm_sweep import (RANK_GRIDS, SAMPLING_GRIDS, check_sweep_sample, sweep_blocks,
                                                    sweep_sample)
from sensitivity.analyses.indices.driver import (
    DEFAULT_METHODS,
    METHODS,
    MethodName,
    combine_results,
    compute,
    cross_checks,
    in_section,
    plan,
    ranking_measures,
    shard_statistics,
    summary_lines,
)
from sensitivity.analyses.indices.ensemble import compute_ensemble, with_member_spread
from sensitivity.analyses.indices.flat_model import FlatModel
from sensitivity.analyses.indices.methods import (
    ActiveSubspaces,
    Aggregated,
    Context,
    Dgsm,
    GivenData,
    Intervals,
    LocalDerivatives,
    Method,
    Morris,
    Quantity,
    Shapley,
    SobolDependent,
    timed,
)
from sensitivity.analyses.indices.sobol_method import Sobol

#: The package's face: the verbs, the settings of each method and the method names; the methods' modules and
#: helpers are imported from their own modules.
__all__ = [
    "DEFAULT_METHODS", "METHODS", "ActiveSubspaces", "Aggregated", "Dgsm", "GivenData", "Intervals", "LocalDerivatives",
    "Morris", "Shapley", "Sobol", "SobolDependent", "compute", "compute_ensemble", "plan",
]
