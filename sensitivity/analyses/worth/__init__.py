"""Linear (FOSM) data-worth analysis: posterior forecast variances, parameter contributions, observation worth.

The math of pyEMU's ``Schur`` (White et al. 2016) on plain arrays, for a linear Gaussian model ``d = J x + e``
with prior ``C_p``, noise ``C_e`` and forecast sensitivities ``y``:

* :mod:`.linear` — :func:`fosm`: the posterior parameter covariance (whitened QR form, no inverse of ``C_p``),
  prior and posterior forecast variances and their reduction;
* :mod:`.contributions` — :func:`parameter_contributions`: forecast variances with each parameter (group)
  perfectly known (``get_par_contribution``);
* :mod:`.data_worth` — :func:`removed_importance` (``get_removed_obs_importance``), :func:`added_importance`
  (``get_added_obs_importance``, batched low-rank updates for hundreds of candidates) and
  :func:`next_most_important` (``next_most_important_added_obs``; also D- and A-optimal greedy designs);
* :mod:`.settings` — :class:`DesignSettings` (criterion, ``k``, forecast);
* :mod:`.groups` — named groups of parameters, observations or candidates;
* :mod:`.plan` — :class:`WorthSettings` (forecasts as :mod:`sensitivity.outputs.functionals`, candidates, their
  noise, grouping by an output dim) and every check that needs no model;
* :mod:`.driver` — the verb :func:`worth` at the calibration's best fit on a compiled surrogate, and averaged over
  posterior draws; :mod:`.dataset` — its labeled dataset on the model's output dims and :func:`summary`;
* :mod:`.ensemble` — :func:`worth_ensemble`: on an ensemble surrogate, the mean's, each member's, their spread and
  whether the members rank the data alike.

References
----------
White, J. T., Fienen, M. N., and Doherty, J. E. (2016). A python framework for environmental model uncertainty
analysis. Environmental Modelling & Software 85, 217-228. https://doi.org/10.1016/j.envsoft.2016.08.017
"""
from __future__ import annotations

from sensitivity.analyses.worth.contributions import Contributions, parameter_contributions
from sensitivity.analyses.worth.data_worth import (Design, ObservationWorth, added_importance, next_most_important,
                                                   removed_importance)
from sensitivity.analyses.worth.linear import FOSM, fosm
from sensitivity.analyses.worth.summary import summary
from sensitivity.analyses.worth.driver import worth
from sensitivity.analyses.worth.ensemble import worth_ensemble
from sensitivity.analyses.worth.plan import WorthSettings
from sensitivity.analyses.worth.settings import DesignSettings

__all__ = [
    "FOSM",
    "Contributions",
    "Design",
    "DesignSettings",
    "ObservationWorth",
    "WorthSettings",
    "added_importance",
    "fosm",
    "next_most_important",
    "parameter_contributions",
    "removed_importance",
    "summary",
    "worth",
    "worth_ensemble",
]
