"""Start-up: the wall time of CLI calls that end before any work (help, a printed config, ``init``, config errors),
side by side with ``python -c "import tensorflow"`` as the reference, in one run.

Each call runs the installed ``sensitivity`` console script (the one beside this interpreter) in a fresh
temporary working directory, so a call that reaches Hydra's run directory writes nothing into the checkout;
``--rounds`` repeats every call, interleaved, and the best round counts (the machine may be shared). The
last column names the heavy modules the call imported (``tensorflow``, ``scipy.stats``, ``xarray``,
``netCDF4``), read from ``sys.modules`` at exit in one more run through the same entry point; the target of
issue 28 is a config error in <= 1.5 s.

``--baseline DIR`` runs every call a second time with ``PYTHONPATH=DIR`` (another checkout of this repository,
e.g. ``git worktree add /tmp/base <commit>`` or ``git archive <commit> | tar -x -C /tmp/base``), interleaved with
this tree's, and prints both columns: before and after, in one run.

Usage: python benchmarks/bench_startup.py [--rounds 3] [--only NAME ...] [--baseline DIR]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).with_name("sensitivity")

#: name -> the console script's arguments (``init`` writes into the temporary directory)
CALLS = {
    "--help": ["--help"],
    "sweep --help": ["sweep", "--help"],
    "sweep --cfg job": ["sweep", "--cfg", "job"],
    "indices --cfg job": ["indices", "--cfg", "job"],
    "init x": ["init", "x"],
    "sweep grid.n=abc": ["sweep", "grid.n=abc"],
    "sweep grid.seeed=3": ["sweep", "grid.seeed=3"],
    "sweep space_file=nope.json": ["sweep", "space_file=nope.json"],
    "calibrate observations.path=nope.nc": ["calibrate", "observations.path=nope.nc"],
    "indices sobol.n=-3": ["indices", "sobol.n=-3"],
}

HEAVY = ("tensorflow", "scipy.stats", "xarray", "netCDF4")

#: the console script's entry point, reporting the heavy modules it imported
PROBE = ("import atexit, sys\n"
         f"atexit.register(lambda: print('MODULES', *[m for m in {HEAVY!r} if m in sys.modules], file=sys.stderr))\n"
         "sys.argv = ['sensitivity', *sys.argv[1:]]\n"
         "from workflows.cli import main\n"
         "sys.exit(main())\n")


def wall(argv: list[str], pythonpath: str | None = None) -> tuple[float, int, str]:
    """Seconds, exit status and stderr of ``argv`` run in a fresh temporary directory (with ``PYTHONPATH``)."""
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONDONTWRITEBYTECODE": "1"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    with tempfile.TemporaryDirectory() as cwd:
        t0 = time.perf_counter()
        proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
        return time.perf_counter() - t0, proc.returncode, proc.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--only", nargs="*", choices=list(CALLS), default=None)
    parser.add_argument("--baseline", default=None, help="another checkout, run with PYTHONPATH=DIR beside this one")
    args = parser.parse_args()
    base = str(Path(args.baseline).resolve()) if args.baseline else None
    calls = {name: CALLS[name] for name in (args.only or CALLS)}
    reference = [sys.executable, "-c", "import tensorflow"]
    best: dict[tuple[str, str | None], float] = {}
    status: dict[tuple[str, str | None], int] = {}
    trees = [None, base] if base else [None]
    for _ in range(args.rounds):
        for name, argv in [("import tensorflow", None), *calls.items()]:
            for tree in trees if argv is not None else [None]:
                seconds, code, _ = wall(reference if argv is None else [str(BIN), *argv], tree)
                best[name, tree] = min(best.get((name, tree), float("inf")), seconds)
                status[name, tree] = code
    modules = {}
    for name, argv in calls.items():
        for tree in trees:
            stderr = wall([sys.executable, "-c", PROBE, *argv], tree)[2]
            line = next((s for s in reversed(stderr.splitlines()) if s.startswith("MODULES")), "MODULES ?")
            modules[name, tree] = " ".join(line.split()[1:]) or "-"
    ref = best["import tensorflow", None]
    load = os.getloadavg()[0]
    print(f"# sensitivity start-up, best of {args.rounds} round(s), {os.cpu_count()} cores, load {load:.2f}"
          + (f"; before: PYTHONPATH={base}" if base else ""))
    head = f"{'call':<50} {'exit':>4}" + (f" {'before s':>8} {'/ tf':>5}" if base else "")
    print(f"{head} {'wall s':>7} {'/ import tf':>11}  heavy modules imported" + ("  (before)" if base else ""))
    rows = [('python -c "import tensorflow"', "import tensorflow")] + [(f"sensitivity {n}", n) for n in calls]
    for label, name in rows:
        line = f"{label:<50} {status[name, None]:>4}"
        if base:
            old = best[name, base if name in calls else None]
            line += f" {old:>8.2f} {old / ref:>5.2f}"
        line += f" {best[name, None]:>7.2f} {best[name, None] / ref:>11.2f}"
        if name in calls:
            line += f"  {modules[name, None]}" + (f"  ({modules[name, base]})" if base else "")
        print(line)
    status = {name: code for (name, tree), code in status.items() if tree is None}
    best = {name: value for (name, tree), value in best.items() if tree is None}
    errors = [n for n in calls if status[n] == 2]
    worst = max(errors, key=best.get, default=None)
    if worst is not None:
        print(f"slowest config error: {worst} {best[worst]:.2f} s (target <= 1.5 s: "
              f"{'met' if best[worst] <= 1.5 else 'missed'})")


if __name__ == "__main__":
    main()
