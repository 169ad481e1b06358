"""Each parameter's (or parameter group's) contribution to each forecast's variance, as pyEMU defines it.

pyEMU's ``Schur.get_par_contribution`` treats a group ``g`` of parameters as perfectly known: it conditions the
prior on them (``C_p|g = C_kk - C_kg C_gg^-1 C_gk`` over the kept parameters ``k``), drops their columns from
``J`` and their rows from ``y``, and recomputes the prior and posterior forecast variances of that smaller
problem. The *contribution* of ``g`` is the drop of the posterior forecast variance from the full problem's,
``y^T P y - y_k^T P_k|g y_k`` (White et al. 2016; PREDUNC4/PREDVAR4 of PEST, Doherty 2015). Both the
conditional prior and posterior are returned, as ``include_prior_results=True`` does in pyEMU.

The conditional prior factor is the trailing block of the Cholesky factor of ``C_p`` with ``g`` ordered first
(Cholesky *is* the stable Schur complement: no subtraction is formed), and the reduced problem is solved in the
whitened form of :mod:`.linear`; for a diagonal prior the conditioning is just dropping the rows.

References
----------
White, J. T., Fienen, M. N., and Doherty, J. E. (2016). A python framework for environmental model uncertainty
analysis. Environmental Modelling & Software 85, 217-228. https://doi.org/10.1016/j.envsoft.2016.08.017

Doherty, J. (2015). Calibration and Uncertainty Analysis for Complex Environmental Models. Watermark Numerical
Computing, Brisbane. ISBN 978-0-9943786-0-6.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sensitivity.analyses.worth.groups import GroupSpec, resolve_groups
from sensitivity.analyses.worth.linear import FOSM, information_factor
from sensitivity.errors import ConfigError


@dataclass(frozen=True)
class Contributions:
    """Forecast variances with each parameter group perfectly known.

    Attributes
    ----------
    group_names
        ``[n_groups]`` names of the groups (the parameters' own names when each is its own group).
    forecast_names
        ``[n_fore]`` forecast names.
    base_prior_variance, base_posterior_variance
        ``[n_fore]`` the full problem's prior and posterior forecast variances [forecast units squared].
    prior_variance, posterior_variance
        ``[n_groups, n_fore]`` prior and posterior forecast variances conditional on each group being known
        (pyEMU's ``get_par_contribution`` rows) [forecast units squared].
    """

    group_names: tuple[str, ...]
    forecast_names: tuple[str, ...]
    base_prior_variance: np.ndarray
    base_posterior_variance: np.ndarray
    prior_variance: np.ndarray
    posterior_variance: np.ndarray

    @property
    def contribution(self) -> np.ndarray:
        """``[n_groups, n_fore]`` drop of each posterior forecast variance when the group is known (>= 0)."""
        return self.base_posterior_variance[None, :] - self.posterior_variance


def parameter_contributions(problem: FOSM, groups: GroupSpec = None) -> Contributions:
    """Prior and posterior forecast variances with each parameter group perfectly known.

    Parameters
    ----------
    problem
        The linear problem (:func:`~sensitivity.analyses.worth.linear.fosm`).
    groups
        Group name -> parameter names or positions; ``None`` (default) makes each parameter its own group.

    Returns
    -------
    Contributions

    Raises
    ------
    ConfigError
        An unknown parameter, an empty group, or a group holding every parameter (at least one must stay
        uncertain, as in pyEMU).
    """
    names, members = resolve_groups(groups, problem.parameter_names, "groups")
    n_par = len(problem.parameter_names)
    prior = np.empty((len(names), len(problem.forecast_names)))
    posterior = np.empty_like(prior)
    for row, (name, known) in enumerate(zip(names, members)):
        if known.size == n_par:
            raise ConfigError(f"groups {name!r} holds every parameter; at least one must remain uncertain")
        keep = np.setdiff1d(np.arange(n_par), known)
        order = np.concatenate([known, keep])
        # trailing block of chol(C_p) with the known parameters first: L_kk L_kk^T = C_kk - C_kg C_gg^-1 C_gk
        lower = np.linalg.cholesky(problem.prior_covariance[np.ix_(order, order)])[known.size:, known.size:]
        fore = problem.forecasts[keep]
        info = information_factor(problem.whitened_jacobian[:, keep] @ lower)
        prior[row] = np.sum((lower.T @ fore) ** 2, axis=0)
        posterior[row] = np.sum(np.linalg.solve(info.T, lower.T @ fore) ** 2, axis=0)
    return Contributions(group_names=names, forecast_names=problem.forecast_names,
                         base_prior_variance=problem.prior_variance,
                         base_posterior_variance=problem.posterior_variance,
                         prior_variance=prior, posterior_variance=posterior)
