"""The Gauss-Newton step map: where the fit pulls each point of a stored sweep.

From the values ``F(x)`` and Jacobians ``dF/dx`` already stored for a block of
sweep points (no model call), compute at every point the Gauss-Newton step
toward the observations, the Levenberg-Marquardt (damped) step, the cost
decrease each predicts, and the condition number of the weighted Jacobian. All
points of the block are handled together by stacked :mod:`numpy.linalg` calls;
:func:`step_map_analysis` is that computation block by block, which
:meth:`sensitivity.sweep.stored.StoredSweep.map_to` streams into a file (memory ``O(N m n)`` per block, resumable).

With the whitened residual ``r = W (F - y)``, whitened Jacobian ``J = W dF/dx``,
column equilibration ``J_s = J diag(1/c)`` (``c`` the column norms, i.e.
Marquardt's scaling ``D = diag(J^T J)``) and ``J_s = U S V^T``:

* Gauss-Newton step ``dx = -diag(1/c) V S^+ U^T r`` (pseudo-inverse, singular
  values below ``rcond * s_max`` dropped): the minimum-norm minimiser of the
  linearised cost; predicted decrease ``|S S^+ U^T r|^2 / 2``.
* Damped step ``dx = -diag(1/c) V S (S^2 + lam)^{-1} U^T r``, the solution of
  ``(J^T J + lam D) dx = -J^T r``; predicted decrease
  ``(|U^T r|^2 - |lam (S^2 + lam)^{-1} U^T r|^2) / 2``.

A sweep of an ensemble that stores each member's values and Jacobians (``store_members``) also gets the steps
and cost of each member's own ``F`` and ``dF/dx``, reported as their mean and standard deviation over the
``K`` members (``ddof=1``): ``gn_step_member_mean``/``_member_std``, ``damped_step_member_*``,
``cost_member_*``; the std is how much the step depends on which member of the surrogate one believes.
The mean-``J`` step beside them is the step of the ensemble's prediction (the members' mean).

References
----------
Marquardt, D. W. (1963). An algorithm for least-squares estimation of nonlinear
parameters. J. SIAM 11(2), 431-441. https://doi.org/10.1137/0111030
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from sensitivity.analyses.calibration.observation_model import ObservationModel
from sensitivity.analyses.calibration.statistics import equilibrated_svd
from sensitivity.datasets.build import PER_MEMBER
from sensitivity.errors import ConfigError, DataError
from sensitivity.outputs.labels import axis_units_attrs, cost_units, parameter_coords
from sensitivity.runtime.lazy import lazy_import
from sensitivity.sweep.stored import BlockAnalysis, StoredSweep, SweepBlock

xr = lazy_import("xarray")


@dataclass(frozen=True)
class GaussNewtonMap:
    """Gauss-Newton quantities of one block of N sweep points (NaN where the point is non-finite).

    Attributes
    ----------
    step
        ``[N, n]`` Gauss-Newton step, parameter units.
    damped_step
        ``[N, n]`` Levenberg-Marquardt step with Marquardt scaling, parameter units.
    cost
        ``[N]`` cost ``|r|^2 / 2`` at the point.
    predicted_decrease
        ``[N]`` decrease of the linearised cost along ``step``.
    damped_predicted_decrease
        ``[N]`` decrease of the linearised cost along ``damped_step``.
    condition_number
        ``[N]`` condition number of the column-equilibrated weighted Jacobian (inf: rank-deficient).
    rank
        ``[N]`` numerical rank of the weighted Jacobian.
    known_noise
        Whether the cost is in whitened (dimensionless) units.
    """

    step: np.ndarray
    damped_step: np.ndarray
    cost: np.ndarray
    predicted_decrease: np.ndarray
    damped_predicted_decrease: np.ndarray
    condition_number: np.ndarray
    rank: np.ndarray
    known_noise: bool

    def to_dataset(
        self,
        parameter_names: Sequence[str] | None = None,
        parameter_units: Sequence[str] | None = None,
        sample_dim: str = "sample",
        output_units: str | Sequence[str] | None = None,
    ) -> xr.Dataset:
        """The block as a labeled dataset on ``(sample_dim, parameter)``.

        ``output_units`` (one string, or per flat output) give the cost's units with unknown noise:
        the squared output units (:func:`sensitivity.outputs.labels.cost_units`); whitened costs are ``1``.
        """
        n = self.step.shape[1]
        names = list(parameter_names) if parameter_names is not None else [f"p{i}" for i in range(n)]
        units = list(parameter_units) if parameter_units is not None else None
        if len(names) != n or (units is not None and len(units) != n):
            raise ConfigError(f"`parameter_names`/`parameter_units` must have {n} entries, got {len(names)}")
        step_attrs = axis_units_attrs(units, "parameter")
        cost_attrs = cost_units(output_units, whitened=self.known_noise)
        sp = (sample_dim, "parameter")
        data = {
            "gn_step": (sp, self.step, {"long_name": "Gauss-Newton step toward the observations", **step_attrs}),
            "damped_step": (sp, self.damped_step, {"long_name": "Levenberg-Marquardt step (Marquardt scaling)",
                                                   **step_attrs}),
            "cost": ((sample_dim,), self.cost, {"long_name": "half the squared norm of the whitened residuals",
                                                **cost_attrs}),
            "predicted_decrease": ((sample_dim,), self.predicted_decrease,
                                   {"long_name": "cost decrease predicted along the Gauss-Newton step", **cost_attrs}),
            "damped_predicted_decrease": ((sample_dim,), self.damped_predicted_decrease,
                                          {"long_name": "cost decrease predicted along the damped step",
                                           **cost_attrs}),
            "condition_number": ((sample_dim,), self.condition_number,
                                 {"long_name": "condition number of the column-equilibrated weighted Jacobian",
                                  "units": "1"}),
            "rank": ((sample_dim,), self.rank, {"long_name": "numerical rank of the weighted Jacobian", "units": "1"}),
        }
        return xr.Dataset({k: xr.Variable(d, v, a) for k, (d, v, a) in data.items()},
                          coords=parameter_coords(names, units))


def gauss_newton_map(
    values: np.ndarray,
    jacobian: np.ndarray,
    y_obs: np.ndarray,
    *,
    sigma: np.ndarray | float | None = None,
    cov: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    damping: float = 1e-3,
    rcond: float = 1e-8,
    output_names: Sequence[str] | None = None,
) -> GaussNewtonMap:
    """Gauss-Newton and damped steps at every stored point of a block.

    Parameters
    ----------
    values
        ``[N, m]`` model outputs at the points, output units.
    jacobian
        ``[N, m, n]`` Jacobians at the points, output units per parameter unit.
    y_obs
        ``[m]`` observations (NaN = missing).
    sigma, cov, mask
        Observation errors and mask, as in :func:`~sensitivity.analyses.calibration.calibrate`.
    damping
        Levenberg-Marquardt ``lam`` relative to Marquardt's scaling (dimensionless, > 0).
    rcond
        Relative singular-value cutoff for the Gauss-Newton pseudo-inverse and the rank.
    output_names
        Names for error messages.

    Returns
    -------
    GaussNewtonMap
        Arrays over the N points; ``.to_dataset(names, units)`` labels them.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[1.0], [3.0]])                 # two sweep points, one parameter
    >>> values, jac = 2.0 * x, np.full((2, 1, 1), 2.0)  # model F(x) = 2 x
    >>> gauss_newton_map(values, jac, np.array([4.0])).step[:, 0]  # both pulled to x = 2
    array([ 1., -1.])
    """
    f = np.asarray(values, dtype=float)
    jac = np.asarray(jacobian, dtype=float)
    if f.ndim != 2 or jac.ndim != 3 or jac.shape[:2] != f.shape:
        raise DataError(f"`values` [N, m] and `jacobian` [N, m, n] disagree: {list(f.shape)} and {list(jac.shape)}")
    if not isinstance(damping, (int, float)) or not 0 < damping < np.inf:
        raise ConfigError(f"`damping` must be > 0, got {damping!r}")
    if not isinstance(rcond, (int, float)) or not 0 < rcond < 1:
        raise ConfigError(f"`rcond` must lie in (0, 1), got {rcond!r}")
    obs = ObservationModel.from_arrays(y_obs, sigma=sigma, cov=cov, mask=mask, output_names=output_names)
    if obs.y_obs.size != f.shape[1]:
        raise DataError(f"`y_obs` has {obs.y_obs.size} outputs but `values` has {f.shape[1]}")
    r = obs.residual(f)
    jw = obs.jacobian(jac)
    finite = np.all(np.isfinite(r), axis=1) & np.all(np.isfinite(jw), axis=(1, 2))
    svd = equilibrated_svd(np.where(finite[:, None, None], jw, np.nan))
    s = svd.singular_values
    p = svd.u.shape[2]
    coeff = np.pad(np.einsum("kmp,km->kp", svd.u, np.where(finite[:, None], r, np.nan)), ((0, 0), (0, s.shape[1] - p)))
    rank = svd.rank(rcond)
    keep = np.arange(s.shape[1])[None, :] < rank[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        gn_filter = np.where(keep, 1.0 / s, 0.0)
    damped_filter = s / (s**2 + damping)

    def to_step(filt: np.ndarray) -> np.ndarray:
        return -np.einsum("kji,kj->ki", svd.vt, filt * coeff) / svd.scale

    residual_part = damping / (s**2 + damping) * coeff
    return GaussNewtonMap(
        step=to_step(gn_filter),
        damped_step=to_step(damped_filter),
        cost=np.where(finite, 0.5 * np.sum(np.where(finite[:, None], r, 0.0) ** 2, axis=1), np.nan),
        predicted_decrease=np.where(finite, 0.5 * np.sum(np.where(keep, coeff, 0.0) ** 2, axis=1), np.nan),
        damped_predicted_decrease=0.5 * (np.sum(coeff**2, axis=1) - np.sum(residual_part**2, axis=1)),
        condition_number=svd.condition_number(),
        rank=np.where(finite, rank, -1).astype(np.int32),
        known_noise=obs.known_noise,
    )


# ----------------------------------------------------------------------------- over a stored sweep
def step_map_block(blk: SweepBlock, sweep: StoredSweep, y_obs: np.ndarray, **options: Any) -> xr.Dataset:
    """:func:`gauss_newton_map` of one block of a stored sweep, labeled on ``(sample, parameter)`` with the points ``x``.

    Parameters
    ----------
    blk
        Samples of ``sweep`` (:meth:`~sensitivity.sweep.stored.StoredSweep.blocks`); their stored values
        and Jacobians are used, the model is not called.
    sweep
        The stored sweep the block comes from (its output spec and parameter labels).
    y_obs, **options
        Observations and keyword arguments (``sigma``, ``cov``, ``mask``, ``damping``, ``rcond``) of
        :func:`gauss_newton_map`, on the sweep's flat outputs (C order).
    """
    x, values, jacobian = blk.flat(sweep.output)
    result = gauss_newton_map(values, jacobian, y_obs, output_names=sweep.output.flat_names(), **options)
    part = result.to_dataset(sweep.parameter_names, sweep.parameter_units, output_units=sweep.output.flat_units())
    part = part.assign_coords(sample=blk.data["sample"])
    part["x"] = xr.Variable(("sample", "parameter"), x, blk.data["x"].attrs)
    if sweep.members:
        part = part.assign(member_spread(blk, sweep, part, y_obs, **options))
    return part


#: The step map's variables whose spread over the members :func:`member_spread` reports.
MEMBER_SPREAD = {"gn_step": "step", "damped_step": "damped_step", "cost": "cost"}


def member_spread(blk: SweepBlock, sweep: StoredSweep, part: xr.Dataset, y_obs: np.ndarray,
                  **options: Any) -> dict[str, xr.Variable]:
    """Mean and standard deviation (``ddof=1``) over the members of the steps and cost of each member's own values
    and Jacobians stored in the block (a sweep with :attr:`~sensitivity.sweep.stored.StoredSweep.members`).

    ``part`` is the block's mean-``J`` step map (:func:`step_map_block`), whose variables lend their dims and
    units; returns ``<variable>_member_mean`` and ``<variable>_member_std`` for each of :data:`MEMBER_SPREAD`.
    """
    _, values, jacobian = blk.flat(sweep.output, members=True)  # [N, K, m], [N, K, m, n]
    n_points, k = values.shape[:2]
    each = gauss_newton_map(values.reshape(n_points * k, -1), jacobian.reshape(n_points * k, *jacobian.shape[2:]),
                            y_obs, output_names=sweep.output.flat_names(), **options)
    out = {}
    for name, field in MEMBER_SPREAD.items():
        per_member = getattr(each, field)
        stacked = per_member.reshape(n_points, k, *per_member.shape[1:])
        var = part[name].variable
        for stat, data, what in (("mean", stacked.mean(axis=1), "mean"),
                                 ("std", stacked.std(axis=1, ddof=1), "standard deviation (ddof=1)")):
            long_name = f"{var.attrs['long_name']}: {what} over the {k} members' own values and Jacobians"
            out[f"{name}_member_{stat}"] = xr.Variable(var.dims, data, {**var.attrs, "long_name": long_name})
    return out


def member_steps_note(sweep: StoredSweep) -> str | None:
    """What the step map of ``sweep`` says of the ensemble's members: the per-member variables it has, or, for a
    sweep with only the members' spread of the Jacobian, that per-member steps need ``store_members``;
    None for a sweep of one model."""
    if sweep.members:
        return (f"the Gauss-Newton and damped steps and the cost of each of the {sweep.members} members' own values "
                "and Jacobians: their mean and std over the members in *_member_mean, *_member_std")
    if sweep.surrogate_std:
        return ("none per member: the sweep stores the members' spread of the Jacobian (jacobian_surrogate_std), not "
                "each member's Jacobians; sweep with store_members=true for the spread of the steps")
    return None


def step_map_analysis(
    sweep: StoredSweep,
    y_obs: np.ndarray,
    *,
    sigma: np.ndarray | float | None = None,
    cov: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    damping: float = 1e-3,
    rcond: float = 1e-8,
) -> BlockAnalysis:
    """The step map of ``sweep`` toward ``y_obs`` as a block analysis: :func:`step_map_block` on every block, for
    :meth:`~sensitivity.sweep.stored.StoredSweep.map_to` to stream into a file (memory ``O(block m n)``,
    verified, resumable).

    Parameters
    ----------
    sweep
        The stored sweep; refused by ``map_to`` when it does not match its checksum record.
    y_obs, sigma, cov, mask, damping, rcond
        As for :func:`gauss_newton_map`, on the sweep's flat outputs (C order).

    Returns
    -------
    BlockAnalysis
        Each block -> ``gn_step``, ``damped_step``, ``cost``, ... on ``(sample, parameter)`` and the points ``x``;
        for a sweep that stores each member's values and Jacobians, also their steps' and cost's member mean and
        std (:func:`member_spread`).
    """
    options = dict(sigma=sigma, cov=cov, mask=mask, damping=damping, rcond=rcond)
    read = [sweep.output.name, "jacobian"]  # not the members' std of an ensemble's sweep: half its bytes
    read += [name + PER_MEMBER for name in read] if sweep.members else []
    return BlockAnalysis(lambda blk: step_map_block(blk, sweep, y_obs, **options), variables=["x", *read],
                         name="step map")
