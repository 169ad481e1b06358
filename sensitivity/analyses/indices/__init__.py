"""Sensitivity indices: one module per method, their shared design, bootstrap and labels, and the driver.

Methods, each with ``sample`` (where it has its own design) and ``analyze`` on arrays:
:mod:`~sensitivity.analyses.indices.derivatives` (local derivative-based sensitivities at given points),
:mod:`~sensitivity.analyses.indices.dgsm` (derivative-based global measures and the total-Sobol' bound),
:mod:`~sensitivity.analyses.indices.sobol` (Sobol' first/total/second-order indices),
:mod:`~sensitivity.analyses.indices.morris` (elementary effects) and
:mod:`~sensitivity.analyses.indices.active_subspaces`; cross-checks between them in
:mod:`~sensitivity.analyses.indices.crosschecks`. Shared: :mod:`~sensitivity.analyses.indices.design`
(points and input checks), :mod:`~sensitivity.analyses.indices.bootstrap` (resampling and intervals),
:mod:`~sensitivity.analyses.indices.intervals` (randomised-QMC, bootstrap or no intervals),
:mod:`~sensitivity.analyses.indices.tails` (heavy-tail checks of the outputs),
:mod:`~sensitivity.analyses.indices.dataset` (labels and units).

The driver runs them on a compiled surrogate: settings objects in
:mod:`~sensitivity.analyses.indices.methods` (``LocalDerivatives``, ``Dgsm``, ``Sobol``, ``Morris``,
``ActiveSubspaces``), :func:`plan` and :func:`compute` in :mod:`~sensitivity.analyses.indices.driver`,
and DGSM from a stored sweep in :mod:`~sensitivity.analyses.indices.dgsm_sweep`. The method names
(:data:`METHODS`: ``local``, ``dgsm``, ``sobol``, ``morris``, ``active_subspaces``) key the config
sections and prefix the variables of the combined dataset.
"""
from __future__ import annotations

from sensitivity.analyses.indices import (
    active_subspaces,
    bootstrap,
    crosschecks,
    dataset,
    derivatives,
    design,
    dgsm,
    intervals,
    morris,
    sobol,
    tails,
)
from sensitivity.analyses.indices.dgsm_sweep import SAMPLING_GRIDS, check_sweep_sample, sweep_blocks
from sensitivity.analyses.indices.driver import (
    METHODS,
    MethodName,
    combine_results,
    compute,
    cross_checks,
    in_section,
    plan,
    ranking_measures,
    summary_lines,
)
from sensitivity.analyses.indices.methods import (
    ActiveSubspaces,
    Context,
    Dgsm,
    FlatModel,
    Intervals,
    LocalDerivatives,
    Method,
    Morris,
    Quantity,
    Sobol,
    timed,
)

__all__ = [
    "METHODS", "SAMPLING_GRIDS", "ActiveSubspaces", "Context", "Dgsm", "FlatModel", "Intervals", "LocalDerivatives",
    "Method", "MethodName", "Morris", "Quantity", "Sobol", "active_subspaces", "bootstrap", "check_sweep_sample",
    "combine_results", "compute", "cross_checks", "crosschecks", "dataset", "derivatives", "design", "dgsm",
    "in_section", "intervals", "morris", "plan", "ranking_measures", "sobol", "summary_lines", "sweep_blocks", "tails",
    "timed",
]
