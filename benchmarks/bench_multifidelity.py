"""Multifidelity Sobol' indices against simulator-only pick-freeze at an equal simulator budget (Ishigami).

The "simulator" is the Ishigami function (a = 7, b = 0.1, closed-form indices) and the "surrogate" the same
function plus a smooth error whose size sets its correlation with the simulator. Both use one i.i.d.
pick-freeze design of ``N`` row blocks (``A, A_B^(1..3), B``); the simulator runs on the first ``n`` of them,
the surrogate on all ``N``:

  (1) variance of the estimates over ``--seeds`` seeds, multifidelity (``sobol_indices``) over simulator-only
      pick-freeze on the same ``n`` rows (same estimators), for a surrogate with rho >= 0.99.
      Target: >= 10x lower for every main and total index;
  (2) coverage of the 95 % bootstrap intervals of the multifidelity indices for a surrogate of R^2 ~ 0.95,
      over ``--coverage-seeds`` seeds x 6 indices. Target: >= 0.9.

Both print the measured correlation / R^2, the closed-form CV factor 1 - rho^2 (N - n)/N of the numerators,
and the wall time. Nothing here is asserted: the tests check correctness, this prints figures.

Usage: python benchmarks/bench_multifidelity.py [--n-sim 256] [--ratio 64] [--seeds 20] [--coverage-seeds 100]
       [--resamples 200]
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np
from scipy.stats import f as f_dist

from sensitivity.analyses.multifidelity import MFSobol, sobol_indices

A, B = 7.0, 0.1


def ishigami(x: np.ndarray) -> np.ndarray:
    return (np.sin(x[:, 0]) + A * np.sin(x[:, 1]) ** 2 + B * x[:, 2] ** 4 * np.sin(x[:, 0]))[:, None]


def exact() -> dict[str, np.ndarray]:
    v1, v2, v13 = 0.5 * (1 + B * math.pi**4 / 5) ** 2, A**2 / 8, B**2 * math.pi**8 * (1 / 18 - 1 / 50)
    v = v1 + v2 + v13
    return {"variance": np.array(v), "S1": np.array([v1, v2, 0.0]) / v, "ST": np.array([v1 + v13, v2, v13]) / v}


def error(x: np.ndarray) -> np.ndarray:
    """A smooth error of unit scale: a shift, a cosine of x1 and an x2-x3 interaction."""
    return (0.5 + np.cos(x[:, 0]) + 0.6 * np.sin(x[:, 1]) * x[:, 2] / math.pi)[:, None]


def design(rng: np.random.Generator, n: int, d: int = 3) -> np.ndarray:
    a, b = rng.uniform(-math.pi, math.pi, (2, n, d))
    swap = np.eye(d, dtype=bool)[None]
    return np.concatenate([a[:, None], np.where(swap, b[:, None], a[:, None]), b[:, None]], axis=1).reshape(-1, d)


def scale_for(r2: float) -> float:
    """The error scale at which the surrogate's R^2 (1 - Var[error]/Var[f]) is ``r2``, on a large sample."""
    x = np.random.default_rng(12345).uniform(-math.pi, math.pi, (400_000, 3))
    return math.sqrt((1 - r2) * ishigami(x).var() / error(x).var())


def fit(scale: float) -> tuple[float, float]:
    x = np.random.default_rng(54321).uniform(-math.pi, math.pi, (400_000, 3))
    f, g = ishigami(x)[:, 0], ishigami(x)[:, 0] + scale * error(x)[:, 0]
    return float(np.corrcoef(f, g)[0, 1]), float(1 - np.var(g - f) / np.var(f))


def runs(scale: float, seeds: int, n_sim: int, n_sur: int, resamples: int) -> list:
    out = []
    for seed in range(seeds):
        x = design(np.random.default_rng(seed), n_sur)
        out.append(sobol_indices(ishigami(x[: n_sim * 5]), ishigami(x) + scale * error(x), 3,
                                 MFSobol(n_resamples=resamples), seed=seed))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n-sim", type=int, default=256)
    p.add_argument("--ratio", type=int, default=64, help="N / n: surrogate rows per simulator row")
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--coverage-seeds", type=int, default=100)
    p.add_argument("--resamples", type=int, default=200)
    args = p.parse_args()
    n, big = args.n_sim, args.n_sim * args.ratio
    ref = exact()
    print(f"Ishigami, i.i.d. pick-freeze design: simulator on n = {n} row blocks ({5 * n} runs), "
          f"surrogate on N = {big} ({5 * big} runs)")

    scale = scale_for(0.985)
    rho, r2 = fit(scale)
    start = time.perf_counter()
    res = runs(scale, args.seeds, n, big, 0)
    wall = time.perf_counter() - start
    print(f"\n(1) variance over {args.seeds} seeds, equal simulator budget; surrogate rho = {rho:.4f} (R^2 = {r2:.3f})")
    print(f"    closed-form CV factor 1 - rho^2 (N - n)/N of the values: {1 - rho**2 * (big - n) / big:.4f}")
    worst = math.inf
    for key in ("S1", "ST"):
        mf = np.stack([getattr(r, key)[:, 0] for r in res])
        alone = np.stack([r.simulator_only[key][:, 0] for r in res])
        factor = alone.var(axis=0, ddof=1) / mf.var(axis=0, ddof=1)
        worst = min(worst, factor.min())
        formula = np.mean([r.variance_ratio_formula["main" if key == "S1" else "total"][:, 0] for r in res], axis=0)
        print(f"    {key}: exact {np.round(ref[key], 4)}, MF mean {np.round(mf.mean(0), 4)} "
              f"sd {np.round(mf.std(0, ddof=1), 4)}; simulator-only sd {np.round(alone.std(0, ddof=1), 4)}")
        print(f"        variance lower by {np.round(factor, 1)} x (numerators' closed form: {np.round(1 / formula, 1)} x)")
    spread = f_dist.ppf(0.975, args.seeds - 1, args.seeds - 1)
    print(f"    smallest reduction {worst:.1f} x (target >= 10 x)  [{wall:.2f} s for {args.seeds} analyses]")
    print(f"    (a ratio of two {args.seeds}-draw variances is known to a factor ~{spread:.1f} either way, 95 %, "
          f"F({args.seeds - 1}, {args.seeds - 1}); --seeds 100 narrows it)")

    scale = scale_for(0.95)
    rho, r2 = fit(scale)
    start = time.perf_counter()
    res = runs(scale, args.coverage_seeds, n, big, args.resamples)
    wall = time.perf_counter() - start
    inside = np.array([[(getattr(r, f"{k}_interval")[:, 0, 0] <= ref[k]) & (ref[k] <= getattr(r, f"{k}_interval")[:, 0, 1])
                        for k in ("S1", "ST")] for r in res])
    sur = np.array([[(np.abs(r.surrogate_only[k][:, 0] - ref[k])) for k in ("S1", "ST")] for r in res]).mean(0)
    print(f"\n(2) coverage of the 95 % bootstrap intervals ({args.resamples} resamples), surrogate R^2 = {r2:.3f} "
          f"(rho = {rho:.4f}), {args.coverage_seeds} seeds x 6 indices")
    print(f"    per index (S1 x3, ST x3): {np.round(inside.mean(0).reshape(-1), 2)}; surrogate-only |error| "
          f"{np.round(sur.reshape(-1), 3)}")
    print(f"    overall {inside.mean():.3f} (target >= 0.9)  [{wall:.1f} s, {wall / args.coverage_seeds:.2f} s per analysis]")


if __name__ == "__main__":
    main()
