"""A study to report on: the species x day model of the study matrix (:mod:`tests.helpers.study_matrix`) through
the stages of ``sensitivity run`` at small sizes, in a folder made by ``sensitivity init``.

:data:`STAGES` is the chain (the default study's stages on this model); :func:`write_chain_study` writes the
study folder with an experiment ``chain`` whose ``stages`` run it (``sensitivity run experiment=chain``), and
:func:`run_stages` runs the same stages one by one in this process, each into ``<run dir>/<stage>/``, as
``sensitivity run`` lays them out.
"""
from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.study_matrix import write_study

#: The model: outputs on (species, day).
SHAPE = "labels_by_numbers"

#: (stage, workflow, its overrides, config key -> the stage whose result it takes), in the order of
#: ``conf/run.yaml``'s default study.
STAGES = (
    ("sweep", "sweep", ["grid.through=distribution"], {}),
    ("calibrate", "calibrate", [], {"sweep_path": "sweep"}),
    ("posterior", "posterior", [], {"calibration": "calibrate"}),
    ("propagate", "propagate", ["propagate=calibration"],
     {"uncertainty.path": "calibrate", "pointwise.sweep": "sweep", "posterior.path": "posterior"}),
    ("indices", "indices", [], {}),
)


def chain_experiment() -> str:
    """The experiment file of :data:`STAGES` for ``sensitivity run`` (JSON is YAML)."""
    stages = [{"name": name, "workflow": workflow, "overrides": [f"experiment={SHAPE}", *overrides],
               "inputs": inputs} for name, workflow, overrides, inputs in STAGES]
    return "# @package _global_\n# The species x day study as one chain.\nstages: " + json.dumps(stages) + "\n"


def write_chain_study(folder: Path) -> Path:
    """``sensitivity init`` a study folder, add the study matrix's models and the experiment ``chain``."""
    from workflows.init import init

    init(folder)
    write_study(folder)
    (folder / "conf" / "experiment" / "chain.yaml").write_text(chain_experiment())
    return folder


def run_stages(study: Path, run_dir: Path, *overrides: str) -> dict[str, Path]:
    """Run :data:`STAGES` in this process, composed on the study's config path as the command line composes
    them, from the study folder (the caller changes into it); returns each stage's result path."""
    from workflows.cli import _compose
    from workflows.plumbing.runner import run_workflow
    from workflows.plumbing.schema import register

    register()
    results: dict[str, Path] = {}
    for name, workflow, own, inputs in STAGES:
        args = [f"experiment={SHAPE}", f"output_dir={run_dir / name}", *own, *overrides,
                *(f"{key}={results[source]}" for key, source in inputs.items())]
        results[name] = run_workflow(workflow, _compose(workflow, args, str(study / "conf")))
    return results
