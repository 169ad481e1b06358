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
  probability (:func:`failure_probability`; :class:`MFImportanceSampling`, :class:`MFISResult`).

The package imports nothing of the library but :mod:`sensitivity.errors`; wiring it to the engine, the
simulator runner and the workflows comes later.
"""
from __future__ import annotations

from sensitivity.analyses.multifidelity.allocation import Allocation, AllocationResult, allocate
from sensitivity.analyses.multifidelity.control_variates import (ControlVariate, CVResult, estimate_covariance,
                                                                 estimate_mean, estimate_variance)
from sensitivity.analyses.multifidelity.importance_sampling import (MFImportanceSampling, MFISResult,
                                                                    failure_probability)
from sensitivity.analyses.multifidelity.sobol import MFSobol, MFSobolResult, sobol_indices

__all__ = [
    "Allocation", "AllocationResult", "CVResult", "ControlVariate", "MFISResult", "MFImportanceSampling", "MFSobol",
    "MFSobolResult", "allocate", "estimate_covariance", "estimate_mean", "estimate_variance", "failure_probability",
    "sobol_indices",
]
