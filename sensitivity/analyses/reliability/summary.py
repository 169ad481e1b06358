"""The summary of a reliability study (``reliability.nc``): the events, each method's range of failure probabilities
and its cost, and the warnings (unconverged starts, several design points, extrapolation, the verdict's
disagreements); the reliability workflow logs it and the study report renders it."""
from __future__ import annotations

import numpy as np

from sensitivity.analyses.reliability import form as fm
from sensitivity.analyses.reliability.dataset import DISAGREES, FORM_FLAGS, METHOD_DIM
from sensitivity.analyses.reliability.reach import BEYOND, UNKNOWN
from sensitivity.datasets.summary import Fact, Summary
from sensitivity.outputs.members import MEMBER
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")


def summary(ds: xr.Dataset) -> Summary:
    """The events; per threshold every method's ``pf`` (and the sampling intervals; over several outputs, each
    method's smallest and largest); per method its evaluations; the training data's reach; the methods the verdict
    finds in agreement with the sampling reference; on an ensemble, the largest surrogate std of ``pf``. Warnings
    for FORM starts that did not converge, events without a design point (and why), events with several
    contributing design points, design points outside the parameter bounds or beyond the reach of the training
    data, SORM failures, and the methods the verdict finds in disagreement with the sampling reference, saying
    which estimate is not to be trusted (:func:`_verdicts`)."""
    reach_facts, reach_warnings = _reach(ds)
    agree, disagree = _verdicts(ds)
    methods = ds[f"{METHOD_DIM}_name"].values
    facts = [_events(ds), *_pf_facts(ds),
             *(Fact(str(name), f"{int(ds['evaluations'].values[k])} evaluations") for k, name in enumerate(methods)),
             *reach_facts, *agree]
    if "pf_surrogate_std" in ds:
        spread = ds["pf_surrogate_std"].values
        facts.append(Fact(f"ensemble of {ds.sizes[MEMBER]}",
                          f"surrogate std of pf up to {float(np.nanmax(spread)):.3g}" if np.isfinite(spread).any()
                          else "surrogate std of pf not estimated (no method gave every member a pf)"))
    warnings = [*_unconverged(ds), *_no_design_point(ds), *_flagged(ds), *reach_warnings, *_sorm_failures(ds),
                *disagree]
    return Summary(str(ds.attrs.get("title", "reliability")), tuple(facts), warnings=tuple(warnings))


def _events(ds: xr.Dataset) -> Fact:
    """What fails, over how many thresholds and outputs (or functionals)."""
    quantities = "functionals" if str(ds.attrs.get("output_selection", "")).startswith("functionals ") else "outputs"
    events = ds["form_beta"].size // ds.sizes["threshold"]
    return Fact("failure", f"{ds.attrs.get('failure', '')}; {ds.sizes['threshold']} thresholds, {events} {quantities}")


def _pf_facts(ds: xr.Dataset, most: int = 12) -> list[Fact]:
    """``pf at threshold T``: ``form 1.2e-03, ..., importance_sampling 1.3e-03 [1.1e-03, 1.5e-03]`` for the first
    ``most`` thresholds (then a count); over several outputs each method's smallest and largest ``pf``."""
    names = ds[f"{METHOD_DIM}_name"].values
    thresholds = ds["threshold"].values
    facts = []
    for j, threshold in enumerate(thresholds[:most]):
        parts = []
        for k, name in enumerate(names):
            pf = np.ravel(ds["pf"].isel({METHOD_DIM: k, "threshold": j}).values)
            if pf.size == 1:
                low, high = ds["pf_interval"].isel({METHOD_DIM: k, "threshold": j}).values.ravel()
                shown = f"{pf[0]:.3g}" + (f" [{low:.3g}, {high:.3g}]" if np.isfinite(low) else "")
            else:
                finite = pf[np.isfinite(pf)]
                shown = (f"{finite.min():.3g} to {finite.max():.3g} over {pf.size}" if finite.size else "nan") + \
                    (f" ({pf.size - finite.size} nan)" if 0 < finite.size < pf.size else "")
            parts.append(f"{name} {shown}")
        facts.append(Fact(f"pf at threshold {threshold:g}", ", ".join(parts)))
    if len(thresholds) > most:
        facts.append(Fact(f"pf at {len(thresholds) - most} more thresholds", "in reliability.nc (pf)"))
    return facts


def _unconverged(ds: xr.Dataset) -> list[str]:
    """FORM's starts that did not converge, among those used."""
    status = ds["start_status"].values
    used = status != fm.NOT_STARTED
    failed = int(((status != fm.CONVERGED) & used).sum())
    return [f"FORM: {failed} of {int(used.sum())} starts did not converge"] if failed else []


def _no_design_point(ds: xr.Dataset, most: int = 10) -> list[str]:
    """One warning per event without a design point (at most ``most``, then a count): how its starts ended and the
    output where the closest one stopped, so a threshold beyond the output's reach (every start on the safe
    side, at a stationary point of the output; or every start on the failure side, a threshold short of the
    output's whole range, ``Pf`` near 1) or at a critical value (``grad`` vanishing at the threshold) reads as
    such, not as a silent NaN. Search starts that were not used do not count."""
    beta = ds["form_beta"]
    missing = np.argwhere(np.isnan(beta.values))
    names = dict(FORM_FLAGS)
    above = ds.attrs.get("direction", "above") == "above"
    lines = []
    for index in missing[:most]:
        at = dict(zip(beta.dims, (int(i) for i in index)))
        status, y, grad = (ds[v].isel(at).values for v in ("start_status", "start_output", "start_gradient_norm"))
        used = status != fm.NOT_STARTED
        status, y, grad = status[used], y[used], grad[used]
        threshold = float(ds["threshold"].values[at["threshold"]])
        labels = [str(ds[f"{d}_name"].values[i]) if f"{d}_name" in ds.coords else f"{d}={ds[d].values[i]}"
                  for d, i in at.items() if d != "threshold"]
        counts = ", ".join(f"{int((status == k).sum())} {name}" for k, name in names.items() if (status == k).any())
        gap = np.abs(y - threshold)
        closest = int(np.nanargmin(gap)) if np.isfinite(gap).any() else 0
        safe = np.all(y < threshold) if above else np.all(y > threshold)
        failed = np.all(y > threshold) if above else np.all(y < threshold)
        why = ("; it reached the threshold where the gradient vanishes: the threshold is a critical value of the "
               "output, FORM has no normal there" if gap[closest] <= 1e-6 * max(1.0, abs(threshold)) else
               "; every start stayed on the safe side: the threshold may be beyond the output's reach" if safe else
               "; every start stayed on the failure side: the threshold may be out of the output's reach on the "
               f"other side ({'below' if above else 'above'} its whole range, Pf near 1)" if failed else "")
        lines.append(f"FORM: no design point for {' '.join(labels) or 'the output'} {'>' if above else '<'} "
                     f"{threshold:g} ({status.size} starts: {counts}); the closest stopped at output {y[closest]:.6g}"
                     f" with gradient norm {grad[closest]:.2g}{why}")
    if len(missing) > most:
        lines.append(f"FORM: no design point for {len(missing) - most} more events")
    return lines


def _flagged(ds: xr.Dataset) -> list[str]:
    """How many events have several contributing design points, and how many design points lie out of bounds."""
    lines = []
    for var, what in (("several_contribute", "events have several contributing design points (pf is their union)"),
                      ("design_outside_bounds", "design points lie outside the parameter bounds (the surrogate "
                                                "extrapolates there)")):
        count = int((ds[var].values == 1).sum())
        if count:
            lines.append(f"{count} {what}")
    return lines


def _sorm_failures(ds: xr.Dataset) -> list[str]:
    """How many found design points SORM failed at."""
    if "sorm_status" not in ds:
        return []
    bad = int(((ds["sorm_status"].values != 0) & np.isfinite(ds["design_beta"].values)).sum())
    return [f"SORM failed at {bad} design points (see sorm_status)"] if bad else []


def _reach(ds: xr.Dataset) -> tuple[list[Fact], list[str]]:
    """Whether the design points lie within the reach of the surrogate's training inputs (a fact), beyond it (a
    warning), or that it is unknown (a fact)."""
    flags, found = ds["design_extrapolated"].values, np.isfinite(ds["design_beta"].values)
    if not found.any():
        return [], []
    record = ds["design_extrapolated"].attrs.get("training_record", "none")
    if (flags[found] == UNKNOWN).all():
        return [Fact("training data's reach", "unknown (no record of the surrogate's training inputs)")], []
    beyond = ((flags == BEYOND) & found).any(axis=ds["design_extrapolated"].dims.index("design_point"))
    if not beyond.any():
        return [Fact("training data's reach", f"every design point within it ({record})")], []
    return [], [f"{int(beyond.sum())} of {beyond.size} events have a design point beyond the reach of the training "
                f"inputs ({record}): the surrogate extrapolates there, its pf rests on no training data (verify them "
                "against the simulator)"]


def _verdicts(ds: xr.Dataset, weak_cov: float = 0.3) -> tuple[list[Fact], list[str]]:
    """Per judged method, on how many events it disagrees with the reference: a fact where it agrees on every one;
    else a warning saying which estimate is not to be trusted there: the method's (FORM: first order, with the
    number of design points; SORM: its paraboloid at the design points) where the reference resolves ``pf`` (CoV
    at most ``weak_cov``), neither where it does not."""
    verdict = ds["disagrees"]
    reference = verdict.attrs.get("verdict_reference", "none")
    names = list(ds[f"{METHOD_DIM}_name"].values)
    if reference not in names:
        return [], []
    r = names.index(reference)
    ref_pf, ref_cov = (ds[v].isel({METHOD_DIM: r}).values for v in ("pf", "pf_cov"))
    points = ds["n_design_points"].transpose(*ds["pf"].dims[1:]).values
    agree, disagree = [], []
    for k, name in enumerate(names):
        flags = verdict.isel({METHOD_DIM: k}).values
        if not (flags >= 0).any():
            continue
        bad = flags == DISAGREES
        head = f"{name} disagrees with {reference} on {int(bad.sum())} of {int((flags >= 0).sum())} events"
        if not bad.any():
            agree.append(Fact("verdict", head))
            continue
        weak = bad & ~(ref_cov <= weak_cov)
        trusted = bad & ~weak
        parts = []
        if trusted.any():
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = ref_pf[trusted] / ds["pf"].isel({METHOD_DIM: k}).values[trusted]
            finite = ratio[np.isfinite(ratio)]
            found = (f"{reference} finds {finite.min():.2g} to {finite.max():.2g} times its pf" if finite.size
                     else f"{reference}'s pf differs")
            if name == "form":
                single = int((points[trusted] == 1).sum())
                why = (f"first order: {single} of them with one design point, {int(trusted.sum()) - single} with "
                       f"several; {found}: a curved limit state or failure regions its half-spaces miss")
            else:
                why = f"its paraboloid at the design points misfits the surface (see curvature); {found}"
            parts.append(f"{name}'s pf is not to be trusted on {int(trusted.sum())} of them ({why}); {reference}'s is")
        if weak.any():
            parts.append(f"on {int(weak.sum())} of them {reference}'s own CoV exceeds {weak_cov:g}: neither estimate "
                         "is to be trusted there (more importance.n_samples)")
        disagree.append(f"verdict: {head}: " + "; ".join(parts))
    return agree, disagree
