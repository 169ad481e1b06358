"""``sensitivity init DIR``: write a study skeleton a scientist edits into their own study.

The folder gets ``conf/space/``, ``conf/model/`` and ``conf/experiment/`` (found by the CLI
because ``./conf`` goes on Hydra's search path ahead of the packaged configs), a model stub
``model.py`` (importable as ``model:response`` from that folder) and a README. Existing files
are never overwritten.
"""
from __future__ import annotations

import sys
from pathlib import Path

from sensitivity.datasets import write_text_atomic
from sensitivity.errors import SensitivityError

FILES = {
    "conf/space/study.yaml": """\
# The inputs of your model, in the order of its input vector x[:, 0], x[:, 1], ...
# distribution: any continuous scipy.stats distribution by name with its parameters, optionally truncated
# (`truncate: [low, high]`, null for an open side); low/high are derived when omitted (README: Parameter spaces).
parameters:
  - {name: a, units: "1", long_name: first input, distribution: {kind: uniform, loc: 0.0, scale: 1.0}}
  - {name: b, units: "1", long_name: second input, distribution: {kind: norm, loc: 1.0, scale: 0.2, truncate: [0.5, null]}}
  - {name: c, units: "1", long_name: third input, distribution: {kind: gumbel_r, loc: 2.0, scale: 0.5, truncate: [0.0, 6.0]}}
""",
    "conf/model/study.yaml": """\
# Your model: a TF-traceable function x[B, n_in] -> y[B] (one output) or y[B, m] (m named outputs).
source: model:response          # module:function, imported from this folder
kwargs: {}                      # keyword arguments of the function (checked against its signature)
output: {name: y, units: "1", long_name: model response}
""",
    "conf/experiment/study.yaml": """\
# @package _global_
# The whole study, in one file: `sensitivity run experiment=study` chains its stages; `sensitivity <workflow>
# experiment=study` runs one workflow. Each workflow takes its own keys from this file and ignores the others'.
defaults:
  - override /model: study
  - override /space: study
grid:                           # the design of the sweep (and, with training.runs points, of train)
  n: 1024                       # sweep: points of the sweep (values and Jacobians of the model at each)
  through: distribution         # drawn from the inputs' distributions (DGSM and pointwise propagation read the sweep)
training:                       # train: a surrogate of a simulator of your own (sensitivity train experiment=study)
  runs: 512                     # train: simulator runs of the training design, the training size (not grid.n;
                                #   docs/how-to/training-size.md: how many for how many inputs)
  # simulator: model:simulate   # train: a numpy function x [N, n] -> y [N, ...] (training.simulator)
# simulator:                   # train, verify, multifidelity, simulate: a program as the simulator instead
#   program: legacy/beam.yaml   #   (docs/how-to/simulator-program.md); executor: {kind: dask} on a cluster
sobol:
  n: 4096                       # indices: the Sobol' design
# input_fields: {rain: [8, 8]}  # indices: maps of the indices of a field of inputs named rain_* (row by row)
# observations: {path: observations.nc}   # calibrate and posterior (docs/how-to/observations.md)
# prior: {from_space: true}     # calibrate: the inputs' distributions as the prior, for a fit the data underdetermine
stages:                         # sensitivity run experiment=study
  - name: sweep
    workflow: sweep
  - name: propagate
    workflow: propagate
    inputs: {pointwise.sweep: sweep}   # + sigma_y at every sweep point
  - name: indices
    workflow: indices
    inputs: {dgsm.sweep: sweep}        # DGSM from the stored sweep
""",
    "model.py": '''\
"""Your model. Replace ``response`` with your own; keep it TensorFlow-traceable (tf ops, no numpy on x)."""
import tensorflow as tf


def response(x: tf.Tensor) -> tf.Tensor:
    """y = a + b^2 c, one value per point: x [B, 3] -> y [B]."""
    a, b, c = tf.unstack(x, axis=1)
    return a + b**2 * c
''',
    "README.md": """\
# My study

Made by `sensitivity init`. Run every command from this folder: its `conf/` goes ahead of the
packaged configs, and `model.py` is importable as `model:response`.

| file | what |
|---|---|
| `model.py` | the model: x[B, n_in] -> y[B] or y[B, m], TensorFlow-traceable |
| `conf/model/study.yaml` | where the model is (`module:function`, a .keras file or a SavedModel) and its outputs |
| `conf/space/study.yaml` | the inputs: names, units, distributions (any scipy.stats one, optionally truncated) |
| `conf/experiment/study.yaml` | the study: which model and space, every workflow's settings, the stages of `run` |

```bash
sensitivity run experiment=study               # every stage -> outputs/run/study/<stage>/, and report.html
sensitivity sweep experiment=study             # values and Jacobians over a Sobol' grid -> outputs/sweep/...
sensitivity indices experiment=study           # Sobol', DGSM, Morris, local and active-subspace indices
sensitivity propagate experiment=study         # mean, std, quantiles of y from the input distributions
sensitivity sweep experiment=study --cfg job   # the composed config
```

Each workflow writes into `outputs/<workflow>/<overrides>-<hash>/` (`outputs/<workflow>/latest` is the last one)
and ends by logging its result and the next command. Rerunning `sensitivity run experiment=study` skips every
stage whose settings and inputs are unchanged, and recomputes the stages a change reaches.
""",
}


def init(directory: str | Path) -> list[Path]:
    """Write the skeleton into ``directory`` (created if needed); return the files written.

    Each file is written atomically (:func:`sensitivity.datasets.write_text_atomic`).

    Parameters
    ----------
    directory
        The study folder; none of :data:`FILES` may exist in it yet.

    Returns
    -------
    list of Path
        The files written, in the order of :data:`FILES`.

    Raises
    ------
    FileExistsError
        When one of the files exists already (nothing is written then).
    DataError
        When a file cannot be written (full disk, read-only folder).
    """
    root = Path(directory)
    existing = [root / name for name in FILES if (root / name).exists()]
    if existing:
        raise FileExistsError(f"sensitivity init: {existing[0]} exists; choose an empty folder")
    return [write_text_atomic(text, root / name) for name, text in FILES.items()]


def main(argv: list[str]) -> int:
    """``sensitivity init DIR``: exit status 0, or 2 with a one-line message."""
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: sensitivity init DIR", file=sys.stderr)
        return 2
    try:
        written = init(argv[0])
    except (FileExistsError, SensitivityError) as err:  # an existing file; a full disk or read-only folder
        print(err, file=sys.stderr)
        return 2
    print(f"wrote {len(written)} files into {argv[0]}; next: cd {argv[0]} && sensitivity run experiment=study")
    return 0
