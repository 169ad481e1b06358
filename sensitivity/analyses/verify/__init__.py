"""Verification of an analysis against the simulator: its surrogate error at the points it depends on, a verdict.

:mod:`.checks` holds one check per analysis (:func:`verify_calibration`, :func:`verify_posterior`,
:func:`verify_sobol`), :mod:`.reliability` and :mod:`.propagation` (:func:`verify_propagation`: a propagation's
Monte Carlo moments against the simulator's, anchored by control variates) and :mod:`.anchored_pf` (the
simulator's failure probabilities from a few of its runs on a reliability analysis's proposal, the estimator the
reliability check judges by, as an answer with its interval); :class:`VerifyPlan` says how many of an
analysis's points are verified (:class:`RefinePlan`: how many runs refinement may add); :func:`refine` adds simulator
runs where an ensemble's members disagree most on those points and retrains, until the verdict holds or the rounds
are spent; :class:`VerdictSettings` says when a value is flagged (:mod:`.verdict`).
"""
from __future__ import annotations

from sensitivity.analyses.verify.checks import (VERDICT, gaussian_log_likelihood, verify_calibration,
                                                verify_posterior, verify_sobol)
from sensitivity.analyses.verify.plan import RefinePlan, VerifyPlan
from sensitivity.analyses.verify.propagation import verify_propagation
from sensitivity.analyses.verify.refine import refine
from sensitivity.analyses.verify.verdict import VerdictSettings

#: The package's face: its verbs, their settings and the result constants (helpers are imported from their modules).
__all__ = [
    "RefinePlan", "VERDICT", "VerdictSettings", "VerifyPlan", "gaussian_log_likelihood", "refine",
    "verify_calibration", "verify_posterior", "verify_propagation", "verify_sobol"
]
