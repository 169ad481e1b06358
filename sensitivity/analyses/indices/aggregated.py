"""Aggregated (generalized) Sobol' indices of a whole output (a series, a field, named scalars) and PCA-based indices.

For an output with many elements ``Y_k`` (the days of a series, the cells of a field), per-element indices
answer "what drives ``Y`` on day 12"; the aggregated index answers "what drives the series as a whole". With
weights ``w_k >= 0`` (e.g. ``cos(lat)`` area weights of a lat/lon field) it is the share of the weighted
total variance (Gamboa, Janon, Klein & Lagnoux 2014, doi:10.1214/14-EJS895, with ``Gamma = diag(w)``)::

    S_i = sum_k w_k Var(E[Y_k | x_i]) / sum_k w_k Var(Y_k) = sum_k w_k V_k S_ik / sum_k w_k V_k

the per-element indices averaged with weights ``w_k V_k``; ``ST_i`` likewise. The reduction runs over the
output dims named in ``over`` (all of them by default); the others are kept, so a ``(species, day)`` output
aggregated over ``day`` has one index per species. The estimator is the ratio of the weighted sums of the
pick-freeze numerators and variances of :mod:`~sensitivity.analyses.indices.sobol` (Saltelli 2010 first
order, Jansen total), on the same design, with the same intervals (each replicate aggregated on its own).

Beside them, PCA-based indices (Lamboni, Monod & Makowski 2011, doi:10.1016/j.ress.2010.12.002): the
weighted principal components of the output over the ``over`` dims (a singular value decomposition of
the centred, ``sqrt(w)``-scaled values of the ``A`` and ``B`` rows), the variance each explains, and the
first-order and total indices of each component's score, projected on every row of the design. Their
variance-weighted mean over all components is the aggregated index.

With a correlation matrix in the space the design is :mod:`~sensitivity.analyses.indices.sobol_dependent`'s
and every index comes as its full and independent first-order and total forms (``S1_full``, ``ST_full``,
``S1_ind``, ``ST_ind``), aggregated the same way.

Weights: none (every element counts alike), ``"area"`` (``cos(latitude)`` along a ``lat``/``latitude`` dim,
or one whose units are ``degrees_north``), or ``{dim: [w, ...]}`` per dim of ``over`` (their product over the
elements). Elements in different units cannot be summed: named scalars with different units are refused
unless explicit weights are given.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from sensitivity.analyses.indices import dataset, design, sobol, sobol_dependent
from sensitivity.analyses.indices.design import Seed
from sensitivity.analyses.indices.intervals import RQMC, IntervalPlan, REPLICATES
from sensitivity.runtime.lazy import lazy_import
from sensitivity.outputs.axes import own_coords
from sensitivity.errors import ConfigError
from sensitivity.outputs.labels import axis_coords, common_units
from sensitivity.outputs.spec import OutputSpec
from sensitivity.inputs.space import ParameterSpace

xr = lazy_import("xarray")

Weights = str | Mapping[str, Sequence[float]] | None

#: Names (and units) that mark a latitude dim for ``weights="area"``.
LATITUDE_NAMES, LATITUDE_UNITS = ("lat", "latitude"), ("degrees_north", "degree_north")


def sample(space: ParameterSpace, n: int, *, seed: Seed = None, replicates: int = REPLICATES) -> np.ndarray:
    """Saltelli's design (:func:`sobol.sample`) for independent inputs, else :func:`sobol_dependent.sample`'s."""
    if design.is_correlated(space):
        return sobol_dependent.sample(space, n, seed=seed, replicates=replicates)
    return sobol.sample(space, n, seed=seed, replicates=replicates)


def resolve_over(spec: OutputSpec, over: Sequence[str] | None) -> tuple[str, ...]:
    """The output dims to aggregate over: all of ``spec``'s by default, else ``over`` (checked)."""
    names = spec.dim_names
    if over is None:
        return names
    over = tuple(over)
    unknown = [d for d in over if d not in names]
    if unknown or len(set(over)) != len(over) or not over:
        raise ConfigError(f"`over` must name distinct output dims among {list(names)}, got {list(over)}")
    return tuple(d for d in names if d in over)  # the model's order


def output_weights(spec: OutputSpec, over: Sequence[str], weights: Weights) -> np.ndarray:
    """``[*sizes of over]`` non-negative weights of the elements aggregated over (see the module docstring)."""
    dims = {d.name: d for d in spec.dims}
    sizes = [dims[name].size for name in over]
    if weights is None:
        if "output" in over and len(set(spec.flat_units())) > 1:
            raise ConfigError(f"`over` sums outputs in different units {sorted(set(spec.flat_units()))}; give "
                              "explicit `weights` (e.g. 1/scale^2 per output) or leave `output` out of `over`")
        return np.ones(sizes)
    if isinstance(weights, str):
        if weights != "area":
            raise ConfigError(f"`weights` must be 'area', a {{dim: [w, ...]}} mapping or null, got {weights!r}")
        lat = [n for n in over if n in LATITUDE_NAMES or dims[n].units in LATITUDE_UNITS]
        if not lat:
            raise ConfigError(f"`weights: area` needs a latitude dim ({'/'.join(LATITUDE_NAMES)}, or units "
                              f"degrees_north) among `over` {list(over)}, got none")
        values = np.asarray(dims[lat[0]].values, dtype=np.float64)
        if (np.abs(values) > 90).any():
            raise ConfigError(f"`weights: area`: latitudes of {lat[0]!r} must lie in [-90, 90] degrees, "
                              f"got {values.min():g} .. {values.max():g}")
        weights = {lat[0]: np.cos(np.deg2rad(values)).clip(0, None)}
    unknown = [k for k in weights if k not in over]
    if unknown:
        raise ConfigError(f"`weights` names dim(s) {unknown} that are not aggregated over ({list(over)})")
    total = np.ones(sizes)
    for axis, name in enumerate(over):
        if name not in weights:
            continue
        w = np.asarray(weights[name], dtype=np.float64)
        if w.shape != (sizes[axis],) or not np.isfinite(w).all() or (w < 0).any():
            raise ConfigError(f"`weights` of {name!r} must be {sizes[axis]} finite numbers >= 0, got "
                              f"{np.asarray(weights[name]).tolist()}")
        total = total * w.reshape([-1 if a == axis else 1 for a in range(len(over))])
    if not total.sum() > 0:
        raise ConfigError("`weights` must not all be 0")
    return total


def analyze(
    values: np.ndarray,
    space: ParameterSpace,
    spec: OutputSpec,
    *,
    over: Sequence[str] | None = None,
    weights: Weights = None,
    n_components: int = 3,
    intervals: IntervalPlan = RQMC,
) -> xr.Dataset:
    """Aggregated Sobol' indices over the output dims ``over`` and PCA-based indices per principal component.

    Parameters
    ----------
    values
        ``[rows, m]`` model values on the rows of :func:`sample`, the ``m = spec.size`` outputs flat in C
        order of ``spec``'s dims.
    space
        The parameter space the design was drawn from (correlated: the dependent design and indices).
    spec
        The model's output description: its dims, coordinates and units.
    over
        Output dims to aggregate over (all by default); the others are kept.
    weights
        ``None``, ``"area"`` or ``{dim: [w, ...]}`` (see the module docstring).
    n_components
        Principal components reported (at most the number of elements aggregated over).
    intervals
        The interval plan, as :func:`sensitivity.analyses.indices.sobol.analyze`'s; the PCA basis is computed once,
        on every row.

    Returns
    -------
    xarray.Dataset
        ``S1``, ``ST`` (or ``S1_full``, ``ST_full``, ``S1_ind``, ``ST_ind``) ``(parameter, *kept)`` with
        ``*_interval``; ``variance (*kept)`` (the weighted mean variance of the elements); ``weight (*over)``;
        ``pca_<index> (parameter, component, *kept)`` with intervals, ``pca_explained_variance`` and
        ``pca_explained_variance_ratio (component, *kept)``, ``pca_loading (component, *over, *kept)``
        (unit vectors in the ``sqrt(w)``-scaled elements, largest entry positive).
    """
    plan = intervals.check()
    if not isinstance(n_components, (int, np.integer)) or isinstance(n_components, bool) or n_components < 1:
        raise ConfigError(f"`n_components` must be an integer >= 1, got {n_components!r}")
    over = resolve_over(spec, over)
    w = output_weights(spec, over, weights)
    y = design.as_values(values)
    if y.shape[1] != spec.size:
        raise ConfigError(f"`values` must have {spec.size} outputs (the model's), got {y.shape[1]}")
    d, dependent = len(space), design.is_correlated(space)
    g = 2 * d if dependent else d
    n = sobol.base_size(y.shape[0], g + 2, g, False)
    grouped = y[:, element_order(spec, over)].reshape(-1, *layout(spec, over))
    reps = sobol.replicate_estimates(grouped.reshape(n, g + 2, -1), g, False, plan)
    c = min(n_components, w.size, 2 * n)
    pca = _principal_components(grouped, n, g, w.ravel(), c, plan)
    return indices_dataset(reps, pca, space, spec, over, w, n, plan=plan, weights=weights)


def element_order(spec: OutputSpec, over: Sequence[str]) -> np.ndarray:
    """``[m]`` the flat outputs (C order of ``spec``'s dims) reordered kept dims first, then the ``over`` dims."""
    kept = [name for name in spec.dim_names if name not in over]
    order = [spec.dim_names.index(x) for x in kept + list(over)]
    return np.arange(spec.size).reshape(spec.shape).transpose(order).ravel()


def layout(spec: OutputSpec, over: Sequence[str]) -> tuple[int, int]:
    """``(k, M)``: the number of kept elements and of elements aggregated over each."""
    sizes = dict(zip(spec.dim_names, spec.shape))
    m_over = int(np.prod([sizes[x] for x in over], dtype=int))
    return spec.size // m_over, m_over


def indices_dataset(reps: dict[str, np.ndarray], pca: dict[str, np.ndarray], space: ParameterSpace,
                    spec: OutputSpec, over: tuple[str, ...], w: np.ndarray, n: int, *, plan: IntervalPlan,
                    weights: Weights) -> xr.Dataset:
    """:func:`analyze`'s dataset from the per-element replicate estimates ``reps`` (``S1``, ``ST`` ``[R, g,
    k M]``, ``variance`` ``[R, k M]``, elements in :func:`element_order`) and the principal components ``pca``
    (:func:`_principal_components`' layout), of a design of ``n`` base rows."""
    d, dependent = len(space), design.is_correlated(space)
    g = 2 * d if dependent else d
    kept = tuple(name for name in spec.dim_names if name not in over)
    k, m_over = layout(spec, over)
    variance = np.nan_to_num(reps["variance"].reshape(-1, k, m_over)) * w.ravel()  # [R, k, M], w V
    total = variance.sum(axis=-1)  # [R, k]
    aggregated = {key: np.einsum("rgkm,rkm->rgk", np.nan_to_num(reps[key].reshape(-1, g, k, m_over)), variance)
                  / total[:, None] for key in ("S1", "ST")}
    sizes = dict(zip(spec.dim_names, spec.shape))
    kept_shape = tuple(sizes[x] for x in kept)
    units = _squared_units(spec)
    data = {
        "variance": dataset.variable(kept, (total[0] / w.sum()).reshape(kept_shape),
                                     "weighted mean output variance sum_k w_k V_k / sum_k w_k", units),
        "weight": dataset.variable(over, w, "weight of the output element in the aggregated indices", "1"),
        "pca_explained_variance": dataset.variable(
            ("component",) + kept, _on_kept(pca["explained"], kept_shape), "variance explained by the principal "
            "component (weighted)", units),
        "pca_explained_variance_ratio": dataset.variable(
            ("component",) + kept, _on_kept(pca["ratio"], kept_shape), "share of the weighted total variance "
            "explained by the principal component", "1"),
        "pca_loading": dataset.variable(
            ("component",) + over + kept, pca["loading"].swapaxes(1, 2).reshape((pca["n"],) + w.shape + kept_shape),
            "principal direction over the sqrt(w)-scaled output elements", "1"),
    }
    for key, columns, estimator, long_name in _indices(d, dependent):
        data.update(sobol.index_variables(
            key, aggregated[estimator][:, columns].reshape((-1, d) + kept_shape), ("parameter",) + kept,
            f"aggregated {long_name} over {', '.join(over) or 'the output'}", plan))
        scores = pca[estimator][:, columns].reshape((-1, d) + kept_shape + (pca["n"],))
        data.update(sobol.index_variables(
            f"pca_{key}", np.moveaxis(scores, -1, 2), ("parameter", "component") + kept,
            f"{long_name} of the principal component's score", plan))
    own = own_coords(spec)
    coords = {
        **dataset.parameter_axis(space),
        **axis_coords("component", [f"pc{j + 1}" for j in range(pca["n"])]),
        **dataset.BOUND_COORDS,
        **{name: var for name, var in own.items() if set(var.dims) <= set(kept + over)},
    }
    attrs = {
        "method": "aggregated Sobol' indices (Gamboa, Janon, Klein & Lagnoux 2014) and PCA-based indices "
                  "(Lamboni, Monod & Makowski 2011)" + (", full and independent forms of dependent inputs "
                                                       "(Mara, Tarantola & Annoni 2015)" if dependent else ""),
        "references": "doi:10.1214/14-EJS895 doi:10.1016/j.ress.2010.12.002"
                      + (" doi:10.1016/j.envsoft.2015.07.010" if dependent else ""),
        "over": " ".join(over),
        "weights": "uniform" if weights is None else weights if isinstance(weights, str) else "explicit",
        "inputs": "dependent (Gaussian copula)" if dependent else "independent",
        "base_sample_size": n,
        **plan.attrs(),
    }
    return xr.Dataset(data, coords=coords, attrs=attrs)


def _indices(d: int, dependent: bool) -> list[tuple[str, slice, str, str]]:
    """``(variable, pick-freeze columns, estimator key, long name)`` of the indices of the design."""
    if not dependent:
        return [("S1", slice(0, d), "S1", "first-order Sobol' index"), ("ST", slice(0, d), "ST", "total Sobol' index")]
    return [(key, slice(0, d) if columns == "full" else slice(d, 2 * d), estimator, long_name)
            for key, columns, estimator, long_name in sobol_dependent.INDICES]


def _principal_components(grouped: np.ndarray, n: int, g: int, w: np.ndarray, c: int,
                          plan: IntervalPlan) -> dict[str, np.ndarray]:
    """Weighted PCA of ``grouped [rows, k, M]`` per kept element on the ``A``/``B`` rows, and its scores' indices.

    Returns ``explained``/``ratio`` ``[c, k]``, ``loading`` ``[c, k, M]``, ``S1``/``ST`` ``[R, g, k * c]``
    (component fastest) and ``n`` = ``c``.
    """
    blocks = grouped.reshape(n, g + 2, *grouped.shape[1:])
    basis = np.concatenate([blocks[:, 0], blocks[:, -1]])  # [2n, k, M]
    mean, root = basis.mean(axis=0), np.sqrt(w)
    explained, ratio, loading, scores = [], [], [], []
    for j in range(grouped.shape[1]):
        _, s, vt = np.linalg.svd((basis[:, j] - mean[j]) * root, full_matrices=False)
        vt = vt[:c] * np.sign(np.take_along_axis(vt[:c], np.argmax(np.abs(vt[:c]), axis=1)[:, None], axis=1))
        power = s**2 / (len(basis) - 1)
        explained.append(power[:c])
        ratio.append(power[:c] / power.sum() if power.sum() > 0 else np.full(c, np.nan))
        loading.append(vt)
        scores.append(((grouped[:, j] - mean[j]) * root) @ vt.T)  # [rows, c]
    projected = np.stack(scores, axis=1).reshape(n, g + 2, -1)  # [n, g + 2, k * c]
    reps = sobol.replicate_estimates(projected, g, False, plan)
    return {"explained": np.array(explained).T, "ratio": np.array(ratio).T, "loading": np.array(loading).swapaxes(0, 1),
            "S1": reps["S1"], "ST": reps["ST"], "n": c}


def _on_kept(array: np.ndarray, kept_shape: tuple[int, ...]) -> np.ndarray:
    """``[c, k]`` -> ``[c, *kept]``."""
    return array.reshape(array.shape[:1] + kept_shape)


def _squared_units(spec: OutputSpec) -> str | None:
    """Units of a variance of the output, when every element shares its units."""
    return common_units(dataset.squared_units(spec.flat_units()))
