"""Batched multi-start calibration against a Python loop of ``scipy.optimize.least_squares``.

The same problem both ways: K starts (a scrambled Sobol' design over the parameter box), the same
observations and weights, the same bounds, exact Jacobians from the compiled engine.
  (a) batched: :func:`sensitivity.analyses.calibration.calibrate` (the default trust-region solver) as the
      ``calibrate`` workflow runs it: all K starts advanced together, per iteration one float64
      values-only call for every start still running and one Jacobian call for the accepted steps,
      the Jacobian of the steps in float32 (``step_dtype``, the workflow's default); the cost, the
      convergence tests and the statistics in float64. (a64) the same with float64 step Jacobians;
      (aLM) as (a) with Levenberg-Marquardt (``calibrate=levenberg_marquardt``);
  (b) loop: one ``least_squares(method="trf", x_scale="jac")`` per start, its residual and Jacobian
      from per-start engine calls (an engine compiled for one point, values and Jacobian from one
      call, cached between ``fun`` and ``jac``).
The loop is slow, so by default it runs on a subset of the starts and its time is extrapolated
linearly to K (stated in the output). Both use the engine warmed up (compiled) beforehand, and each of
(a) and (b) runs ``--repeats`` times with the fastest run counted on both sides (the rule of ``timeit``: on
a shared machine the slower runs measure the other processes).

Models (``--model``): ``seir`` (the demo surrogate data/seir/surrogate.keras with its shipped
observations data/seir/observations.nc), ``plume`` (the analytic 2-D Gaussian plume with synthetic
observations), or ``auto`` (seir when its files exist, else plume).

Usage: python benchmarks/bench_calibration.py [--model auto] [--starts 10000] [--loop-starts 200] [--repeats 3]
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from sensitivity.runtime.tf_import import import_tensorflow  # noqa: E402

import_tensorflow()  # TensorFlow without the CUDA-probe lines of its wheel on a machine with no GPU

import numpy as np  # noqa: E402
import yaml  # noqa: E402
from scipy import optimize  # noqa: E402

from sensitivity.analyses.calibration import (  # noqa: E402
    BatchedModel, Fit, LevenbergMarquardt, ObservationModel, TrustRegion, calibrate)
from sensitivity.sweep.designs import make_grid  # noqa: E402
from sensitivity.engine.jacobian import compile_jacobian  # noqa: E402
from sensitivity.inputs.space import ParameterSpace  # noqa: E402
from sensitivity.surrogates.load import load_surrogate  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SEIR = ROOT / "data" / "seir"
TOL = 1e-10


def seir_problem(dtype: str = "float64"):
    """The demo surrogate in ``dtype``, its space and its shipped observations."""
    from sensitivity.analyses.calibration.observations import read_observations
    from sensitivity.simulators.seir import output_spec, space

    # the output as the config declares it (`day`), which the stored model predates (`time`)
    model = load_surrogate(str(SEIR / "surrogate.keras"), output=output_spec(), dtype=dtype)
    obs = read_observations(SEIR / "observations.nc", model.output)
    return model, space(), obs.values, obs.errors()


def plume_problem(dtype: str = "float64"):
    """The analytic plume in ``dtype``, the space of conf/space/plume.yaml, noisy observations of a known
    point (computed in float64 whatever ``dtype``)."""
    records = yaml.safe_load((ROOT / "conf" / "space" / "plume.yaml").read_text())["parameters"]
    space = ParameterSpace.from_records(records)
    output = yaml.safe_load((ROOT / "conf" / "model" / "plume.yaml").read_text())

    def load(dt):
        return load_surrogate("sensitivity.simulators.analytic:gaussian_plume", input_names=space.names,
                              input_units=space.units, output=output["output"], kwargs=output["kwargs"], dtype=dt)

    truth = np.array([[1.3, 0.45, 0.6, 0.2]])
    exact = load("float64")
    y = exact(truth).reshape(-1) + 0.02 * np.random.default_rng(0).standard_normal(exact.output_size)
    return load(dtype), space, y, {"sigma": np.full(y.size, 0.02), "cov": None}


def warm(jac, point: np.ndarray, largest: int) -> None:
    """Compile every padded shape the runs below will use (powers of two up to ``largest`` points)."""
    size = 1
    while size <= largest:
        batch = np.repeat(point[None, :], size, axis=0)
        jac(batch)
        jac.values(batch)
        size *= 2


def batched(jac, step_jac, space, y, errors, starts, solver):
    log_mask = np.array([p.scale == "log" for p in space.parameters])
    t0, c0 = time.perf_counter(), time.process_time()
    ds = calibrate(BatchedModel(value_and_jacobian=jac.flat_value_and_jacobian, values=jac.flat_values,
                   step_jacobian=step_jac.flat_value_and_jacobian), ObservationModel.from_arrays(y, **errors),
                   Fit(solver=solver, throw=False, record_history=False), starts=starts, bounds=space.bounds,
                   log_parameters=log_mask)
    return time.perf_counter() - t0, time.process_time() - c0, ds


def loop(jac1, space, y, errors, starts):
    """One scipy least_squares per start; engine calls on one point, shared by fun and jac."""
    from sensitivity.analyses.calibration import ObservationModel

    obs = ObservationModel.from_arrays(y, **errors)
    engine = jac1.flat_value_and_jacobian
    cache: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

    def evaluate(x):
        key = x.tobytes()
        if key not in cache:
            cache.clear()
            values, jacobian = engine(x[None, :])
            cache[key] = obs.residual(values)[0], obs.jacobian(jacobian)[0]
        return cache[key]

    lo, hi = space.bounds.T
    costs, calls = [], 0
    t0, c0 = time.perf_counter(), time.process_time()
    for x0 in starts:
        result = optimize.least_squares(lambda x: evaluate(x)[0], x0, jac=lambda x: evaluate(x)[1], bounds=(lo, hi),
                                        method="trf", x_scale="jac", ftol=TOL, xtol=TOL, gtol=TOL)
        costs.append(result.cost)
        calls += result.nfev
    return time.perf_counter() - t0, time.process_time() - c0, np.array(costs), calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=["auto", "seir", "plume"], default="auto")
    parser.add_argument("--starts", type=int, default=10000)
    parser.add_argument("--loop-starts", type=int, default=200, help="starts run by the scipy loop (extrapolated)")
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs of (a) and of the loop; the fastest of each counts (timeit's rule: slower runs "
                             "measure other processes on the machine)")
    args = parser.parse_args()
    name = args.model if args.model != "auto" else ("seir" if (SEIR / "surrogate.keras").exists() and
                                                    (SEIR / "observations.nc").exists() else "plume")
    model, space, y, errors = seir_problem() if name == "seir" else plume_problem()
    starts = make_grid(space, "sobol", n=args.starts, seed=0).points()
    jac = compile_jacobian(model)
    jac32 = compile_jacobian((seir_problem if name == "seir" else plume_problem)("float32")[0],
                             chunk_size=jac.chunk_size)
    jac1 = compile_jacobian(model, chunk_size=1)
    for engine, largest in ((jac, jac.chunk_size), (jac32, jac32.chunk_size), (jac1, 1)):
        warm(engine, space.nominal, largest)
    print(f"model {name}: {model.n_in} parameters, {model.output_size} outputs "
          f"({int(np.isfinite(y).sum())} observed); engine {jac.mode} mode, chunk {jac.chunk_size}")

    runs = {}
    tr, lm = TrustRegion(ftol=TOL, xtol=TOL, gtol=TOL), LevenbergMarquardt(ftol=TOL, xtol=TOL, gtol=TOL)
    for label, step, solver, repeats in (("(a)  batched trust region, float32 steps", jac32, tr, args.repeats),
                                         ("(a64) batched trust region, float64 steps", jac, tr, 1),
                                         ("(aLM) batched LM, float32 steps", jac32, lm, args.repeats)):
        wall, cpu, ds = min((batched(jac, step, space, y, errors, starts, solver) for _ in range(repeats)),
                            key=lambda run: run[0])
        runs[label] = wall, cpu, ds
        status = ds["status"].values
        print(f"{label}, {len(starts)} starts: {wall:.2f} s wall, {cpu:.2f} s CPU "
              f"({len(starts) / wall:.0f} fits/s), {int((status > 0).sum())} converged, "
              f"{int(ds['n_minima'])} distinct minima, {ds['n_iterations'].values.mean():.1f} iterations per start "
              f"({int(ds['n_iterations'].max())} at most), best cost {float(np.nanmin(ds['cost'].values)):.10g}")
    (wall_a, cpu_a, ds), (wall_64, cpu_64, ds64), (wall_lm, cpu_lm, _) = runs.values()
    shift = np.abs(ds["estimate"].values - ds64["estimate"].values) / ds64["standard_error"].values
    print(f"      float32 vs float64 steps: estimates differ by at most {np.nanmax(shift):.2g} standard errors "
          f"(median {np.nanmedian(shift):.2g})")

    subset = starts[: min(args.loop_starts, len(starts))]
    wall_b, cpu_b, costs, calls = min((loop(jac1, space, y, errors, subset) for _ in range(args.repeats)),
                                      key=lambda run: run[0])
    scale = len(starts) / len(subset)
    note = "" if len(subset) == len(starts) else (
        f" (run on the first {len(subset)} starts, extrapolated linearly to {len(starts)})")
    print(f"(b) scipy least_squares loop: {wall_b / len(subset) * 1e3:.1f} ms wall per fit, "
          f"{calls / len(subset):.1f} engine calls per fit; {wall_b * scale:.1f} s wall, {cpu_b * scale:.1f} s CPU "
          f"for {len(starts)} starts{note}")
    same = np.abs(ds["cost"].values[: len(subset)] - costs) <= 1e-6 * np.maximum(1.0, costs)
    print(f"    same final cost (rel 1e-6) on {int(same.sum())} of {len(subset)} shared starts; "
          f"loop best cost {costs.min():.6g}")
    print(f"(fastest of {args.repeats} runs of (a), (aLM) and (b), one of (a64))")
    print(f"ratio (b)/(a): {wall_b * scale / wall_a:.1f}x wall, {cpu_b * scale / cpu_a:.1f}x CPU  (target >= 50x); "
          f"(b)/(a64): {wall_b * scale / wall_64:.1f}x wall, {cpu_b * scale / cpu_64:.1f}x CPU; "
          f"(b)/(aLM): {wall_b * scale / wall_lm:.1f}x wall, {cpu_b * scale / cpu_lm:.1f}x CPU")


if __name__ == "__main__":
    main()
