"""Every sensitivity index of a compiled surrogate at once, on the model's own output dims.

Each method of :mod:`sensitivity.analyses` (local, DGSM, Sobol', Morris, active
subspaces) is an immutable settings object with two verbs: ``design`` draws its
points (cheap, and it checks every setting before any model evaluation) and
``run`` evaluates the compiled surrogate there — values only where the method needs
no derivatives (Sobol', Morris), exact Jacobians where it does (local, DGSM, active
subspaces) — and returns the analysis datasets on one flat ``output`` axis.
:func:`compute` runs the chosen methods, adds the cross-checks of
:mod:`sensitivity.analyses.crosschecks` (DGSM bound against the total Sobol' index,
ranking agreement), merges everything into one dataset with every variable prefixed
by its method (``sobol_S1``, ``dgsm_nu``, ...), and puts the results back on the
model's own output dims (:func:`to_output_dims`), so a time series gets
``sobol_S1(parameter, time)``.

DGSM can also come from a stored sweep (:func:`sweep_blocks`), read block by block,
when that sweep's points are draws of the input distribution (:func:`check_sweep_sample`).
"""
from __future__ import annotations

import logging
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Literal, Mapping, Protocol, Sequence

import numpy as np
import xarray as xr

from sensitivity.analyses import _indices, active_subspaces, crosschecks, dgsm, local, morris, sobol
from sensitivity.datasets import flat_sweep_block, iter_blocks, open_result, unstack_output
from sensitivity.errors import ConfigError, DataError
from sensitivity.outputs import OutputSpec
from sensitivity.space import ParameterSpace

if TYPE_CHECKING:
    from sensitivity.jacobian import CompiledJacobian

log = logging.getLogger(__name__)

MethodName = Literal["local", "dgsm", "sobol", "morris", "active_subspaces"]
METHODS: tuple[str, ...] = ("local", "dgsm", "sobol", "morris", "active_subspaces")

#: Grid kinds whose points are draws of a uniform distribution on the bounds (a sweep usable for DGSM).
SAMPLING_GRIDS: tuple[str, ...] = ("sobol", "halton", "lhs", "random")


# ----------------------------------------------------------------------------- the model, flat
@dataclass(frozen=True)
class FlatModel:
    """A compiled surrogate seen through one flat output axis: values ``[N, m]``, Jacobians ``[N, m, n]``."""

    engine: CompiledJacobian

    @property
    def spec(self) -> OutputSpec:
        """The model's own output description (names, dims, units)."""
        return self.engine.surrogate.output

    @property
    def labels(self) -> dict[str, list[str]]:
        """``output_names`` and ``output_units`` of the flat outputs, for the analyses."""
        return {"output_names": self.spec.flat_names(), "output_units": self.spec.flat_units()}

    def values(self, points: np.ndarray) -> np.ndarray:
        """Values only (the compiled values function): ``[N, m]``."""
        return self.engine.values(points).reshape(len(points), -1)

    def jacobian(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Values ``[N, m]`` and exact Jacobians ``[N, m, n]`` in physical units."""
        values, jac = self.engine(points)
        return values.reshape(len(points), -1), jac.reshape(len(points), -1, jac.shape[-1])


@dataclass(frozen=True)
class Bootstrap:
    """Bootstrap settings shared by every method: resamples, level, ``percentile`` or ``normal`` intervals."""

    n_resamples: int = 100
    conf_level: float = 0.95
    interval: str = "percentile"

    def check(self) -> None:
        _indices.check_bootstrap(self.n_resamples, self.conf_level, self.interval)

    def kwargs(self) -> dict[str, Any]:
        return {"n_resamples": self.n_resamples, "conf_level": self.conf_level, "interval": self.interval}


@dataclass
class Context:
    """What every method's ``run`` shares: the model, the space, the seed, and one cached input sample."""

    model: FlatModel
    space: ParameterSpace
    seed: int
    bootstrap: Bootstrap
    _samples: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False)

    def input_sample(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(points, values, jacobian)`` at ``n`` scrambled-Sobol' draws of the input distribution.

        Cached by ``n``: DGSM, active subspaces and the output spread of the local method
        share one sample (and one set of Jacobians) when they ask for the same size.
        """
        if n not in self._samples:
            points = dgsm.sample(self.space, n, seed=self.seed)
            self._samples[n] = (points, *timed(f"input sample of {n} points", self.model.jacobian, points))
        return self._samples[n]

    def analysis_kwargs(self) -> dict[str, Any]:
        return {"seed": self.seed, **self.bootstrap.kwargs(), **self.model.labels}


class Method(Protocol):
    """A sensitivity method: ``design`` checks the settings and draws points; ``run`` returns datasets."""

    def design(self, space: ParameterSpace, seed: int) -> Any: ...

    def run(self, ctx: Context, design: Any) -> dict[str, xr.Dataset]: ...


def timed(what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Call ``fn(*args)`` and log how long it took."""
    t0 = time.perf_counter()
    result = fn(*args)
    log.info("%s: %.2f s", what, time.perf_counter() - t0)
    return result


# ----------------------------------------------------------------------------- methods
@dataclass(frozen=True)
class Local:
    """Local sensitivities (:mod:`sensitivity.analyses.local`) at the nominal point and across ``points``.

    ``sigma_points`` draws of the input distribution give the output spreads of the
    sigma-normalised sensitivities (0: leave them out); ``weights`` are the output weights
    of the scaled sensitivities.
    """

    nominal: bool = True
    points: np.ndarray | None = None
    sigma_points: int = 4096
    weights: Sequence[float] | None = None

    def design(self, space: ParameterSpace, seed: int) -> None:
        if self.sigma_points:
            _indices.check_power_of_two(self.sigma_points, what="sigma_points")
        if self.points is not None:
            space.check_points(self.points, what="local points")

    def run(self, ctx: Context, design: None) -> dict[str, xr.Dataset]:
        spread = ctx.input_sample(self.sigma_points)[1] if self.sigma_points else None
        kwargs = {"output_sample": spread, "weights": self.weights, **ctx.model.labels}
        out = {}
        if self.nominal:
            nominal = ctx.space.nominal
            values, jac = ctx.model.jacobian(nominal[None])
            out["local"] = local.analyze(nominal, values[0], jac[0], ctx.space, **kwargs)
        if self.points is not None:
            values, jac = timed(f"local: {len(self.points)} points", ctx.model.jacobian, self.points)
            ds = local.analyze(self.points, values, jac, ctx.space, **kwargs)
            index = xr.Variable("sample", np.arange(len(self.points), dtype=np.int32),
                                {"long_name": "index of the point in the grid", "units": "1"})
            out["local_sweep"] = ds.assign_coords(sample=index)
        return out


@dataclass(frozen=True)
class Dgsm:
    """DGSM with bootstrap intervals and the total-Sobol' bound (:mod:`sensitivity.analyses.dgsm`).

    On ``n`` fresh draws of the input distribution, or on the points of a stored ``sweep``
    file read ``block`` points at a time (see :func:`check_sweep_sample` for when that is valid).
    """

    n: int = 4096
    sweep: str | Path | None = None
    block: int = 65536

    def design(self, space: ParameterSpace, seed: int) -> None:
        if self.sweep is None:
            _indices.check_power_of_two(self.n, what="n")
        elif not isinstance(self.block, int) or self.block < 1:
            raise ConfigError(f"`block` must be a positive integer, got {self.block!r}")

    def run(self, ctx: Context, design: None) -> dict[str, xr.Dataset]:
        if self.sweep is not None:
            blocks = sweep_blocks(self.sweep, ctx.model.spec, self.block)
            return {"dgsm": timed(f"dgsm from {self.sweep}",
                                  lambda: dgsm.analyze_blocks(blocks, ctx.space, **ctx.analysis_kwargs()))}
        _, values, jac = ctx.input_sample(self.n)
        return {"dgsm": dgsm.analyze(jac, values, ctx.space, **ctx.analysis_kwargs())}


@dataclass(frozen=True)
class Sobol:
    """Sobol' first/total (and second) order indices per parameter, and per group when ``groups`` are given."""

    n: int = 1024
    second_order: bool = False
    groups: Mapping[str, Sequence[str]] | None = None
    convergence_start: int = 64

    def design(self, space: ParameterSpace, seed: int) -> dict[str, np.ndarray]:
        _indices.check_power_of_two(self.convergence_start, what="convergence_start")
        designs = {"sobol": sobol.sample(space, self.n, seed=seed, calc_second_order=self.second_order)}
        if self.groups is not None:
            designs["sobol_groups"] = sobol.sample(space, self.n, seed=seed, calc_second_order=self.second_order,
                                                   groups=self.groups)
        return designs

    def run(self, ctx: Context, design: dict[str, np.ndarray]) -> dict[str, xr.Dataset]:
        out = {}
        for key, points in design.items():
            values = timed(f"{key}: {len(points)} evaluations", ctx.model.values, points)
            groups = self.groups if key == "sobol_groups" else None
            ds = sobol.analyze(values, ctx.space, groups=groups, calc_second_order=self.second_order,
                               convergence_start=min(self.convergence_start, self.n), **ctx.analysis_kwargs())
            out[key] = ds.rename({"group_member": "member"}) if groups is not None else ds
        return out


@dataclass(frozen=True)
class Morris:
    """Morris elementary effects on ``trajectories`` random trajectories of a ``levels``-level grid."""

    trajectories: int = 64
    levels: int = 4

    def design(self, space: ParameterSpace, seed: int) -> np.ndarray:
        return morris.sample(space, self.trajectories, levels=self.levels, seed=seed)

    def run(self, ctx: Context, design: np.ndarray) -> dict[str, xr.Dataset]:
        values = timed(f"morris: {len(design)} evaluations", ctx.model.values, design)
        return {"morris": morris.analyze(design, values, ctx.space, levels=self.levels, **ctx.analysis_kwargs())}


@dataclass(frozen=True)
class Quantity:
    """A scalar quantity ``q = sum_k w_k y_k`` of the flat outputs: ``weights`` a list, ``"sum"`` or ``"mean"``."""

    name: str = "quantity"
    units: str | None = None
    weights: Sequence[float] | str = "mean"

    def resolve(self, m: int) -> np.ndarray:
        """``[m]`` weights over the flat outputs."""
        if isinstance(self.weights, str):
            if self.weights not in ("sum", "mean"):
                raise ConfigError(f"`quantity.weights` must be 'sum', 'mean' or {m} numbers, got {self.weights!r}")
            return np.full(m, 1.0 if self.weights == "sum" else 1.0 / m)
        w = np.asarray(self.weights, dtype=np.float64)
        if w.shape != (m,):
            raise ConfigError(f"`quantity.weights` must give one weight per output ({m}), got {len(w)}")
        return w


@dataclass(frozen=True)
class ActiveSubspaces:
    """Active subspaces per output and/or for one scalar ``quantity`` of the outputs."""

    n: int = 4096
    normalize: str = "bounds"
    n_active: int | None = None
    per_output: bool = True
    quantity: Quantity | None = None

    def design(self, space: ParameterSpace, seed: int) -> None:
        _indices.check_power_of_two(self.n, what="n")
        active_subspaces.input_scale(space, self.normalize)
        if self.n_active is not None:
            active_subspaces._checked_n_active(self.n_active, len(space))
        if not self.per_output and self.quantity is None:
            raise ConfigError("give `per_output: true` or a `quantity`, got neither")

    def run(self, ctx: Context, design: None) -> dict[str, xr.Dataset]:
        _, _, jac = ctx.input_sample(self.n)
        kwargs = {"normalize": self.normalize, "n_active": self.n_active, **ctx.analysis_kwargs()}
        out = {}
        if self.per_output:
            out["active_subspace"] = active_subspaces.analyze(jac, ctx.space, **kwargs)
        if self.quantity is not None:
            q = self.quantity
            ds = active_subspaces.analyze(jac, ctx.space, weights=q.resolve(jac.shape[1]), quantity_name=q.name,
                                          quantity_units=q.units, **kwargs)
            out["active_subspace_quantity"] = _rename_axis(ds, "output", "quantity")
        return out


def _rename_axis(ds: xr.Dataset, old: str, new: str) -> xr.Dataset:
    """Rename a labeled axis and its ``_name``/``_units`` coordinates (``output`` -> ``quantity``)."""
    names = {k: new + k[len(old):] for k in list(ds.variables) if k == old or k in (f"{old}_name", f"{old}_units")}
    return ds.rename(names)


# ----------------------------------------------------------------------------- the whole computation
def plan(
    space: ParameterSpace,
    methods: Mapping[str, Method],
    *,
    seed: int = 0,
    bootstrap: Bootstrap = Bootstrap(),
    top_k: int | None = None,
) -> dict[str, Any]:
    """Check every setting and draw every method's design, before any model is loaded or evaluated.

    Returns the designs for :func:`compute`. Errors name the method (``sobol: `n` must be ...``).
    """
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ConfigError(f"`methods` must be among {list(METHODS)}, got {unknown}")
    if not methods:
        raise ConfigError(f"`methods` must name at least one of {list(METHODS)}, got none")
    in_section("bootstrap", bootstrap.check)
    if top_k is not None and (not isinstance(top_k, int) or not 1 <= top_k <= len(space)):
        raise ConfigError(f"`top_k` must be an integer in [1, {len(space)}], got {top_k!r}")
    return {name: in_section(name, method.design, space, seed) for name, method in methods.items()}


def compute(
    engine: CompiledJacobian,
    space: ParameterSpace,
    methods: Mapping[str, Method],
    *,
    seed: int = 0,
    bootstrap: Bootstrap = Bootstrap(),
    top_k: int | None = None,
    designs: Mapping[str, Any] | None = None,
) -> xr.Dataset:
    """Run ``methods`` on the compiled surrogate and return one labeled dataset on the model's output dims.

    Parameters
    ----------
    engine
        The compiled surrogate (:func:`sensitivity.jacobian.compile_jacobian`).
    space
        The parameter space with the input distributions.
    methods
        ``{name: settings}`` with names from :data:`METHODS` (e.g. ``{"sobol": Sobol(n=1024)}``).
    seed
        Seed of every design and bootstrap.
    bootstrap
        Shared bootstrap settings.
    top_k
        Size of the top sets compared by the ranking cross-check; ``min(3, n_parameters)`` by default.
    designs
        The result of :func:`plan` with the same arguments (drawn here when omitted).

    Returns
    -------
    xarray.Dataset
        Variables prefixed by method (``local_``, ``local_sweep_``, ``dgsm_``, ``sobol_``,
        ``sobol_groups_``, ``morris_``, ``active_subspace_``, ``active_subspace_quantity_``),
        the cross-checks ``dgsm_bound_margin``/``dgsm_bound_check`` (with DGSM and Sobol') and
        ``rank``/``kendall_tau``/``top_k_agreement`` (with two or more ranking measures), and
        each method's attributes as global attributes ``<prefix>_<attr>``.
    """
    if designs is None:
        designs = plan(space, methods, seed=seed, bootstrap=bootstrap, top_k=top_k)
    ctx = Context(FlatModel(engine), space, seed, bootstrap)
    results: dict[str, xr.Dataset] = {}
    for name, method in methods.items():
        results.update(in_section(name, method.run, ctx, designs[name]))
    checks = cross_checks(results, min(3, len(space)) if top_k is None else top_k)
    return to_output_dims(merge(results, checks), ctx.model.spec)


def in_section(section: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Call ``fn``; a :class:`ConfigError` or :class:`DataError` names the method's config section."""
    try:
        return fn(*args)
    except (ConfigError, DataError) as err:
        raise type(err)(f"{section}: {err}") from None


def summary_lines(ds: xr.Dataset) -> list[str]:
    """One line on the DGSM-bound check and one on the ranking agreement of a :func:`compute` result."""
    lines = []
    if "dgsm_bound_check" in ds:
        lines.append(f"DGSM bound >= total Sobol' index: {ds.attrs['dgsm_bound_violations']} violations, "
                     f"{ds.attrs['dgsm_bound_exceeded_within_intervals']} exceeded within the intervals, of "
                     f"{ds['dgsm_bound_check'].size} (parameter, output) pairs")
    if "kendall_tau" in ds:
        names = [str(v) for v in ds["measure_name"].values]
        tau = ds["kendall_tau"].values.reshape(len(names), len(names), -1)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN pairs (a constant measure)
            pairs = [f"{names[i]}/{names[j]} {np.nanmean(tau[i, j]):+.2f}" for i in range(len(names))
                     for j in range(i + 1, len(names))]
        lines.append("ranking agreement (Kendall tau-b, mean over outputs): " + ", ".join(pairs))
    return lines


def cross_checks(results: Mapping[str, xr.Dataset], top_k: int) -> xr.Dataset:
    """The DGSM-bound check (with DGSM and per-parameter Sobol') and the ranking agreement (two or more measures)."""
    parts = []
    if "dgsm" in results and "sobol" in results:
        parts.append(crosschecks.dgsm_bound(results["dgsm"], results["sobol"]))
    measures = ranking_measures(results)
    if len(measures) >= 2:
        parts.append(crosschecks.rankings(measures, top_k=top_k))
    return xr.merge(parts, compat="no_conflicts", join="exact", combine_attrs="override") if parts else xr.Dataset()


def ranking_measures(results: Mapping[str, xr.Dataset]) -> dict[str, xr.DataArray]:
    """The ``(parameter, output)`` importance measures available in ``results``, larger = more important."""
    sources = {
        "sobol_ST": ("sobol", "ST"),
        "dgsm_bound": ("dgsm", "sobol_total_bound"),
        "morris_mu_star": ("morris", "mu_star"),
        "activity_score": ("active_subspace", "activity_score"),
        "local_sigma_normalized": ("local", "sigma_normalized"),
    }
    measures = {}
    for measure, (result, variable) in sources.items():
        if result in results and variable in results[result]:
            da = results[result][variable]
            measures[measure] = abs(da) if measure.startswith("local") else da
    return measures


def merge(results: Mapping[str, xr.Dataset], checks: xr.Dataset) -> xr.Dataset:
    """One dataset: each result's variables and attributes prefixed by its key, then the cross-checks."""
    parts, attrs = [], {}
    for prefix, ds in results.items():
        parts.append(ds.rename({v: f"{prefix}_{v}" for v in ds.data_vars}))
        attrs.update({f"{prefix}_{k}": v for k, v in ds.attrs.items()})
    if "dgsm_bound_check" in checks:
        flags = checks["dgsm_bound_check"].values
        attrs["dgsm_bound_violations"] = int((flags == crosschecks.VIOLATION).sum())
        attrs["dgsm_bound_exceeded_within_intervals"] = int((flags == crosschecks.WITHIN_INTERVALS).sum())
    merged = xr.merge([*parts, checks], compat="no_conflicts", join="exact", combine_attrs="override")
    merged.attrs = attrs
    return merged


def to_output_dims(ds: xr.Dataset, spec: OutputSpec) -> xr.Dataset:
    """Put every variable on the flat ``output`` axis back on the model's own output dims.

    :func:`sensitivity.datasets.unstack_output` does the reshaping (``S1 (parameter, output)``
    -> ``S1 (parameter, time)``); here the model's dims are then placed last, as CF recommends
    other dims to the left of time and space (``S1_interval (parameter, bound, time)``), and a
    coordinate constant along ``output`` (a units table such as ``nu_units`` when every output
    shares its units) keeps its values without that dim.
    """
    if len(spec.dims) == 1 and spec.dims[0].is_labels or "output" not in ds.dims:
        return ds
    flat = ("output", "output_name", "output_units")
    constant = {name: var.isel(output=0, drop=True) for name, var in ds.coords.items()
                if name not in flat and "output" in var.dims and (var.values == var.isel(output=[0]).values).all()}
    ds = ds.drop_vars(list(constant)).assign_coords(constant)
    return unstack_output(ds, spec).transpose(..., *spec.dim_names)


# ----------------------------------------------------------------------------- DGSM from a stored sweep
def check_sweep_sample(path: str | Path, space: ParameterSpace, spec: OutputSpec,
                       surrogate_hash: str | None = None) -> None:
    """Refuse a sweep whose points are not draws of ``space``'s input distribution, or of another model.

    A sweep grid maps its unit-cube design linearly onto the bounds (geometrically for
    ``scale: log``), so a ``sobol``, ``halton``, ``lhs`` or ``random`` grid samples the uniform
    distribution on the bounds: DGSM on it is DGSM of ``space`` only when every parameter of
    ``space`` is uniform, on linear scale, on the same bounds as the sweep's.

    Raises
    ------
    DataError
        Naming the file and what does not match.
    """
    import yaml

    with open_result(path) as ds:
        attrs = dict(ds.attrs)
        names = [str(n) for n in ds["parameter_name"].values] if "parameter_name" in ds.coords else []
        missing = [v for v in ("jacobian", spec.name) if v not in ds.variables]
        sizes = {d: ds.sizes.get(d) for d in spec.dim_names}
    if missing:
        raise DataError(f"{path}: no variable(s) {missing}: not a sweep of this model's output `{spec.name}`")
    if names != space.names:
        raise DataError(f"{path}: parameters {names} differ from the space's {space.names}")
    if sizes != dict(zip(spec.dim_names, spec.shape)):
        raise DataError(f"{path}: output dims {sizes} differ from the model's {dict(zip(spec.dim_names, spec.shape))}")
    if surrogate_hash and attrs.get("surrogate_hash") and attrs["surrogate_hash"] != surrogate_hash:
        raise DataError(f"{path}: computed with surrogate {attrs['surrogate_hash'][:19]}..., "
                        f"this model is {surrogate_hash[:19]}...")
    config = yaml.safe_load(attrs.get("config") or "null") or {}
    grid, recorded = config.get("grid") or {}, (config.get("space") or {}).get("parameters") or []
    if grid.get("kind") not in SAMPLING_GRIDS:
        raise DataError(f"{path}: a {grid.get('kind', 'unrecorded')!r} grid is not a sample of the input distribution;"
                        f" DGSM needs a sweep on one of {list(SAMPLING_GRIDS)}")
    for p, rec in zip(space.parameters, recorded or [None] * len(space)):
        if p.distribution.kind != "uniform" or p.scale != "linear":
            raise DataError(f"{path}: parameter {p.name!r} is {p.distribution.kind} on {p.scale} scale, but a sweep "
                            "grid samples uniformly on the bounds")
        if rec is None or (rec.get("low"), rec.get("high"), rec.get("scale", "linear")) != (p.low, p.high, "linear"):
            raise DataError(f"{path}: the sweep's bounds of {p.name!r} ({rec and (rec.get('low'), rec.get('high'))})"
                            f" differ from the space's ({p.low}, {p.high})")


def sweep_blocks(path: str | Path, spec: OutputSpec, block: int = 65536) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield ``(jacobian [b, m, n], values [b, m])`` of a sweep file, ``block`` points at a time (bounded memory)."""
    for ds in iter_blocks(path, block, variables=["x", "jacobian", spec.name]):
        _, values, jac = flat_sweep_block(ds, spec)
        yield jac, values
