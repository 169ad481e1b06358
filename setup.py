"""Build step that ships the repository's ``conf/`` and ``data/`` inside the ``workflows`` package.

Everything else is declared in ``pyproject.toml``. The top-level folders stay the one source;
a wheel gets copies at ``workflows/conf`` and ``workflows/data`` (see ``workflows/plumbing/registry.py``),
while an editable install reads the top-level folders directly.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

RESOURCES = ("conf", "data")


class BuildWithResources(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        root = Path(__file__).resolve().parent
        for name in RESOURCES:
            target = Path(self.build_lib) / "workflows" / name
            shutil.rmtree(target, ignore_errors=True)
            shutil.copytree(root / name, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


setup(cmdclass={"build_py": BuildWithResources})
