"""The library's studies, each declared once: its verbs on the public face, its settings types, the kinds of
result dataset it writes and the summary of each.

The public face (``sensitivity.__init__``) serves every study's verbs and settings from :data:`STUDIES`; the
application (``workflows.plumbing.registry``) adds each study's command, config and next step, and its report
tells and summarises a result by the kinds declared here. Everything is named by its dotted path and imported only
when used (:func:`resolve`), so importing this module imports nothing but the standard library and
:mod:`sensitivity.errors`.

A study declares every part: a verb, settings, result kinds; where it has none of a part it says so with
:data:`NONE`, so a study registered without one of its parts is refused (:class:`~sensitivity.errors.ConfigError`).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, fields
from typing import Any

from sensitivity.errors import ConfigError


class _NoPart:
    """The explicit "this study has none of this part" (:data:`NONE`)."""

    def __repr__(self) -> str:
        return "NONE"

    def __iter__(self):
        return iter(())


#: A study's explicit "none" for a part it does not have (``kinds=NONE``: its result is summarised by no library
#: function; ``next=NONE`` in the application: it suggests no next command).
NONE = _NoPart()


def check_parts(record: Any, what: str) -> None:
    """Refuse a registration (``what``: the registry's word for it) that leaves a part out: every field is given,
    non-empty, or :data:`NONE`."""
    for field in fields(record):
        value = getattr(record, field.name)
        if value is None or value == "" or value == ():
            raise ConfigError(f"{what} {getattr(record, 'name', '?')!r}: no `{field.name}`; declare it, or "
                              f"`NONE` where it has none")


def resolve(dotted: str) -> Any:
    """The object a dotted ``package.module.attribute`` names (the module imported on this first use)."""
    module, _, attribute = dotted.rpartition(".")
    return getattr(importlib.import_module(module), attribute)


def public(dotted: str) -> tuple[str, str]:
    """``(face name, dotted path)`` of a verb or settings entry: ``"pkg.mod.fn"`` or ``"pkg.mod.fn as name"``."""
    path, _, alias = (part.strip() for part in dotted.partition(" as "))
    return alias or path.rpartition(".")[2], path


@dataclass(frozen=True)
class ResultKind:
    """A kind of result dataset: its name, the variables and dims that tell it (and, where those cannot, a test
    function by dotted path), and the study's ``summary(ds)`` of it by dotted path."""

    name: str
    variables: tuple[str, ...] | _NoPart
    dims: tuple[str, ...] | _NoPart
    summary: str
    test: str | _NoPart = NONE

    def __post_init__(self) -> None:
        check_parts(self, "result kind")

    def matches(self, ds: Any) -> bool:
        """Whether dataset ``ds`` is of this kind."""
        return set(self.variables) <= set(map(str, ds.variables)) and set(self.dims) <= set(map(str, ds.dims)) and (
            self.test is NONE or bool(resolve(self.test)(ds)))

    def summarize(self, ds: Any) -> Any:
        """The study's :class:`~sensitivity.datasets.summary.Summary` of ``ds``."""
        return resolve(self.summary)(ds)


@dataclass(frozen=True)
class Study:
    """A study of the library.

    Attributes
    ----------
    name
        The study's verb, as the command line names it (``sensitivity <name>``).
    verbs
        Its functions on the public face, by dotted path (``"pkg.mod.fn"``, or ``"pkg.mod.fn as face_name"``).
    settings
        Its settings types (frozen dataclasses) on the public face, the same way.
    kinds
        The kinds of result dataset it writes, in the order they are told apart, or :data:`NONE`.
    """

    name: str
    verbs: tuple[str, ...]
    settings: tuple[str, ...] | _NoPart
    kinds: tuple[ResultKind, ...] | _NoPart

    def __post_init__(self) -> None:
        check_parts(self, "study")

    def face(self) -> dict[str, str]:
        """Face name -> dotted path of its verbs and settings."""
        return dict(public(entry) for entry in (*self.verbs, *self.settings))


_CALIBRATION = "sensitivity.analyses.calibration"
_INDICES = "sensitivity.analyses.indices"
_PROPAGATION = "sensitivity.analyses.propagation"

#: The studies. Their result kinds are told apart in this order, the first that matches: a step map holds a
#: ``rank`` (it comes before the indices); a multifidelity result may hold a verification verdict (it comes before
#: the verification).
STUDIES: tuple[Study, ...] = (
    Study("calibrate", (f"{_CALIBRATION}.calibrate",), (f"{_CALIBRATION}.Fit",), (
        ResultKind("calibration", ("estimate", "parameter_interval", "best_start"), NONE,
                   f"{_CALIBRATION}.summary.summary"),
        ResultKind("step slice", ("in_basin",), ("slice_a",), f"{_CALIBRATION}.summary.step_slice"),
        ResultKind("step map", ("gn_step",), ("sample",), f"{_CALIBRATION}.summary.step_map"))),
    Study("posterior", ("sensitivity.analyses.posterior.sample_posterior",),
          ("sensitivity.analyses.posterior.Sampling",), (
              ResultKind("posterior", ("draws",), ("chain",), "sensitivity.analyses.posterior.summary.summary"),)),
    Study("propagate", (f"{_PROPAGATION}.propagate",), (f"{_PROPAGATION}.Propagation",), (
        ResultKind("propagation", ("output_mean",), ("propagation_method",), f"{_PROPAGATION}.summary.summary"),
        ResultKind("pointwise propagation", ("output_std",), ("sample",), f"{_PROPAGATION}.summary.local_summary"))),
    Study("multifidelity", ("sensitivity.analyses.multifidelity.multifidelity",),
          ("sensitivity.analyses.multifidelity.MultifidelityStudy",), (
              ResultKind("multifidelity", ("S1_surrogate", "output_mean_surrogate", "correlation"), NONE,
                         "sensitivity.analyses.multifidelity.summary.summary"),)),
    Study("verify", tuple(f"sensitivity.analyses.verify.{verb}" for verb in (
        "verify_calibration", "verify_posterior", "verify_sobol", "verify_propagation", "refine")),
          tuple(f"sensitivity.analyses.verify.{s}" for s in ("VerifyPlan", "RefinePlan", "VerdictSettings")), (
              ResultKind("verification", NONE, NONE, "sensitivity.analyses.verify.summary.summary",
                         test="sensitivity.analyses.verify.summary.is_verification"),)),
    Study("indices", (f"{_INDICES}.compute as compute_indices",), tuple(f"{_INDICES}.{s}" for s in (
        "LocalDerivatives", "Dgsm", "Sobol", "Morris", "ActiveSubspaces", "Shapley", "SobolDependent", "Aggregated",
        "GivenData", "Intervals")), (
        ResultKind("sensitivity indices", NONE, NONE, f"{_INDICES}.summary.summary",
                   test=f"{_INDICES}.summary.is_indices"),)),
    Study("sweep", ("sensitivity.sweep.stream.sweep as sweep_surrogate",),
          ("sensitivity.sweep.designs.Grid", "sensitivity.sweep.designs.GridDesign"), (
        ResultKind("sweep", ("jacobian",), ("sample",), "sensitivity.sweep.summary.summary"),)),
    Study("worth", ("sensitivity.analyses.worth.worth",),
          ("sensitivity.analyses.worth.WorthSettings", "sensitivity.analyses.worth.DesignSettings"), (
              ResultKind("data worth", ("added_worth", "design_choice", "posterior_variance"), NONE,
                         "sensitivity.analyses.worth.summary.summary"),)),
    Study("reliability", ("sensitivity.analyses.reliability.reliability",),
          ("sensitivity.analyses.reliability.ReliabilitySettings",), (
              ResultKind("reliability", ("pf", "design_u", "form_beta"), NONE,
                         "sensitivity.analyses.reliability.summary.summary"),)),
    Study("train", ("sensitivity.training.train_surrogate",), ("sensitivity.training.TrainSettings",), NONE),
    Study("simulate", ("sensitivity.simulators.runner.run_simulator",),
          ("sensitivity.simulators.runner.RunnerSettings",), NONE),
)

#: A study by its name.
BY_NAME: dict[str, Study] = {study.name: study for study in STUDIES}


def face() -> dict[str, str]:
    """Face name -> dotted path of every study's verbs and settings (``sensitivity.<name>``)."""
    names: dict[str, str] = {}
    for study in STUDIES:
        for name, path in study.face().items():
            if names.setdefault(name, path) != path:
                raise ConfigError(f"study {study.name!r}: face name {name!r} is {names[name]} already")
    return names


def result_kinds() -> tuple[ResultKind, ...]:
    """Every study's result kinds, in the order they are told apart."""
    return tuple(kind for study in STUDIES for kind in study.kinds)
