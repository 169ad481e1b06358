"""Which kind of result a dataset is, told from its variables and dims (any file name, any study)."""
from __future__ import annotations

from typing import Callable, NamedTuple


from sensitivity.analyses.propagation.dataset import METHOD_DIM
from sensitivity.runtime.lazy import lazy_import
from sensitivity.plots.indices import AGGREGATED, MEASURES
from workflows.report import calibration, indices, posterior, propagation, sweep, worth
from workflows.report.page import Summary

xr = lazy_import("xarray")


class Kind(NamedTuple):
    """A kind of result: its name, the test that tells it, and the function that reads its key numbers."""

    name: str
    matches: Callable[[xr.Dataset], bool]
    summarize: Callable[[xr.Dataset], Summary]


def _is_indices(ds: xr.Dataset) -> bool:
    return "measure" in ds.dims or any(m[0] in ds for m in MEASURES) or any(
        f"aggregated_{suffix}" in ds for suffix, _ in AGGREGATED)


#: The kinds in the order they are tried (a step map holds a ``rank`` too: it comes before the indices).
KINDS: tuple[Kind, ...] = (
    Kind("calibration", lambda ds: {"estimate", "parameter_interval", "best_start"} <= set(ds.variables),
         calibration.calibration),
    Kind("step slice", lambda ds: "in_basin" in ds and "slice_a" in ds.dims, calibration.step_slice),
    Kind("step map", lambda ds: "gn_step" in ds and "sample" in ds.dims, calibration.step_map),
    Kind("posterior", lambda ds: "draws" in ds and "chain" in ds.dims, posterior.posterior),
    Kind("propagation", lambda ds: METHOD_DIM in ds.dims and "output_mean" in ds, propagation.propagation),
    Kind("pointwise propagation", lambda ds: "output_std" in ds and "sample" in ds.dims,
         propagation.local_propagation),
    Kind("sensitivity indices", _is_indices, indices.indices),
    Kind("data worth", lambda ds: {"added_worth", "design_choice", "posterior_variance"} <= set(ds.variables),
         worth.worth),
    Kind("sweep", lambda ds: "jacobian" in ds and "sample" in ds.dims, sweep.sweep),
)

#: A result of no kind above.
OTHER = Kind("result", lambda ds: True, sweep.other)


def kind_of(ds: xr.Dataset) -> Kind:
    """The first kind of :data:`KINDS` that ``ds`` matches, else :data:`OTHER`."""
    return next((k for k in KINDS if k.matches(ds)), OTHER)
