"""The settings of a sequential observation design: its criterion, its length, and the forecast it serves."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sensitivity.errors import ConfigError

#: What a design step minimises: one forecast's posterior variance (pyEMU's ``next_most_important_added_obs``),
#: ``ln det P`` (D-optimality) or ``trace P`` (A-optimality) of the posterior parameter covariance ``P``.
Criterion = Literal["variance", "d_optimal", "a_optimal"]
CRITERIA: tuple[str, ...] = ("variance", "d_optimal", "a_optimal")


@dataclass(frozen=True)
class DesignSettings:
    """How :func:`~sensitivity.analyses.worth.data_worth.next_most_important` chooses observations.

    Attributes
    ----------
    criterion
        ``"variance"`` (the posterior variance of ``forecast``), ``"d_optimal"`` (``ln det P``) or
        ``"a_optimal"`` (``trace P``); each step adds the candidate (group) that lowers it most.
    k
        Number of candidates (or candidate groups) to choose, at least 1.
    forecast
        The forecast whose variance the ``"variance"`` criterion minimises; may be left ``None`` when the problem
        has only one forecast. Ignored by the other criteria.
    """

    criterion: Criterion = "variance"
    k: int = 3
    forecast: str | None = None

    def __post_init__(self) -> None:
        if self.criterion not in CRITERIA:
            raise ConfigError(f"criterion must be one of {list(CRITERIA)}, got {self.criterion!r}")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ConfigError(f"k must be an integer >= 1, got {self.k!r}")
        if self.forecast is not None and not isinstance(self.forecast, str):
            raise ConfigError(f"forecast must be a forecast's name or None, got {self.forecast!r}")
