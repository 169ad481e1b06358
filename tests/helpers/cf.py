"""The IOOS compliance checker (CF 1.8) as an independent judge of the datasets written."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def cf_report(path: Path) -> dict[str, list[str]]:
    """Every message of the IOOS compliance checker (CF 1.8) on ``path``, by priority: ``high`` (errors),
    ``medium`` and ``low`` (warnings)."""
    out = subprocess.run([Path(sys.executable).parent / "compliance-checker", "-t", "cf:1.8", "-f", "json",
                          "-o", "-", str(path)], capture_output=True, text=True)
    report = json.loads(out.stdout)["cf:1.8"]
    return {level: [msg for item in report[f"{level}_priorities"] for msg in item["msgs"]]
            for level in ("high", "medium", "low")}


def cf_errors(path: Path) -> list[str]:
    """High-priority failures of the IOOS compliance checker (CF 1.8) on ``path``."""
    return cf_report(path)["high"]


def cf_errors_of(paths: list[Path]) -> dict[Path, list[str]]:
    """High-priority failures of the checker on each of ``paths``, in one run of it (it takes many files)."""
    out = subprocess.run([Path(sys.executable).parent / "compliance-checker", "-t", "cf:1.8", "-f", "json_new",
                          "-o", "-", *map(str, paths)], capture_output=True, text=True)
    report = json.loads(out.stdout)
    return {path: [msg for item in report[str(path)]["cf:1.8"]["high_priorities"] for msg in item["msgs"]]
            for path in paths}
