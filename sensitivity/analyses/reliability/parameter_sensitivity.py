"""Sensitivities of FORM's ``beta`` and ``Pf`` to the inputs' distribution parameters and to the threshold.

At a design point ``u*`` of ``beta = min ||u||`` subject to ``g(x(u)) = 0``, a distribution parameter
``theta`` moves the map ``u = T(x; theta)`` and not the limit state in ``x``, so (the envelope theorem;
Hohenbichler & Rackwitz 1986; Madsen, Krenk & Lind 1986, sect. 6.4)

``d beta / d theta = alpha . dT(x*; theta) / d theta``, ``alpha = u* / beta``,

with ``x*`` held fixed. Under the Nataf transform ``u = L^-1 z``, ``z_i = Phi^-1(F_i(x_i; theta))``, a
parameter of marginal ``i`` moves only ``z_i``:

``d beta / d theta = (L^-T alpha)_i dz_i / d theta``.

``dz_i / d theta`` is the fourth-order central difference of the score ``z_i(x*_i)`` (computed in the tail it
lies in, as :meth:`~sensitivity.analyses.reliability.standard_space.Nataf.to_standard` does) over
distributions rebuilt with the parameter moved by ``h = 1e-4`` of its natural scale (the marginal's standard
deviation for a parameter in the input's units, ``max(|theta|, 0.01)`` for a dimensionless shape): a
difference of scipy's distribution functions, not of the model, relative error ~1e-9. The parameters are
the ones the space declares (``mean``/``std`` of ``normal``, ``median``/``sigma_log`` of ``lognormal``, a scipy
law's shapes, ``loc`` and ``scale``), and ``low``/``high`` for the laws defined on the bounds (``uniform``
without parameters, ``truncnormal``, ``triangular``). The copula's correlations are not among them.

``Pf``: ``d Pf / d theta = sum_d -phi(beta_d) d beta_d / d theta`` over an event's distinct design points
(exact for one; the derivative of the ``'sum'`` union for several), and the same for the threshold with
:func:`~sensitivity.analyses.reliability.form.threshold_sensitivity`'s ``d beta / d T``.

References
----------
Hohenbichler, M. & Rackwitz, R. (1986), Sensitivity and importance measures in structural reliability, Civil
Engineering Systems 3(4), 203-209, doi:10.1080/02630258608970445.
Madsen, H. O., Krenk, S. & Lind, N. C. (1986), Methods of Structural Safety, Prentice-Hall (Dover 2006).
Bjerager, P. & Krenk, S. (1989), Parametric sensitivity in first order reliability theory, J. Eng. Mech.
115(7), 1577-1582, doi:10.1061/(ASCE)0733-9399(1989)115:7(1577).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from sensitivity.analyses.reliability.form import FormResult
from sensitivity.analyses.reliability.standard_space import Nataf
from sensitivity.errors import ConfigError
from sensitivity.inputs.marginals import parameter_names, scipy_distribution
from sensitivity.inputs.space import ParameterSpace
from sensitivity.runtime.lazy import lazy_import
from sensitivity.units import quotient

stats = lazy_import("scipy.stats")

#: Parameters of the original kinds that carry no units (the rest are in the input's units).
_DIMENSIONLESS = ("sigma_log",)
#: Relative step of the central differences of the scores.
STEP = 1e-4


@dataclass(frozen=True)
class DistributionParameter:
    """One distribution parameter of one input: ``input`` (its index), ``key`` (``mean``, ``scale``, ``low``, ...),
    ``value`` and ``units`` (the input's, or ``1`` for a shape); ``name`` is ``'<input>.<key>'``."""

    input: int
    name: str
    key: str
    value: float
    units: str


def distribution_parameters(space: ParameterSpace) -> tuple[DistributionParameter, ...]:
    """The distribution parameters of every input, in the inputs' order (module notes)."""
    out = []
    for i, p in enumerate(space.parameters):
        d = p.distribution
        shapes = () if d.kind in ("normal", "truncnormal", "lognormal", "triangular") or d.needs_bounds else \
            parameter_names(scipy_distribution(d.kind, f"parameter {p.name!r}"))[:-2]
        keys = [(k, float(v)) for k, v in d.params.items()]
        if d.needs_bounds:
            keys += [("low", float(p.low)), ("high", float(p.high))]
        for key, value in keys:
            units = "1" if key in shapes or key in _DIMENSIONLESS else p.units
            out.append(DistributionParameter(i, f"{p.name}.{key}", key, value, units))
    return tuple(out)


def _moved(space: ParameterSpace, parameter: DistributionParameter, value: float) -> Any:
    """The frozen marginal of ``parameter``'s input with that parameter set to ``value``."""
    p = space.parameters[parameter.input]
    if parameter.key in ("low", "high") and p.distribution.needs_bounds:
        low, high = (value, p.high) if parameter.key == "low" else (p.low, value)
        return p.distribution.frozen(low, high, where=f"parameter {p.name!r}")
    d = replace(p.distribution, params={**p.distribution.params, parameter.key: value})
    return d.frozen(p.low, p.high, where=f"parameter {p.name!r}")


def score_derivatives(space: ParameterSpace, parameters: tuple[DistributionParameter, ...], x: np.ndarray
                      ) -> np.ndarray:
    """``dz_i / d theta`` at points ``x [K, n]``, ``[K, P]`` (per unit of each parameter; NaN where a moved
    parameter leaves its law's domain or ``x`` its support): fourth-order central differences of the scores (module notes)."""
    x = np.asarray(x, dtype=float)
    out = np.full((len(x), len(parameters)), np.nan)
    for k, q in enumerate(parameters):
        frozen = space.parameters[q.input].frozen_distribution()
        spread = float(frozen.std()) if q.units != "1" else math.nan
        natural = spread if math.isfinite(spread) and spread > 0 else max(abs(q.value), 1e-2)
        h = STEP * natural
        try:
            z = [Nataf((_moved(space, q, q.value + j * h),)).to_standard(x[:, q.input:q.input + 1])[:, 0]
                 for j in (-2.0, -1.0, 1.0, 2.0)]
        except ConfigError:
            continue
        with np.errstate(invalid="ignore"):  # a moved bound that leaves x outside the support: inf - inf
            out[:, k] = (z[0] - 8.0 * z[1] + 8.0 * z[2] - z[3]) / (12.0 * h)
    return np.where(np.isfinite(out), out, np.nan)


def beta_sensitivity(result: FormResult, nataf: Nataf, space: ParameterSpace,
                     parameters: tuple[DistributionParameter, ...]) -> np.ndarray:
    """``d beta / d theta`` at every distinct design point, ``[E, D, P]`` (per unit of each parameter; NaN
    where there is no design point): ``(L^-T alpha)_i dz_i / d theta`` at ``x*`` (module notes)."""
    e, d, n = result.design_u.shape
    out = np.full((e, d, len(parameters)), np.nan)
    found = np.isfinite(result.design_beta)
    if not found.any() or not parameters:
        return out
    u = result.design_u[found]
    weights = np.linalg.solve(nataf.cholesky.T, result.alpha[found].T).T  # L^-T alpha, [F, n]
    dz = score_derivatives(space, parameters, nataf.to_physical(u))  # [F, P]
    inputs = np.array([q.input for q in parameters])
    with np.errstate(invalid="ignore"):
        out[found] = weights[:, inputs] * dz
    return out


def pf_sensitivity(result: FormResult, dbeta: np.ndarray) -> np.ndarray:
    """``d Pf / d theta = sum_d -phi(beta_d) d beta_d / d theta`` per event, ``[E, ...]`` from ``dbeta
    [E, D, ...]`` (design points on axis 1; NaN for an event without one)."""
    beta = result.design_beta.reshape(*result.design_beta.shape, *([1] * (np.ndim(dbeta) - 2)))
    terms = np.where(np.isfinite(beta), -stats.norm.pdf(beta) * dbeta, 0.0)
    return np.where(np.isfinite(result.pf).reshape(-1, *([1] * (np.ndim(dbeta) - 2))), terms.sum(axis=1), np.nan)


def inverse_units(parameters: tuple[DistributionParameter, ...]) -> list[str]:
    """Units of ``d beta / d theta`` (and ``d Pf / d theta``) per parameter: ``1 / units(theta)``."""
    return [quotient("1", q.units) for q in parameters]
