"""The demo simulator: an SEIR epidemic with a smooth intervention, integrated with scipy.

Compartments are fractions of a closed population (``S + E + I + R = 1``)::

    dS/dt = -b(t) S I          dE/dt = b(t) S I - E / T_E
    dI/dt = E / T_E - I / T_I  dR/dt = I / T_I
    b(t)  = beta (1 - s * logistic((t - t_0) / w))

with transmission rate ``beta``, mean incubation period ``T_E``, mean infectious period
``T_I`` and an intervention that lowers transmission by the fraction ``s``, ramped smoothly
over about two weeks centred on day ``t_0`` (``w`` = :data:`RAMP_WIDTH`) so that the output is
a differentiable function of every parameter. The epidemic starts with a fraction ``i_0``
infectious and everyone else susceptible.

The output is the number of new infections (``S -> E``) during each day ``(t - 1, t]`` for
``t = 1 .. 100`` days, per 100 000 people (units ``1e-5 day-1``): the difference of the
cumulative-infections state ``C`` with ``dC/dt = b(t) S I``. Over the demo space the values
span 5e-6 to 6e3 and carry a relative integration error below 1e-6 (measured against rtol 1e-13).

References
----------
Kermack, W. O. & McKendrick, A. G. (1927), doi:10.1098/rspa.1927.0118 (the final-size relation).
Anderson, R. M. & May, R. M. (1991), Infectious Diseases of Humans, Oxford University Press,
ISBN 978-0-19-854040-3 (the SEIR model, R0 = beta T_I).
"""
from __future__ import annotations

import numpy as np
from scipy.integrate import solve_ivp

from sensitivity.errors import ConfigError, ModelError
from sensitivity.outputs.spec import OutputDim, OutputSpec
from sensitivity.inputs.space import Parameter, ParameterSpace

#: Parameter names in input order.
NAMES = ("beta", "incubation_period", "infectious_period", "initial_infected", "intervention_day",
         "intervention_strength")

#: Width of the logistic intervention ramp [day]: the effect grows from 10 % to 90 % over 4.4 w = 13 days.
RAMP_WIDTH = 3.0

#: Days simulated; the output has one value per day 1 .. DAYS.
DAYS = 100

#: Output units: new infections per 100 000 people per day.
PER_100K = 1e5
OUTPUT_UNITS = "1e-5 day-1"

#: Integration tolerances (DOP853, float64). The points of a call are integrated as one stacked
#: system whose error norm is an RMS over all components, so the relative tolerance is divided by
#: sqrt(number of components) to bound each point's error as if it were integrated alone.
RTOL, ATOL = 1e-10, 1e-16

#: Points integrated together: bounds the cost of sharing one adaptive step sequence.
BATCH = 256


def space() -> ParameterSpace:
    """The demo parameter space: physically sensible bounds, nominal values and units.

    ``R0 = beta * infectious_period`` ranges over about [0.75, 3.9], so the box holds both
    fizzling and explosive epidemics.
    """
    return ParameterSpace((
        Parameter("beta", "day-1", 0.25, 0.65, 0.45, "transmission rate"),
        Parameter("incubation_period", "day", 2.0, 6.0, 3.0, "mean incubation period"),
        Parameter("infectious_period", "day", 3.0, 6.0, 4.0, "mean infectious period"),
        Parameter("initial_infected", "1", 1e-5, 1e-3, 1e-4, "initially infectious fraction of the population",
                  scale="log"),
        Parameter("intervention_day", "day", 10.0, 60.0, 35.0, "day the intervention takes effect"),
        Parameter("intervention_strength", "1", 0.0, 0.7, 0.4, "fractional reduction of transmission"),
    ))


def output_spec(days: int = DAYS) -> OutputSpec:
    """What :func:`simulate` returns: ``new_infections(day)`` [1e-5 day-1] for days ``1 .. days``.

    The axis is a duration since the start of the epidemic, not a date, so it is named ``day`` with
    units ``day``: CF reserves a coordinate named ``time`` for instants (``<unit> since <epoch>``).
    """
    day = OutputDim("day", tuple(range(1, days + 1)), "day", "end of the day since the start of the epidemic")
    return OutputSpec("new_infections", OUTPUT_UNITS, (day,), "daily new infections per 100 000 people")


def simulate(points: np.ndarray, days: int = DAYS) -> np.ndarray:
    """Daily new infections per 100 000 people for each parameter point.

    Parameters
    ----------
    points
        ``[N, 6]`` parameters in the order of :data:`NAMES` and the units of :func:`space`.
    days
        Number of days simulated.

    Returns
    -------
    numpy.ndarray
        ``[N, days]`` new infections during days ``1 .. days`` [1e-5 day-1], float64.
    """
    times = np.arange(days + 1, dtype=float)
    cumulative = trajectories(points, times)[..., 4]
    return PER_100K * np.diff(cumulative, axis=1)


def trajectories(points: np.ndarray, times: np.ndarray) -> np.ndarray:
    """The compartments ``(S, E, I, R, C)`` at ``times`` for each point.

    Parameters
    ----------
    points
        ``[N, 6]`` parameters (see :func:`simulate`).
    times
        Increasing output times [day], starting at 0 or later.

    Returns
    -------
    numpy.ndarray
        ``[N, len(times), 5]`` fractions of the population: susceptible, exposed, infectious,
        removed, and cumulative infections ``C``.
    """
    x = _check_points(points)
    times = np.asarray(times, dtype=float)
    if times.ndim != 1 or times.size == 0 or times[0] < 0 or np.any(np.diff(times) <= 0):
        raise ConfigError(f"`times` must be an increasing 1-D array from t >= 0, got {times!r}")
    blocks = [_integrate(x[i : i + BATCH], times) for i in range(0, len(x), BATCH)]
    return np.concatenate(blocks, axis=0) if blocks else np.empty((0, times.size, 5))


def transmission_rate(t: np.ndarray | float, beta: np.ndarray, day: np.ndarray, strength: np.ndarray) -> np.ndarray:
    """``b(t) = beta (1 - strength * logistic((t - day) / RAMP_WIDTH))`` [day-1]."""
    ramp = 0.5 * (1.0 + np.tanh(0.5 * (t - day) / RAMP_WIDTH))  # logistic, overflow-free
    return beta * (1.0 - strength * ramp)


def _integrate(x: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Integrate one block of points as a stacked system; returns ``[N, T, 5]``."""
    n = len(x)
    beta, t_e, t_i, i0, day, strength = x.T

    def rhs(t: float, flat: np.ndarray) -> np.ndarray:
        s, e, i, _, _ = flat.reshape(5, n)
        infection = transmission_rate(t, beta, day, strength) * s * i
        return np.concatenate([-infection, infection - e / t_e, e / t_e - i / t_i, i / t_i, infection])

    y0 = np.concatenate([1.0 - i0, np.zeros(n), i0, np.zeros(n), np.zeros(n)])
    solution = solve_ivp(rhs, (0.0, times[-1]), y0, method="DOP853", t_eval=times,
                         rtol=RTOL / np.sqrt(y0.size), atol=ATOL)
    if not solution.success:
        raise ModelError(f"SEIR integration failed: {solution.message}")
    return solution.y.reshape(5, n, times.size).transpose(1, 2, 0)


def _check_points(points: np.ndarray) -> np.ndarray:
    x = np.asarray(points, dtype=float)
    if x.ndim != 2 or x.shape[1] != len(NAMES):
        raise ConfigError(f"`points` must have shape [N, {len(NAMES)}] ({', '.join(NAMES)}), got {list(x.shape)}")
    bad = ~np.isfinite(x)
    bad[:, :4] |= x[:, :4] <= 0  # rates, periods and i0 must be positive
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise ConfigError(f"`points`: {NAMES[j]!r} must be finite (and > 0 for rates, periods and i0), got {x[i, j]} "
                          f"at row {i}")
    return x


#: The parameters behind the shipped synthetic observations (data/seir/observations.nc); R0 = 2.25.
TRUE_PARAMETERS = {"beta": 0.5, "incubation_period": 3.5, "infectious_period": 4.5, "initial_infected": 5e-5,
                   "intervention_day": 30.0, "intervention_strength": 0.6}


def synthetic_observations(truth: np.ndarray, *, relative_noise: float = 0.1, floor: float = 1.0,
                           observed_days: int = 70, seed: int = 0,
                           days: int = DAYS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Noisy daily counts from the simulator at ``truth``, with known Gaussian errors.

    ``observed = y + sigma * eps`` with ``sigma = relative_noise * y + floor`` and ``eps ~ N(0, 1)``
    independent per day (``numpy.random.default_rng(seed)``); days after ``observed_days`` are
    missing (NaN), a forecast window.

    Parameters
    ----------
    truth
        ``[6]`` parameters in the order of :data:`NAMES`.
    relative_noise
        Noise standard deviation as a fraction of the true value [1].
    floor
        Noise standard deviation added to every day [1e-5 day-1].
    observed_days
        Days ``1 .. observed_days`` are observed.
    seed
        Seed of the noise.

    Returns
    -------
    tuple of numpy.ndarray
        ``(true values, observed, sigma)``, each ``[days]`` in 1e-5 day-1.
    """
    if not relative_noise >= 0 or not floor > 0:
        raise ConfigError(f"`relative_noise` must be >= 0 and `floor` > 0, got {relative_noise!r}, {floor!r}")
    if not 0 < observed_days <= days:
        raise ConfigError(f"`observed_days` must lie in [1, {days}], got {observed_days!r}")
    clean = simulate(np.asarray(truth, float)[None], days)[0]
    sigma = relative_noise * clean + floor
    observed = clean + sigma * np.random.default_rng(seed).standard_normal(days)
    observed[observed_days:] = np.nan
    return clean, observed, sigma
