"""Shared test helpers: the one place test modules import shared code from.

The rule: a test module imports shared code only from this package (``tests.helpers.<module>``):
independent references (:mod:`.references`, :mod:`.functions`, the flood study :mod:`.flood`), models that configs load by
import path (:mod:`.models`, :mod:`.calibration_models`), the CF checker (:mod:`.cf`) and the
constants below. Pytest fixtures live in ``tests/conftest.py``. No test module imports another
test module or ``conftest``.
"""
from __future__ import annotations

import sys
from pathlib import Path

#: The repository root.
ROOT = Path(__file__).resolve().parent.parent.parent

#: The command line, run as a subprocess of the test's interpreter.
CLI = [sys.executable, "-m", "workflows"]
