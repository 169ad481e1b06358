"""FORM/SORM with exact derivatives against OpenTURNS' FORM/SORM on finite differences; IS and subset simulation
against Monte Carlo.

(a) On each problem, :func:`sensitivity.analyses.reliability.reliability` (the compiled float64 surrogate of a
    TensorFlow function: exact Jacobians, the engine's Hessian for SORM) against OpenTURNS' ``FORM`` and ``SORM``
    (``SQP``, its defaults) on the same function as a ``PythonFunction`` without derivatives, so OpenTURNS takes its
    default finite-difference gradient and Hessian. Reported: beta and Pf of both, the model evaluations (ours:
    points evaluated with their exact Jacobian, plus Hessians; theirs: every call of the function, the finite
    differences included) and the wall time (fastest of ``--repeats``).
(b) Importance sampling at the design point and subset simulation against a Monte Carlo reference computed here
    (``--mc`` draws in blocks) or the closed form, down to Pf ~ 1e-6: the estimate, its 95 % interval, whether the
    reference lies inside, the coefficient of variation and the evaluations. Subset simulation runs ``--subsets``
    times with independent seeds (one run's error is ~15 % at these sizes, so one seed says little about bias):
    the mean with its standard error, how often the intervals cover, Au & Beck's CoV against the runs' own.

(c) ``--seir``: the demo's P(daily new infections > T on day t), 20 thresholds x 100 days = 2000 events in one
    call of :func:`~sensitivity.analyses.reliability.reliability` (FORM + importance sampling, 400 samples per
    event: the settings of the SEIR test in ``tests/workflows/test_reliability.py``) on the shipped surrogate
    ``data/seir/surrogate.keras`` (float32, the engine's defaults): wall and CPU time of the call (fastest of
    ``--repeats``, after one call that compiles), split into FORM and importance sampling, and the evaluations.

Usage: python benchmarks/bench_reliability.py [--repeats 3] [--mc 20000000] [--subsets 20]
       python benchmarks/bench_reliability.py --seir [--repeats 3]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import tensorflow as tf
from scipy import stats

from sensitivity.analyses.reliability import (FormSettings, ImportanceSettings, ReliabilitySettings, SubsetSettings,
                                              form, importance_sampling, nataf, output_hessian, reliability,
                                              subset_simulation)
from sensitivity.engine.jacobian import compile_jacobian
from sensitivity.inputs.space import ParameterSpace
from sensitivity.surrogates.load import load_surrogate

N_LINEAR = 20


def rs_lognormal(x):
    return x[:, :1] - x[:, 1:2]


def mixed(x):
    return (2.2 * x[:, 1] * x[:, 3] / x[:, 2] - 0.35 * x[:, 0])[:, None]


def paraboloid(x):
    k = tf.constant(np.linspace(0.05, 0.3, 9), dtype=x.dtype)
    return (x[:, 9] - 0.5 * tf.reduce_sum(k * x[:, :9] ** 2, axis=1))[:, None]


def linear(x):
    return tf.reduce_sum(x, axis=1, keepdims=True)


PROBLEMS = {  # name: (function, parameters, threshold, direction, numpy twin, OpenTURNS marginals)
    "R - S lognormal (2)": (rs_lognormal, [{"kind": "lognorm", "s": 0.25, "scale": 10.0},
                                           {"kind": "lognorm", "s": 0.3, "scale": 4.0}], 0.0, "below",
                            lambda x: x[0] - x[1],
                            lambda ot: [ot.LogNormal(np.log(10.0), 0.25), ot.LogNormal(np.log(4.0), 0.3)]),
    "mixed marginals (4)": (mixed, [{"kind": "gumbel_r", "loc": 10.0, "scale": 2.0},
                                    {"kind": "lognorm", "s": 0.25, "scale": float(np.e)},
                                    {"kind": "uniform", "loc": 1.0, "scale": 2.0},
                                    {"kind": "norm", "loc": 5.0, "scale": 2.0}], 0.0, "below",
                            lambda x: 2.2 * x[1] * x[3] / x[2] - 0.35 * x[0],
                            lambda ot: [ot.Gumbel(2.0, 10.0), ot.LogNormal(1.0, 0.25), ot.Uniform(1.0, 3.0),
                                        ot.Normal(5.0, 2.0)]),
    "paraboloid (10)": (paraboloid, [{"kind": "norm", "loc": 0.0, "scale": 1.0}] * 10, 3.0, "above",
                        lambda x: x[9] - 0.5 * float(np.dot(np.linspace(0.05, 0.3, 9), np.square(x[:9]))),
                        lambda ot: [ot.Normal(0.0, 1.0)] * 10),
    f"linear ({N_LINEAR})": (linear, [{"kind": "norm", "loc": 0.0, "scale": 1.0}] * N_LINEAR, 4.0 * np.sqrt(N_LINEAR),
                             "above", lambda x: float(np.sum(x)), lambda ot: [ot.Normal(0.0, 1.0)] * N_LINEAR),
}


def fastest(call, repeats):
    best, out = np.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        out = call()
        best = min(best, time.perf_counter() - start)
    return out, best


def ours(name, repeats):
    fn, params, threshold, direction, _, _ = PROBLEMS[name]
    space = ParameterSpace.from_records([{"name": f"x{i}", "units": "1", "distribution": p}
                                         for i, p in enumerate(params)])
    surrogate = load_surrogate(fn, input_names=space.names, input_units=space.units, dtype="float64",
                               output={"name": "y", "units": "1", "names": ["y"]})
    engine = compile_jacobian(surrogate, jit_compile=False)
    settings = ReliabilitySettings(thresholds=(threshold,), direction=direction, methods=("form", "sorm"),
                                   form=FormSettings(tolerance=1e-6))
    hessian = output_hessian(engine, np.zeros(1, dtype=int))  # compiled once, as a workflow does
    reliability(engine, space, settings, hessian=hessian)  # traces once
    return fastest(lambda: reliability(engine, space, settings, hessian=hessian), repeats)


def theirs(name, repeats):
    import openturns as ot

    _, _, threshold, direction, twin, marginals = PROBLEMS[name]
    n = len(marginals(ot))

    def run():
        function = ot.PythonFunction(n, 1, lambda x: [twin(np.asarray(x))])
        distribution = ot.JointDistribution(marginals(ot)) if hasattr(ot, "JointDistribution") else \
            ot.ComposedDistribution(marginals(ot))
        event = ot.ThresholdEvent(ot.CompositeRandomVector(function, ot.RandomVector(distribution)),
                                  ot.Less() if direction == "below" else ot.Greater(), threshold)
        first = ot.FORM(ot.SQP(), event, distribution.getMean())
        first.run()
        form_calls = function.getEvaluationCallsNumber()
        second = ot.SORM(ot.SQP(), event, distribution.getMean())
        second.run()
        return first.getResult(), second.getResult(), form_calls, function.getEvaluationCallsNumber() - form_calls

    return fastest(run, repeats)


def compare(repeats: int) -> None:
    print("(a) FORM / SORM: this project (exact derivatives) vs OpenTURNS (finite differences)")
    print(f"{'problem':22s} {'beta ours':>10s} {'beta OT':>10s} {'Pf FORM ours':>13s} {'Pf FORM OT':>11s} "
          f"{'SORM ours':>10s} {'SORM OT':>10s} {'evals ours':>11s} {'evals OT':>9s} {'FORM ratio':>10s} "
          f"{'t ours':>7s} {'t OT':>7s}")
    for name in PROBLEMS:
        ds, t_ours = ours(name, repeats)
        (first, second, calls_form, calls_sorm), t_ot = theirs(name, repeats)
        names = list(ds["reliability_method_name"].values)
        pf = ds["pf"].values.reshape(len(names))
        evaluations = ds["evaluations"].values
        ours_form = int(evaluations[0])
        ours_all = ours_form + int(evaluations[names.index("sorm_breitung")])
        print(f"{name:22s} {float(ds['form_beta'].values.ravel()[0]):10.6f} {first.getHasoferReliabilityIndex():10.6f} "
              f"{pf[0]:13.4e} {first.getEventProbability():11.4e} {pf[names.index('sorm_breitung')]:10.4e} "
              f"{second.getEventProbabilityBreitung():10.4e} {ours_all:11d} {calls_form + calls_sorm:9d} "
              f"{calls_form / ours_form:9.1f}x {t_ours:7.3f} {t_ot:7.3f}")


def sampling(mc: int, subsets: int) -> None:
    print("\n(b) sampling estimates against references (95 % intervals)")
    rng = np.random.default_rng(0)
    cases = []
    for beta in (3.0, 4.0, 4.75):  # closed form: a linear limit state of 10 standard normals
        a = np.ones(10) / np.sqrt(10.0)
        cases.append((f"linear beta={beta}", lambda u, a=a, beta=beta: beta - u @ a,
                      lambda u, a=a: (-a[None, :].repeat(len(u), 0)), 10, float(stats.norm.sf(beta)), "closed form"))
    space = nataf([stats.lognorm(0.25, scale=10.0), stats.lognorm(0.3, scale=4.0)])
    t = 2.0

    def rs(x):
        return x[:, 0] - t * x[:, 1]

    reference, done, block = 0, 0, 10_000_000
    while done < mc:
        size = min(block, mc - done)
        reference += int(np.sum(rs(space.to_physical(rng.standard_normal((size, 2)))) <= 0))
        done += size
    p_mc = reference / mc
    cases.append(("R - 2 S lognormal", lambda u: rs(space.to_physical(u)), None, 2, p_mc,
                  f"Monte Carlo {mc:.0e} ({reference} failures, CoV {np.sqrt((1 - p_mc) / (mc * p_mc)):.1%})"))
    print(f"{'case':22s} {'reference':>10s} {'method':>10s} {'Pf':>10s} {'interval':>23s} {'in':>3s} {'CoV':>6s} "
          f"{'evals':>7s}  reference from")
    for name, g, grad, n, ref, source in cases:
        if grad is None:
            in_u = space.pull_back(lambda x: (x[:, 0] - t * x[:, 1], np.stack([np.ones(len(x)), -t * np.ones(len(x))], 1)))
        else:
            in_u = lambda u, g=g, grad=grad: (g(u), grad(u))  # noqa: E731
        design = form(in_u, np.zeros((1, n)))
        found = np.isfinite(design.design_beta[0])
        r = importance_sampling(g, design.design_u[0, found], ImportanceSettings(n_samples=20_000),
                                betas=design.design_beta[0, found], seed=1)
        inside = "yes" if r.interval[0, 0] <= ref <= r.interval[0, 1] else "NO"
        print(f"{name:22s} {ref:10.3e} {'IS':>10s} {r.pf[0]:10.3e} [{r.interval[0, 0]:10.3e}, "
              f"{r.interval[0, 1]:10.3e}] {inside:>3s} {r.cov[0]:6.1%} {r.evaluations:7d}  {source}")
        runs = [subset_simulation(g, n, SubsetSettings(n_per_level=5_000), seed=seed)
                for seed in rng.integers(2**32, size=subsets)]
        pf = np.array([s.pf for s in runs])
        covered = np.mean([s.interval[0] <= ref <= s.interval[1] for s in runs])
        print(f"{name:22s} {ref:10.3e} {'subset':>10s} {pf.mean():10.3e} mean of {subsets} runs, +- "
              f"{pf.std(ddof=1) / np.sqrt(subsets):9.2e} (se); intervals cover {covered:4.0%}, CoV "
              f"{np.mean([s.cov for s in runs]):5.1%} (Au-Beck) vs {pf.std(ddof=1) / pf.mean():5.1%} (the runs'), "
              f"{int(np.mean([s.evaluations for s in runs]))} evals")


def seir(repeats: int) -> None:
    from pathlib import Path

    import sensitivity.analyses.reliability.driver as driver
    from sensitivity.analyses.reliability import ImportanceSettings as IS
    from sensitivity.simulators import seir as demo

    space = demo.space()
    surrogate = load_surrogate(str(Path(__file__).resolve().parents[1] / "data/seir/surrogate.keras"),
                               input_names=space.names, input_units=space.units)
    low, high = space.bounds.T
    engine = compile_jacobian(surrogate, probe_points=np.stack([space.nominal, low + 0.7 * (high - low)]))
    thresholds = tuple(float(t) for t in np.geomspace(10.0, 2000.0, 20).round(1))
    settings = ReliabilitySettings(thresholds=thresholds, methods=("form", "importance_sampling"),
                                   importance=IS(n_samples=400),
                                   form=FormSettings(tolerance=1e-3, max_iterations=30, max_backtracks=10))
    phases = {}

    def timed(name, fn):
        def call(*args, **kwargs):
            start, cpu = time.perf_counter(), time.process_time()
            out = fn(*args, **kwargs)
            phases[name] = (time.perf_counter() - start, time.process_time() - cpu)
            return out
        return call

    driver.form = timed("FORM", driver.form)
    driver.importance_sampling_events = timed("importance sampling", driver.importance_sampling_events)
    reliability(engine, space, settings)  # compiles the engine's chunk functions
    best = None
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        ds = reliability(engine, space, settings)
        run = (time.perf_counter() - start, time.process_time() - cpu, dict(phases))
        best = run if best is None or run[0] < best[0] else best
    wall, cpu, split = best
    evaluations = ds["evaluations"].values
    print(f"(c) SEIR: P(new infections > T on day t), {len(thresholds)} thresholds x 100 days = "
          f"{ds['pf'].shape[1] * ds['pf'].shape[2]} events in one call: {wall:.2f} s wall, {cpu:.2f} s CPU "
          f"(fastest of {repeats}; " + ", ".join(f"{k} {w:.2f} s wall / {c:.2f} s CPU" for k, (w, c) in split.items())
          + f"); evaluations FORM {int(evaluations[0])} (value + Jacobian), importance sampling {int(evaluations[1])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mc", type=int, default=20_000_000)
    parser.add_argument("--subsets", type=int, default=20, help="independent subset simulations per case")
    parser.add_argument("--seir", action="store_true", help="only (c): the SEIR demo's 2000 events in one call")
    args = parser.parse_args()
    if args.seir:
        seir(args.repeats)
        return
    compare(args.repeats)
    sampling(args.mc, args.subsets)


if __name__ == "__main__":
    main()
