"""The simulator's failure probabilities from a few of its runs: multifidelity importance sampling on a reliability
analysis's proposal, the surrogate as control variate (:func:`failure_probabilities`).

The surrogate builds the biasing density and the simulator weighs the samples (Peherstorfer, Cui, Marzouk &
Willcox 2016, doi:10.1016/j.cma.2015.12.002): the biasing density is the reliability analysis's own importance
sampling proposal, the mixture of normals at the surrogate's design points
(:class:`~sensitivity.analyses.reliability.sampling.Mixture`), redrawn with its sample size and weights. The
surrogate runs on every draw, ``Pf_sur = mean(w 1[g_sur <= 0])``; the simulator runs on a simple random subsample
of the draws the surrogate fails (``failure_runs``) and of those it does not (``safe_runs``), and the two strata
estimate the change its own sign of ``g`` makes, so that

    ``Pf_sim = Pf_sur + mean(w (1[g_sim <= 0] - 1[g_sur <= 0]))``

is unbiased for the *simulator's* failure probability whatever the surrogate's error (the mixture has full
support), with the standard error of both parts and a normal interval at ``level`` (clipped at 0). This is the
estimator of :func:`sensitivity.analyses.verify.reliability.verify_reliability` (stratified sampling, Cochran 1977,
ch. 5), which runs it to judge the surrogate: here it is the answer, beside the surrogate's own ``Pf_sur`` and its
interval. Where the simulator fails in a region the proposal misses, only the safe stratum's subsample sees it:
the pilot is topped up to the runs that would see a factor-2 change of Pf (about ``2 z / Pf`` safe runs, at most
``max_runs``), and an event that stays short of them is inconclusive.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable

import numpy as np

from sensitivity.analyses.multifidelity import checks
from sensitivity.analyses.multifidelity.checks import Seed
from sensitivity.analyses.verify.reliability import FlatFn, ReliabilityEvents, verify_reliability
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")

METHOD = ("multifidelity importance sampling (Peherstorfer, Cui, Marzouk & Willcox 2016) on the reliability "
          "analysis's proposal, the surrogate as control variate in two strata (Cochran 1977, ch. 5)")
REFERENCES = "doi:10.1016/j.cma.2015.12.002"


@dataclass(frozen=True)
class MFReliability:
    """Settings of :func:`failure_probabilities`.

    Parameters
    ----------
    failure_runs, safe_runs
        Simulator runs per event among the redrawn importance samples the surrogate fails / does not fail
        (>= 2 each): the pilot [runs].
    max_runs
        Most simulator runs per event, pilot included: where the pilot could not have seen a factor-2 change of Pf,
        the strata are topped up to the runs that would
        (:func:`~sensitivity.analyses.verify.reliability.verify_reliability`), at most this many [runs].
    level
        Confidence level of the intervals and of the verdict on the surrogate's error, in (0, 1).
    """

    failure_runs: int = 64
    safe_runs: int = 64
    max_runs: int = 4096
    level: float = 0.95

    def check(self) -> MFReliability:
        """These settings, or a one-line :class:`~sensitivity.errors.ConfigError` naming the bad field."""
        checks.count(self.failure_runs, "failure_runs", 2)
        checks.count(self.safe_runs, "safe_runs", 2)
        checks.count(self.max_runs, "max_runs", self.failure_runs + self.safe_runs)
        checks.level(self.level)
        return self


def failure_probabilities(simulate: FlatFn, surrogate: FlatFn, to_physical: Callable[[np.ndarray], np.ndarray],
                          found: ReliabilityEvents, settings: MFReliability = MFReliability(), *,
                          seed: Seed = 0) -> xr.Dataset:
    """The simulator-anchored failure probability of every event of a reliability analysis, beside the surrogate's.

    Parameters
    ----------
    simulate, surrogate
        ``[P, n] -> [P, M]`` the simulator's and the surrogate's flat outputs at physical inputs.
    to_physical
        ``u [P, n] -> x [P, n]``, the analysis's transform (its Nataf).
    found
        The analysis's events, design points and proposal
        (:meth:`~sensitivity.analyses.verify.reliability.ReliabilityEvents.from_dataset`).
    settings
        Simulator runs per stratum and the confidence level.
    seed
        Of the redrawn importance samples and the subsamples.

    Returns
    -------
    xarray.Dataset
        :func:`~sensitivity.analyses.verify.reliability.verify_reliability`'s variables on ``reliability_event``
        (``reliability_pf_simulator``: the anchored Pf, ``reliability_pf_surrogate``: the surrogate's, each with
        its ``_se``; ``reliability_changes``: the surrogate's error changes Pf beyond the sampling uncertainty) at
        ``level``, with ``reliability_pf_simulator_interval`` and ``reliability_pf_surrogate_interval``
        ``(reliability_event, bound)``.
    """
    s = settings.check()
    at_level = dataclasses.replace(found, importance=dataclasses.replace(found.importance, level=s.level))
    ds = verify_reliability(simulate, surrogate, to_physical, at_level, failure_runs=s.failure_runs,
                            safe_runs=s.safe_runs, max_runs=s.max_runs, seed=seed)
    z = checks.z_value(s.level)
    for who in ("simulator", "surrogate"):
        pf, se = ds[f"reliability_pf_{who}"], ds[f"reliability_pf_{who}_se"]
        bounds = np.stack([np.maximum(pf.values - z * se.values, 0.0), pf.values + z * se.values], axis=-1)
        ds[f"reliability_pf_{who}_interval"] = (("reliability_event", "bound"), bounds, {
            "long_name": f"{pf.attrs['long_name']}, {s.level:.0%} interval (normal, clipped at 0)", "units": "1"})
    return ds.assign_attrs(reliability_method=METHOD, reliability_references=REFERENCES)
