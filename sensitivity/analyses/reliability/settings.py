"""The settings of one reliability analysis, and the outputs an event is about, picked by label.

:class:`ReliabilitySettings` freezes every choice of :func:`~sensitivity.analyses.reliability.driver.reliability`:
the event (an output or functionals of the outputs, above or below thresholds), the methods and their settings.
:func:`select_outputs` picks
the outputs of an event from the model's :class:`~sensitivity.outputs.spec.OutputSpec` the way
:func:`sensitivity.datasets.select` picks from a dataset: ``{dim: label}`` drops that dim, ``{dim: [labels]}``
keeps it with those labels, a dim not named is kept whole (so ``{"species": "I"}`` of a ``(species, day)``
output is a series: one event per day and threshold).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

import numpy as np

from sensitivity.analyses.reliability._checks import choice, fraction, positive, positive_int
from sensitivity.analyses.reliability.form import FormSettings
from sensitivity.analyses.reliability.sampling import ImportanceSettings, MonteCarloSettings, SubsetSettings
from sensitivity.errors import ConfigError
from sensitivity.outputs.functionals import Functional
from sensitivity.outputs.spec import OutputDim, OutputSpec

#: Methods of :func:`~sensitivity.analyses.reliability.driver.reliability`, in the order they run.
METHODS: tuple[str, ...] = ("form", "sorm", "importance_sampling", "subset_simulation", "monte_carlo")
#: What runs when nothing is chosen: FORM, SORM at its design points and importance sampling there.
DEFAULT_METHODS: tuple[str, ...] = METHODS[:3]


@dataclass(frozen=True)
class ReliabilitySettings:
    """Every setting of one reliability analysis.

    Parameters
    ----------
    thresholds
        The thresholds ``T`` [the output's units]: one event per selected output and threshold.
    direction
        ``'above'`` (failure ``y > T``) or ``'below'`` (failure ``y < T``).
    output
        ``{dim: label or [labels]}``: the outputs the events are about (:func:`select_outputs`); empty: all.
    functionals
        Differentiable functionals of the outputs the events are about instead of outputs
        (:class:`~sensitivity.outputs.functionals.Functional`, or its ``{name, kind, at, over, weights, units}``
        mapping): the value at a label, the max / sum / mean over a dim, a weighted sum; one event per functional
        and threshold. Exclusive with ``output``; SORM needs the outputs' own Hessians, so it is refused with them.
    output_range
        ``[low, high]``: the range the output was recorded over (its training data) [the output's units]; a
        threshold outside it is refused before any model evaluation (the surrogate knows nothing there). None:
        not checked.
    methods
        Any of :data:`METHODS`; ``sorm`` and ``importance_sampling`` need ``form`` (its design points).
    starts
        FORM starts per event: the origin, then ``starts - 1`` antipodal random directions at ``start_radius``.
        More than the origin by default: where the output is even in an input with a symmetric marginal
        (Ishigami's ``x2`` and ``x3``), ``grad g`` has no component along that input on the whole plane
        ``u_i = 0``, so a start at the origin never leaves it and finds no design point off it.
    start_radius
        Distance of the random starts from the origin [standard units].
    form, importance, subset, monte_carlo
        Each method's settings (:class:`~sensitivity.analyses.reliability.form.FormSettings`, ...). FORM's
        ``tolerance`` defaults to ``1e-4`` here, which a float32 surrogate reaches.
    rtol
        The verdict's tolerance: FORM or SORM agrees with the sampling reference when its ``Pf`` lies in the
        reference's interval widened by ``rtol`` of the reference's ``Pf`` on either side.
    """

    thresholds: tuple[float, ...] = ()
    direction: Literal["above", "below"] = "above"
    output: Mapping[str, Any] = field(default_factory=dict)
    functionals: tuple[Functional, ...] = ()
    output_range: tuple[float, float] | None = None
    methods: tuple[str, ...] = DEFAULT_METHODS
    starts: int = 4
    start_radius: float = 1.0
    form: FormSettings = FormSettings(tolerance=1e-4)
    importance: ImportanceSettings = ImportanceSettings(n_samples=4_000)
    subset: SubsetSettings = SubsetSettings()
    monte_carlo: MonteCarloSettings = MonteCarloSettings()
    rtol: float = 0.1

    def __post_init__(self) -> None:
        t = np.atleast_1d(np.asarray(self.thresholds, dtype=float)) if _numbers(self.thresholds) else None
        if t is None or t.ndim != 1 or t.size == 0 or not np.all(np.isfinite(t)):
            raise ConfigError(f"`thresholds` must be a non-empty list of finite numbers, got {self.thresholds!r}")
        object.__setattr__(self, "thresholds", tuple(float(v) for v in t))
        choice("direction", self.direction, ("above", "below"))
        if not isinstance(self.output, Mapping):
            raise ConfigError(f"`output` must be a mapping {{dim: label or [labels]}}, got {self.output!r}")
        if not isinstance(self.functionals, (list, tuple)):
            raise ConfigError(f"`functionals` must be a list of {{name, kind, at, over, ...}}, got "
                              f"{self.functionals!r}")
        functionals = tuple(f if isinstance(f, Functional) else Functional.from_dict(f) for f in self.functionals)
        object.__setattr__(self, "functionals", functionals)
        if functionals and self.output:
            raise ConfigError(f"`output` and `functionals` are exclusive: an event is about outputs or functionals of "
                              f"them, got output {dict(self.output)} and {len(functionals)} functionals")
        if self.output_range is not None:
            low, high = _range(self.output_range)
            outside = [v for v in self.thresholds if not low <= v <= high]
            if outside:
                raise ConfigError(f"`thresholds` must lie in the output's recorded range [{low:g}, {high:g}], "
                                  f"got {outside[0]:g}")
        methods = tuple(self.methods)
        if not methods or len(set(methods)) != len(methods):
            raise ConfigError(f"`methods` must list distinct methods from {list(METHODS)}, got {list(methods)}")
        for name in methods:
            choice("methods", name, METHODS)
        for name in ("sorm", "importance_sampling"):
            if name in methods and "form" not in methods:
                raise ConfigError(f"`methods`: {name!r} needs 'form' (its design points), got {list(methods)}")
        if functionals and "sorm" in methods:
            raise ConfigError(f"`methods`: 'sorm' takes the outputs' own Hessians, not a functional's; drop it or "
                              f"give `output` instead of `functionals`, got {list(methods)}")
        object.__setattr__(self, "methods", tuple(m for m in METHODS if m in methods))
        positive_int("starts", self.starts)
        positive("start_radius", self.start_radius)
        for name, cls in (("form", FormSettings), ("importance", ImportanceSettings), ("subset", SubsetSettings),
                          ("monte_carlo", MonteCarloSettings)):
            if not isinstance(getattr(self, name), cls):
                raise ConfigError(f"`{name}` must be a {cls.__name__}, got {getattr(self, name)!r}")
        if not isinstance(self.rtol, (int, float)) or isinstance(self.rtol, bool) or not 0 <= self.rtol < math.inf:
            raise ConfigError(f"`rtol` must be a finite number >= 0, got {self.rtol!r}")

    @property
    def level(self) -> float:
        """The level of every sampling interval: the importance sampling's ``level`` (config ``importance.level``)."""
        return fraction("level", self.importance.level)


def _numbers(values: Any) -> bool:
    items = values if isinstance(values, (list, tuple, np.ndarray)) else [values]
    return all(isinstance(v, (int, float, np.number)) and not isinstance(v, bool) for v in items)


def _range(value: Any) -> tuple[float, float]:
    if not isinstance(value, (list, tuple)) or len(value) != 2 or not _numbers(value) or \
            not all(math.isfinite(v) for v in value) or not value[0] < value[1]:
        raise ConfigError(f"`output_range` must be [low, high] with finite low < high, got {value!r}")
    return float(value[0]), float(value[1])


def select_outputs(spec: OutputSpec, selection: Mapping[str, Any]) -> tuple[np.ndarray, OutputSpec]:
    """The flat indices (C order) of the outputs ``selection`` picks, and the description of what is left.

    Parameters
    ----------
    spec
        The model's output description.
    selection
        ``{dim: value}`` with a label (labeled dim) or coordinate value (numeric dim): that dim is dropped;
        ``{dim: [values]}``: the dim is kept with those values, in that order; a dim not named is kept whole.

    Returns
    -------
    indices : ``[m]`` int
        Flat output indices of the picked outputs, in the C order of the remaining dims.
    OutputSpec
        The picked outputs' description: the kept dims with their kept values (no dims for one output).

    Raises
    ------
    ConfigError
        An unknown dim or a value that is not on its dim (naming the ones there).
    """
    dims = {d.name: d for d in spec.dims}
    unknown = [name for name in selection if name not in dims]
    if unknown:
        raise ConfigError(f"`output`: unknown dim {unknown[0]!r}; the output {spec.name!r} has dims "
                          f"{list(dims)}")
    axes, kept = [], []
    for d in spec.dims:
        if d.name not in selection:
            axes.append(np.arange(d.size))
            kept.append(d)
            continue
        wanted = selection[d.name]
        many = isinstance(wanted, (list, tuple))
        picks = [_position(d, w) for w in (wanted if many else [wanted])]
        if many and not picks:
            raise ConfigError(f"`output.{d.name}` must name at least one value, got []")
        axes.append(np.asarray(picks))
        if many:
            kept.append(OutputDim(d.name, tuple(d.values[i] for i in picks), d.units, d.long_name))
    grid = np.meshgrid(*axes, indexing="ij") if axes else []
    indices = np.ravel_multi_index([g.ravel() for g in grid], spec.shape) if axes else np.zeros(1, dtype=int)
    units: Any = spec.units
    if spec.units_dim is not None:
        own = list(spec.units)
        if spec.units_dim.name in selection:
            picked = [own[i] for i in np.atleast_1d(axes[spec.dims.index(spec.units_dim)])]
            units = tuple(picked) if any(d.name == spec.units_dim.name for d in kept) else picked[0]
    if not kept:
        label = ",".join(f"{k}={selection[k]}" for k in dims if k in selection)
        kept = [OutputDim("output", (f"{spec.name}[{label}]",))]
        units = units if isinstance(units, str) else units[0]
    return np.asarray(indices, dtype=int).ravel(), OutputSpec(spec.name, units, tuple(kept), spec.long_name)


def _position(d: OutputDim, value: Any) -> int:
    """Index of ``value`` on dim ``d`` (a label, or a coordinate value within 1e-9 of one)."""
    if d.is_labels:
        if value in d.values:
            return d.values.index(value)
    elif _numbers([value]):
        close = np.flatnonzero(np.isclose(np.asarray(d.values, dtype=float), float(value), rtol=1e-9, atol=0.0))
        if close.size:
            return int(close[0])
    shown = list(d.values) if d.size <= 12 else [*d.values[:6], "...", *d.values[-3:]]
    raise ConfigError(f"`output.{d.name}`: {value!r} is not on the dim; it has {shown}")
