"""The summary of a reliability study (``reliability.nc``): the events, each method's range of failure probabilities
and its cost, and the warnings (unconverged starts, several design points, extrapolation, the verdict's
disagreements); the reliability workflow logs it and the study report renders it."""
from __future__ import annotations

from sensitivity.analyses.reliability.dataset import summary_lines
from sensitivity.datasets.summary import Fact, Summary
from sensitivity.runtime.lazy import lazy_import

xr = lazy_import("xarray")


def summary(ds: xr.Dataset) -> Summary:
    """Each ``info`` line of :func:`~sensitivity.analyses.reliability.dataset.summary_lines` as a fact (its label
    before the first colon), each ``warning`` line as a warning."""
    lines = summary_lines(ds)
    facts = tuple(Fact(*(part.strip() for part in line.split(":", 1))) if ":" in line else Fact(line, "")
                  for severity, line in lines if severity != "warning")
    return Summary(str(ds.attrs.get("title", "reliability")), facts,
                   warnings=tuple(line for severity, line in lines if severity == "warning"))
