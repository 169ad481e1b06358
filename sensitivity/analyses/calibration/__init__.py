"""Batched calibration: trust region / Levenberg-Marquardt / Gauss-Newton over many starts at once; step maps.

The fit minimises the weighted least-squares cost (half the squared norm of the
whitened residuals, plus whitened prior rows for a MAP fit)::

    cost(x) = 1/2 |L^{-1} (F(x) - y)|^2 + 1/2 |L_p^{-1} (x - mu_p)|^2

with ``L L^T`` the observation covariance (``diag(sigma^2)`` or ``cov``, restricted
to the observed outputs) and ``L_p L_p^T`` the prior covariance.

Modules, in the order a fit uses them:

* :mod:`.observation_model` — observations, which of them count, their whitening ``L^{-1}``;
* :mod:`.problem` — bounds, log-space parameters, prior; whitened residuals and Jacobians;
* :mod:`.solvers` — the immutable solver settings and the rules in which they differ; statuses;
* :mod:`.model_calls` — the checked, blocked calls of the user's batched model;
* :mod:`.iteration` — the batched multi-start loop (bounds by projection) and its history;
* :mod:`.statistics` — covariance, standard errors, identifiability, bands, distinct minima;
* :mod:`.dataset` — the labeled result of :func:`calibrate`;
* :mod:`.driver` — :func:`calibrate`, the verb that strings them together, ``calibrate(model, observations,
  Fit(...), starts=..., space=...)``, and its settings :class:`Fit`;
* :mod:`.emulator` — :func:`calibrate_ensemble`: an ensemble surrogate's members calibrated each, and its
  predictive variance as emulator variance in the observation model (Kennedy & O'Hagan 2001);
* :mod:`.step_map` — Gauss-Newton steps at every point of a stored sweep (no model call);
* :mod:`.step_slice` — the step map on a 2-D slice through the estimate, with the basin of the best minimum.
"""
from __future__ import annotations

from sensitivity.analyses.calibration.driver import CalibrationError, Emulator, Fit, calibrate
from sensitivity.analyses.calibration.emulator import calibrate_ensemble, emulator_covariance
from sensitivity.analyses.callables import BatchedModel, ValueAndJacobianFn, ValuesFn
from sensitivity.analyses.calibration.observation_model import ObservationModel
from sensitivity.analyses.calibration.solvers import (FAILED, STATUS_MESSAGES, GaussNewton, LevenbergMarquardt, Solver,
                                                      Status, TrustRegion)
from sensitivity.analyses.calibration.statistics import (EquilibratedSVD, correlation, delta_method_std,
                                                         distinct_minima, equilibrated_svd, identifiability,
                                                         minimum_points, pseudo_inverse_covariance)
from sensitivity.analyses.calibration.step_map import (GaussNewtonMap, gauss_newton_map, member_steps_note,
                                                       step_map_block, step_map_analysis)
from sensitivity.analyses.calibration.step_slice import StepSlice, least_identifiable, slice_box, step_slice

#: The package's face: its verbs, their settings and the result constants (helpers are imported from their modules).
__all__ = [
    "BatchedModel", "CalibrationError", "Emulator", "FAILED", "Fit", "GaussNewton", "GaussNewtonMap",
    "LevenbergMarquardt", "ObservationModel", "STATUS_MESSAGES", "Status", "StepSlice", "TrustRegion", "calibrate", "calibrate_ensemble",
    "step_map_analysis", "step_slice"
]
