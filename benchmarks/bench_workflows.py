"""Each workflow beside its in-process core, and beside its peer where one is installed.

Every measurement runs in a fresh child process (its own peak RSS, no state from another); within a
child, a workflow and its core alternate round by round, so each ratio compares two timings taken
back to back under the same machine load (the median of the rounds is printed). Sections (``--only``):

* ``sweep``: :func:`sensitivity.sweep.stream.sweep` (what ``sensitivity sweep`` runs once the model is loaded:
  the engine, the record store, the checksum, the published file) against the engine alone computing
  the same Jacobians in memory (``jac(points)``, block by block), on the demo surrogate
  (``data/seir/surrogate.keras``, 6 -> 100 days) and a wide MLP 8 -> [256]x3 tanh -> 64, at 2^18 and
  2^20 points; bytes written (``/proc/self/io`` ``wchar``: every write call of the process) against
  the file's size. Files go to a temporary directory (``--dir``).
* ``scan``: the sweep's time per point from 2^16 to 2^22 points (demo), one child per size.
* ``mc``: :func:`~sensitivity.analyses.propagation.monte_carlo` (2^20 samples, 16 scrambled-Sobol'
  replicates, blocks of 4,096, a truncated-normal calibration-like input) against the bare model
  evaluations of as many points, on the demo surrogate.
* ``posterior``: the propagate stage's posterior predictive (16 chains x 1,000 draws through the demo
  surrogate, ESS-based standard errors): its time, the ESS calls' time and the child's peak RSS; and the
  compiled Hessian at one point, compilation included.
* ``sobol``: Sobol' S1/ST of the demo surrogate's 100 outputs (N = 1,024, 100 bootstrap resamples)
  against SALib (``benchmarks/bench_indices.py``'s two sides), when SALib is installed.
* ``openturns``: Monte Carlo (2^16 points, mean / covariance / quantiles) and first-order Taylor
  propagation of a Gaussian input (std 2 % of each range, correlation 0.3 between neighbours) through
  the demo surrogate against OpenTURNS (the same compiled model and Jacobian behind an
  ``ot.PythonFunction``), when OpenTURNS is installed.

``--baseline DIR`` runs every child a second time with ``PYTHONPATH=DIR`` (another checkout of this
repository, e.g. ``git worktree add /tmp/base <commit>``), interleaved with this tree's, and prints both
columns: before and after, in one run. The Monte Carlo loop holds numpy's BLAS to one thread itself; on a
machine shared with other jobs, ``OPENBLAS_NUM_THREADS=1`` keeps OpenBLAS's spinning threads out of the
other sections too (and out of a baseline that predates that); the printout names the setting and the load.

Usage: python benchmarks/bench_workflows.py [--only sweep scan mc posterior sobol openturns]
       [--rounds 3] [--baseline DIR] [--dir /tmp] [--scan-max 22]
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import child_process

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "data" / "seir" / "surrogate.keras"
WIDE = (8, [256, 256, 256], 64)
SECTIONS = ("sweep", "scan", "mc", "posterior", "sobol", "openturns")


# ----------------------------------------------------------------------------- children (one process each)


def _written() -> int:
    """Bytes this process has passed to write calls so far (``/proc/self/io`` ``wchar``)."""
    with open("/proc/self/io") as f:
        return int(next(line for line in f if line.startswith("wchar")).split()[1])


def _engine(model: str):
    """The compiled engine and parameter space of ``model`` ("demo" or "wide")."""
    import sensitivity
    from sensitivity.inputs.space import ParameterSpace

    if model == "demo":
        from sensitivity.simulators import seir

        space = seir.space()
        surrogate = sensitivity.load_surrogate(str(DEMO), input_names=space.names, input_units=space.units)
    else:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from bench_jacobian import mlp

        n_in, hidden, n_out = WIDE
        net = mlp(n_in, hidden, n_out)
        space = ParameterSpace.from_records([dict(name=f"p{i}", units="1", low=-1, high=1) for i in range(n_in)])
        surrogate = sensitivity.load_surrogate(lambda t: net(t), input_names=space.names, input_units=space.units,
                                               output={"name": "y", "names": [f"y{i}" for i in range(n_out)]})
    return sensitivity.compile_jacobian(surrogate), space


def child_sweep(model: str, n: int, rounds: int, folder: str) -> dict:
    """``rounds`` pairs (engine alone, sweep), alternating which goes first."""
    import sensitivity
    from sensitivity.sweep.designs import make_grid
    from sensitivity.sweep.stream import part_points, sweep

    jac, space = _engine(model)
    grid = make_grid(space, "sobol", n=n, seed=0)
    step = part_points(jac)
    jac(grid.block(0, min(step, n)))  # the XLA compile of the full chunk

    def engine() -> tuple[float, float]:
        t0, c0 = time.perf_counter(), time.process_time()
        for a in range(0, n, step):
            jac(grid.block(a, min(a + step, n)))
        return time.perf_counter() - t0, time.process_time() - c0

    def stream(r: int) -> tuple[float, float, int, int]:
        path = Path(folder) / f"sweep-{model}-{n}-{r}.nc"
        before, t0, c0 = _written(), time.perf_counter(), time.process_time()
        summary = sweep(jac, grid, path, attrs={"title": "bench_workflows"}, fingerprint=f"bench {r}", progress=False)
        seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
        written, size = _written() - before, summary.path.stat().st_size
        for p in path.parent.glob(path.name + "*"):
            p.unlink()
        return seconds, cpu, written, size

    pairs = []
    for r in range(rounds):
        if r % 2:
            s = stream(r)
            e = engine()
        else:
            e = engine()
            s = stream(r)
        pairs.append(dict(engine=e[0], engine_cpu=e[1], sweep=s[0], sweep_cpu=s[1], written=s[2], size=s[3]))
    return dict(pairs=pairs, mode=jac.mode, chunk=jac.chunk_size, package=sensitivity.__file__)


def child_scan(n: int, folder: str) -> dict:
    """One sweep of the demo surrogate over ``n`` points, after the engine's warm-up."""
    from sensitivity.sweep.designs import make_grid
    from sensitivity.sweep.stream import sweep

    jac, space = _engine("demo")
    grid = make_grid(space, "sobol", n=n, seed=0)
    jac(grid.block(0, min(n, 4 * jac.chunk_size)))
    path = Path(folder) / f"scan-{n}.nc"
    t0, c0 = time.perf_counter(), time.process_time()
    sweep(jac, grid, path, attrs={"title": "bench_workflows"}, fingerprint="scan", progress=False)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    for p in path.parent.glob(path.name + "*"):
        p.unlink()
    return dict(seconds=seconds, per_point_us=seconds / n * 1e6, cpu_per_point_us=cpu / n * 1e6)


def _posterior_inputs(space):
    """N(nominal, S) kept inside the bounds: std 5 % of each range, correlation 0.3 between neighbours."""
    import numpy as np

    from sensitivity.inputs.uncertainty import truncated_gaussian_inputs

    std = 0.05 * (space.bounds[:, 1] - space.bounds[:, 0])
    corr = np.eye(len(space)) + 0.3 * (np.eye(len(space), k=1) + np.eye(len(space), k=-1))
    return truncated_gaussian_inputs(space.nominal, corr * np.outer(std, std), space)


def child_mc(n: int, rounds: int) -> dict:
    """``rounds`` pairs (bare evaluations of ``n`` points, Monte Carlo of ``n`` samples)."""
    from sensitivity.analyses.propagation import monte_carlo

    jac, space = _engine("demo")
    inputs = _posterior_inputs(space)
    block = 4096
    x = inputs.sample(block, seed=1)
    monte_carlo(inputs, jac.flat_values, n_samples=2 * block, n_replicates=2, block_size=block, seed=0)  # warm

    def bare() -> float:
        t0 = time.perf_counter()
        for _ in range(n // block):
            jac.flat_values(x)
        return time.perf_counter() - t0

    def mc() -> float:
        t0 = time.perf_counter()
        monte_carlo(inputs, jac.flat_values, n_samples=n, n_replicates=16, block_size=block, seed=0)
        return time.perf_counter() - t0

    pairs = []
    for r in range(rounds):
        first, second = (bare, mc) if r % 2 == 0 else (mc, bare)
        a, b = first(), second()
        pairs.append(dict(bare=a, mc=b) if first is bare else dict(mc=a, bare=b))
    return dict(pairs=pairs)


def child_posterior() -> dict:
    """The posterior predictive of AR(1) chains around the nominal point, and the Hessian at one point."""
    import numpy as np

    from sensitivity.analyses.propagation import predictive
    from sensitivity.engine.hessian import compile_hessian

    jac, space = _engine("demo")
    rng = np.random.default_rng(0)
    c, d, n = 16, 1000, len(space)
    z = np.zeros((c, d, n))
    e = rng.normal(size=(c, d, n))
    for t in range(1, d):
        z[:, t] = 0.7 * z[:, t - 1] + e[:, t]
    draws = space.nominal + 0.02 * (space.bounds[:, 1] - space.bounds[:, 0]) * z / 1.4
    jac.flat_values(draws.reshape(-1, n)[:4096])
    ess_seconds, real = [0.0], predictive.effective_sample_size

    def timed(x):
        t0 = time.perf_counter()
        try:
            return real(x)
        finally:
            ess_seconds[0] += time.perf_counter() - t0

    predictive.effective_sample_size = timed
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    predictive.posterior_predictive(draws, jac.flat_values)
    seconds = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    surrogate = jac.surrogate
    t0 = time.perf_counter()
    compile_hessian(surrogate.fn, surrogate.n_in, output_size=surrogate.output_size,
                    dtype=surrogate.dtype)(space.nominal[None])
    return dict(seconds=seconds, ess=ess_seconds[0], rss_growth=rss - rss0, hessian=time.perf_counter() - t0)


def child_sobol(n: int, rounds: int) -> dict:
    """This package's Sobol' S1/ST against SALib's, both sides of ``bench_indices.py``."""
    import keras
    import numpy as np

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_indices

    jac, space = _engine("demo")
    model = keras.models.load_model(DEMO)
    bench_indices.ours(space, jac, n, 2, 0)
    model.predict(np.zeros((64, len(space)), np.float32), verbose=0)
    ours, salib = [], []
    for _ in range(rounds):
        ours.append(bench_indices.ours(space, jac, n, 100, 0))
        salib.append(bench_indices.salib(space, model, n, 100, 0, None))
    t, _, st = min(ours, key=lambda r: r[0])
    fixed, loop, _, _, st_salib = min(salib, key=lambda r: r[0] + r[1])
    return dict(ours=t, salib=fixed + loop, agreement=float(np.nanmax(np.abs(st - st_salib))))


def child_openturns(n: int, rounds: int) -> dict:
    """Monte Carlo and first-order Taylor propagation: this package against OpenTURNS on the same model."""
    import numpy as np
    import openturns as ot

    from sensitivity.inputs.uncertainty import gaussian_inputs
    from sensitivity.analyses.propagation import first_order, monte_carlo

    ot.Log.Show(ot.Log.NONE)  # its covariance of 100 outputs from 6 inputs is singular, which it warns about
    jac, space = _engine("demo")
    std = 0.02 * (space.bounds[:, 1] - space.bounds[:, 0])  # 2 %: the initial fraction stays > 0 (5 std)
    cov = (np.eye(len(space)) + 0.3 * (np.eye(len(space), k=1) + np.eye(len(space), k=-1))) * np.outer(std, std)
    inputs = gaussian_inputs(space.nominal, cov)
    m, n_in = jac.surrogate.output_size, len(space)

    def gradient(x):  # OpenTURNS wants d y / d x as [n_in, m]
        return jac.flat_value_and_jacobian(np.asarray(x, float)[None])[1][0].T.astype(float)

    f = ot.PythonFunction(n_in, m, func_sample=lambda x: jac.flat_values(np.asarray(x)).astype(float),
                          gradient=gradient)
    dist = ot.Normal(ot.Point(space.nominal), ot.CovarianceMatrix(cov.tolist()))
    p = [0.05, 0.25, 0.5, 0.75, 0.95]

    def ot_mc():
        y = f(dist.getSample(n))
        return np.asarray(y.computeMean()), y.computeCovariance(), y.computeQuantilePerComponent(p)

    def ot_taylor():
        taylor = ot.TaylorExpansionMoments(ot.CompositeRandomVector(f, ot.RandomVector(dist)))
        return np.asarray(taylor.getMeanFirstOrder()), taylor.getCovariance()

    def ours_mc():
        return monte_carlo(inputs, jac.flat_values, n_samples=n, n_replicates=16, sampler="random", seed=0)

    def ours_taylor():
        return first_order(inputs, jac.flat_value_and_jacobian)

    best = {}
    for name, fn in (("ours_mc", ours_mc), ("ot_mc", ot_mc), ("ours_taylor", ours_taylor), ("ot_taylor", ot_taylor)):
        fn()
        times = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            result = fn()
            times.append(time.perf_counter() - t0)
        best[name] = (min(times), result)
    mean_ours, mean_ot = best["ours_mc"][1]["output_mean"].values, best["ot_mc"][1][0]
    taylor_ours, taylor_ot = best["ours_taylor"][1]["output_mean"].values, best["ot_taylor"][1][0]
    scale = np.abs(taylor_ot).max()
    return dict(**{k: v[0] for k, v in best.items()},
                mc_agreement=float(np.abs(mean_ours - mean_ot).max() / scale),
                taylor_agreement=float(np.abs(taylor_ours - taylor_ot).max() / scale))


CHILDREN = {"sweep": child_sweep, "scan": child_scan, "mc": child_mc, "posterior": child_posterior,
            "sobol": child_sobol, "openturns": child_openturns}


# ----------------------------------------------------------------------------- the parent


def run_child(role: str, tree: str | None, *args) -> dict:
    """``role(*args)`` in a fresh process importing ``sensitivity`` from ``tree`` (None: this checkout)."""
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = os.pathsep.join([tree, *filter(None, [env.get("PYTHONPATH")])])
    return child_process.run(__file__, role, *args, env=env, cwd=str(ROOT))


def both(trees: dict[str, str | None], role: str, *args) -> dict[str, dict]:
    """The child in every tree, one after the other (before, after)."""
    return {label: run_child(role, tree, *args) for label, tree in trees.items()}


def median(values) -> float:
    return float(statistics.median(values))


def report(args: argparse.Namespace, work: Path) -> None:
    trees = {"before": args.baseline, "after": None} if args.baseline else {"this tree": None}
    print(f"bench_workflows: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, "
          f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}, files in {work}; "
          + ", ".join(f"{k}: {v or ROOT}" for k, v in trees.items()), flush=True)
    if "sweep" in args.only:
        print("\n| model | points | tree | engine alone | sweep (file published) | sweep / engine speed "
              "| CPU time: engine / sweep | bytes written / file |\n|---|---|---|---|---|---|---|---|", flush=True)
        for model in ("demo", "wide"):
            for exp in (18, 20):
                for label, r in both(trees, "sweep", model, 2**exp, args.rounds, str(work)).items():
                    p = r["pairs"]
                    ratios = [q["engine"] / q["sweep"] for q in p]
                    print(f"| {model} ({r['mode']}, chunk {r['chunk']}) | 2^{exp} | {label} | "
                          f"{median([q['engine'] for q in p]):.2f} s | {median([q['sweep'] for q in p]):.2f} s | "
                          f"{median(ratios):.2f}x (pairs {_list(ratios)}) | "
                          f"{median([q['engine_cpu'] / q['sweep_cpu'] for q in p]):.2f}x | "
                          f"{median([q['written'] / q['size'] for q in p]):.3f}x |", flush=True)
    if "scan" in args.only:
        print("\n| points | tree | sweep | per point | CPU per point |\n|---|---|---|---|---|", flush=True)
        per: dict[str, list[float]] = {label: [] for label in trees}
        cpu: dict[str, list[float]] = {label: [] for label in trees}
        for exp in range(16, args.scan_max + 1):
            for label, tree in trees.items():
                if label == "before" and exp > 20:
                    continue  # the assembly of the old store takes minutes beyond 2^20
                r = run_child("scan", tree, 2**exp, str(work))
                per[label].append(r["per_point_us"])
                cpu[label].append(r["cpu_per_point_us"])
                print(f"| 2^{exp} | {label} | {r['seconds']:.2f} s | {r['per_point_us']:.2f} us | "
                      f"{r['cpu_per_point_us']:.2f} us |", flush=True)
        for label, values in per.items():
            if values:
                print(f"{label}: per-point time {min(values):.2f}-{max(values):.2f} us (max / min "
                      f"{max(values) / min(values):.2f}), CPU {min(cpu[label]):.2f}-{max(cpu[label]):.2f} us "
                      f"(max / min {max(cpu[label]) / min(cpu[label]):.2f})", flush=True)
    if "mc" in args.only:
        print("\n| tree | bare evaluations (2^20) | Monte Carlo (2^20, 16 replicates) | MC / bare |\n|---|---|---|---|",
              flush=True)
        for label, r in both(trees, "mc", 2**20, args.rounds).items():
            p = r["pairs"]
            ratios = [q["mc"] / q["bare"] for q in p]
            print(f"| {label} | {median([q['bare'] for q in p]):.2f} s | {median([q['mc'] for q in p]):.2f} s | "
                  f"{median(ratios):.2f}x (pairs {_list(ratios)}) |", flush=True)
    if "posterior" in args.only:
        print("\n| tree | posterior predictive (16 x 1000 draws) | of which ESS | peak RSS growth | "
              "Hessian at one point (compile + call) |\n|---|---|---|---|---|", flush=True)
        for label, r in both(trees, "posterior").items():
            print(f"| {label} | {r['seconds']:.2f} s | {r['ess']:.2f} s | {r['rss_growth']:.0f} MiB | "
                  f"{r['hessian']:.2f} s |", flush=True)
    if "sobol" in args.only and _installed("SALib"):
        print("\n| tree | Sobol' S1/ST, N = 1024, 100 outputs | SALib | SALib / this | max abs ST difference |"
              "\n|---|---|---|---|---|", flush=True)
        for label, r in both(trees, "sobol", 1024, args.rounds).items():
            print(f"| {label} | {r['ours']:.2f} s | {r['salib']:.2f} s | {r['salib'] / r['ours']:.1f}x | "
                  f"{r['agreement']:.1e} |", flush=True)
    if "openturns" in args.only and _installed("openturns"):
        print("\n| tree | MC 2^16 (this) | MC 2^16 (OpenTURNS) | OT / this | Taylor (this) | Taylor (OpenTURNS) "
              "| OT / this | max mean difference / max |mean|: MC, Taylor |\n|---|---|---|---|---|---|---|---|",
              flush=True)
        for label, r in both(trees, "openturns", 2**16, args.rounds).items():
            print(f"| {label} | {r['ours_mc']:.3f} s | {r['ot_mc']:.3f} s | {r['ot_mc'] / r['ours_mc']:.1f}x | "
                  f"{r['ours_taylor'] * 1e3:.1f} ms | {r['ot_taylor'] * 1e3:.1f} ms | "
                  f"{r['ot_taylor'] / r['ours_taylor']:.1f}x | {r['mc_agreement']:.1e}, {r['taylor_agreement']:.1e} |",
                  flush=True)


def _list(values) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


def _installed(name: str) -> bool:
    from importlib.util import find_spec

    if find_spec(name) is None:
        print(f"\n({name} is not installed: pip install -e '.[bench]')")
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument("--rounds", type=int, default=3, help="pairs per measurement (median printed)")
    parser.add_argument("--baseline", default=None, help="another checkout: measured beside this one")
    parser.add_argument("--dir", default=None, help="where the files go (a temporary directory in it)")
    parser.add_argument("--scan-max", type=int, default=22, help="largest sweep of the scan: 2^scan_max points")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if child_process.serve(args.child, CHILDREN):
        return
    work = Path(tempfile.mkdtemp(prefix="bench_workflows_", dir=args.dir))
    try:
        report(args, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
