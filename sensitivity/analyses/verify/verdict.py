"""What makes a verdict fail: the rules that flag an index, an estimate, a posterior mean or a propagated moment, each
with its cause.

A surrogate error is worth flagging only where it could change what the analysis concludes. Sampling noise
cannot: an error below the analysis's own uncertainty (a Sobol' index's sampling half-width, an estimate's
standard error, a posterior mean's Monte Carlo standard error) is invisible in the result. Nor can a difference
too small to matter: an index whose surrogate value is 0.00018 against the simulator's 0.00009 is "32 half-widths"
off on a long design, yet both say "no influence". :class:`VerdictSettings` holds the absolute tolerances below
which nothing is flagged, and the conclusions a study draws from its indices: the ranking of the influential inputs
and, given a threshold of importance, which inputs are influential.

Flags are bit masks (CF ``flag_masks``), so each flagged value names its cause: :data:`ERROR` the error exceeds
both the uncertainty and the tolerance (or is not finite), :data:`RANKING` the surrogate reverses the order of two
influential inputs that the simulator tells apart, :data:`THRESHOLD` the surrogate puts an input on the other side
of the importance threshold.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from sensitivity.analyses.agreement import INDEX_TOLERANCE, MOMENT_TOLERANCE, agrees
from sensitivity.errors import ConfigError

ERROR, RANKING, THRESHOLD = 1, 2, 4
#: CF attributes of a flag variable of these bits.
FLAGS = {"flag_masks": np.array([ERROR, RANKING, THRESHOLD], np.int8),
         "flag_meanings": "error_beyond_uncertainty_and_tolerance ranking_of_influential_inputs_changed "
                          "importance_threshold_crossed"}
#: The words a summary names a cause by.
CAUSES = {ERROR: "error", RANKING: "ranking", THRESHOLD: "threshold"}


@dataclass(frozen=True)
class VerdictSettings:
    """When a verification flags a value.

    Parameters
    ----------
    index_tolerance
        Absolute tolerance of a Sobol' index [1, a share of the output variance]: an index is flagged for its error
        only when ``|S_sur - S_sim|`` exceeds both its sampling half-width and this. The default 0.01 (one percent
        of the output variance) is at or below the cut-offs screening studies commonly use to call an input
        non-influential (ST below 0.01-0.05; on indices and their use, Saltelli et al. 2008, *Global Sensitivity
        Analysis: The Primer*, Wiley, doi:10.1002/9780470725184), so an error within it changes no conclusion drawn
        from the index, however narrow the index's own sampling interval is (an index of ~0 on a long design).
    importance
        A threshold of importance on the total index ST [1]: inputs at or above it are influential, and an input
        the surrogate puts on the other side of it (by more than ``index_tolerance``) is flagged; None: no
        threshold (influential: ST above ``index_tolerance``).
    flag_on
        ``"error"``: flag by the error rule only; ``"conclusion"``: only where the ranking of the influential
        inputs (by ST) or the threshold of importance changes; ``"either"``: both.
    shift_tolerance
        Absolute floor of a calibration's or a posterior mean's shift, a fraction of each parameter's range
        ``high - low`` [1]: a parameter is flagged only when its shift exceeds both its standard error and this
        floor. The default 0.001 is a tenth of the 1 % of a range a study reports an estimate to; it matters only
        where the standard error is smaller still (a near-perfectly identified parameter, a very long chain).
    moment_tolerance
        Absolute tolerance of a propagated output mean or standard deviation, a fraction of the simulator's output
        standard deviation [1]: a moment is flagged only when its error exceeds both its combined half-width
        (:mod:`~sensitivity.analyses.verify.propagation`) and this. The default 0.001 is a tenth of the 1 % a study
        reports a moment to, and below the surrogate biases worth finding (a 256-run ensemble of a 10-input
        function: 0.5 % of the std, outside its own interval); it matters only where both intervals are narrower
        still (a long randomised QMC sample of a surrogate exact but for its float32 rounding).
    """

    index_tolerance: float = INDEX_TOLERANCE
    importance: float | None = None
    flag_on: Literal["error", "conclusion", "either"] = "either"
    shift_tolerance: float = 1e-3
    moment_tolerance: float = MOMENT_TOLERANCE

    def __post_init__(self) -> None:
        for name in ("index_tolerance", "shift_tolerance", "moment_tolerance", "importance"):
            value = getattr(self, name)
            if value is None and name == "importance":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
                raise ConfigError(f"`{name}` must be a number in [0, 1), got {value!r}")
        if self.flag_on not in ("error", "conclusion", "either"):
            raise ConfigError(f"`flag_on` must be 'error', 'conclusion' or 'either', got {self.flag_on!r}")

    def shift_floor(self, bounds: np.ndarray) -> np.ndarray:
        """``[n]`` the absolute floor of a shift [parameter units] for parameters of ``bounds [n, 2]``."""
        bounds = np.asarray(bounds, float)
        return self.shift_tolerance * (bounds[:, 1] - bounds[:, 0])


def shift_flags(shift: np.ndarray, standard_error: np.ndarray, floor: np.ndarray | None) -> np.ndarray:
    """``[n]`` int8 :data:`ERROR` where ``|shift|`` exceeds both the standard error and ``floor`` (or is not
    finite)."""
    bound = np.maximum(standard_error, 0.0 if floor is None else floor)
    exceeds = ~(np.abs(shift) <= bound)  # NaN: flagged
    return np.where(exceeds, ERROR, 0).astype(np.int8)


def index_flags(key: str, surrogate: np.ndarray, simulator: np.ndarray, half_width: np.ndarray,
                settings: VerdictSettings) -> np.ndarray:
    """``[d, m]`` int8 flags of one kind of Sobol' index ``key`` (``"S1"`` or ``"ST"``) of ``d`` inputs on ``m``
    outputs.

    :data:`ERROR`: ``|S_sur - S_sim| > max(half-width, index_tolerance)`` (the rule multifidelity judges its
    indices by too, :func:`sensitivity.analyses.agreement.agrees`), or an index of one and not the other is not
    finite (both not finite: the output is constant on the rows, nothing to judge). The conclusions (ST only):
    :data:`RANKING` on both inputs of a pair the simulator orders by more than ``max(index_tolerance, hw_i + hw_j)``
    (a gap its own sampling intervals resolve), both influential, whose order the surrogate reverses;
    :data:`THRESHOLD` on an input the two put on different sides of ``importance``, by an error above
    ``index_tolerance``.
    """
    sur, sim, hw = (np.asarray(a, float) for a in (surrogate, simulator, half_width))
    tol = settings.index_tolerance
    flags = np.zeros(sim.shape, np.int8)
    error = sur - sim
    if settings.flag_on in ("error", "either"):
        both_nan = ~np.isfinite(sur) & ~np.isfinite(sim)
        beyond = ~agrees(error, hw, tol)
        flags |= np.where(beyond & ~both_nan, ERROR, 0).astype(np.int8)
    if key != "ST" or settings.flag_on == "error":
        return flags
    known = np.nan_to_num(sim, nan=-np.inf)
    influential = known >= settings.importance if settings.importance is not None else known > tol
    gap = sim[:, None, :] - sim[None, :, :]  # [d, d, m]: i over j
    resolved = gap > np.maximum(tol, np.nan_to_num(hw[:, None, :] + hw[None, :, :], nan=0.0))
    reversed_ = sur[:, None, :] < sur[None, :, :]
    swapped = resolved & reversed_ & influential[:, None, :] & influential[None, :, :]
    ranking = swapped.any(axis=1) | swapped.any(axis=0)
    flags |= np.where(ranking, RANKING, 0).astype(np.int8)
    if settings.importance is not None:
        crossed = ((sim >= settings.importance) != (sur >= settings.importance)) & ~(np.abs(error) <= tol)
        flags |= np.where(crossed, THRESHOLD, 0).astype(np.int8)
    return flags


def causes(flags: np.ndarray) -> list[str]:
    """The causes named by the bits set anywhere in ``flags`` (``["error", "ranking"]``)."""
    seen = int(np.bitwise_or.reduce(np.asarray(flags, np.int64).ravel(), initial=0))
    return [word for bit, word in CAUSES.items() if seen & bit]
