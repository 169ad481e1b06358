"""The verb: the reliability of a compiled surrogate's outputs over a parameter space, as one labeled dataset.

:func:`plan` checks everything that needs no model (the space's distributions, the picked outputs, the
settings); :func:`reliability` then maps the space's marginals and Gaussian copula to the standard normal space
(:class:`~sensitivity.analyses.reliability.standard_space.Nataf`), chains the engine's exact Jacobian with the
transform's, and solves every picked output x threshold in one batched FORM run
(:mod:`~sensitivity.analyses.reliability.form`); SORM takes the engine's compiled Hessian
(:mod:`sensitivity.engine.hessian`) pulled back to ``u`` (:meth:`Nataf.pull_back_hessian`); importance sampling
is centred at each event's design points; subset simulation and Monte Carlo come by the settings. The dataset
and its verdict are :mod:`~sensitivity.analyses.reliability.dataset`'s.

On an ensemble surrogate the analysis is the ensemble mean's; FORM runs once more on every member side by side,
and importance sampling and Monte Carlo estimate every member's Pf on the mean's samples
(:mod:`~sensitivity.analyses.reliability.ensemble`): Pf per member, its spread, and the reference interval
widened by it (:func:`sensitivity.outputs.members.combined_bounds`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from sensitivity.analyses.reliability import events as ev
from sensitivity.analyses.reliability.dataset import reliability_dataset
from sensitivity.analyses.reliability.ensemble import member_form
from sensitivity.analyses.reliability.form import FormResult, form
from sensitivity.analyses.reliability.search import sphere_starts
from sensitivity.analyses.reliability.reach import UNKNOWN, training_reach
from sensitivity.analyses.reliability.sampling import importance_sampling_events, monte_carlo, subset_simulation
from sensitivity.analyses.reliability.settings import ReliabilitySettings, select_outputs
from sensitivity.analyses.reliability.sorm import sorm
from sensitivity.analyses.reliability.standard_space import Nataf
from sensitivity.errors import ConfigError
from sensitivity.inputs.space import ParameterSpace
from sensitivity.outputs.functionals import Functionals, resolve
from sensitivity.outputs.spec import OutputDim, OutputSpec
from sensitivity.runtime.lazy import lazy_import
from sensitivity.settings import HESSIAN_MAX_ROWS

xr = lazy_import("xarray")

if TYPE_CHECKING:
    from sensitivity.engine.jacobian import CompiledJacobian


@dataclass(frozen=True)
class Plan:
    """What :func:`plan` checked: the transform, the events' quantities and their description.

    Attributes
    ----------
    nataf
        The map of the space to the standard normal space.
    indices
        ``[m]`` flat (C order) model outputs of the picked outputs; None where the events are about functionals.
    output
        The events' quantities: the picked outputs, or the functionals along one labeled dim ``functional``.
    settings
        The checked settings.
    functionals
        The resolved functionals (:func:`sensitivity.outputs.functionals.resolve`), or None.
    """

    nataf: Nataf
    indices: np.ndarray | None
    output: OutputSpec
    settings: ReliabilitySettings
    functionals: Functionals | None = None

    @property
    def size(self) -> int:
        """``m``: the quantities per point (picked outputs or functionals)."""
        return self.output.size

    def pick(self, values: np.ndarray, jacobian: np.ndarray | None = None
             ) -> tuple[np.ndarray, np.ndarray | None]:
        """The events' quantities ``[K, m]`` and their Jacobians ``[K, m, n]`` from the model's ``[K, *out]`` and
        ``[K, *out, n]`` (the functional's weights chained with the model's Jacobian); None without ``jacobian``."""
        if self.functionals is not None:
            return self.functionals.apply(values, jacobian)
        k = len(values)  # picked in the engine's dtype, then one float64 copy of those
        flat = np.asarray(np.asarray(values).reshape(k, -1)[:, self.indices], float)
        if jacobian is None:
            return flat, None
        jacobian = np.asarray(jacobian)
        return flat, np.asarray(jacobian.reshape(k, -1, jacobian.shape[-1])[:, self.indices], float)


def plan(space: ParameterSpace, output: OutputSpec, settings: ReliabilitySettings) -> Plan:
    """Check the space, the events' outputs or functionals and the settings before any model is loaded.

    Raises
    ------
    ConfigError
        A parameter without a proper continuous distribution (a density that is not finite and positive
        at its median), an unknown output dim or label (of ``output`` or of a functional), quantities of several
        units under one threshold list.
    """
    if not isinstance(settings, ReliabilitySettings):
        raise ConfigError(f"`settings` must be a ReliabilitySettings, got {type(settings).__name__}")
    marginals = []
    for p in space.parameters:
        frozen = p.frozen_distribution()
        density = float(np.exp(frozen.logpdf(frozen.ppf(0.5))))
        if not (np.isfinite(density) and density > 0):
            raise ConfigError(f"parameter {p.name!r}: reliability needs a proper continuous distribution, got "
                              f"{p.distribution.kind!r} with density {density!r} at its median")
        marginals.append(frozen)
    nataf = Nataf(tuple(marginals), space.correlation)
    if settings.functionals:
        resolved = resolve(settings.functionals, output)
        if len(set(resolved.units)) > 1:
            raise ConfigError(f"`functionals` have several units {sorted(set(resolved.units))}; one threshold list "
                              "needs one unit: declare functionals of one")
        described = OutputSpec("functional", resolved.units[0], (OutputDim(
            "functional", resolved.names, long_name="; ".join(resolved.long_names)),), f"functionals of {output.name}")
        return Plan(nataf, None, described, settings, resolved)
    indices, picked = select_outputs(output, settings.output)
    units = set(picked.flat_units())
    if len(units) > 1:
        raise ConfigError(f"`output` picks outputs of several units {sorted(units)}; one threshold list needs "
                          "one unit: pick outputs of one")
    return Plan(nataf, indices, picked, settings)


def reliability(model: CompiledJacobian | Any, space: ParameterSpace, settings: ReliabilitySettings, *,
                seed: int = 0, hessian: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
                training_inputs: np.ndarray | None = None, training_record: str = "none") -> xr.Dataset:
    """Probabilities of failure of every picked output x threshold, by FORM, SORM and sampling.

    Parameters
    ----------
    model
        The compiled surrogate (:func:`sensitivity.engine.jacobian.compile_jacobian`), or an ensemble's
        (:func:`sensitivity.engine.ensemble.compile_ensemble`).
    space
        The parameter space: its marginals and copula correlation are the inputs' distribution.
    settings
        :class:`~sensitivity.analyses.reliability.settings.ReliabilitySettings`.
    seed
        Seed of the FORM starts and of every sampling method.
    hessian
        ``(x [K, n], which [K]) -> [K, n, n]``: each point's Hessian of picked output ``which`` (physical
        units), for SORM; None: compiled from ``model.surrogate.fn`` (:func:`output_hessian`).
    training_inputs
        ``[N, n]`` the inputs the surrogate was trained on (physical units, the space's parameter order): design
        points beyond their reach are flagged (:func:`~sensitivity.analyses.reliability.reach.training_reach`);
        None: ``unknown``.
    training_record
        Where ``training_inputs`` come from, recorded beside the flags.

    Returns
    -------
    xarray.Dataset
        :func:`~sensitivity.analyses.reliability.dataset.reliability_dataset`'s.
    """
    p = plan(space, model.surrogate.output, settings)
    members = int(getattr(model, "members", 0) or 0)
    flat = PickedModel(model, p.pick, members)
    n, m, t = p.nataf.n, p.size, len(settings.thresholds)
    rng = np.random.default_rng(seed)
    starts = sphere_starts(n, settings.starts, radius=settings.start_radius, seed=rng)
    in_u = p.nataf.pull_back(flat)
    result = form(ev.threshold_limit_state(in_u, settings.thresholds, settings.direction), starts, settings.form,
                  seed=rng)
    second = None
    if "sorm" in settings.methods:
        second = sorm(_hessian_in_u(p, flat, hessian or output_hessian(model, p.indices), result), result)
    values = _values_in_u(p.nataf, flat)
    sampled, member_pf = {}, {}
    if "importance_sampling" in settings.methods:
        pf, interval, cov, count = _importance(flat.copies_in_u(p.nataf), 1 + members, result, p, rng)
        sampled["importance_sampling"] = (pf[0], interval[0], cov[0], count)
        member_pf["importance_sampling"] = pf[1:]
    if "subset_simulation" in settings.methods:
        sampled["subset_simulation"] = _subset(values, m * t, p, rng)
    if "monte_carlo" in settings.methods:
        copies = flat.copies_in_u(p.nataf)
        limit = lambda u: ev.threshold_values(copies(u).reshape(len(u), -1), settings.thresholds,  # noqa: E731
                                              settings.direction)
        mc = monte_carlo(limit, n, settings.monte_carlo, seed=rng)
        per_copy = lambda a: np.asarray(a).reshape(-1, m * t, *np.shape(a)[1:])  # noqa: E731  [1 + K, E, ...]
        sampled["monte_carlo"] = (per_copy(mc.pf)[0], per_copy(mc.interval)[0], per_copy(mc.cov)[0], mc.evaluations)
        member_pf["monte_carlo"] = per_copy(mc.pf)[1:]
    if members > 1:
        member_pf["form"] = member_form(model, p, starts, members)
    reach = training_reach(p.nataf.to_physical(np.nan_to_num(result.design_u.reshape(-1, n))).reshape(
        result.design_u.shape), training_inputs)
    reach[~np.isfinite(result.design_beta)] = UNKNOWN
    return reliability_dataset(space, p, result, second, sampled, member_pf if members > 1 else None, seed=seed,
                               reach=reach, training_record=training_record if training_inputs is not None else "none")


@dataclass(frozen=True)
class PickedModel:
    """The events' quantities of a compiled surrogate (the members' mean of an ensemble), in physical units:
    its picked outputs or functionals of its outputs (``pick``: :meth:`Plan.pick`)."""

    model: Any
    pick: Callable[..., tuple[np.ndarray, np.ndarray | None]]
    members: int

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``x [K, n] -> (y [K, m], dy/dx [K, m, n])``."""
        values, jac = self.model(x)
        if self.members:
            values, jac = values.mean(axis=0), jac.mean(axis=0)
        return self.pick(values, jac)

    def values(self, x: np.ndarray) -> np.ndarray:
        """``x [K, n] -> y [K, m]``, values only."""
        return self.copies(x)[:, 0]

    def copies(self, x: np.ndarray) -> np.ndarray:
        """``x [K, n] -> [K, C, m]``: the quantities of the mean, then of each member of an ensemble
        (``C = 1 + members``; ``C = 1`` for one model), from one evaluation."""
        values = np.asarray(self.model.values(x))
        k = len(x)
        if not self.members:
            return self.pick(values.reshape(k, -1))[0][:, None]
        values = self.pick(values.reshape(self.members * k, -1))[0].reshape(self.members, k, -1).transpose(1, 0, 2)
        return np.concatenate([values.mean(axis=1, keepdims=True), values], axis=1)

    def copies_in_u(self, nataf: Nataf) -> Callable[[np.ndarray], np.ndarray]:
        """``u [K, n] -> [K, C, m]``: :meth:`copies` in the standard normal space."""
        return lambda u: self.copies(nataf.to_physical(u))


def _values_in_u(nataf: Nataf, flat: PickedModel) -> Callable[[np.ndarray], np.ndarray]:
    """``u [K, n] -> y [K, m]``: values only, for the sampling methods."""
    return lambda u: flat.values(nataf.to_physical(u))


def output_hessian(model: Any, indices: np.ndarray, *, max_rows: int = HESSIAN_MAX_ROWS
                   ) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """``(x [K, n], which [K]) -> [K, n, n]``: each point's Hessian of its own picked output ``which``.

    One compiled Hessian (:func:`sensitivity.engine.hessian.compile_hessian`) of ``w . y(x)`` over the inputs
    ``(x, w)``, with ``w`` the one-hot row of the output: ``n + m`` rows per point, not the ``m n`` of every
    output's Hessian (the ``x``-block of the result is the picked output's Hessian; the model is linear in
    ``w``). An ensemble's ``surrogate.fn`` is its members' mean. ``max_rows``: the working memory of
    :func:`~sensitivity.engine.hessian.compile_hessian`.
    """
    import tensorflow as tf

    from sensitivity.engine.hessian import compile_hessian

    surrogate, n = model.surrogate, model.surrogate.n_in
    picked = tf.constant(np.asarray(indices, dtype=np.int32))

    def weighted(xw: tf.Tensor) -> tf.Tensor:
        y = tf.gather(tf.reshape(surrogate.fn(xw[:, :n]), [tf.shape(xw)[0], -1]), picked, axis=1)
        return tf.reduce_sum(y * xw[:, n:], axis=1, keepdims=True)

    compiled = compile_hessian(weighted, n + len(indices), output_size=1, dtype=model.dtype,
                               max_rows=max_rows)

    def hessian(x: np.ndarray, which: np.ndarray) -> np.ndarray:
        onehot = np.eye(len(indices))[np.asarray(which, dtype=int)]
        return compiled(np.concatenate([x, onehot], axis=1))[:, 0, :n, :n]

    return hessian


def _hessian_in_u(p: Plan, flat: PickedModel, hessian: Callable, result: FormResult) -> Callable[[np.ndarray], np.ndarray]:
    """``u [K, n] -> [K, n, n]``: the Hessian in ``u`` of each design point's own event, in the row order
    :func:`~sensitivity.analyses.reliability.sorm.sorm` calls with."""
    events, _ = np.nonzero(np.isfinite(result.design_beta))
    t = len(p.settings.thresholds)
    output = events // t
    sign = 1.0 if p.settings.direction == "above" else -1.0

    def in_u(u: np.ndarray) -> np.ndarray:
        x = p.nataf.to_physical(u)
        _, jac = flat(x)
        rows = np.arange(len(u))
        h = np.asarray(hessian(x, output), float)
        return p.nataf.pull_back_hessian(u, -sign * jac[rows, output], -sign * h)

    return in_u


def _importance(copies: Callable, c: int, result: FormResult, p: Plan, rng: np.random.Generator) -> tuple:
    """Importance sampling of every event at its own design points (events without one: NaN), of the mean and of
    every member (``copies: u -> [K, C, m]``) on the same samples: ``pf [C, E]``, ``interval [C, E, 2]``,
    ``cov [C, E]``, evaluations.

    All events' samples are drawn in turn from ``rng`` and evaluated together in a few batched calls
    (:func:`~sensitivity.analyses.reliability.sampling.importance_sampling_events`). Where the origin fails
    (``beta < 0``, Pf > 1/2) the safe event ``-g <= 0`` is sampled at the same points (their index ``-beta``)
    and ``Pf = 1 - P(safe)``, with the interval mirrored: a proposal centred at the design point resolves the
    small side of the two.
    """
    s = p.settings
    e = result.beta.size
    pf, cov = np.full((c, e), np.nan), np.full((c, e), np.nan)
    interval = np.full((c, e, 2), np.nan)
    events = np.flatnonzero(np.isfinite(result.beta))
    if events.size == 0:
        return pf, interval, cov, 0
    flip = np.where(result.beta[events] < 0, -1.0, 1.0)  # origin failed: sample the safe side, Pf = 1 - P(safe)
    found = [np.isfinite(result.design_beta[event]) for event in events]

    def limit(u: np.ndarray, which: np.ndarray) -> np.ndarray:
        return flip[which, None] * ev.own_threshold_values(copies(u), events[which], s.thresholds, s.direction)

    r = importance_sampling_events(limit, [result.design_u[event, f] for event, f in zip(events, found)],
                                   s.importance, betas=[b * result.design_beta[event, f]
                                                        for b, event, f in zip(flip, events, found)], seed=rng)
    safe = flip < 0
    pf[:, events], interval[:, events], cov[:, events] = r.pf.T, r.interval.transpose(1, 0, 2), r.cov.T
    pf[:, events[safe]] = 1.0 - r.pf[safe].T
    interval[:, events[safe]] = 1.0 - r.interval[safe][:, :, ::-1].transpose(1, 0, 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        cov[:, events[safe]] = r.cov[safe].T * r.pf[safe].T / pf[:, events[safe]]
    return pf, interval, cov, r.evaluations


def _subset(values: Callable, e: int, p: Plan, rng: np.random.Generator) -> tuple:
    """Subset simulation of every event, one at a time."""
    s = p.settings
    t = len(s.thresholds)
    pf, cov = np.full(e, np.nan), np.full(e, np.nan)
    interval = np.full((e, 2), np.nan)
    evaluations = 0
    for event in range(e):
        i, j = divmod(event, t)
        limit = lambda u, i=i, j=j: ev.threshold_values(values(u)[:, i], [s.thresholds[j]], s.direction)  # noqa: E731
        r = subset_simulation(limit, p.nataf.n, s.subset, seed=rng)
        pf[event], interval[event], cov[event] = r.pf, r.interval, r.cov
        evaluations += r.evaluations
    return pf, interval, cov, evaluations
