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


_STUDY_PROBE = """
import sys, sensitivity
from sensitivity.studies import STUDIES, resolve
for study in STUDIES:
    for name, path in study.face().items():
        assert getattr(sensitivity, name) is resolve(path), (study.name, name)
        assert "tensorflow" not in sys.modules, (study.name, name)
for study in STUDIES:  # still the verbs once every module is imported (no subpackage shadows a face name)
    for name, path in study.face().items():
        assert getattr(sensitivity, name) is resolve(path), (study.name, name)
print("ok", sum(len(s.face()) for s in STUDIES))
"""


def test_every_registered_study_has_its_verbs_and_settings_on_the_face_without_tensorflow():
    from sensitivity.studies import STUDIES

    names = {study.name: set(study.face()) for study in STUDIES}
    assert {"reliability", "worth", "multifidelity", "verify", "train", "simulate"} <= set(names)
    assert all(names.values()) and all(n in sensitivity.__all__ for face in names.values() for n in face)
    assert {"reliability", "worth", "multifidelity", "verify_sobol", "train_surrogate", "run_simulator"} <= set(
        sensitivity.__all__)
    done = subprocess.run([sys.executable, "-c", _STUDY_PROBE], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["ok", str(sum(map(len, names.values())))]


def test_the_face_names_of_the_studies_and_the_shared_names_are_distinct():
    from sensitivity.studies import STUDIES

    shared = [name for study in STUDIES for name in study.face() if name in sensitivity._ENGINE]
    faces = [name for study in STUDIES for name in study.face()]
    assert shared == [] and len(faces) == len(set(faces))
