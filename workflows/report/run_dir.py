"""What a run directory holds: its stages' folders with their result files and figures, and the commands that
made them.

A run of ``sensitivity run`` has one folder per stage (``<run dir>/<stage>/``); a run of a single workflow
holds its results itself, and is then its own one stage. Hydra records the run's command in
``.hydra/overrides.yaml`` and its config (with the chain's stage list) in ``.hydra/config.yaml``.
"""
from __future__ import annotations

import base64
import shlex
import struct
from dataclasses import dataclass
from pathlib import Path

import yaml

from sensitivity.datasets import checksum_path, content_hash
from workflows.report.page import Figure

#: Hydra's record of a run (``hydra.output_subdir``).
HYDRA_DIR = ".hydra"
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class StageFiles:
    """The files of one stage: its result datasets and PNG figures, each sorted by name."""

    name: str
    folder: Path
    results: list[Path]
    figures: list[Path]

    @classmethod
    def of(cls, name: str, folder: Path) -> "StageFiles":
        return cls(name, folder, *(sorted(p for p in folder.glob(f"*.{ext}") if p.is_file() and
                                          not p.name.startswith(".")) for ext in ("nc", "png")))


def stage_files(run_dir: Path) -> tuple[list[StageFiles], bool]:
    """The stages of ``run_dir`` in the order of the chain's stage list (when Hydra recorded one), else in the
    order they were written; and whether ``run_dir`` is itself the one stage (a single workflow's run)."""
    own = StageFiles.of(hydra_job(run_dir) or run_dir.name, run_dir)
    if own.results or own.figures:
        return [own], True
    stages = [StageFiles.of(p.name, p) for p in sorted(run_dir.iterdir())
              if p.is_dir() and not p.name.startswith(".")]
    stages = [s for s in stages if s.results or s.figures]
    listed = [s["name"] for s in chain_stages(run_dir)]
    return sorted(stages, key=lambda s: (listed.index(s.name) if s.name in listed else len(listed),
                                         min(p.stat().st_mtime for p in s.results + s.figures))), False


def _hydra(run_dir: Path, name: str):
    path = run_dir / HYDRA_DIR / name
    return yaml.safe_load(path.read_text()) if path.is_file() else None


def hydra_job(run_dir: Path) -> str | None:
    """The workflow Hydra ran in ``run_dir`` (``hydra.job.name``), None without Hydra's record."""
    record = _hydra(run_dir, "hydra.yaml") or {}
    return (record.get("hydra", {}).get("job") or {}).get("name")


def chain_stages(run_dir: Path) -> list[dict]:
    """The stage list of a ``sensitivity run`` (name, workflow, overrides, inputs) as Hydra recorded it."""
    stages = (_hydra(run_dir, "config.yaml") or {}).get("stages") or []
    return [s for s in stages if isinstance(s, dict) and "name" in s]


def run_command(run_dir: Path) -> str:
    """The command that made ``run_dir`` (``sensitivity <workflow> <overrides>``), '' without Hydra's record."""
    job, overrides = hydra_job(run_dir), _hydra(run_dir, "overrides.yaml")
    return "" if job is None else shlex.join(["sensitivity", job, *map(str, overrides or [])])


def stage_commands(run_dir: Path) -> dict[str, str]:
    """Each stage's command from the recorded stage list, its inputs named by the stage whose result they take."""
    return {s["name"]: shlex.join(["sensitivity", str(s.get("workflow", "")), *map(str, s.get("overrides") or [])])
            + "".join(f" {key}=<result of stage {source}>" for key, source in (s.get("inputs") or {}).items())
            for s in chain_stages(run_dir)}


def checksum(path: Path) -> str:
    """``sha256:<hex>`` of a result: the checksum recorded beside it when there is one (a large sweep is not
    read again), else computed."""
    record = checksum_path(path)
    if record.is_file():
        digest = record.read_text().split()[:1]
        if digest:
            return f"sha256:{digest[0]}"
    return content_hash(path)


def size_text(path: Path) -> str:
    """A file's size in B, KiB, MiB or GiB."""
    size = float(path.stat().st_size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return ""


def figure(path: Path) -> Figure:
    """A PNG file as an embedded figure; its pixel size from the PNG header (width and height of IHDR)."""
    data = path.read_bytes()
    width, height = struct.unpack(">II", data[16:24]) if data.startswith(_PNG_SIGNATURE) else (0, 0)
    return Figure(path.name, "data:image/png;base64," + base64.b64encode(data).decode("ascii"), width, height)
