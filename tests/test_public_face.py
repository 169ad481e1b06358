"""The public face: what a notebook reaches from ``import sensitivity``, and what that import costs."""
from __future__ import annotations

import subprocess
import sys

import sensitivity

_PROBE = """
import sys, sensitivity
names = [n for n in sensitivity.__all__ if n not in sensitivity._ENGINE]
served = [getattr(sensitivity, n) for n in names]
print("before", "tensorflow" in sys.modules)
sensitivity.compile_jacobian
print("after", "tensorflow" in sys.modules)
"""


def test_the_study_verbs_settings_and_results_import_no_tensorflow_until_an_engine_name_is_used():
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True).stdout.split("\n")
    assert "before False" in out and "after True" in out


def test_every_public_name_is_served_and_is_what_its_module_defines():
    from sensitivity.analyses.indices import compute
    from sensitivity.analyses.propagation import propagate
    from sensitivity.datasets import select

    assert all(getattr(sensitivity, name) is not None for name in sensitivity.__all__)
    assert (sensitivity.propagate, sensitivity.select, sensitivity.compute_indices) == (propagate, select, compute)
