"""Multifidelity estimators: the simulator's answer at a small simulator budget, the surrogate's speed for the rest.

Plain numpy on arrays of model values, the high fidelity being the simulator and the low fidelity the
surrogate, evaluated on nested samples (the surrogate's first rows are the simulator's points):

- :mod:`~sensitivity.analyses.multifidelity.allocation`: the MFMC split of a budget from pilot runs
  (:func:`allocate`, settings :class:`Allocation`, result :class:`AllocationResult`);
- :mod:`~sensitivity.analyses.multifidelity.control_variates`: control-variate (MFMC = ACV-MF = ACV-IS for one
  surrogate) mean, variance and covariance of every output (:func:`estimate_mean`, :func:`estimate_variance`,
  :func:`estimate_covariance`; :class:`ControlVariate`, :class:`CVResult`);
- :mod:`~sensitivity.analyses.multifidelity.sobol`: multifidelity main and total Sobol' indices on a pick-freeze
  design (:func:`sobol_indices`; :class:`MFSobol`, :class:`MFSobolResult`);
- :mod:`~sensitivity.analyses.multifidelity.importance_sampling`: multifidelity importance sampling of a failure
  probability (:func:`failure_probability`; :class:`MFImportanceSampling`, :class:`MFISResult`);
- :mod:`~sensitivity.analyses.multifidelity.study`: the study verb (:func:`multifidelity`, settings
  :class:`MultifidelityStudy`): pilot, allocation, anchored moments and indices of every output beside the
  surrogate's, as a labeled dataset (:mod:`~sensitivity.analyses.multifidelity.dataset`) with its
  :func:`~sensitivity.analyses.multifidelity.summary.summary`.

The estimators take arrays; the study verb takes the surrogate's values and a simulator callable (the caller
records its runs: :func:`sensitivity.simulators.runner.run_simulator`) and writes no file. The simulator's failure
probabilities of a reliability analysis's events live with the check that judges by the same estimator,
:mod:`sensitivity.analyses.verify.anchored_pf` (the verify package uses this one's estimators, not the reverse).
"""
from __future__ import annotations

from sensitivity.analyses.multifidelity.allocation import Allocation, AllocationResult, allocate
from sensitivity.analyses.multifidelity.control_variates import (ControlVariate, CVResult, estimate_covariance,
                                                                 estimate_mean, estimate_variance)
from sensitivity.analyses.multifidelity.importance_sampling import (MFImportanceSampling, MFISResult,
                                                                    failure_probability)
from sensitivity.analyses.multifidelity.sobol import MFSobol, MFSobolResult, sobol_indices
from sensitivity.analyses.multifidelity.study import MultifidelityStudy, multifidelity
from sensitivity.analyses.multifidelity.summary import summary

__all__ = [
    "Allocation", "AllocationResult", "CVResult", "ControlVariate", "MFISResult", "MFImportanceSampling",
    "MFSobol", "MFSobolResult", "MultifidelityStudy", "allocate", "estimate_covariance", "estimate_mean",
    "estimate_variance", "failure_probability", "multifidelity", "sobol_indices", "summary",
]
