"""Start-up: the wall time of CLI calls that end before any work (help, a printed config, ``init``, config errors),
side by side with ``python -c "import tensorflow"`` as the reference, in one run.

Each call runs the installed ``sensitivity`` console script (the one beside this interpreter) in a fresh
temporary working directory, so a call that reaches Hydra's run directory writes nothing into the checkout;
``--rounds`` repeats every call, interleaved, and the best round counts (the machine may be shared). The
last column names the heavy modules the call imported (``tensorflow``, ``scipy.stats``, ``xarray``,
``netCDF4``), read from ``sys.modules`` at exit in one more run through the same entry point; the target of
issue 28 is a config error in <= 1.5 s.

Usage: python benchmarks/bench_startup.py [--rounds 3] [--only NAME ...]
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


def wall(argv: list[str]) -> tuple[float, int, str]:
    """Seconds, exit status and stderr of ``argv`` run in a fresh temporary directory."""
    env = {**os.environ, "TF_ENABLE_ONEDNN_OPTS": "0", "TF_CPP_MIN_LOG_LEVEL": "2"}
    with tempfile.TemporaryDirectory() as cwd:
        t0 = time.perf_counter()
        proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
        return time.perf_counter() - t0, proc.returncode, proc.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--only", nargs="*", choices=list(CALLS), default=None)
    args = parser.parse_args()
    calls = {name: CALLS[name] for name in (args.only or CALLS)}
    reference = [sys.executable, "-c", "import tensorflow"]
    best: dict[str, float] = {}
    status: dict[str, int] = {}
    for _ in range(args.rounds):
        for name, argv in [("import tensorflow", None), *calls.items()]:
            seconds, code, _ = wall(reference if argv is None else [str(BIN), *argv])
            best[name] = min(best.get(name, float("inf")), seconds)
            status[name] = code
    modules = {}
    for name, argv in calls.items():
        stderr = wall([sys.executable, "-c", PROBE, *argv])[2]
        line = next((s for s in reversed(stderr.splitlines()) if s.startswith("MODULES")), "MODULES ?")
        modules[name] = " ".join(line.split()[1:]) or "-"
    ref = best["import tensorflow"]
    load = os.getloadavg()[0]
    print(f"# sensitivity start-up, best of {args.rounds} round(s), {os.cpu_count()} cores, load {load:.2f}")
    print(f"{'call':<46} {'exit':>4} {'wall s':>7} {'/ import tf':>11}  heavy modules imported")
    label = 'python -c "import tensorflow"'
    print(f"{label:<46} {status['import tensorflow']:>4} {ref:>7.2f} {1.0:>11.2f}")
    for name in calls:
        print(f"{'sensitivity ' + name:<46} {status[name]:>4} {best[name]:>7.2f} {best[name] / ref:>11.2f}  "
              f"{modules[name]}")
    errors = [n for n in calls if status[n] == 2]
    worst = max(errors, key=best.get, default=None)
    if worst is not None:
        print(f"slowest config error: {worst} {best[worst]:.2f} s (target <= 1.5 s: "
              f"{'met' if best[worst] <= 1.5 else 'missed'})")


if __name__ == "__main__":
    main()
