"""Reliability: the probability of failure ``Pf = P(g(U) <= 0)`` in the standard normal space ``u``.

The verb :func:`reliability` (:mod:`~sensitivity.analyses.reliability.driver`) runs it on a compiled surrogate
over a parameter space, with :class:`ReliabilitySettings`, into one labeled dataset
(:mod:`~sensitivity.analyses.reliability.dataset`, :func:`summary`); the math below is plain numpy/scipy on
batched callables.

``Nataf`` / ``nataf`` (:mod:`~sensitivity.analyses.reliability.standard_space`)
    ``x = F^-1(Phi(L u))`` for independent marginals under a Gaussian copula, its inverse, its exact
    Jacobian, and the pull-back of a limit state in ``x`` to ``u``.
``form`` (:mod:`~sensitivity.analyses.reliability.form`)
    Design points by batched improved HL-RF from many starts and for many events at once, clustered into
    distinct points; ``beta``, ``Pf = Phi(-beta)``, ``alpha``, importance factors, the union of several
    points, ``d beta / d T``.
``sorm`` (:mod:`~sensitivity.analyses.reliability.sorm`)
    Principal curvatures at the design points; Breitung, Hohenbichler-Rackwitz, Tvedt and the paraboloid's
    exact probability.
``monte_carlo``, ``importance_sampling``, ``importance_sampling_events``, ``subset_simulation``
    (:mod:`~sensitivity.analyses.reliability.sampling`): sampling estimates with intervals and coefficients of
    variation; ``importance_sampling_events``: many events, each at its own design points, in few batched calls.
``threshold_limit_state``, ``threshold_events``, ``union``, ``intersection``
    (:mod:`~sensitivity.analyses.reliability.events`):
    outputs x thresholds as one batch of events (a fragility curve from one run); combined events.
"""
from __future__ import annotations

from sensitivity.analyses.reliability.summary import summary
from sensitivity.analyses.reliability.driver import output_hessian, plan, reliability
from sensitivity.analyses.reliability.events import (
    intersection,
    threshold_events,
    threshold_limit_state,
    union,
)
from sensitivity.analyses.reliability.form import FormSettings, form, threshold_sensitivity
from sensitivity.analyses.reliability.search import sphere_starts
from sensitivity.analyses.reliability.sampling import (
    ImportanceSettings,
    MonteCarloSettings,
    SubsetSettings,
    importance_sampling,
    importance_sampling_events,
    monte_carlo,
    subset_simulation,
)
from sensitivity.analyses.reliability.settings import METHODS, ReliabilitySettings, select_outputs
from sensitivity.analyses.reliability.sorm import sorm
from sensitivity.analyses.reliability.standard_space import Nataf, nataf

__all__ = [
    "METHODS",
    "ReliabilitySettings",
    "output_hessian",
    "plan",
    "reliability",
    "select_outputs",
    "summary",
    "FormSettings",
    "ImportanceSettings",
    "MonteCarloSettings",
    "Nataf",
    "SubsetSettings",
    "form",
    "importance_sampling",
    "importance_sampling_events",
    "intersection",
    "monte_carlo",
    "nataf",
    "sorm",
    "sphere_starts",
    "subset_simulation",
    "threshold_events",
    "threshold_limit_state",
    "threshold_sensitivity",
    "union",
]
