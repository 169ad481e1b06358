"""Active subspaces of every output (or of one weighted sum of outputs) from exact Jacobians.

For a scalar quantity ``f`` and inputs ``z`` normalised per parameter, the matrix
``C = E[grad_z f grad_z f^T] = W Lambda W^T`` (Constantine, Dow & Wang 2014,
doi:10.1137/130916138) has eigenvalues ``lambda_1 >= ... >= lambda_n`` (the mean
squared directional derivative along each eigenvector ``w_j``); a large gap after
``lambda_k`` says ``f`` varies mostly along ``w_1 .. w_k``. The activity score of
parameter ``i`` is ``alpha_i = sum_{j <= k} lambda_j w_ij^2`` (Constantine & Diaz
2017, doi:10.1016/j.ress.2017.01.013); with ``k = n`` it equals ``C_ii``, the DGSM
``nu_i`` of the normalised input.

``C`` is estimated by the sample mean over points drawn from the input distribution
(:func:`sample`); eigenvalue intervals come from the randomised-QMC replicates of that sample
(or a bootstrap over the points; :mod:`~sensitivity.analyses.indices.intervals`).

Dependent inputs (a correlation matrix in the space): ``C`` is the expectation under the joint law
(Constantine 2015, doi:10.1137/1.9781611973860, defines it for any input density), estimated on draws
of the space's Gaussian copula; its eigenpairs are the directions of largest mean squared change where
the inputs actually lie, in the same normalised physical coordinates, and ``alpha_i = nu_i`` still holds
for ``k = n``. What assumes independence is not used here: the activity scores are not bounds on Sobol'
indices. The ``inputs`` attribute records which case a result is.
"""
from __future__ import annotations

from typing import Callable, Literal, Sequence

import numpy as np

from sensitivity.analyses.indices import bootstrap, dataset, design, onepass
from sensitivity.analyses.indices.design import Seed
from sensitivity.analyses.indices.dgsm import sample
from sensitivity.analyses.indices.intervals import RQMC, IntervalPlan
from sensitivity.errors import ConfigError
from sensitivity.outputs.labels import axis_coords
from sensitivity.runtime.lazy import lazy_import
from sensitivity.inputs.space import ParameterSpace

xr = lazy_import("xarray")

Normalize = Literal["bounds", "std", "none"]
NORMALIZE_KINDS: tuple[str, ...] = ("bounds", "std", "none")

__all__ = ["Statistics", "analyze", "analyze_model", "input_scale", "sample"]


def input_scale(space: ParameterSpace, normalize: Normalize) -> np.ndarray:
    """``[n]`` factors ``dx/dz`` of the input normalisation, in parameter units.

    ``bounds``: ``z`` in ``[-1, 1]`` across the bounds, factor ``(b - a) / 2`` (Constantine
    2015, doi:10.1137/1.9781611973860); ``std``: ``z`` in standard deviations of the
    input distribution, factor ``sigma``; ``none``: physical inputs, factor 1.
    """
    if normalize == "bounds":
        return np.diff(space.bounds, axis=1)[:, 0] / 2
    if normalize == "std":
        return np.array([p.frozen_distribution().std() for p in space.parameters])
    if normalize == "none":
        return np.ones(len(space))
    raise ConfigError(f"`normalize` must be one of {NORMALIZE_KINDS}, got {normalize!r}")


def analyze(
    jacobian: np.ndarray,
    space: ParameterSpace,
    *,
    weights: Sequence[float] | None = None,
    quantity_name: str = "weighted_sum",
    quantity_units: str | None = None,
    normalize: Normalize = "bounds",
    n_active: int | None = None,
    intervals: IntervalPlan = RQMC,
    output_names: Sequence[str] | None = None,
    output_units: Sequence[str] | None = None,
) -> xr.Dataset:
    """Eigen-decomposition of ``C = E[grad f grad f^T]`` per output, or for ``sum_k weights_k y_k``.

    Parameters
    ----------
    jacobian
        ``[N, m, n]`` exact d(output)/d(parameter) at ``N`` points drawn from the input
        distribution, in output units per parameter unit.
    space
        The parameter space (bounds or spreads for the normalisation).
    weights
        Optional ``[m]`` weights of one scalar quantity ``q = sum_k w_k y_k``; the result
        then has one output named ``quantity_name`` with units ``quantity_units``.
    normalize
        Input normalisation, see :func:`input_scale`.
    n_active
        Dimension ``k`` of the active subspace for the activity scores; by default, per
        output, the ``k`` after which the eigenvalues drop most on a log scale.
    intervals
        The eigenvalues' interval plan (:class:`~sensitivity.analyses.indices.intervals.IntervalPlan`): ``"rqmc"``
        over the ``replicates`` scramblings of :func:`sample`, ``"bootstrap"`` over the ``N``
        points (shared by all outputs), or ``"none"`` (no ``eigenvalue_interval``).
    output_names, output_units
        Labels and UDUNITS-2 units of the ``m`` outputs.

    Returns
    -------
    xarray.Dataset
        ``eigenvalue (direction, output)`` with ``eigenvalue_interval``, ``eigenvector
        (parameter, direction, output)`` (unit vectors in normalised inputs, sign fixed so
        the largest component is positive), ``activity_score (parameter, output)`` and
        ``n_active (output)``.
    """
    plan = intervals.check()
    jac = design.as_jacobian(jacobian, len(space))
    if n_active is not None:
        checked_n_active(n_active, len(space))
    grad, labels = _gradients(jac, space, normalize, weights, quantity_name, quantity_units, output_names,
                              output_units)
    covs = _second_moments(grad, plan.weights(grad.shape[0]))  # [K, m, n, n]
    return _result(covs, space, normalize=normalize, n_active=n_active, plan=plan, n_points=grad.shape[0],
                   weights=weights, **labels)


def analyze_model(
    model: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]],
    space: ParameterSpace,
    n: int,
    *,
    seed: Seed = None,
    weights: Sequence[float] | None = None,
    quantity_name: str = "weighted_sum",
    quantity_units: str | None = None,
    normalize: Normalize = "bounds",
    n_active: int | None = None,
    intervals: IntervalPlan = RQMC,
    block: int = onepass.BLOCK_POINTS,
    output_names: Sequence[str] | None = None,
    output_units: Sequence[str] | None = None,
) -> xr.Dataset:
    """:func:`analyze` of ``model`` on :func:`sample`'s points, in one pass: memory independent of ``n``.

    The points are drawn (:func:`~sensitivity.analyses.indices.onepass.sample_blocks`), evaluated and reduced
    ``block`` at a time into the means ``g_i`` and co-moments ``C_ij`` of the normalised gradient of each
    scrambling (:class:`Statistics`, fed by :func:`~sensitivity.analyses.indices.onepass.evaluate`), whence
    ``E[g_i g_j] = C_ij / N + g_i g_j``; the eigen-decomposition is made at the end. The result is
    :func:`analyze`'s of the same points to float64 round-off, with randomised-QMC intervals or none; bootstrap
    intervals resample all ``n`` points and are refused here.

    Parameters
    ----------
    model
        ``points [b, n] -> (values [b, m], jacobian [b, m, n])`` in physical units.
    space, n, seed
        As :func:`sample`'s (the replicates are ``intervals``').
    weights, quantity_name, quantity_units, normalize, n_active, intervals, output_names, output_units
        As :func:`analyze`'s.
    block
        Points per model call, a power of two.
    """
    plan = intervals.check()
    draws = onepass.Draws.of(plan, n, seed=seed, block=block, what="the one-pass active subspaces make")
    stats = Statistics(space, draws, weights=weights, quantity_name=quantity_name, quantity_units=quantity_units,
                       normalize=normalize, n_active=n_active, intervals=plan, output_names=output_names,
                       output_units=output_units)
    onepass.evaluate(model, space, draws, [stats])
    return stats.result()


class Statistics:
    """:func:`analyze_model`'s statistics over ``draws``, fed block by block
    (a :class:`~sensitivity.analyses.indices.onepass.Reduction`): the means ``g_i`` and co-moments ``C_ij`` of the
    normalised gradient of each scrambling.

    Parameters
    ----------
    space
        The parameter space.
    draws
        The points' size and scramblings (:meth:`~sensitivity.analyses.indices.onepass.Draws.of` of ``intervals``).
    weights, quantity_name, quantity_units, normalize, n_active, intervals, output_names, output_units
        As :func:`analyze`'s; the plan neither the bootstrap nor unchecked.
    """

    def __init__(self, space: ParameterSpace, draws: onepass.Draws, *, weights: Sequence[float] | None = None,
                 quantity_name: str = "weighted_sum", quantity_units: str | None = None,
                 normalize: Normalize = "bounds", n_active: int | None = None, intervals: IntervalPlan,
                 output_names: Sequence[str] | None = None, output_units: Sequence[str] | None = None):
        input_scale(space, normalize)
        if n_active is not None:
            checked_n_active(n_active, len(space))
        self.space, self.n, self.plan = space, draws.n, intervals
        self.options = {"weights": weights, "quantity_name": quantity_name, "quantity_units": quantity_units,
                        "output_names": output_names, "output_units": output_units}
        self.normalize, self.n_active, self.labels = normalize, n_active, {}
        self.upper = np.stack(np.triu_indices(len(space)), axis=1)  # the pairs i <= j of C
        self.stats = onepass.Replicates(draws.n, draws.replicates, self.upper)

    def update(self, values: np.ndarray, jacobian: np.ndarray) -> None:
        """Add the next block's ``jacobian [b, m, n]`` (``values`` unused)."""
        jac = design.as_jacobian(jacobian, len(self.space))
        grad, self.labels = _gradients(jac, self.space, self.normalize, **self.options)
        self.stats.update(np.swapaxes(grad, 1, 2))  # [b, n, m]

    def result(self) -> xr.Dataset:
        """:func:`analyze_model`'s dataset: ``E[g_i g_j] = C_ij / N + g_i g_j``, eigen-decomposed."""
        sets, d, (i, j) = self.stats.sets(), len(self.space), self.upper.T
        means, covs = onepass.stacked_means(sets), onepass.stacked_covariances(sets)  # [K, n, m], [K, q, m]
        second = np.empty((len(sets), d, d, means.shape[-1]))
        second[:, i, j] = covs + means[:, i] * means[:, j]
        second[:, j, i] = second[:, i, j]
        return _result(np.moveaxis(second, 3, 1), self.space, normalize=self.normalize, n_active=self.n_active,
                       plan=self.plan, n_points=self.n, weights=self.options["weights"], **self.labels)


def _gradients(jac: np.ndarray, space: ParameterSpace, normalize: Normalize, weights: Sequence[float] | None,
               quantity_name: str, quantity_units: str | None, output_names: Sequence[str] | None,
               output_units: Sequence[str] | None) -> tuple[np.ndarray, dict[str, Sequence[str] | None]]:
    """``[N, m, n]`` gradients in normalised inputs (of the one quantity with ``weights``), and their labels."""
    grad = jac * input_scale(space, normalize)
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (jac.shape[1],):
            raise ConfigError(f"`weights` must give one weight per output ({jac.shape[1]}), got shape {list(w.shape)}")
        grad = np.einsum("k,nkj->nj", w, grad)[:, None, :]
        output_names, output_units = [quantity_name], None if quantity_units is None else [quantity_units]
    return grad, {"output_names": output_names, "output_units": output_units}


def _result(covs: np.ndarray, space: ParameterSpace, *, normalize: Normalize, n_active: int | None,
            plan: IntervalPlan, n_points: int, weights: Sequence[float] | None,
            output_names: Sequence[str] | None, output_units: Sequence[str] | None) -> xr.Dataset:
    """The dataset of :func:`analyze` from ``covs [K, m, n, n]``: ``E[grad grad^T]`` on all points, then on each
    replicate."""
    m, d = covs.shape[1], covs.shape[2]
    eigenvalues = np.linalg.eigvalsh(covs)[..., ::-1]  # [K, m, n] descending
    values = eigenvalues[0]  # [m, n]
    vectors = _fix_signs(np.linalg.eigh(covs[0])[1][:, :, ::-1])  # [m, n(param), n(dir)]
    k = _active_dimension(values) if n_active is None else np.full(m, checked_n_active(n_active, d))
    keep = np.arange(d)[None, :] < k[:, None]  # [m, n(dir)]
    scores = np.einsum("mj,mij->mi", values * keep, vectors**2)

    units, unit_coords = dataset.units_table(
        "eigenvalue_units", ("output",), _eigen_units(output_units, space.units, normalize),
        "units of the active-subspace eigenvalues",
    )
    ref = next(iter(unit_coords), None)
    coords = {
        **dataset.parameter_axis(space),
        **dataset.output_axis(m, output_names, output_units),
        **axis_coords("direction", [f"w{j + 1}" for j in range(d)]),
        **dataset.BOUND_COORDS,
        **unit_coords,
    }
    data = {
        "eigenvalue": dataset.variable(
            ("direction", "output"), values.T, "active-subspace eigenvalue of C", units, units_coordinate=ref
        ),
        "eigenvector": dataset.variable(
            ("parameter", "direction", "output"), np.moveaxis(vectors, 0, -1),
            f"active-subspace direction in inputs normalised by {normalize}", "1",
        ),
        "activity_score": dataset.variable(
            ("parameter", "output"), scores.T, "activity score sum_{j<=n_active} lambda_j w_ij^2", units,
            units_coordinate=ref,
        ),
        "n_active": xr.Variable("output", k.astype(np.int32), {"long_name": "active subspace dimension", "units": "1"}),
    }
    if plan.kind != "none":
        data["eigenvalue_interval"] = dataset.variable(
            ("direction", "output", "bound"), np.swapaxes(plan.bounds(eigenvalues), 0, 1),
            f"active-subspace eigenvalue, {plan.describe()}", units, units_coordinate=ref,
        )
    attrs = {
        "method": "active subspaces (Constantine et al. 2014) with activity scores (Constantine & Diaz 2017)",
        "references": "doi:10.1137/130916138 doi:10.1016/j.ress.2017.01.013",
        "normalize": normalize,
        "inputs": "dependent (Gaussian copula): C under the joint law" if design.is_correlated(space) else "independent",
        "n_points": n_points,
        **plan.attrs(),
    }
    if weights is not None:
        attrs["quantity_weights"] = np.asarray(weights, dtype=np.float64)
    return xr.Dataset(data, coords=coords, attrs=attrs)


def _second_moments(grad: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``[K, m, n, n]`` weighted means of ``grad grad^T`` over the points, in output chunks of bounded memory."""
    n_points, m, d = grad.shape
    chunk = max(1, bootstrap.CHUNK_ELEMENTS // (n_points * d * d))
    parts = []
    for s in range(0, m, chunk):
        g = grad[:, s : s + chunk]
        parts.append(bootstrap.weighted_mean(weights, g[..., :, None] * g[..., None, :]))
    return np.concatenate(parts, axis=1)


def _fix_signs(vectors: np.ndarray) -> np.ndarray:
    """Flip each eigenvector (columns of ``[m, n, n]``) so its largest-magnitude component is positive."""
    idx = np.argmax(np.abs(vectors), axis=1)[:, None, :]
    return vectors * np.sign(np.take_along_axis(vectors, idx, axis=1))


def _active_dimension(values: np.ndarray) -> np.ndarray:
    """``[m]`` dimension after the largest drop of the descending eigenvalues ``[m, n]`` on a log scale.

    Eigenvalues below ``n eps lambda_1`` are rounding noise of zero and count as that floor.
    """
    if values.shape[1] == 1:
        return np.ones(values.shape[0], dtype=int)
    floor = values.shape[1] * np.finfo(np.float64).eps * np.abs(values[:, :1]) + np.finfo(np.float64).tiny
    logs = np.log(np.maximum(values, floor))
    return np.argmax(logs[:, :-1] - logs[:, 1:], axis=1) + 1


def checked_n_active(n_active: int, d: int) -> int:
    """``n_active`` if it is an integer in ``[1, d]`` (``d`` parameters), else a :class:`ConfigError`."""
    if not isinstance(n_active, (int, np.integer)) or not 1 <= n_active <= d:
        raise ConfigError(f"`n_active` must be an integer in [1, {d}], got {n_active!r}")
    return int(n_active)


def _eigen_units(output_units: Sequence[str] | None, parameter_units: Sequence[str], normalize: str) -> list[str] | None:
    """Units of ``C`` per output: output units squared, per parameter unit squared without normalisation.

    None when unknown, or when ``normalize="none"`` mixes parameters of different units.
    """
    if normalize != "none":
        return dataset.squared_units(output_units)
    if output_units is None or len(set(parameter_units)) != 1:
        return None
    return list(dataset.derivative_table(output_units, parameter_units[:1], squared=True)[:, 0])
