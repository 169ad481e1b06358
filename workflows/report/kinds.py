"""Which kind of result a dataset is, told from its variables and dims (any file name, any study), and the
library's summary of that kind (``summary(ds)`` of its study, the one its workflow logged)."""
from __future__ import annotations

from typing import Callable, NamedTuple

from sensitivity.analyses.calibration import summary as calibration
from sensitivity.analyses.indices import summary as indices
from sensitivity.analyses.posterior import summary as posterior
from sensitivity.analyses.propagation import summary as propagation
from sensitivity.analyses.propagation.dataset import METHOD_DIM
from sensitivity.analyses.verify import summary as verify
from sensitivity.datasets.summary import Fact, Summary
from sensitivity.runtime.lazy import lazy_import
from sensitivity.sweep import summary as sweep
from sensitivity.analyses.reliability.summary import summary as reliability_summary
from sensitivity.analyses.worth.summary import summary as worth_summary
from sensitivity.analyses.multifidelity.summary import summary as multifidelity_summary

xr = lazy_import("xarray")


class Kind(NamedTuple):
    """A kind of result: its name, the test that tells it, and the function that summarises it."""

    name: str
    matches: Callable[[xr.Dataset], bool]
    summarize: Callable[[xr.Dataset], Summary]


def _is_indices(ds: xr.Dataset) -> bool:
    from sensitivity.plots.indices import AGGREGATED, MEASURES

    return "measure" in ds.dims or any(m[0] in ds for m in MEASURES) or any(
        f"aggregated_{suffix}" in ds for suffix, _ in AGGREGATED)


def _other(ds: xr.Dataset) -> Summary:
    """A result of no kind the library summarises: its dims and variables."""
    return Summary(str(ds.attrs.get("title", "result")), (
        Fact("dims", ", ".join(f"{d} {n}" for d, n in ds.sizes.items()) or "none"),
        Fact("variables", ", ".join(map(str, ds.data_vars)) or "none")))


#: The kinds in the order they are tried (a step map holds a ``rank`` too: it comes before the indices; a
#: multifidelity.nc may hold a reliability verdict: it comes before the verification).
KINDS: tuple[Kind, ...] = (
    Kind("calibration", lambda ds: {"estimate", "parameter_interval", "best_start"} <= set(ds.variables),
         calibration.summary),
    Kind("step slice", lambda ds: "in_basin" in ds and "slice_a" in ds.dims, calibration.step_slice),
    Kind("step map", lambda ds: "gn_step" in ds and "sample" in ds.dims, calibration.step_map),
    Kind("posterior", lambda ds: "draws" in ds and "chain" in ds.dims, posterior.summary),
    Kind("propagation", lambda ds: METHOD_DIM in ds.dims and "output_mean" in ds, propagation.summary),
    Kind("pointwise propagation", lambda ds: "output_std" in ds and "sample" in ds.dims, propagation.local_summary),
    Kind("multifidelity", lambda ds: {"S1_surrogate", "output_mean_surrogate", "correlation"} <= set(ds.variables),
         multifidelity_summary),
    Kind("verification", lambda ds: any(f"{prefix}_verdict" in ds for _, prefix in verify.ANALYSES),
         verify.summary),
    Kind("sensitivity indices", _is_indices, indices.summary),
    Kind("sweep", lambda ds: "jacobian" in ds and "sample" in ds.dims, sweep.summary),
    Kind("data worth", lambda ds: {"added_worth", "design_choice", "posterior_variance"} <= set(ds.variables),
         worth_summary),
    Kind("reliability", lambda ds: {"pf", "design_u", "form_beta"} <= set(ds.variables), reliability_summary),
)

#: A result of no kind above.
OTHER = Kind("result", lambda ds: True, _other)


def kind_of(ds: xr.Dataset) -> Kind:
    """The first kind of :data:`KINDS` that ``ds`` matches, else :data:`OTHER`."""
    return next((k for k in KINDS if k.matches(ds)), OTHER)
