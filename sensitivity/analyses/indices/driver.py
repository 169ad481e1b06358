"""Every sensitivity index of a compiled surrogate at once, cross-checked, on the model's own output dims.

:func:`plan` checks every method's settings and draws its design before any model is loaded;
:func:`compute` runs the chosen methods (:mod:`~sensitivity.analyses.indices.methods`), adds the
cross-checks of :mod:`~sensitivity.analyses.indices.crosschecks` (DGSM bound against the total
Sobol' index, ranking agreement), combines everything into one dataset with every variable prefixed
by its method (``sobol_S1``, ``dgsm_nu``, ...; :func:`combine_results`), and puts the results back
on the model's own output dims (:func:`sensitivity.outputs.axes.unstack_output`), so a time series gets
``sobol_S1(parameter, time)``.
"""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping

import numpy as np

from sensitivity.analyses.indices import crosschecks, tails
from sensitivity.analyses.indices.flat_model import FlatModel
from sensitivity.analyses.indices.methods import Context, Intervals, Method, jacobian_pass
from sensitivity.errors import ConfigError, DataError
from sensitivity.outputs.labels import position_label
from sensitivity.runtime.lazy import lazy_import
from sensitivity.outputs.axes import unstack_output
from sensitivity.inputs.space import ParameterSpace
from sensitivity.outputs.members import member_count

xr = lazy_import("xarray")

if TYPE_CHECKING:
    from sensitivity.engine.jacobian import CompiledJacobian

MethodName = Literal["local", "dgsm", "sobol", "morris", "active_subspaces", "shapley", "sobol_dependent", "aggregated",
                     "given_data"]
#: Method names: the keys of the ``methods`` mapping, of the config sections and of the variable prefixes.
METHODS: tuple[str, ...] = ("local", "dgsm", "sobol", "morris", "active_subspaces", "shapley", "sobol_dependent",
                            "aggregated", "given_data")
#: The methods run when none are named: every index of independent inputs, per output value.
DEFAULT_METHODS: tuple[str, ...] = METHODS[:5]


def plan(
    space: ParameterSpace,
    methods: Mapping[str, Method],
    *,
    seed: int = 0,
    intervals: Intervals = Intervals(),
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
    in_section("intervals", intervals.check)
    if top_k is not None and (not isinstance(top_k, int) or not 1 <= top_k <= len(space)):
        raise ConfigError(f"`top_k` must be an integer in [1, {len(space)}], got {top_k!r}")
    if getattr(methods.get("sobol"), "shards", 1) > 1 and len(methods) > 1:
        raise ConfigError(f"sobol: a shard (`shards` > 1) computes the Sobol' statistics of its rows only; run it "
                          f"with methods=[sobol], got {list(methods)}")
    return {name: in_section(name, method.design, space, seed, intervals) for name, method in methods.items()}


def shard_statistics(engine: CompiledJacobian, space: ParameterSpace, method: Method, design: Any, *, seed: int = 0,
                     intervals: Intervals = Intervals(), keep: Callable[[str], Any] | None = None,
                     top_k: int | None = None) -> dict[str, xr.Dataset]:
    """The statistics of one shard of the Sobol' method (``Sobol(shards > 1)``; its ``design`` from :func:`plan`)
    by result key, to join with the other shards' (``Sobol(merge=...)``); ``top_k`` is :func:`compute`'s, unused."""
    return in_section("sobol", method.statistics, Context(FlatModel(engine), space, seed, intervals, keep), design)


def compute(
    engine: CompiledJacobian,
    space: ParameterSpace,
    methods: Mapping[str, Method],
    *,
    seed: int = 0,
    intervals: Intervals = Intervals(),
    top_k: int | None = None,
    designs: Mapping[str, Any] | None = None,
    keep: Callable[[str], Any] | None = None,
) -> xr.Dataset:
    """Run ``methods`` on the compiled surrogate and return one labeled dataset on the model's output dims.

    Parameters
    ----------
    engine
        The compiled surrogate (:func:`sensitivity.engine.jacobian.compile_jacobian`).
    space
        The parameter space with the input distributions.
    methods
        ``{name: settings}`` with names from :data:`METHODS` (e.g. ``{"sobol": Sobol(n=1024)}``).
    seed
        Seed of every design and bootstrap.
    intervals
        How every method gets its confidence intervals (randomised QMC, bootstrap or none).
    top_k
        Size of the top sets compared by the ranking cross-check; ``min(3, n_parameters)`` by default.
    designs
        The result of :func:`plan` with the same arguments (drawn here when omitted).
    keep
        Where the one-pass methods keep their finished groups of blocks, by result key (:class:`Context`'s).

    Returns
    -------
    xarray.Dataset
        Variables prefixed by method (``local_``, ``local_sweep_``, ``dgsm_``, ``sobol_``,
        ``sobol_groups_``, ``morris_``, ``active_subspace_``, ``active_subspace_quantity_``, ``shapley_``,
        ``sobol_dependent_``, ``given_data_``; ``aggregated_``, already on the output dims it keeps),
        the cross-checks ``dgsm_bound_margin``/``dgsm_bound_check`` (with DGSM and Sobol') and
        ``rank``/``kendall_tau``/``top_k_agreement`` (with two or more ranking measures), and
        each method's attributes as global attributes ``<prefix>_<attr>``.
    """
    if member_count(engine):  # an ensemble: the mean's indices, each member's, their spread and combined intervals
        from sensitivity.analyses.indices.ensemble import compute_ensemble

        return compute_ensemble(engine, space, methods, seed=seed, intervals=intervals, top_k=top_k, designs=designs,
                                keep=keep)
    if designs is None:
        designs = plan(space, methods, seed=seed, intervals=intervals, top_k=top_k)
    ctx = Context(FlatModel(engine), space, seed, intervals, keep)
    return assemble(run_methods(ctx, methods, designs), ctx.model.spec, len(space), top_k)


def run_methods(ctx: Context, methods: Mapping[str, Method], designs: Mapping[str, Any]) -> dict[str, xr.Dataset]:
    """Each method's results on ``ctx``'s model, by result key, on the flat ``output`` axis."""
    return {key: ds for results in run_by_method(ctx, methods, designs).values() for key, ds in results.items()}


def run_by_method(ctx: Context, methods: Mapping[str, Method], designs: Mapping[str, Any]
                  ) -> dict[str, dict[str, xr.Dataset]]:
    """Each method's results by result key, by method name (in ``methods``' order).

    The one-pass derivative methods (those with ``reductions``: DGSM, active subspaces) whose draws are equal (the
    same ``n``; the seed, scramblings and block are the run's) share one pass: one Jacobian evaluation per block
    feeds all their statistics (:func:`~sensitivity.analyses.indices.methods.jacobian_pass`), each result what the
    method gives alone.
    """
    passes: dict[Any, dict[str, dict[str, Any]]] = {}  # draws -> method name -> result key -> reduction
    for name, method in methods.items():
        one_pass = in_section(name, method.reductions, ctx) if hasattr(method, "reductions") else None
        if one_pass is not None:
            passes.setdefault(one_pass[0], {})[name] = one_pass[1]
    shared: dict[str, dict[str, xr.Dataset]] = {}
    for draws, by_method in passes.items():
        reductions = {key: r for part in by_method.values() for key, r in part.items()}
        results = in_section(", ".join(by_method), jacobian_pass, ctx, draws, reductions)
        shared.update({name: {key: results[key] for key in part} for name, part in by_method.items()})
    return {name: shared[name] if name in shared else in_section(name, method.run, ctx, designs[name])
            for name, method in methods.items()}


def assemble(results: Mapping[str, xr.Dataset], spec: Any, n_parameters: int, top_k: int | None) -> xr.Dataset:
    """:func:`compute`'s dataset from the methods' results: the cross-checks added, on the model's output dims."""
    checks = cross_checks(results, min(3, n_parameters) if top_k is None else top_k)
    return unstack_output(combine_results(results, checks), spec)


def in_section(section: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Call ``fn``; a :class:`ConfigError` or :class:`DataError` names the method's config section."""
    try:
        return fn(*args)
    except (ConfigError, DataError) as err:
        raise type(err)(f"{section}: {err}") from None


def summary_lines(ds: xr.Dataset) -> list[tuple[str, str]]:
    """``(severity, line)`` pairs on the cross-checks of a :func:`compute` result.

    One line on the DGSM-bound check (``"warning"`` when a total Sobol' index exceeds its DGSM bound
    significantly, else ``"info"``), one ``"info"`` line on the ranking agreement, and a ``"warning"``
    per method whose sample flags an output's tail (:mod:`~sensitivity.analyses.indices.tails`).
    """
    lines = nonfinite_lines(ds) + tail_lines(ds) + constant_lines(ds) + poincare_lines(ds)
    if "dgsm_bound_check" in ds:
        lines.append(("warning" if ds.attrs.get("dgsm_bound_violations") else "info",
                      f"DGSM bound >= total Sobol' index: {ds.attrs['dgsm_bound_violations']} violations, "
                      f"{ds.attrs['dgsm_bound_exceeded_within_intervals']} exceeded within the intervals, of "
                      f"{ds['dgsm_bound_check'].size} (parameter, output) pairs"))
    if "kendall_tau" in ds:
        names = [str(v) for v in ds["measure_name"].values]
        tau = ds["kendall_tau"].values.reshape(len(names), len(names), -1)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN pairs (a constant measure)
            pairs = [f"{names[i]}/{names[j]} {np.nanmean(tau[i, j]):+.2f}" for i in range(len(names))
                     for j in range(i + 1, len(names))]
        lines.append(("info", "ranking agreement (Kendall tau-b, mean over outputs): " + ", ".join(pairs)))
    return lines


def nonfinite_lines(ds: xr.Dataset) -> list[tuple[str, str]]:
    """A ``"warning"`` when DGSM from a stored sweep left out points where the model is not finite: how many of
    how many, the first few, and that the indices are those of the remaining points."""
    if not ds.attrs.get("dgsm_nonfinite_points"):
        return []
    count, total = int(ds.attrs["dgsm_nonfinite_points"]), int(ds.attrs["dgsm_points"])
    return [("warning", f"dgsm: the model is not finite at {count} of {total} sweep points (first at "
                        f"{ds.attrs['dgsm_nonfinite_first']}); DGSM is computed on the other {total - count}, and "
                        "describes the region where the model is defined")]


def constant_lines(ds: xr.Dataset) -> list[tuple[str, str]]:
    """A ``"warning"`` when outputs do not vary over the input sample (a field's cell fixed by a boundary
    condition, a series' initial value): their variance-based and sigma-normalised indices are NaN (0 / 0), their
    derivative-based ones 0. Names up to five, by the first variance the methods computed."""
    variance = next((ds[v] for v in ("sobol_variance", "dgsm_variance", "sobol_dependent_variance", "shapley_variance")
                     if v in ds), None)
    if variance is None or not (variance == 0).any():
        return []
    constant = np.atleast_1d(variance.values == 0).ravel()  # C order, as np.unravel_index reads it
    names = [", ".join(f"{d}={position_label(ds, d, i)}"
                       for d, i in zip(variance.dims, np.unravel_index(k, variance.shape)))
             for k in np.flatnonzero(constant)]
    shown = "; ".join(names[:5]) + ("; ..." if len(names) > 5 else "")
    return [("warning", f"{int(constant.sum())} of {constant.size} outputs are constant over the input sample "
                        f"({shown}): their Sobol', DGSM-bound and sigma-normalised indices are NaN")]


def poincare_lines(ds: xr.Dataset) -> list[tuple[str, str]]:
    """An ``"info"`` line naming the independent inputs without a Poincare constant, whose DGSM bound is NaN."""
    if "dgsm_poincare_constant" not in ds or ds.attrs.get("dgsm_inputs") != "independent":
        return []
    missing = ds["parameter_name"].values[np.isnan(ds["dgsm_poincare_constant"].values)]
    if not missing.size:
        return []
    its = "its" if missing.size == 1 else "their"
    return [("info", f"dgsm: no Poincare constant for {', '.join(map(str, missing))} (the families and supports "
                     f"that have one: sensitivity.analyses.indices.dgsm), so no bound on {its} total Sobol' "
                     f"index; {its} nu is computed")]


def tail_lines(ds: xr.Dataset) -> list[tuple[str, str]]:
    """A ``"warning"`` per method whose heavy-tail check flags outputs, naming up to five of them."""
    lines = []
    for prefix in ("sobol", "sobol_groups", "sobol_dependent", "dgsm"):
        if f"{prefix}_tail_flag" not in ds:
            continue
        flag = ds[f"{prefix}_tail_flag"]
        counts = {kind: int((flag == value).sum()) for kind, value in (("infinite", tails.INFINITE_VARIANCE),
                                                                          ("heavy", tails.HEAVY_TAIL))}
        if not any(counts.values()):
            continue
        names = flag["output_name"].values[flag.values > 0] if "output_name" in flag.coords else []
        shown = ", ".join(str(n) for n in list(names)[:5]) + (", ..." if len(names) > 5 else "")
        lines.append(("warning", f"{prefix}: heavy-tailed outputs, {counts['infinite']} with a tail index < "
                      f"{tails.INDEX_LIMIT:g} (infinite variance), {counts['heavy']} with > {tails.SHARE_LIMIT:.0%} "
                      f"of the variance from the top 0.1 % of points, of {flag.size}"
                      + (f" ({shown})" if shown else "") + ": their indices and intervals are unreliable"))
    return lines


def cross_checks(results: Mapping[str, xr.Dataset], top_k: int) -> xr.Dataset:
    """The DGSM-bound check (with DGSM and per-parameter Sobol') and the ranking agreement (two or more measures)."""
    parts = []
    if "dgsm" in results and "sobol" in results:
        parts.append(crosschecks.dgsm_bound(results["dgsm"], results["sobol"]))
    measures = ranking_measures(results)
    if len(measures) >= 2 and next(iter(measures.values())).sizes["parameter"] >= 2:  # one parameter: no ranking
        parts.append(crosschecks.rankings(measures, top_k=top_k))
    return xr.merge(parts, compat="no_conflicts", join="exact", combine_attrs="override") if parts else xr.Dataset()


def ranking_measures(results: Mapping[str, xr.Dataset]) -> dict[str, xr.DataArray]:
    """The ``(parameter, output)`` importance measures available in ``results``, larger = more important; a measure
    undefined everywhere (the DGSM bound of dependent inputs: no Poincare constant of their joint law) ranks nothing
    and is left out."""
    sources = {
        "sobol_ST": ("sobol", "ST"),
        "dgsm_bound": ("dgsm", "sobol_total_bound"),
        "morris_mu_star": ("morris", "mu_star"),
        "activity_score": ("active_subspace", "activity_score"),
        "local_sigma_normalized": ("local", "sigma_normalized"),
        "shapley_effect": ("shapley", "effect"),
    }
    measures = {}
    for measure, (result, variable) in sources.items():
        if result in results and variable in results[result] and results[result][variable].notnull().any():
            da = results[result][variable]
            measures[measure] = abs(da) if measure.startswith("local") else da
    return measures


def combine_results(results: Mapping[str, xr.Dataset], checks: xr.Dataset) -> xr.Dataset:
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
