"""The workflow registry: every command, declared once with its parts.

Each command is a :class:`Workflow`: its module (a ``run(cfg)`` function, optionally a ``SCHEMA`` dataclass and a
``POSITIONAL`` config key; its primary config ``conf/<name>.yaml``), its one-line summary, what it writes, the
command that takes its result further, and the library study it runs (:data:`sensitivity.studies.STUDIES`: the
verbs and settings on the public face, the result kinds the report tells and summarises), each given or declared
:data:`~sensitivity.studies.NONE`. The command line's list (:func:`available`), the runner's next step
(:data:`workflows.plumbing.runner.NEXT`), the report's kinds (:mod:`workflows.report.kinds`, from the studies) and
the schema registration derive from it; it imports no workflow, so ``sensitivity --help`` imports none.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

from sensitivity.errors import ConfigError
from sensitivity.studies import BY_NAME, NONE, Study, check_parts

_PACKAGE = Path(__file__).resolve().parent.parent  # the `workflows` package

#: The folder holding ``conf/`` and ``data/``: this package in a wheel (``setup.py``'s build step copies the
#: repository's top-level folders into it), else the repository root (a source checkout, an editable install).
RESOURCE_ROOT = _PACKAGE if (_PACKAGE / "conf").is_dir() else _PACKAGE.parent

#: The Hydra config tree (the primary config directory of every workflow).
CONF_DIR = RESOURCE_ROOT / "conf"

@dataclass(frozen=True)
class Workflow:
    """A command of ``sensitivity``.

    Attributes
    ----------
    name
        Its verb: ``sensitivity <name>``.
    module
        Its module (``run(cfg)``).
    line
        Its one-line summary (``sensitivity --help``).
    writes
        What it writes (``-> <writes>`` in the summary), or ``NONE``.
    next
        The command that takes its result further (``{result}``: its result's path, ``{observations}``: the
        observations it read), printed after a run as ``next: sensitivity ...``, or ``NONE``.
    study
        The name of the library study it runs (:data:`sensitivity.studies.STUDIES`), or ``NONE``.
    """

    name: str
    module: str
    line: str
    writes: str | object
    next: str | object
    study: str | object

    def __post_init__(self) -> None:
        check_parts(self, "workflow")
        if self.study is not NONE and self.study not in BY_NAME:
            raise ConfigError(f"workflow {self.name!r}: `study` {self.study!r} is not a study of the library "
                              f"(sensitivity.studies: {', '.join(BY_NAME)})")

    @property
    def summary(self) -> str:
        """The line ``sensitivity --help`` shows."""
        return self.line if self.writes is NONE else f"{self.line} -> {self.writes}"

    @property
    def library(self) -> Study | None:
        """Its library study (verbs, settings, result kinds and their summaries), None for a command of its own."""
        return None if self.study is NONE else BY_NAME[self.study]


#: The commands, in the order `sensitivity --help` lists them.
REGISTRY: tuple[Workflow, ...] = (
    Workflow("run", "workflows.run", "the default study: sweep, calibrate, posterior, propagate and indices of the "
             "SEIR demo surrogate", NONE, NONE, NONE),
    Workflow("sweep", "workflows.sweep", "values and Jacobians of a surrogate over a parameter grid", "sweep.nc",
             "indices dgsm.sweep={result}", "sweep"),
    Workflow("simulate", "workflows.simulate", "the simulator itself (a function, or a program: templated inputs, "
             "parsed outputs) over a parameter grid, locally or on a Dask cluster", "simulate.nc",
             "train training.data={result}", "simulate"),
    Workflow("train", "workflows.train", "fit an ensemble of Keras MLP surrogates (or one) to a simulator or a "
             "dataset", "surrogate.ensemble/ (surrogate.keras), training.nc", "sweep model=keras model.source={result}",
             "train"),
    Workflow("calibrate", "workflows.calibrate", "batched multi-start least-squares fit (trust region, LM or "
             "Gauss-Newton) to observations", "calibration.nc",
             "posterior calibration={result} observations.path={observations}", "calibrate"),
    Workflow("posterior", "workflows.posterior", "posterior of a calibration by batched NUTS chains (TensorFlow "
             "Probability)", "posterior.nc", "propagate propagate=posterior uncertainty.path={result}", "posterior"),
    Workflow("propagate", "workflows.propagate", "uncertainty propagation (first/second order, unscented, Monte "
             "Carlo)", "propagation.nc", "indices", "propagate"),
    Workflow("indices", "workflows.indices", "local, DGSM, Sobol', Morris and active-subspace indices of every "
             "output, cross-checked; Shapley, dependent Sobol', aggregated and given-data indices on request",
             "indices.nc", NONE, "indices"),
    Workflow("reliability", "workflows.reliability", "probability that an output crosses thresholds (FORM, SORM "
             "with exact Hessians, importance sampling, subset simulation, Monte Carlo), fragility curves",
             "reliability.nc", NONE, "reliability"),
    Workflow("worth", "workflows.worth", "what to measure next: forecast variances at a calibration's best fit, "
             "each parameter's contribution, the worth of every observation and candidate, greedy designs (FOSM, "
             "exact Jacobians)", "worth.nc", NONE, "worth"),
    Workflow("verify", "workflows.verify", "the simulator at the points an analysis depends on: the surrogate's "
             "error there against the analysis's own uncertainty, with a verdict; optional refinement of an "
             "ensemble", "verify.nc", NONE, "verify"),
    Workflow("multifidelity", "workflows.multifidelity", "the simulator's own mean, variance and Sobol' indices "
             "from a budget of its runs, the surrogate as control variate, beside the surrogate's with both "
             "intervals", "multifidelity.nc", NONE, "multifidelity"),
    Workflow("export", "workflows.export", "the compiled Jacobian as a standalone TF SavedModel (checked on "
             "reload); PEST .jcb and SALib problem files", NONE, NONE, NONE),
    Workflow("merge", "workflows.merge", "the shards (and swept configs) of a multirun as one dataset", "sweep.nc",
             "indices dgsm.sweep={result}", NONE),
)

#: Workflow name -> module, in registry order.
WORKFLOWS: dict[str, str] = {workflow.name: workflow.module for workflow in REGISTRY}

#: Workflow name -> its record.
BY_WORKFLOW: dict[str, Workflow] = {workflow.name: workflow for workflow in REGISTRY}


def modules():
    """Yield ``(name, module)`` for every workflow whose module exists, in registry order.

    Only a missing workflow module is passed over: a module that exists but fails to import (a
    dependency it needs is missing) raises, instead of its workflow silently leaving the list.
    """
    for name, module_name in WORKFLOWS.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if err.name != module_name:
                raise
            continue
        yield name, module


def available() -> dict[str, str]:
    """Workflows whose module exists (found, not imported), with their one-line summaries."""
    import importlib.util

    return {w.name: w.summary for w in REGISTRY if importlib.util.find_spec(w.module)}
