"""Linear data worth on arrays against pyEMU's ``Schur``: candidates' worth and a greedy design.

The same problem both ways: ``--params`` parameters with a correlated prior, ``--obs`` existing observations with
diagonal noise, ``--candidates`` candidate observations with their own noise variances, ``--forecasts`` forecasts.
  (a) worth of every candidate: :func:`sensitivity.analyses.worth.added_importance` (one batched rank-one update
      for all candidates) against ``Schur.get_added_obs_importance`` (one sub-problem per candidate);
  (b) greedy design of ``--k`` candidates for one forecast: :func:`~sensitivity.analyses.worth.next_most_important`
      against ``Schur.next_most_important_added_obs``.
Each side runs ``--repeats`` times and the fastest run counts (the rule of ``timeit``: on a shared machine the
slower runs measure the other processes); pyEMU's greedy is slow, so it runs once. The results are compared
(max relative difference) so the ratio is between equal answers. pyEMU is optional: without it only our times
print.

With ``--seir``, the SEIR demo instead (data/seir: 6 parameters, 70 observed days, 30 candidate days, the three
forecasts and designs of 10 of conf/experiment/seir_worth.yaml, at the true parameters): the model runs a PEST-style
finite-difference Jacobian takes (``n_par + 1`` per Jacobian, at the best fit and at each of ``--draws`` posterior
draws) against the engine's one batched call, the time of each, and the whole analysis (the verb
:func:`sensitivity.analyses.worth.worth`) linear and averaged over the draws; then pyEMU's ``Schur`` on the same
linearisation (the engine's Jacobian, the forecasts' gradients, the prior and the noise): the worth of every candidate
day and each forecast's greedy design against the verb's.

Usage: python benchmarks/bench_worth.py [--params 10] [--obs 20] [--candidates 400] [--forecasts 3] [--k 10]
       python benchmarks/bench_worth.py --seir [--draws 200]
"""
from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from sensitivity.analyses.worth import DesignSettings, added_importance, fosm, next_most_important


def fastest(call, repeats):
    """The result of ``call()`` and its fastest wall time over ``repeats`` runs [s]."""
    best, out = np.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        out = call()
        best = min(best, time.perf_counter() - start)
    return out, best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", type=int, default=10)
    parser.add_argument("--obs", type=int, default=20)
    parser.add_argument("--candidates", type=int, default=400)
    parser.add_argument("--forecasts", type=int, default=3)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seir", action="store_true", help="the SEIR demo through the compiled surrogate")
    parser.add_argument("--draws", type=int, default=200, help="--seir: posterior draws of the averaged analysis")
    args = parser.parse_args()
    if args.seir:
        seir(args)
        return
    rng = np.random.default_rng(0)
    n, m, c, f = args.params, args.obs, args.candidates, args.forecasts
    g = rng.normal(size=(n, n))
    prior, jac, noise = g @ g.T / n + np.eye(n), rng.normal(size=(m, n)), rng.uniform(0.3, 1.5, m)
    cand, cand_noise, fore = rng.normal(size=(c, n)), rng.uniform(0.2, 2.0, c), rng.normal(size=(n, f))
    pars, obs = [f"p{i}" for i in range(n)], [f"o{i}" for i in range(m)]
    cands, fores = [f"c{i}" for i in range(c)], [f"f{i}" for i in range(f)]
    settings = DesignSettings(criterion="variance", k=args.k, forecast="f0")

    def ours_worth():
        return added_importance(fosm(jac, prior, noise, fore, parameter_names=pars, observation_names=obs,
                                     forecast_names=fores), cand, cand_noise, candidate_names=cands)

    def ours_design():
        return next_most_important(fosm(jac, prior, noise, fore, parameter_names=pars, observation_names=obs,
                                        forecast_names=fores), cand, cand_noise, settings, candidate_names=cands)

    worth, t_worth = fastest(ours_worth, args.repeats)
    design, t_design = fastest(ours_design, args.repeats)
    print(f"problem: {n} parameters, {m} observations, {c} candidates, {f} forecasts; greedy k = {args.k}")
    print(f"ours   worth of {c} candidates: {1e3 * t_worth:9.2f} ms   greedy design: {1e3 * t_design:9.2f} ms")
    schur = pyemu_schur(jac, prior, noise, fore, cand, cand_noise, pars, obs, cands, fores)
    if schur is None:
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame, p_worth = fastest(lambda: schur.get_added_obs_importance({k: [k] for k in cands}, base_obslist=list(obs),
                                                                        reset_zero_weight=0.0), 1)
        steps, p_design = fastest(lambda: schur.next_most_important_added_obs(
            forecast="f0", niter=args.k, obslist_dict={k: [k] for k in cands}, base_obslist=list(obs),
            reset_zero_weight=0.0), 1)
    diff_worth = np.max(np.abs(frame.loc[cands, fores].to_numpy() / worth.variance - 1))
    same = list(steps["best_obs"]) == list(design.chosen)
    diff_design = np.max(np.abs(steps["f0_variance"].to_numpy() / design.variance[:, 0] - 1))
    print(f"pyemu  worth of {c} candidates: {1e3 * p_worth:9.2f} ms   greedy design: {1e3 * p_design:9.2f} ms")
    print(f"ratio (pyemu / ours)  worth: {p_worth / t_worth:8.0f}x   greedy design: {p_design / t_design:8.0f}x")
    print(f"agreement: worth max rel. diff {diff_worth:.1e}; design same picks: {same}, variance max rel. diff "
          f"{diff_design:.1e}")


def pyemu_schur(jac, prior, noise, fore, cand, cand_noise, pars, obs, cands, fores):
    """pyEMU's ``Schur`` of the problem (observations and candidates in one Jacobian and one diagonal noise
    covariance, the candidates zero-weighted by the calls' ``base_obslist``); None, with a line, without pyEMU."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pyemu
    except ImportError:
        print("pyemu is not importable: no comparison")
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return pyemu.Schur(jco=pyemu.Jco(x=np.vstack([jac, cand]), row_names=obs + cands, col_names=pars),
                           parcov=pyemu.Cov(x=prior, names=pars),
                           obscov=pyemu.Cov(x=np.concatenate([noise, cand_noise])[:, None], names=obs + cands,
                                            isdiagonal=True),
                           forecasts=pyemu.Matrix(x=fore, row_names=pars, col_names=fores), verbose=False)


def seir(args) -> None:
    """The SEIR demo: finite-difference model runs against the engine's calls, and the whole analysis."""
    import json
    from pathlib import Path

    import xarray as xr
    import yaml

    from sensitivity.analyses.worth import WorthSettings, worth
    from sensitivity.engine.jacobian import compile_jacobian
    from sensitivity.inputs.space import ParameterSpace
    from sensitivity.surrogates.load import load_surrogate

    root = Path(__file__).resolve().parent.parent
    space = ParameterSpace.from_records(yaml.safe_load((root / "conf/space/seir.yaml").read_text())["parameters"])
    forecasts = yaml.safe_load((root / "conf/experiment/seir_worth.yaml").read_text())["forecasts"]
    with xr.open_dataset(root / "data/seir/observations.nc") as obs:
        observed, sigma = obs["observed"].values, obs["sigma"].values
        truth = json.loads(obs.attrs["true_parameters"])
    x = np.array([truth[name] for name in space.names])
    surrogate = load_surrogate(str(root / "data/seir/surrogate.keras"), input_names=space.names, dtype="float64")
    engine = compile_jacobian(surrogate, "forward")
    n = len(space)
    rng = np.random.default_rng(0)
    low, high = space.bounds.T
    draws = np.clip(x + 0.02 * (high - low) * rng.standard_normal((args.draws, n)), low, high)
    step = 1e-6 * np.maximum(np.abs(x), 1e-12)
    fd_points = np.vstack([x, x + np.diag(step)])  # PEST: the base run and one perturbed run per parameter
    engine(x[None, :])  # compiled before timing
    surrogate(fd_points)
    _, t_engine = fastest(lambda: engine(x[None, :]), args.repeats)
    _, t_fd = fastest(lambda: [surrogate(p[None, :]) for p in fd_points], args.repeats)
    _, t_engine_draws = fastest(lambda: engine(draws), args.repeats)
    settings = WorthSettings(forecasts=forecasts)
    common = dict(best_fit=x, observed_values=observed, noise=sigma)
    ds, t_linear = fastest(lambda: worth(engine, space, settings, **common), args.repeats)
    _, t_averaged = fastest(lambda: worth(engine, space, settings, draws=draws, **common), 1)
    print(f"SEIR: {n} parameters, {int(ds.attrs['n_observed'])} observed days, {int(ds.attrs['n_candidates'])} "
          f"candidate days, {len(forecasts)} forecasts, designs of {settings.design.k}")
    print(f"Jacobian at the best fit: finite differences {n + 1} model runs {1e3 * t_fd:8.2f} ms   engine 1 call "
          f"{1e3 * t_engine:8.2f} ms")
    print(f"Jacobians at {args.draws} draws: finite differences {(n + 1) * args.draws} model runs   engine 1 batched "
          f"call {1e3 * t_engine_draws:8.2f} ms")
    print(f"whole analysis: linear {1e3 * t_linear:8.1f} ms   averaged over {args.draws} draws "
          f"{1e3 * t_averaged:8.1f} ms")
    seir_against_pyemu(engine, space, settings, ds, x, observed, sigma)


def seir_against_pyemu(engine, space, settings, ds, x, observed, sigma) -> None:
    """pyEMU's ``Schur`` on the same linearisation (the engine's Jacobian at ``x``, the forecasts' gradients, the
    space's prior, the observations' and candidates' noise): the worth of every candidate day and each forecast's
    greedy design, against ``ds`` (the verb's result)."""
    import re

    from sensitivity.outputs.functionals import resolve

    values, jac = engine(x[None, :])
    y, J = values[0].reshape(-1), jac[0].reshape(values[0].size, -1)
    fn = resolve(settings.forecasts, engine.surrogate.output)
    fore = fn.apply(values, jac)[1][0].T  # [n_par, n_forecasts]
    seen = np.isfinite(np.asarray(observed, float).reshape(-1))
    days = np.flatnonzero(~seen) + 1
    pars, fores = [f"p{i}" for i in range(len(space))], [f"f{i}" for i in range(len(fn))]
    obs, cands = [f"o{d}" for d in np.flatnonzero(seen) + 1], [f"c{d}" for d in days]
    cand_noise = (settings.candidate_sigma + settings.candidate_relative_sigma * np.abs(y[~seen])) ** 2
    schur = pyemu_schur(J[seen], space.moments()[1], np.asarray(sigma, float).reshape(-1)[seen] ** 2, fore,
                        J[~seen], cand_noise, pars, obs, cands, fores)
    if schur is None:
        return
    def groups():  # pyEMU's greedy pops its picks from the dict it is given: a fresh one per call
        return {c: [c] for c in cands}

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frame, t_worth = fastest(lambda: schur.get_added_obs_importance(groups(), base_obslist=obs,
                                                                        reset_zero_weight=0.0), 1)
        designs, t_design = fastest(lambda: [schur.next_most_important_added_obs(
            forecast=f, niter=settings.design.k, obslist_dict=groups(), base_obslist=obs, reset_zero_weight=0.0)
            for f in fores], 1)
    theirs = frame.loc["base", fores].to_numpy() - frame.loc[cands, fores].to_numpy()
    ours = ds["added_worth"].values[:, days - 1].T
    same = all(list(steps["best_obs"]) == ["c" + re.search(r"day=(\d+)", c)[1] for c in ds["design_choice"].values[f]]
               for f, steps in enumerate(designs))
    variance = max(np.max(np.abs(steps[f"{name}_variance"].to_numpy() / ds["design_variance"].values[f, :, f] - 1))
                   for f, (name, steps) in enumerate(zip(fores, designs)))
    print(f"pyemu on the same linearisation: worth of {len(cands)} candidates {1e3 * t_worth:8.1f} ms, "
          f"{len(fores)} designs of {settings.design.k} {1e3 * t_design:8.1f} ms")
    print(f"agreement: worth max rel. diff {np.max(np.abs(ours / theirs - 1)):.1e}; designs same picks: {same}, "
          f"variance max rel. diff {variance:.1e}")


if __name__ == "__main__":
    main()
