"""The sensitivity methods as immutable settings objects, run on a compiled surrogate (the Sobol' method's in
:mod:`~sensitivity.analyses.indices.sobol_method`).

Each method of :mod:`sensitivity.analyses.indices` (local derivatives, DGSM, Sobol', Morris, active
subspaces; for dependent inputs and whole outputs Shapley effects, dependent Sobol' indices, aggregated
indices and given-data indices) has two verbs: ``design`` draws its points (cheap, and it checks every setting before any
model evaluation) and ``run`` evaluates the compiled surrogate there — values only where the method
needs no derivatives (Sobol', Morris), exact Jacobians where it does (local derivatives, DGSM, active
subspaces; those of DGSM and active subspaces of one size from one pass, :func:`jacobian_pass`) — and returns the
analysis datasets on one flat ``output`` axis. The model is seen through
:class:`~sensitivity.analyses.indices.flat_model.FlatModel`; how every method gets its intervals is
:class:`Intervals`; what the methods share (model, space, seed, intervals, one cached input sample) is a
:class:`Context`.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from sensitivity.analyses.indices import (active_subspaces, aggregated, aggregated_onepass, dataset, derivatives, dgsm,
                                          given_data, given_data_bins, morris, onepass, shapley, sobol_dependent,
                                          sobol_onepass)
from sensitivity.analyses.indices.design import check_power_of_two
from sensitivity.analyses.indices.intervals import INTERVAL, INTERVAL_METHODS, LEVEL, IntervalPlan, N_RESAMPLES, REPLICATES
from sensitivity.analyses.indices.dgsm_sweep import NonFinite, sweep_blocks, sweep_sample
from sensitivity.analyses.indices.flat_model import FlatModel
from sensitivity.errors import ConfigError, DataError
from sensitivity.runtime.lazy import lazy_import
from sensitivity.inputs.space import ParameterSpace
from sensitivity.sweep.stored import StoredSweep

xr = lazy_import("xarray")

log = logging.getLogger(__name__)


# ----------------------------------------------------------------------------- the model, shared settings
@dataclass(frozen=True)
class Intervals:
    """How every method gets its confidence intervals (:mod:`~sensitivity.analyses.indices.intervals`).

    ``method``: ``rqmc`` — Student-t intervals over ``replicates`` independent scramblings on the
    scrambled-Sobol' designs (Sobol', DGSM, active subspaces; each method's ``n`` stays the TOTAL
    budget, split into ``replicates`` designs of ``n / replicates``), the bootstrap on the i.i.d.
    designs (Morris' random trajectories, DGSM from a stored sweep); ``bootstrap`` — the bootstrap
    everywhere (the Sobol' designs then one scrambling); ``none`` — no intervals, no cost.
    ``n_resamples`` (0: no bootstrap intervals) and ``interval`` (``percentile`` | ``normal``) set
    the bootstrap; ``level`` every interval.
    """

    method: str = "rqmc"
    replicates: int = REPLICATES
    level: float = LEVEL
    n_resamples: int = N_RESAMPLES
    interval: str = INTERVAL

    def check(self) -> None:
        if self.method not in INTERVAL_METHODS:
            raise ConfigError(f"`method` must be one of {INTERVAL_METHODS}, got {self.method!r}")
        for qmc in (True, False):
            self.plan(qmc=qmc).check()

    def plan(self, *, qmc: bool, seed: int | None = None) -> IntervalPlan:
        """The intervals of one analysis, on a scrambled-Sobol' (``qmc``) or an i.i.d. design."""
        method = "bootstrap" if self.method == "rqmc" and not qmc else self.method
        return IntervalPlan(method, self.level, self.n_resamples, self.interval,  # type: ignore[arg-type]
                            self.replicates, seed)

    def replicates_of(self, *, qmc: bool) -> int:
        """Independent scramblings of a design: ``replicates`` under ``rqmc``, else 1."""
        return self.replicates if self.plan(qmc=qmc).kind == "rqmc" else 1

    def check_size(self, n: int, *, what: str) -> None:
        """``n`` of a scrambled-Sobol' design: a power of two, at least 2 points per scrambling."""
        check_power_of_two(n, what=what, minimum=2 * self.replicates_of(qmc=True))

    def kwargs(self, *, qmc: bool, seed: int | None) -> dict[str, Any]:
        """The interval keyword of an ``analyze`` function: the whole plan."""
        return {"intervals": self.plan(qmc=qmc, seed=seed)}


@dataclass
class Context:
    """What every method's ``run`` shares: the model, the space, the seed, the intervals, one cached input sample."""

    model: FlatModel
    space: ParameterSpace
    seed: int
    intervals: Intervals
    #: Where a one-pass method keeps the statistics of its finished groups of blocks, by its result's key
    #: (``keep("sobol")``: a :class:`~sensitivity.analyses.indices.shards.Kept`); None keeps nothing.
    keep: Callable[[str], Any] | None = None
    _samples: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False)

    def kept(self, key: str) -> Any:
        """Where the one-pass analysis of result ``key`` keeps its finished groups (None: nowhere)."""
        return None if self.keep is None else self.keep(key)

    def input_sample(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(points, values, jacobian)`` at ``n`` scrambled-Sobol' draws of the input distribution.

        Cached by ``n``: the local method's output spread and DGSM and active subspaces under bootstrap intervals
        share one sample (and one set of Jacobians) when they ask for the same size; it is drawn as the
        randomised-QMC replicates of :class:`Intervals`, the points of :func:`jacobian_pass` of that size.
        """
        if n not in self._samples:
            points = dgsm.sample(self.space, n, seed=self.seed, replicates=self.intervals.replicates_of(qmc=True))
            self._samples[n] = (points, *timed(f"Jacobians at an input sample of {n} points", self.model.jacobian,
                                               points))
        return self._samples[n]

    def analysis_kwargs(self, *, qmc: bool = True) -> dict[str, Any]:
        """Seed, interval settings (on a scrambled-Sobol' design or not) and output labels of an ``analyze``."""
        return {**self.intervals.kwargs(qmc=qmc, seed=self.seed), **self.model.labels}


class Method(Protocol):
    """A sensitivity method: ``design`` checks the settings and draws points; ``run`` returns datasets."""

    def design(self, space: ParameterSpace, seed: int, intervals: Intervals) -> Any: ...

    def run(self, ctx: Context, design: Any) -> dict[str, xr.Dataset]: ...


def timed(what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Call ``fn(*args)`` and log how long it took."""
    t0 = time.perf_counter()
    result = fn(*args)
    log.info("%s: %.2f s", what, time.perf_counter() - t0)
    return result


def jacobian_pass(ctx: Context, draws: onepass.Draws, reductions: Mapping[str, onepass.Reduction]
                  ) -> dict[str, xr.Dataset]:
    """The results by key of ``reductions`` (of :meth:`Dgsm.reductions`, :meth:`ActiveSubspaces.reductions`) on
    ``draws``: one Jacobian evaluation per block feeds them all (:func:`~.onepass.evaluate`)."""
    timed(f"{', '.join(reductions)}: {draws.n} Jacobians evaluated once and reduced {draws.block} at a time",
          onepass.evaluate, ctx.model.jacobian, ctx.space, draws, list(reductions.values()))
    return {key: reduction.result() for key, reduction in reductions.items()}


# ----------------------------------------------------------------------------- methods
@dataclass(frozen=True)
class LocalDerivatives:
    """Local derivative-based sensitivities (:mod:`~sensitivity.analyses.indices.derivatives`) at the nominal point and across ``points``.

    ``sigma_points`` draws of the input distribution give the output spreads of the
    sigma-normalised sensitivities (0: leave them out); ``weights`` are the output weights
    of the scaled sensitivities.
    """

    nominal: bool = True
    points: np.ndarray | None = None
    sigma_points: int = 4096
    weights: Sequence[float] | None = None

    def design(self, space: ParameterSpace, seed: int, intervals: Intervals) -> None:
        if self.sigma_points:
            intervals.check_size(self.sigma_points, what="sigma_points")
        if self.points is not None:
            space.check_points(self.points, what="local points")

    def run(self, ctx: Context, design: None) -> dict[str, xr.Dataset]:
        spread = ctx.input_sample(self.sigma_points)[1] if self.sigma_points else None
        kwargs = {"output_sample": spread, "weights": self.weights, **ctx.model.labels}
        out = {}
        if self.nominal:
            nominal = ctx.space.nominal
            values, jac = ctx.model.jacobian(nominal[None])
            out["local"] = derivatives.analyze(nominal, values[0], jac[0], ctx.space, **kwargs)
        if self.points is not None:
            values, jac = timed(f"local: {len(self.points)} points", ctx.model.jacobian, self.points)
            ds = derivatives.analyze(self.points, values, jac, ctx.space, **kwargs)
            index = xr.Variable("sample", np.arange(len(self.points), dtype=np.int32),
                                {"long_name": "index of the point in the grid", "units": "1"})
            out["local_sweep"] = ds.assign_coords(sample=index)
        return out


@dataclass(frozen=True)
class Dgsm:
    """DGSM with intervals and the total-Sobol' bound (:mod:`~sensitivity.analyses.indices.dgsm`).

    On ``n`` fresh draws of the input distribution, drawn, evaluated and reduced in blocks
    (:func:`jacobian_pass`: memory does not grow with ``n``; one evaluation per block shared with active subspaces of
    the same ``n``; bootstrap intervals resample all ``n`` points, which are then held), or on the points of a stored
    ``sweep`` file read ``block`` points at a time (see
    :func:`~sensitivity.analyses.indices.dgsm_sweep.check_sweep_sample` for when that is valid).
    """

    n: int = 4096
    sweep: str | Path | None = None
    block: int = 65536

    def design(self, space: ParameterSpace, seed: int, intervals: Intervals) -> None:
        if self.sweep is None:
            intervals.check_size(self.n, what="n")
        elif not isinstance(self.block, int) or self.block < 1:
            raise ConfigError(f"`block` must be a positive integer, got {self.block!r}")

    def run(self, ctx: Context, design: None) -> dict[str, xr.Dataset]:
        if self.sweep is not None:
            left_out = NonFinite()
            with StoredSweep(self.sweep) as sweep:
                blocks = sweep_blocks(sweep, self.block, left_out)
                ds = timed(f"dgsm from {self.sweep}", lambda: dgsm.analyze_blocks(blocks, ctx.space,
                                                                                  **ctx.analysis_kwargs(qmc=False)))
            if left_out.count:  # said by summary_lines (nonfinite_lines)
                ds.attrs.update(nonfinite_points=left_out.count, points=left_out.total,
                                nonfinite_first=left_out.where(ctx.space.names))
            return {"dgsm": ds}
        kwargs = ctx.analysis_kwargs()
        if kwargs["intervals"].kind == "bootstrap":  # resamples all n points: they are held
            _, values, jac = ctx.input_sample(self.n)
            return {"dgsm": dgsm.analyze(jac, values, ctx.space, **kwargs)}
        return jacobian_pass(ctx, *self.reductions(ctx))

    def reductions(self, ctx: Context) -> tuple[onepass.Draws, dict[str, onepass.Reduction]] | None:
        """The one-pass draws and statistics of :meth:`run` by result key; None when it holds its points (a stored
        sweep, bootstrap intervals)."""
        plan = ctx.intervals.plan(qmc=True, seed=ctx.seed)
        if self.sweep is not None or plan.kind == "bootstrap":
            return None
        draws = onepass.Draws.of(plan, self.n, seed=ctx.seed, what="the one-pass DGSM makes")
        return draws, {"dgsm": dgsm.Statistics(ctx.space, draws, intervals=plan, **ctx.model.labels)}


@dataclass(frozen=True)
class Morris:
    """Morris elementary effects on ``trajectories`` random trajectories of a ``levels``-level grid.

    The trajectories' points are made, evaluated and reduced in blocks
    (:func:`~sensitivity.analyses.indices.morris.analyze_model`): no values of all of them are held.
    """

    trajectories: int = 64
    levels: int = 4

    def design(self, space: ParameterSpace, seed: int, intervals: Intervals) -> morris.Trajectories:
        return morris.trajectories(space, self.trajectories, levels=self.levels, seed=seed)

    def run(self, ctx: Context, design: morris.Trajectories) -> dict[str, xr.Dataset]:
        analysis = partial(morris.analyze_model, ctx.model.values, design, ctx.space, levels=self.levels,
                           **ctx.analysis_kwargs(qmc=False))
        return {"morris": timed(f"morris: {design.count * (len(ctx.space) + 1)} evaluations, reduced "
                                f"{onepass.BLOCK_POINTS} at a time", analysis)}


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
    """Active subspaces per output and/or for one scalar ``quantity`` of the outputs.

    On ``n`` draws of the input distribution, drawn, evaluated and reduced in blocks
    (:func:`jacobian_pass`: memory does not grow with ``n``), one Jacobian evaluation per block feeding both results
    (and DGSM's, run together on the same ``n``: :func:`~sensitivity.analyses.indices.driver.run_by_method`);
    bootstrap intervals resample all ``n`` points, which are then held (and shared by both results).
    """

    n: int = 4096
    normalize: str = "bounds"
    n_active: int | None = None
    per_output: bool = True
    quantity: Quantity | None = None

    def design(self, space: ParameterSpace, seed: int, intervals: Intervals) -> None:
        intervals.check_size(self.n, what="n")
        active_subspaces.input_scale(space, self.normalize)
        if self.n_active is not None:
            active_subspaces.checked_n_active(self.n_active, len(space))
        if not self.per_output and self.quantity is None:
            raise ConfigError("give `per_output: true` or a `quantity`, got neither")

    def run(self, ctx: Context, design: None) -> dict[str, xr.Dataset]:
        one_pass = self.reductions(ctx)
        if one_pass is not None:
            return jacobian_pass(ctx, *one_pass)
        jac, plan = ctx.input_sample(self.n)[2], ctx.intervals.plan(qmc=True, seed=ctx.seed)  # bootstrap: held
        return {key: label(active_subspaces.analyze(jac, ctx.space, normalize=self.normalize, n_active=self.n_active,
                                                    intervals=plan, **options))
                for key, (options, label) in self._results(ctx).items()}

    def reductions(self, ctx: Context) -> tuple[onepass.Draws, dict[str, onepass.Reduction]] | None:
        """The one-pass draws and statistics of :meth:`run` by result key, both results' from the same Jacobians;
        None under bootstrap intervals (the points are held)."""
        plan = ctx.intervals.plan(qmc=True, seed=ctx.seed)
        if plan.kind == "bootstrap":
            return None
        draws = onepass.Draws.of(plan, self.n, seed=ctx.seed, what="the one-pass active subspaces make")
        return draws, {key: onepass.Then(active_subspaces.Statistics(
            ctx.space, draws, normalize=self.normalize, n_active=self.n_active, intervals=plan, **options), label)
            for key, (options, label) in self._results(ctx).items()}

    def _results(self, ctx: Context) -> dict[str, tuple[dict[str, Any], Callable[[xr.Dataset], xr.Dataset]]]:
        """Each result's options and labelling by key: per output, and the ``quantity`` on an axis of its own."""
        labels, q = ctx.model.labels, self.quantity
        out = {"active_subspace": (labels, lambda ds: ds)} if self.per_output else {}
        if q is not None:
            out["active_subspace_quantity"] = (
                {"weights": q.resolve(len(labels["output_names"])), "quantity_name": q.name, "quantity_units": q.units,
                 **labels}, partial(dataset.rename_axis, old="output", new="quantity"))
        return out


@dataclass(frozen=True)
class Shapley:
    """Shapley effects with standard errors under the space's copula (:mod:`~sensitivity.analyses.indices.shapley`).

    Exact permutations (every subset cost, ``n_outer`` outer draws each) for at most ``exact_up_to``
    inputs, else ``n_permutations`` random orders (one outer draw per step); ``n_inner`` conditional
    draws per outer draw, ``n_variance`` draws for the output variance. Pseudo-random draws: intervals
    are ``Sh -+ z se`` at ``intervals.level`` (none with ``intervals.method: none``).
    """

    n_outer: int = 4096
    n_inner: int = 3
    n_variance: int = 65536
    n_permutations: int = 16384
    exact_up_to: int = 6

    def design(self, space: ParameterSpace, seed: int, intervals: Intervals) -> shapley.Design:
        return shapley.sample(space, n_variance=self.n_variance, n_outer=self.n_outer, n_inner=self.n_inner,
                              n_permutations=self.n_permutations, exact_up_to=self.exact_up_to, seed=seed)

    def run(self, ctx: Context, design: shapley.Design) -> dict[str, xr.Dataset]:
        level = None if ctx.intervals.method == "none" else ctx.intervals.level
        analysis = partial(shapley.analyze_model, level=level, **ctx.model.labels)
        return {"shapley": timed(f"shapley: {design.n_points} evaluations", analysis, ctx.model.values, design,
                                 ctx.space)}


@dataclass(frozen=True)
class SobolDependent:
    """Full and independent first-order and total Sobol' indices of dependent inputs.

    ``n`` base rows (a power of two) of the ``N (2 d + 2)``-run pick-freeze design of the space's copula
    (:mod:`~sensitivity.analyses.indices.sobol_dependent`). With randomised-QMC intervals or none the design is
    generated, evaluated and reduced in blocks, its finished groups kept where the run says
    (:func:`~sensitivity.analyses.indices.sobol_onepass.analyze_model`: memory does not grow with ``n``, a killed
    run resumes); bootstrap intervals resample the whole design, which is then drawn in :meth:`design` and held.
    """

    n: int = 1024

    def design(self, space: ParameterSpace, seed: int, intervals: Intervals) -> np.ndarray | None:
        intervals.check_size(self.n, what="n")
        if intervals.plan(qmc=True).kind != "bootstrap":
            return None
        return sobol_dependent.sample(space, self.n, seed=seed, replicates=intervals.replicates_of(qmc=True))

    def run(self, ctx: Context, design: np.ndarray | None) -> dict[str, xr.Dataset]:
        if design is None:
            analysis = partial(sobol_onepass.analyze_model, ctx.model.values, ctx.space, self.n, seed=ctx.seed,
                               dependent=True, kept=ctx.kept("sobol_dependent"), model_id=ctx.model.identity,
                               **ctx.analysis_kwargs())
            return {"sobol_dependent": timed(f"sobol_dependent: {self.n} base rows evaluated and reduced "
                                             f"{sobol_onepass.BLOCK_ROWS} at a time", analysis)}
        values = timed(f"sobol_dependent: {len(design)} evaluations", ctx.model.values, design)
        return {"sobol_dependent": sobol_dependent.analyze(values, ctx.space, **ctx.analysis_kwargs())}


@dataclass(frozen=True)
class Aggregated:
    """Aggregated Sobol' indices over output dims and PCA-based ones (:mod:`~sensitivity.analyses.indices.aggregated`).

    ``n`` base rows of the Sobol' design (the dependent one for a correlated space); ``over`` the output
    dims reduced (None: all), ``weights`` ``None`` | ``"area"`` | ``{dim: [w, ...]}``, ``n_components``
    principal components reported. With randomised-QMC intervals or none the design is generated, evaluated and
    reduced in blocks (:func:`~sensitivity.analyses.indices.aggregated_onepass.analyze_model`: memory does not grow
    with ``n``); bootstrap intervals resample the whole design, which is then drawn in :meth:`design` and held.
    """

    n: int = 1024
    over: Sequence[str] | None = None
    weights: str | Mapping[str, Sequence[float]] | None = None
    n_components: int = 3

    def design(self, space: ParameterSpace, seed: int, intervals: Intervals) -> np.ndarray | None:
        intervals.check_size(self.n, what="n")
        if not isinstance(self.n_components, int) or isinstance(self.n_components, bool) or self.n_components < 1:
            raise ConfigError(f"`n_components` must be an integer >= 1, got {self.n_components!r}")
        if intervals.plan(qmc=True).kind != "bootstrap":
            return None
        return aggregated.sample(space, self.n, seed=seed, replicates=intervals.replicates_of(qmc=True))

    def run(self, ctx: Context, design: np.ndarray | None) -> dict[str, xr.Dataset]:
        spec = ctx.model.spec  # the output dims and weights are checked before any model run
        aggregated.output_weights(spec, aggregated.resolve_over(spec, self.over), self.weights)
        kwargs = {k: v for k, v in ctx.analysis_kwargs().items() if k not in ctx.model.labels}
        options = {"over": self.over, "weights": self.weights, "n_components": self.n_components, **kwargs}
        if design is None:
            analysis = partial(aggregated_onepass.analyze_model, ctx.model.values, ctx.space, spec, self.n,
                               seed=ctx.seed, **options)
            return {"aggregated": timed(f"aggregated: {self.n} base rows, {sobol_onepass.BLOCK_ROWS} a call", analysis)}
        values = timed(f"aggregated: {len(design)} evaluations", ctx.model.values, design)
        return {"aggregated": aggregated.analyze(values, ctx.space, spec, **options)}


@dataclass(frozen=True)
class GivenData:
    """Given-data first-order indices (:mod:`~sensitivity.analyses.indices.given_data`): no design of their own.

    From the points and values of a stored ``sweep`` file on a ``random`` or ``lhs`` grid (read ``block``
    points at a time; see :func:`~sensitivity.analyses.indices.dgsm_sweep.check_sweep_sample` for when that
    is valid) or of a ``samples`` file of i.i.d. points (netCDF ``x(sample, parameter)`` and the output
    variable, or CSV: :func:`sensitivity.sweep.from_file.read_samples`), with no model runs, by the rank-based
    estimator; with neither, from ``n`` fresh i.i.d. draws of the input distribution (``n`` model runs for every
    first-order index), drawn, evaluated and reduced in blocks by the partition estimator on ``bins`` bins of
    equal probability per input (None: :func:`~sensitivity.analyses.indices.given_data_bins.default_bins`;
    :mod:`~sensitivity.analyses.indices.given_data_bins`: memory does not grow with ``n``). The error is over
    ``intervals.replicates`` batches of the points.
    """

    n: int = 4096
    sweep: str | Path | None = None
    samples: str | Path | None = None
    block: int = 65536
    bins: int | None = None

    def design(self, space: ParameterSpace, seed: int, intervals: Intervals) -> None:
        if self.sweep is not None and self.samples is not None:
            raise ConfigError(f"give `sweep` or `samples`, not both, got {str(self.sweep)!r} and {str(self.samples)!r}")
        if not isinstance(self.block, int) or self.block < 1:
            raise ConfigError(f"`block` must be a positive integer, got {self.block!r}")
        for key, path in (("sweep", self.sweep), ("samples", self.samples)):
            if path is not None and not Path(path).is_file():
                raise DataError(f"`{key}` file not found: {path}")
        if self.sweep is None and self.samples is None:
            batches = 0 if intervals.method == "none" else intervals.replicates
            given_data_bins.check(self.n, self._bins(batches), batches, intervals.level)

    def run(self, ctx: Context, design: None) -> dict[str, xr.Dataset]:
        batches = 0 if ctx.intervals.method == "none" else ctx.intervals.replicates
        if self.sweep is not None:
            with StoredSweep(self.sweep) as sweep:
                points, values = timed(f"given_data: read {self.sweep}", sweep_sample, sweep, self.block)
        elif self.samples is not None:
            from sensitivity.sweep.from_file import read_samples

            points, values = read_samples(Path(self.samples), ctx.space.names, ctx.model.spec,
                                          key="given_data.samples")
            values = values.reshape(len(points), -1)
        else:
            return {"given_data": timed(f"given_data: {self.n} draws evaluated and reduced "
                                        f"{given_data_bins.BLOCK_POINTS} at a time", partial(
                                            given_data_bins.analyze_model, ctx.model.values, ctx.space, self.n,
                                            seed=ctx.seed, bins=self._bins(batches), batches=batches,
                                            level=ctx.intervals.level, **ctx.model.labels))}
        return {"given_data": given_data.analyze(points, values, ctx.space, batches=batches, seed=ctx.seed,
                                                 level=ctx.intervals.level, **ctx.model.labels)}

    def _bins(self, batches: int) -> int:
        return given_data_bins.default_bins(self.n, batches) if self.bins is None else self.bins
