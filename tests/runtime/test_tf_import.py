"""The command line's TensorFlow import: no CUDA probe lines on a machine without a GPU, other messages kept."""
from __future__ import annotations

import subprocess
import sys

import pytest

from sensitivity.runtime.tf_import import CUDA_ABSENT_MARKERS

pytestmark = pytest.mark.slow

SCRIPT = """
import os, sys
from sensitivity.runtime.tf_import import import_tensorflow
tf = import_tensorflow()
print("devices", len(tf.config.list_physical_devices()))
os.write(2, b"after import: still on stderr\\n")
"""


def run(script: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "TF_ENABLE_ONEDNN_OPTS": "0"}
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)


def test_import_drops_only_the_cuda_absent_lines():
    plain = run("import tensorflow as tf; tf.config.list_physical_devices()")
    assert plain.returncode == 0, plain.stderr
    if "cudart_stub.cc" not in plain.stderr:
        pytest.skip("this TensorFlow build or machine prints no CUDA probe lines (a GPU, or a CPU-only wheel)")
    done = run(SCRIPT)
    assert done.returncode == 0, done.stderr
    assert "devices" in done.stdout
    assert not [line for line in done.stderr.splitlines() if any(m in line for m in CUDA_ABSENT_MARKERS)], done.stderr
    assert "after import: still on stderr" in done.stderr


@pytest.mark.parametrize("workflow", [["sweep", "grid.n=8"], ["sweep", "experiment=seir_ensemble", "grid.n=8"]])
def test_a_workflow_imports_tensorflow_only_through_the_quiet_import(workflow, tmp_path):
    """The sweep imported the engine's modules (and so TensorFlow) before the quiet import: its CUDA probe lines
    reached the terminal of every default study."""
    plain = run("import tensorflow as tf; tf.config.list_physical_devices()")
    if "cudart_stub.cc" not in plain.stderr:
        pytest.skip("this TensorFlow build or machine prints no CUDA probe lines (a GPU, or a CPU-only wheel)")
    from tests.helpers import CLI, ROOT

    done = subprocess.run(CLI + [*workflow, "plots=false", "progress=false", f"hydra.run.dir={tmp_path}"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300,
                          env={"PATH": "/usr/bin:/bin", "TF_ENABLE_ONEDNN_OPTS": "0"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert not [line for line in done.stderr.splitlines() if any(m in line for m in CUDA_ABSENT_MARKERS)], done.stderr
