"""Which kind of result a dataset is, told from its variables and dims (any file name, any study), and the
library's summary of that kind (``summary(ds)`` of its study, the one its workflow logged): the result kinds the
studies declare (:data:`sensitivity.studies.STUDIES`), tried in their order."""
from __future__ import annotations

from typing import Callable, NamedTuple

from sensitivity.datasets.summary import Fact, Summary
from sensitivity.runtime.lazy import lazy_import
from sensitivity.studies import result_kinds

xr = lazy_import("xarray")


class Kind(NamedTuple):
    """A kind of result: its name, the test that tells it, and the function that summarises it."""

    name: str
    matches: Callable[[xr.Dataset], bool]
    summarize: Callable[[xr.Dataset], Summary]


def _other(ds: xr.Dataset) -> Summary:
    """A result of no kind the library summarises: its dims and variables."""
    return Summary(str(ds.attrs.get("title", "result")), (
        Fact("dims", ", ".join(f"{d} {n}" for d, n in ds.sizes.items()) or "none"),
        Fact("variables", ", ".join(map(str, ds.data_vars)) or "none")))


#: The kinds in the order they are tried (the studies' order: :data:`sensitivity.studies.STUDIES`).
KINDS: tuple[Kind, ...] = tuple(Kind(k.name, k.matches, k.summarize) for k in result_kinds())

#: A result of no kind above.
OTHER = Kind("result", lambda ds: True, _other)


def kind_of(ds: xr.Dataset) -> Kind:
    """The first kind of :data:`KINDS` that ``ds`` matches, else :data:`OTHER`."""
    return next((k for k in KINDS if k.matches(ds)), OTHER)
