"""The figure modules leave matplotlib's backend to their caller."""
from __future__ import annotations

import importlib
import pkgutil

import matplotlib

import sensitivity.plots


def test_importing_the_figure_modules_keeps_the_callers_backend():
    before = matplotlib.get_backend()
    matplotlib.use("svg")  # a non-interactive backend other than the Agg the workflows select
    try:
        names = ["sensitivity.plots"] + [f"sensitivity.plots.{m.name}" for m in pkgutil.iter_modules(sensitivity.plots.__path__)]
        assert len(names) > 1
        for name in names:
            importlib.reload(importlib.import_module(name))  # run each module's import-time code again
        assert matplotlib.get_backend() == "svg"
    finally:
        matplotlib.use(before)
