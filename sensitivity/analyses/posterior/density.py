"""The calibration problem's posterior as a compiled float64 log-density on an unconstrained space.

The log-posterior of parameters ``x`` (physical units) given observations ``y`` is, up to a constant,
the calibration's cost with its sign flipped plus the log-prior::

    log p(x | y) = -1/2 |W (F(x) - y)|^2 + log p(x)

with ``W`` the whitening of :class:`~sensitivity.analyses.calibration.ObservationModel` (``1/sigma`` or
``L^{-1}`` of the observed block of the covariance; masked and missing outputs dropped) and ``log p``
either the space's marginals (the frozen scipy objects propagation samples: every family of
:data:`~sensitivity.analyses.posterior.priors.FAMILIES`, truncated on either side, and the original kinds
through their scipy form; :mod:`.priors` holds their TF log-densities) or a Gaussian ``N(mu_p, P)``. Its
gradient is ``-J^T W^T W r + grad log p``, exact, by reverse mode through the surrogate.

The sampler moves in an unconstrained space ``z``: ``x = T(mu_u + L z)`` where ``T`` maps each parameter
elementwise from the real line onto its support (a scaled sigmoid for two finite bounds, a shifted
softplus for one, the identity for none; ``scale: log`` parameters through ``exp`` of the same in
``log x``) and ``mu_u``, ``L L^T`` are the mean and covariance in ``u`` space of the Laplace Gaussian's
draws that fall inside the bounds (a fixed dense preconditioner, the role of NUTS's mass matrix: the
sampler then sees a posterior of about unit scale in every direction). The target is
``log p(T(mu_u + L z) | y) + log|det dx/dz|``
(the change of variables; Betancourt 2017, section 4.3).

References
----------
Betancourt, M. (2017). A conceptual introduction to Hamiltonian Monte Carlo. arXiv:1701.02434.
Stan Development Team. Stan Reference Manual, "Constraint transforms" (lower/upper bounds by a
scaled logistic, lower bound by ``exp``); here softplus, which keeps the gradient bounded far out.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from sensitivity.analyses.calibration import ObservationModel
from sensitivity.analyses.posterior.priors import check_prior_families, describe, log_density
from sensitivity.errors import ConfigError
from sensitivity.inputs.space import ParameterSpace
from sensitivity.outputs.members import predictive_factor

_PRECONDITIONER_DRAWS = 4096  # Laplace draws whose moments in u space precondition the sampler
_MIN_INSIDE = 64  # fewer draws inside the bounds: no preconditioning

#: A TF-traceable model ``x [B, n] float64 -> y [B, ...]`` (flattened to ``[B, m]`` inside).
ModelFn = Callable[[Any], Any]


@dataclass(frozen=True)
class Prior:
    """A prior on the ``n`` parameters in physical units.

    Build with :func:`space_prior`, :func:`gaussian_prior` or :func:`flat_prior`.

    Attributes
    ----------
    kind
        ``"space"`` (independent marginals), ``"gaussian"`` or ``"flat"`` (improper unless bounded).
    marginals
        Per parameter the frozen :mod:`scipy.stats` marginal (``kind="space"``): a family of
        :data:`~sensitivity.analyses.posterior.priors.FAMILIES`, or a
        :class:`~sensitivity.inputs.marginals.Truncated` one.
    mean, cov
        ``[n]`` and ``[n, n]`` of a Gaussian prior.
    """

    kind: str
    marginals: tuple[Any, ...] = ()
    mean: np.ndarray | None = None
    cov: np.ndarray | None = None

    def description(self) -> str:
        """One line for dataset attributes: each marginal's family, parameters and truncation."""
        if self.kind == "space":
            return "space marginals: " + "; ".join(describe(m) for m in self.marginals)
        return "Gaussian N(prior mean, prior covariance)" if self.kind == "gaussian" else "flat (uniform on the bounds)"


def space_prior(space: ParameterSpace) -> Prior:
    """The space's marginal distributions, the very objects propagation samples, as the prior.

    Each parameter's :meth:`~sensitivity.inputs.space.Parameter.frozen_distribution`: a scipy family with its
    shapes, ``loc`` and ``scale``, truncated where the space truncates it (uniform on the bounds where no
    distribution is given). The space's copula correlation, meant for propagation, is not a prior belief
    and is ignored.

    Raises
    ------
    ConfigError
        A family without a TF log-density (:func:`~sensitivity.analyses.posterior.priors.check_prior_families`).
    """
    check_prior_families(space)
    return Prior("space", tuple(p.frozen_distribution() for p in space.parameters))


def gaussian_prior(mean: np.ndarray, cov: np.ndarray) -> Prior:
    """A Gaussian prior ``N(mean, cov)`` in physical units (e.g. the calibration's ``prior.*``)."""
    mean, cov = np.asarray(mean, float), np.asarray(cov, float)
    n = mean.size
    if mean.shape != (n,) or cov.shape != (n, n) or not np.all(np.isfinite(cov)) or not np.all(np.isfinite(mean)):
        raise ConfigError(f"Gaussian prior: `mean` [n] and `cov` [n, n] must be finite, got shapes "
                          f"{list(mean.shape)} and {list(cov.shape)}")
    if not np.allclose(cov, cov.T) or np.linalg.eigvalsh(cov).min() <= 0:
        raise ConfigError("Gaussian prior: `cov` must be symmetric positive definite")
    return Prior("gaussian", mean=mean, cov=cov)


def flat_prior() -> Prior:
    """A flat prior: proper only where the bounds (or the data) confine every parameter."""
    return Prior("flat")


@dataclass(frozen=True)
class Support:
    """Where each parameter lives: bounds in physical units and whether it moves in ``log x``."""

    lower: np.ndarray  # [n], -inf for none
    upper: np.ndarray  # [n], +inf for none
    log_mask: np.ndarray  # [n] bool

    @classmethod
    def of(cls, bounds: np.ndarray | None, log_mask: np.ndarray | None, n: int, names: Sequence[str]) -> "Support":
        lo, hi = (np.full(n, -np.inf), np.full(n, np.inf)) if bounds is None else np.asarray(bounds, float).T
        if lo.shape != (n,):
            raise ConfigError(f"`bounds` must have shape [{n}, 2], got {list(np.shape(bounds))}")
        log = np.zeros(n, bool) if log_mask is None else np.asarray(log_mask, bool)
        for j in range(n):
            if np.isnan(lo[j]) or np.isnan(hi[j]) or not lo[j] < hi[j]:
                raise ConfigError(f"`bounds` for {names[j]!r} must be low < high, got ({lo[j]}, {hi[j]})")
            if log[j] and lo[j] < 0:
                raise ConfigError(f"`bounds` for log parameter {names[j]!r} must have low >= 0, got {lo[j]}")
        return cls(lo.copy(), hi.copy(), log)

    def interior(self, x: np.ndarray, margin: float = 1e-3) -> np.ndarray:
        """``x`` moved at least ``margin`` of the bounded width off each finite bound (an estimate that sits on
        a bound, e.g. from an active-set fit, is not a valid start of an unconstrained sampler)."""
        width = np.where(np.isfinite(self.upper - self.lower), self.upper - self.lower, 1.0)
        low = np.where(self.log_mask, np.maximum(self.lower, 0.0), self.lower) + margin * width
        return np.clip(x, low, self.upper - margin * width)

    def inside(self, x: np.ndarray) -> np.ndarray:
        """``[K]`` True where every parameter lies strictly inside its support."""
        positive = ~self.log_mask | (x > 0)
        return np.all((x > self.lower) & (x < self.upper) & positive, axis=-1)


def bijector(support: Support):
    """The TFP bijector ``u -> x`` that maps the real line onto each parameter's support, elementwise."""
    import tensorflow_probability as tfp

    tfb = tfp.bijectors
    parts = []
    for lo, hi, log in zip(support.lower, support.upper, support.log_mask):
        if log:
            lo, hi = (np.log(lo) if lo > 0 else -np.inf), np.log(hi) if np.isfinite(hi) else np.inf
        if np.isfinite(lo) and np.isfinite(hi):
            inner = tfb.Sigmoid(low=np.float64(lo), high=np.float64(hi))
        elif np.isfinite(lo):
            inner = tfb.Chain([tfb.Shift(np.float64(lo)), tfb.Softplus()])
        elif np.isfinite(hi):
            inner = tfb.Chain([tfb.Shift(np.float64(hi)), tfb.Scale(np.float64(-1.0)), tfb.Softplus()])
        else:
            inner = tfb.Identity()
        parts.append(tfb.Chain([tfb.Exp(), inner]) if log else inner)
    return tfb.Blockwise(parts, block_sizes=[1] * len(parts))


@dataclass(frozen=True)
class LogPosterior:
    """The compiled pieces of one posterior: physical log-density and the sampler's parametrisation.

    Build with :func:`log_posterior`. ``log_prob`` takes ``[B, n]`` float64 physical points and returns
    ``[B]`` (``-inf`` outside the support); ``to_support`` is the bijector ``u -> x``; ``shift`` ``[n]`` and
    ``scale`` ``[n, n]`` (lower triangular) the preconditioner ``u = shift + scale z``; ``compiled`` holds the
    sampler's compiled stages (:func:`~sensitivity.analyses.posterior.nuts.run_nuts`), so that another run on
    the same posterior with the same settings and chain count does not compile again.
    """

    log_prob: Callable[[Any], Any]
    to_support: Any
    shift: np.ndarray
    scale: np.ndarray
    support: Support
    prior: Prior
    n_observed: int
    compiled: dict = field(default_factory=dict, compare=False, repr=False)  # the sampler's XLA stages, reused

    def transform(self, shift=None, scale=None):
        """The bijector ``z -> x`` the sampler moves through (``shift``, ``scale``: tensors or arrays)."""
        import tensorflow_probability as tfp

        tfb = tfp.bijectors
        return tfb.Chain([self.to_support, tfb.Shift(self.shift if shift is None else shift),
                          tfb.ScaleMatvecTriL(self.scale if scale is None else scale)])

    def metric(self, draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(shift, scale)``: mean and Cholesky factor of the covariance of ``[N, n]`` physical draws in
        ``u`` space (the preconditioner re-estimated from warm-up draws)."""
        import tensorflow as tf

        u = self.to_support.inverse(tf.constant(draws, tf.float64)).numpy()
        return _moments(u)


def log_posterior(model: ModelFn, observations: ObservationModel, prior: Prior, support: Support, *,
                  center: np.ndarray | None = None, covariance: np.ndarray | None = None,
                  model_dtype: str = "float64", members: ModelFn | None = None) -> LogPosterior:
    """Build the float64 log-posterior of a calibration problem and its unconstrained parametrisation.

    Parameters
    ----------
    model
        TF-traceable ``x [B, n] (float64) -> y [B, ...]`` in output units (flattened to ``[B, m]``).
    observations
        Observed values, which outputs count, and their whitening; needs known noise (``sigma`` or ``cov``).
    prior
        :func:`space_prior`, :func:`gaussian_prior` or :func:`flat_prior`.
    support
        Bounds and log parameters (:class:`Support`).
    center, covariance
        The Laplace approximation (physical units) that preconditions the sampler (see the module
        docstring); ``center`` may sit on a bound. Without them, no preconditioning.
    model_dtype
        ``"float64"`` or ``"float32"``: the dtype ``model`` takes and computes in (the points are cast to it;
        its outputs back to float64, so residuals, prior, bijector and the density stay float64). A float32
        model is about 2.7x cheaper per gradient on CPU for the demo MLP; its outputs differ by about 1e-6
        relative, which moves the demo's log-density by about 1e-4 near the mode (README "Posterior sampling").
    members
        An ensemble's members ``x [B, n] -> [K, B, ...]`` (:meth:`sensitivity.surrogates.load.Surrogate.member_fn`): the
        likelihood is then the members' mean with their predictive variance ``v(x) = (1 + 1/K) s^2(x)`` added to
        the observation covariance, ``y | x ~ N(mean(x), C_obs + diag v(x))`` (Kennedy & O'Hagan 2001,
        doi:10.1111/1467-9868.00294), whose ``log det`` depends on ``x`` and is kept. Diagonal: with few members
        the shrinkage of their correlations toward zero is near complete
        (:func:`sensitivity.analyses.calibration.emulator.shrunk_covariance`). ``model`` is then unused.
    """
    import tensorflow as tf

    if model_dtype not in ("float64", "float32"):
        raise ConfigError(f"`model_dtype` must be 'float64' or 'float32', got {model_dtype!r}")
    if not observations.known_noise:
        raise ConfigError("posterior sampling needs observation errors: give `sigma` or `cov` with the observations")
    n = support.lower.size
    rows = tf.constant(observations.observed, tf.int32)
    y = tf.constant(observations.y_obs[observations.observed], tf.float64)
    whitening = tf.constant(observations.whitening, tf.float64)
    diagonal = observations.whitening.ndim == 1
    log_prior = _log_prior(prior, n)
    lower, upper = tf.constant(support.lower, tf.float64), tf.constant(support.upper, tf.float64)

    likelihood = None if members is None else _emulator_likelihood(members, observations, model_dtype)

    def log_prob(x):
        if likelihood is None:
            values = tf.reshape(model(tf.cast(x, model_dtype)), [tf.shape(x)[0], -1])
            diff = tf.gather(tf.cast(values, tf.float64), rows, axis=1) - y
            r = diff * whitening if diagonal else tf.linalg.matvec(whitening, diff)
            lp = -0.5 * tf.reduce_sum(r * r, axis=1) + log_prior(x)
        else:
            lp = likelihood(x) + log_prior(x)
        inside = tf.reduce_all((x >= lower) & (x <= upper), axis=1)
        return tf.where(inside, lp, tf.constant(-np.inf, tf.float64))

    to_support = bijector(support)
    if center is None:
        shift, scale = np.zeros(n), np.eye(n)
    else:
        shift, scale = _preconditioner(to_support, np.asarray(center, float), np.asarray(covariance, float), support)
    return LogPosterior(log_prob, to_support, shift, scale, support, prior, observations.n_observed)


def _emulator_likelihood(members: ModelFn, observations: ObservationModel, model_dtype: str) -> Callable[[Any], Any]:
    """``x [B, n] -> [B]`` Gaussian log-likelihood (up to a constant) of the ensemble mean with the members'
    predictive variance added to the observation covariance: ``-1/2 r^T C^{-1} r - 1/2 log det C``,
    ``C = C_obs + diag((1 + 1/K) s^2(x))`` on the observed outputs."""
    import tensorflow as tf

    rows = tf.constant(observations.observed, tf.int32)
    y = tf.constant(observations.y_obs[observations.observed], tf.float64)
    w = observations.whitening
    if w.ndim == 1:
        variance = tf.constant(1.0 / w**2, tf.float64)
    else:  # C_obs = (W^T W)^{-1}
        chol_cov = tf.constant(np.linalg.inv(w.T @ w), tf.float64)

    def log_likelihood(x):
        stacked = tf.cast(members(tf.cast(x, model_dtype)), tf.float64)
        k = int(stacked.shape[0])  # static (stacked from a list of members): the factor's check needs a number
        stacked = tf.gather(tf.reshape(stacked, [k, tf.shape(x)[0], -1]), rows, axis=2)
        mean = tf.reduce_mean(stacked, axis=0)
        spread = predictive_factor(k) * tf.reduce_sum(tf.square(stacked - mean), axis=0) / (k - 1)  # [B, m_o]
        diff = mean - y
        if w.ndim == 1:
            total = variance + spread
            return -0.5 * tf.reduce_sum(diff * diff / total + tf.math.log(total), axis=1)
        chol = tf.linalg.cholesky(chol_cov + tf.linalg.diag(spread))
        z = tf.linalg.triangular_solve(chol, diff[:, :, None], lower=True)[:, :, 0]
        return -0.5 * tf.reduce_sum(z * z, axis=1) - tf.reduce_sum(tf.math.log(tf.linalg.diag_part(chol)), axis=1)

    return log_likelihood


def _preconditioner(to_support, center: np.ndarray, covariance: np.ndarray, support: Support):
    """Mean and Cholesky factor of the covariance, in ``u`` space, of the Laplace Gaussian restricted to the
    support: ``N(center, covariance)`` draws inside the bounds carried through ``T^{-1}``.

    Moments of the mapped draws rather than a linearisation of ``T`` at ``center``: a calibration estimate
    often sits on a bound, where the sigmoid's slope vanishes and the linearised covariance would be
    infinite. With fewer than ``_MIN_INSIDE`` draws inside, the preconditioner is the identity at ``center``.
    """
    import tensorflow as tf

    n = center.size
    if covariance.shape != (n, n) or not np.all(np.isfinite(covariance)) or not np.all(np.isfinite(center)):
        raise ConfigError(f"the Laplace mean [{n}] and covariance [{n}, {n}] must be finite, got shapes "
                          f"{list(center.shape)} and {list(covariance.shape)}")
    w, v = np.linalg.eigh(0.5 * (covariance + covariance.T))
    normal = np.random.default_rng(0).standard_normal((_PRECONDITIONER_DRAWS, n))
    draws = center + (normal * np.sqrt(np.maximum(w, 0))) @ v.T
    draws = draws[support.inside(draws)]
    if len(draws) < _MIN_INSIDE:
        u = to_support.inverse(tf.constant(support.interior(center)[None], tf.float64)).numpy()
        return u[0], np.eye(n)
    return _moments(to_support.inverse(tf.constant(draws, tf.float64)).numpy())


def _moments(u: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and Cholesky factor of the (slightly regularised) covariance of ``[N, n]`` points."""
    n = u.shape[1]
    cov = np.cov(u, rowvar=False).reshape(n, n)
    return u.mean(axis=0), np.linalg.cholesky(cov + 1e-9 * max(np.trace(cov) / n, 1e-300) * np.eye(n))


def _log_prior(prior: Prior, n: int) -> Callable[[Any], Any]:
    """``x [B, n] -> [B]`` log prior density (up to a constant for a flat prior)."""
    import tensorflow as tf
    import tensorflow_probability as tfp

    tfd = tfp.distributions
    if prior.kind == "flat":
        return lambda x: tf.zeros(tf.shape(x)[:1], tf.float64)
    if prior.kind == "gaussian":
        if prior.mean.size != n:
            raise ConfigError(f"Gaussian prior has {prior.mean.size} parameters, the problem {n}")
        dist = tfd.MultivariateNormalTriL(tf.constant(prior.mean, tf.float64),
                                          tf.constant(np.linalg.cholesky(prior.cov), tf.float64))
        return dist.log_prob
    if len(prior.marginals) != n:
        raise ConfigError(f"space prior has {len(prior.marginals)} parameters, the problem {n}")
    densities = [log_density(m) for m in prior.marginals]

    def log_prob(x):
        return tf.add_n([density(x[:, j]) for j, density in enumerate(densities)])

    return log_prob
