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

Usage: python benchmarks/bench_worth.py [--params 10] [--obs 20] [--candidates 400] [--forecasts 3] [--k 10]
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
    args = parser.parse_args()
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
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import pyemu
    except ImportError:
        print("pyemu is not importable: no comparison")
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        schur = pyemu.Schur(jco=pyemu.Jco(x=np.vstack([jac, cand]), row_names=obs + cands, col_names=pars),
                            parcov=pyemu.Cov(x=prior, names=pars),
                            obscov=pyemu.Cov(x=np.concatenate([noise, cand_noise])[:, None], names=obs + cands,
                                             isdiagonal=True),
                            forecasts=pyemu.Matrix(x=fore, row_names=pars, col_names=fores), verbose=False)
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


if __name__ == "__main__":
    main()
