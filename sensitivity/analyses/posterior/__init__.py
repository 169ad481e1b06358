"""Posterior sampling of a calibration problem with exact gradients (NUTS), beyond the Laplace approximation.

* :mod:`.density`: the posterior as a compiled float64 log-density (observation model, priors, bounds and
  log parameters through bijectors, Laplace preconditioning);
* :mod:`.priors`: the space's marginals (scipy families, truncated on either side) as TF log-densities, and
  the TF-free check that a space's families have one;
* :mod:`.nuts`: many TensorFlow Probability NUTS chains in one XLA-compiled call;
* :mod:`.diagnostics`: split R-hat, bulk and tail ESS, MCSE (Vehtari et al. 2021);
* :mod:`.driver`: the verb :func:`sample_posterior` and the dataset it returns.
"""
from __future__ import annotations

from sensitivity.analyses.posterior.density import (LogPosterior, Prior, Support, flat_prior, gaussian_prior,
                                                    log_posterior, space_prior)
from sensitivity.analyses.posterior.diagnostics import ESS_MIN, RHAT_MAX, Diagnostics, diagnose
from sensitivity.analyses.posterior.nuts import NUTS, Chains, run_nuts
from sensitivity.analyses.posterior.driver import (PosteriorError, PosteriorWarning, Sampling, check_proper,
                                                   initial_points, sample_posterior)
from sensitivity.analyses.posterior.priors import FAMILIES, check_prior_families

#: The package's face: its verbs, their settings and the result constants (helpers are imported from their modules).
__all__ = [
    "ESS_MIN", "FAMILIES", "NUTS", "PosteriorError", "PosteriorWarning", "Prior", "RHAT_MAX", "Sampling", "Support",
    "sample_posterior"
]
