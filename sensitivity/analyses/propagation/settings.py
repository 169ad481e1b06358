"""The settings of a propagation, as immutable objects: the only defaults of :func:`propagate` and its methods.

:class:`Propagation` holds which methods run, the quantiles they report, and one settings object per part:
:class:`Unscented` (the sigma points), :class:`MonteCarlo` (the sample and its replicates) and :class:`Verdict`
(when a method counts as disagreeing with the reference). The method functions
(:func:`~sensitivity.analyses.propagation.unscented`, :func:`~sensitivity.analyses.propagation.monte_carlo`,
:func:`~sensitivity.analyses.propagation.nonlinearity_verdict`) take these defaults as their keywords'.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from sensitivity.analyses.propagation.dataset import DEFAULT_QUANTILES
from sensitivity.errors import ConfigError
from sensitivity.inputs.uncertainty import Sampler

Method = Literal["first_order", "second_order", "unscented", "monte_carlo"]
#: The methods of the input uncertainty, in the order :func:`propagate` runs them by default.
METHODS: tuple[str, ...] = ("first_order", "second_order", "unscented", "monte_carlo")


@dataclass(frozen=True)
class Unscented:
    """Scaled unscented transform (Julier 2002; Wan & van der Merwe 2000).

    ``alpha`` [1] spreads the sigma points (> 0; 1 puts them at ``mu +- sqrt(n + kappa) L_i``), ``beta`` [1]
    weighs the centre point in the covariance (2 is optimal for a Gaussian), ``kappa`` [1] is the secondary
    scaling (``alpha^2 (n + kappa) > 0``).
    """

    alpha: float = 1.0
    beta: float = 2.0
    kappa: float = 0.0

    def kwargs(self) -> dict[str, Any]:
        """The keywords of :func:`~sensitivity.analyses.propagation.unscented`."""
        return asdict(self)


@dataclass(frozen=True)
class MonteCarlo:
    """Monte Carlo or randomised QMC of the full input distribution (:mod:`.monte_carlo`).

    ``n_samples`` points in all, split into ``n_replicates`` independent replicates (their spread gives every
    standard error); ``sampler``: ``sobol`` (Owen-scrambled) or ``random``; ``block_size`` points per model call;
    ``max_bytes`` [bytes] of samples held for the quantiles.
    """

    n_samples: int = 2**16
    n_replicates: int = 16
    sampler: Sampler = "sobol"
    block_size: int = 4096
    max_bytes: int = 2**28

    def kwargs(self) -> dict[str, Any]:
        """The keywords of :func:`~sensitivity.analyses.propagation.monte_carlo` (but ``seed``)."""
        return asdict(self)


@dataclass(frozen=True)
class Verdict:
    """When a method disagrees with the reference (:func:`~sensitivity.analyses.propagation.nonlinearity_verdict`).

    ``|mean_M - mean_ref| > k_sigma * mean_se_ref + rtol * std_ref`` (or the same for the std) flags it.
    ``reference``: the reference method; None: ``posterior`` with MCMC draws, else ``monte_carlo``. A reference
    that is not among the methods leaves every method not assessed.
    """

    k_sigma: float = 3.0
    rtol: float = 0.05
    reference: str | None = None


@dataclass(frozen=True)
class Propagation:
    """Everything :func:`~sensitivity.analyses.propagation.propagate` is told, but the model, inputs and seed.

    ``methods``: any of :data:`METHODS`, in output order; ``quantiles`` (in (0, 1)) every method reports;
    ``unscented``, ``monte_carlo``, ``verdict``: the settings of those parts; ``level`` [1]: the probability of
    the sampling and combined intervals of an ensemble's moments and quantiles
    (:func:`~sensitivity.analyses.propagation.merge_members`).
    """

    methods: tuple[Method, ...] = METHODS  # type: ignore[assignment]
    quantiles: tuple[float, ...] = DEFAULT_QUANTILES
    unscented: Unscented = field(default_factory=Unscented)
    monte_carlo: MonteCarlo = field(default_factory=MonteCarlo)
    verdict: Verdict = field(default_factory=Verdict)
    level: float = 0.95

    def __post_init__(self) -> None:
        object.__setattr__(self, "methods", tuple(self.methods))
        object.__setattr__(self, "quantiles", tuple(self.quantiles))
        if not 0 < self.level < 1:
            raise ConfigError(f"`propagation.level` must lie in (0, 1), got {self.level!r}")
