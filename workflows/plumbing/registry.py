"""The workflow registry: which workflows exist, where their modules and configs are.

Imported by the command line (:mod:`workflows.cli`), the schema registration
(:mod:`workflows.plumbing.schema`) and the study chain (:mod:`workflows.run`); it imports none of them.
Each workflow is a module with a ``run(cfg)`` function, optionally a ``SCHEMA`` dataclass and a
``POSITIONAL`` config key, a primary config ``conf/<workflow>.yaml`` and a line in :data:`SUMMARIES` (here, so
that ``sensitivity --help`` imports no workflow).
"""
from __future__ import annotations

import importlib
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent  # the `workflows` package

#: The folder holding ``conf/`` and ``data/``: this package in a wheel (``setup.py``'s build step copies the
#: repository's top-level folders into it), else the repository root (a source checkout, an editable install).
RESOURCE_ROOT = _PACKAGE if (_PACKAGE / "conf").is_dir() else _PACKAGE.parent

#: The Hydra config tree (the primary config directory of every workflow).
CONF_DIR = RESOURCE_ROOT / "conf"

#: Workflow name -> module, in the order `sensitivity --help` lists them.
WORKFLOWS = {
    "run": "workflows.run",
    "sweep": "workflows.sweep",
    "simulate": "workflows.simulate",
    "train": "workflows.train",
    "calibrate": "workflows.calibrate",
    "posterior": "workflows.posterior",
    "propagate": "workflows.propagate",
    "indices": "workflows.indices",
    "reliability": "workflows.reliability",
    "worth": "workflows.worth",
    "verify": "workflows.verify",
    "multifidelity": "workflows.multifidelity",
    "export": "workflows.export",
    "merge": "workflows.merge",
}


#: Workflow name -> its one-line summary (``sensitivity --help``).
SUMMARIES = {
    "run": "the default study: sweep, calibrate, posterior, propagate and indices of the SEIR demo surrogate",
    "sweep": "values and Jacobians of a surrogate over a parameter grid -> sweep.nc",
    "simulate": "the simulator itself (a function, or a program: templated inputs, parsed outputs) over a parameter "
                "grid, locally or on a Dask cluster -> simulate.nc",
    "train": "fit an ensemble of Keras MLP surrogates (or one) to a simulator or a dataset -> surrogate.ensemble/ "
             "(surrogate.keras), training.nc",
    "calibrate": "batched multi-start least-squares fit (trust region, LM or Gauss-Newton) to observations "
                 "-> calibration.nc",
    "posterior": "posterior of a calibration by batched NUTS chains (TensorFlow Probability) -> posterior.nc",
    "propagate": "uncertainty propagation (first/second order, unscented, Monte Carlo) -> propagation.nc",
    "indices": "local, DGSM, Sobol', Morris and active-subspace indices of every output, cross-checked; Shapley, "
               "dependent Sobol', aggregated and given-data indices on request -> indices.nc",
    "reliability": "probability that an output crosses thresholds (FORM, SORM with exact Hessians, importance "
                   "sampling, subset simulation, Monte Carlo), fragility curves -> reliability.nc",
    "worth": "what to measure next: forecast variances at a calibration's best fit, each parameter's contribution, "
             "the worth of every observation and candidate, greedy designs (FOSM, exact Jacobians) -> worth.nc",
    "verify": "the simulator at the points an analysis depends on: the surrogate's error there against the analysis's "
              "own uncertainty, with a verdict; optional refinement of an ensemble -> verify.nc",
    "multifidelity": "the simulator's own mean, variance and Sobol' indices from a budget of its runs, the surrogate as "
                     "control variate, beside the surrogate's with both intervals -> multifidelity.nc",
    "export": "the compiled Jacobian as a standalone TF SavedModel (checked on reload); PEST .jcb and SALib problem "
              "files",
    "merge": "the shards (and swept configs) of a multirun as one dataset -> sweep.nc",
}


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

    return {name: SUMMARIES[name] for name, module in WORKFLOWS.items() if importlib.util.find_spec(module)}
