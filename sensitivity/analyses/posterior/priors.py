"""The space's marginals as float64 TensorFlow log-densities: the posterior's prior.

The prior of a parameter is the very marginal that propagation and the indices sample from: the frozen
:mod:`scipy.stats` object of :meth:`sensitivity.inputs.space.Parameter.frozen_distribution` (a scipy family with its
shapes, ``loc`` and ``scale``, optionally truncated on either side, see :mod:`sensitivity.inputs.marginals`). Its
log-density is, for ``z = (x - loc) / scale``,

    log p(x) = f(z; shapes) - log(scale) - log M,

with ``f`` the family's standard log-density in closed form, written as scipy's ``_logpdf`` writes it
(``xlogy``, ``log1p``, ``expm1`` where scipy uses them, so the tails keep their relative accuracy) and
every term that depends on the shapes only (``betaln``, ``gammaln``, a truncated normal's mass, ...)
computed once in float64 by :mod:`scipy.special`; ``M = P(lower <= X <= upper)`` the mass a truncation
keeps, computed once by :func:`sensitivity.inputs.marginals.log_mass` (``M = 1`` untruncated). The gradient is
autodiff of the closed form.

Outside the (truncated) support the log-density is ``-inf``; at a finite end of the support it is scipy's
own value there (a constant: densities at an end are 0, finite or infinite by family, and scipy closes
or opens the support by family); in between the closed form is evaluated at points moved inside the
support, so that neither branch of a ``tf.where`` yields a NaN gradient.

:data:`FAMILIES` (the families with an exact log-density) and :func:`check_prior_families` import no
TensorFlow: a space with a family outside the table is refused when the config is read.

References
----------
Virtanen, P. et al. (2020). SciPy 1.0: fundamental algorithms for scientific computing in Python.
Nature Methods 17, 261-272, doi:10.1038/s41592-019-0686-2 (the parametrisations and ``_logpdf`` forms).
Johnson, N. L., Kotz, S. and Balakrishnan, N. (1994, 1995). Continuous Univariate Distributions, vols. 1
and 2, 2nd ed., Wiley (the densities).
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from sensitivity.errors import ConfigError
from sensitivity.runtime.lazy import lazy_import
from sensitivity.inputs.marginals import Truncated, frozen_parameters, log_mass

sc = lazy_import("scipy.special")
stats = lazy_import("scipy.stats")

_LOG_2 = math.log(2.0)
_LOG_PI = math.log(math.pi)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


def _piecewise(z, below: bool, cut: float, left: Callable, right: Callable, inside_left: float,
               inside_right: float):
    """``left(z)`` where ``z < cut`` (``z <= cut`` with ``below=False``), else ``right(z)``; each branch is
    evaluated only at its own points (the others moved to ``inside_left`` / ``inside_right``)."""
    import tensorflow as tf

    on_left = z < cut if below else z <= cut
    inside_left, inside_right = (tf.constant(v, z.dtype) for v in (inside_left, inside_right))
    return tf.where(on_left, left(tf.where(on_left, z, inside_left)), right(tf.where(on_left, inside_right, z)))


def _cauchy(m, z):
    # scipy: log1p(z^2) below |z| = 1, 2 log|z| + log1p(1 / z^2) above (no overflow of z^2)
    a = m.abs(z)
    return -_LOG_PI - _piecewise(a, True, 1.0, lambda a: m.log1p(a * a),
                                 lambda a: 2.0 * m.log(a) + m.log1p((1.0 / a) ** 2), 0.5, 2.0)


def _triang(m, z, c):
    if c == 0.0:
        return _LOG_2 + m.log1p(-z)
    if c == 1.0:
        return _LOG_2 + m.log(z)
    return _piecewise(z, True, c, lambda z: _LOG_2 + m.log(z) - math.log(c),
                      lambda z: _LOG_2 + m.log1p(-z) - math.log1p(-c), 0.5 * c, 0.5 * (1.0 + c))


def _trapezoid(m, z, c, d):
    u = math.log(2.0 / (d - c + 1.0))
    rise = lambda z: u + m.log(z) - math.log(c)  # noqa: E731
    flat = lambda z: u + 0.0 * z  # noqa: E731
    fall = lambda z: u + m.log1p(-z) - math.log1p(-d)  # noqa: E731
    top = flat if d == 1.0 else lambda z: _piecewise(z, False, d, flat, fall, 0.5 * (c + d), 0.5 * (d + 1.0))
    return top(z) if c == 0.0 else _piecewise(z, True, c, rise, top, 0.5 * c, 0.5 * (c + d))


def _genextreme(m, z, c):
    if c == 0.0:
        return -z - m.exp(-z)
    log_y = m.log1p(-c * z) / c  # scipy's log(-log cdf)
    return -m.exp(log_y) + log_y - m.log1p(-c * z)


def _beta(m, z, a, b):
    return m.xlog1py(b - 1.0, -z) + m.xlogy(a - 1.0, z) - sc.betaln(a, b)


def _burr(m, z, c, d):
    return math.log(c) + math.log(d) + m.xlogy(-c - 1.0, z) - m.xlog1py(d + 1.0, z ** (-c))


def _invgauss(m, z, mu):
    return -_LOG_SQRT_2PI - 1.5 * m.log(z) - (z / mu - 1.0) ** 2 / (2.0 * z)


def _lognorm(m, z, s):
    return -m.log(z) ** 2 / (2.0 * s * s) - m.log(z) - math.log(s) - _LOG_SQRT_2PI


def _gamma(m, z, a):
    return m.xlogy(a - 1.0, z) - z - sc.gammaln(a)


def _loguniform(m, z, a, b):
    return -m.log(z) - math.log(math.log(b) - math.log(a))


#: The families with an exact TF log-density: scipy name -> ``f(m, z, **shapes)``, the standard log-density
#: (``loc = 0``, ``scale = 1``) at ``z`` inside the support, with ``m = tf.math`` and the shapes float64.
FAMILIES: dict[str, Callable[..., Any]] = {
    "alpha": lambda m, z, a: -2.0 * m.log(z) - 0.5 * (a - 1.0 / z) ** 2 - _LOG_SQRT_2PI - sc.log_ndtr(a),
    "anglit": lambda m, z: m.log(m.cos(2.0 * z)),
    "arcsine": lambda m, z: -_LOG_PI - 0.5 * m.log(z) - 0.5 * m.log1p(-z),
    "beta": _beta,
    "betaprime": lambda m, z, a, b: m.xlogy(a - 1.0, z) - m.xlog1py(a + b, z) - sc.betaln(a, b),
    "bradford": lambda m, z, c: math.log(c) - m.log1p(c * z) - math.log(math.log1p(c)),
    "burr": _burr,
    "burr12": lambda m, z, c, d: (math.log(c) + math.log(d) + m.xlogy(c - 1.0, z)
                                  + m.xlog1py(-d - 1.0, z ** c)),
    "cauchy": _cauchy,
    "chi": lambda m, z, df: (_LOG_2 - 0.5 * _LOG_2 * df - sc.gammaln(0.5 * df) + m.xlogy(df - 1.0, z)
                             - 0.5 * z * z),
    "chi2": lambda m, z, df: m.xlogy(0.5 * df - 1.0, z) - 0.5 * z - sc.gammaln(0.5 * df) - 0.5 * _LOG_2 * df,
    "cosine": lambda m, z: m.log1p(m.cos(z)) - math.log(2.0 * math.pi),
    "dgamma": lambda m, z, a: m.xlogy(a - 1.0, m.abs(z)) - m.abs(z) - _LOG_2 - sc.gammaln(a),
    "dweibull": lambda m, z, c: math.log(c) - _LOG_2 + m.xlogy(c - 1.0, m.abs(z)) - m.abs(z) ** c,
    "erlang": _gamma,
    "expon": lambda m, z: -z,
    "exponpow": lambda m, z, b: 1.0 + math.log(b) + m.xlogy(b - 1.0, z) + z ** b - m.exp(z ** b),
    "exponweib": lambda m, z, a, c: (math.log(a) + math.log(c) + m.xlogy(a - 1.0, -m.expm1(-z ** c)) - z ** c
                                     + m.xlogy(c - 1.0, z)),
    "f": lambda m, z, dfn, dfd: (0.5 * dfd * math.log(dfd) + 0.5 * dfn * math.log(dfn)
                                 + m.xlogy(0.5 * dfn - 1.0, z) - 0.5 * (dfn + dfd) * m.log(dfd + dfn * z)
                                 - sc.betaln(0.5 * dfn, 0.5 * dfd)),
    "fatiguelife": lambda m, z, c: (m.log1p(z) - (z - 1.0) ** 2 / (2.0 * z * c * c) - math.log(2.0 * c)
                                    - _LOG_SQRT_2PI - 1.5 * m.log(z)),
    "fisk": lambda m, z, c: _burr(m, z, c, np.float64(1.0)),
    "foldnorm": lambda m, z, c: -0.5 * (z - c) ** 2 - _LOG_SQRT_2PI + m.log1p(m.exp(-2.0 * c * z)),
    "gamma": _gamma,
    "genextreme": _genextreme,
    "gengamma": lambda m, z, a, c: math.log(abs(c)) + m.xlogy(c * a - 1.0, z) - z ** c - sc.gammaln(a),
    "gennorm": lambda m, z, beta: math.log(0.5 * beta) - sc.gammaln(1.0 / beta) - m.abs(z) ** beta,
    "genpareto": lambda m, z, c: -z if c == 0.0 else -m.xlog1py(c + 1.0, c * z) / c,
    "gibrat": lambda m, z: _lognorm(m, z, 1.0),
    "gompertz": lambda m, z, c: math.log(c) + z - c * m.expm1(z),
    "gumbel_l": lambda m, z: z - m.exp(z),
    "gumbel_r": lambda m, z: -z - m.exp(-z),
    "halfcauchy": lambda m, z: math.log(2.0 / math.pi) - m.log1p(z * z),
    "halfgennorm": lambda m, z, beta: math.log(beta) - sc.gammaln(1.0 / beta) - z ** beta,
    "halflogistic": lambda m, z: _LOG_2 - z - 2.0 * m.log1p(m.exp(-z)),
    "halfnorm": lambda m, z: 0.5 * math.log(2.0 / math.pi) - 0.5 * z * z,
    "hypsecant": lambda m, z: _LOG_2 - _LOG_PI - m.abs(z) - m.log1p(m.exp(-2.0 * m.abs(z))),
    "invgamma": lambda m, z, a: -(a + 1.0) * m.log(z) - sc.gammaln(a) - 1.0 / z,
    "invgauss": _invgauss,
    "invweibull": lambda m, z, c: math.log(c) + m.xlogy(-c - 1.0, z) - z ** (-c),
    "johnsonsb": lambda m, z, a, b: (math.log(b) - m.log(z) - m.log1p(-z) - _LOG_SQRT_2PI
                                     - 0.5 * (a + b * (m.log(z) - m.log1p(-z))) ** 2),
    "johnsonsu": lambda m, z, a, b: (math.log(b) - 0.5 * m.log1p(z * z) - _LOG_SQRT_2PI
                                     - 0.5 * (a + b * m.asinh(z)) ** 2),
    "laplace": lambda m, z: -m.abs(z) - _LOG_2,
    "levy": lambda m, z: -_LOG_SQRT_2PI - 1.5 * m.log(z) - 0.5 / z,
    "levy_l": lambda m, z: -_LOG_SQRT_2PI - 1.5 * m.log(-z) + 0.5 / z,
    "loggamma": lambda m, z, c: c * z - m.exp(z) - sc.gammaln(c),
    "logistic": lambda m, z: -m.abs(z) - 2.0 * m.log1p(m.exp(-m.abs(z))),
    "loglaplace": lambda m, z, c: math.log(0.5 * c) + _piecewise(z, True, 1.0, lambda z: (c - 1.0) * m.log(z),
                                                                 lambda z: (-c - 1.0) * m.log(z), 0.5, 2.0),
    "lognorm": _lognorm,
    "loguniform": _loguniform,
    "lomax": lambda m, z, c: math.log(c) - (c + 1.0) * m.log1p(z),
    "maxwell": lambda m, z: 0.5 * math.log(2.0 / math.pi) + 2.0 * m.log(z) - 0.5 * z * z,
    "mielke": lambda m, z, k, s: math.log(k) + (k - 1.0) * m.log(z) - (1.0 + k / s) * m.log1p(z ** s),
    "moyal": lambda m, z: -0.5 * (z + m.exp(-z)) - _LOG_SQRT_2PI,
    "nakagami": lambda m, z, nu: (_LOG_2 + sc.xlogy(nu, nu) - sc.gammaln(nu) + m.xlogy(2.0 * nu - 1.0, z)
                                  - nu * z * z),
    "norm": lambda m, z: -0.5 * z * z - _LOG_SQRT_2PI,
    "pareto": lambda m, z, b: math.log(b) - (b + 1.0) * m.log(z),
    "powerlaw": lambda m, z, a: math.log(a) + m.xlogy(a - 1.0, z),
    "rayleigh": lambda m, z: m.log(z) - 0.5 * z * z,
    "rdist": lambda m, z, c: -_LOG_2 + _beta(m, 0.5 * (z + 1.0), 0.5 * c, 0.5 * c),
    "recipinvgauss": lambda m, z, mu: -(1.0 - mu * z) ** 2 / (2.0 * z * mu * mu) - _LOG_SQRT_2PI - 0.5 * m.log(z),
    "reciprocal": _loguniform,
    "semicircular": lambda m, z: math.log(2.0 / math.pi) + 0.5 * m.log1p(-z * z),
    "t": lambda m, z, df: (math.log(sc.poch(0.5 * df, 0.5)) - 0.5 * (math.log(df) + _LOG_PI)
                           - 0.5 * (df + 1.0) * m.log1p(z * z / df)),
    "trapezoid": _trapezoid,
    "triang": _triang,
    "truncexpon": lambda m, z, b: -z - math.log(-math.expm1(-b)),
    "truncnorm": lambda m, z, a, b: -0.5 * z * z - _LOG_SQRT_2PI - log_mass(stats.norm(), a, b),
    "truncweibull_min": lambda m, z, c, a, b: (math.log(c) + m.xlogy(c - 1.0, z) - z ** c
                                               - math.log(math.exp(-a ** c) - math.exp(-b ** c))),
    "uniform": lambda m, z: 0.0 * z,
    "wald": lambda m, z: _invgauss(m, z, 1.0),
    "weibull_max": lambda m, z, c: math.log(c) + m.xlogy(c - 1.0, -z) - (-z) ** c,
    "weibull_min": lambda m, z, c: math.log(c) + m.xlogy(c - 1.0, z) - z ** c,
}


def check_prior_families(space: Any) -> None:
    """Refuse a space with a marginal that has no TF log-density (imports no TensorFlow).

    Parameters
    ----------
    space
        A :class:`~sensitivity.inputs.space.ParameterSpace`.

    Raises
    ------
    ConfigError
        ``parameter 'c': distribution 'foo' has no TF log-density for the posterior; families that work: ...``.
    """
    for p in space.parameters:
        if _base(p.frozen_distribution()).dist.name not in FAMILIES:
            raise ConfigError(_unsupported(p.distribution.kind, f"parameter {p.name!r}"))


def _unsupported(kind: str, where: str) -> str:
    return (f"{where}: distribution {kind!r} has no TF log-density for the posterior; families that work: "
            f"{', '.join(sorted(FAMILIES))}")


def _base(marginal: Any) -> Any:
    """The untruncated frozen law of a marginal."""
    return marginal.base if isinstance(marginal, Truncated) else marginal


def describe(marginal: Any) -> str:
    """``family(shapes, loc, scale)``, with ``truncated to [lower, upper]`` when truncated, e.g.
    ``gumbel_r(loc=2, scale=0.5) truncated to [0, 6]``."""
    base = _base(marginal)
    params = ", ".join(f"{k}={v:.6g}" for k, v in frozen_parameters(base).items())
    text = f"{base.dist.name}({params})"
    if isinstance(marginal, Truncated):
        text += f" truncated to [{marginal.lower:.6g}, {marginal.upper:.6g}]"
    return text


def log_density(marginal: Any) -> Callable[[Any], Any]:
    """The float64 TF log-density ``x [B] -> [B]`` of one marginal [1 / parameter units, log].

    Parameters
    ----------
    marginal
        A frozen :mod:`scipy.stats` distribution of a family in :data:`FAMILIES`, or a
        :class:`sensitivity.inputs.marginals.Truncated` one (as :meth:`~sensitivity.inputs.space.Distribution.frozen` returns).

    Returns
    -------
    callable
        TF-traceable ``x -> log p(x)``, elementwise on a float64 tensor; ``-inf`` outside the support.

    Raises
    ------
    ConfigError
        A family outside :data:`FAMILIES`.
    """
    import tensorflow as tf

    truncated, base = isinstance(marginal, Truncated), _base(marginal)
    family = base.dist.name
    if family not in FAMILIES:
        raise ConfigError(_unsupported(family, "prior"))
    params = frozen_parameters(base)
    loc, scale = params.pop("loc"), params.pop("scale")
    shapes = {k: np.float64(v) for k, v in params.items()}
    lower, upper = (float(end) for end in marginal.support())
    mass = log_mass(base, lower, upper) if truncated else 0.0
    offset = math.log(scale) + mass
    ends = [(end, float(base.logpdf(end)) - mass) for end in (lower, upper) if math.isfinite(end)]
    inner = tf.constant(float(marginal.ppf(0.5)), tf.float64)
    standard = FAMILIES[family]

    def log_prob(x):
        x = tf.convert_to_tensor(x, tf.float64)
        inside = (x > lower) & (x < upper)
        z = (tf.where(inside, x, inner) - loc) / scale
        lp = tf.where(inside, standard(tf.math, z, **shapes) - offset, tf.constant(-np.inf, tf.float64))
        for end, value in ends:
            lp = tf.where(x == end, tf.constant(value, tf.float64), lp)
        return lp

    return log_prob
