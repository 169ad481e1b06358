"""The posterior's priors (sensitivity.analyses.posterior.priors) against scipy.stats, family by family.

For every family of the table, on the marginal the space builds (``sensitivity.inputs.marginals.marginal``:
untruncated, truncated below, above and on both sides), the TF log-density equals scipy's ``logpdf``
to 1e-10 at points from the 1e-12 to the 1 - 1e-12 quantile, at the ends of the support and outside it
(``-inf``); its autodiff gradient equals float64 central differences of scipy's ``logpdf``. A
truncated normal is scipy's own ``truncnorm``; any other truncated law is its scipy ``logpdf`` less the
log of the mass that ``scipy.integrate.quad`` finds on the truncation interval (``stats.truncate`` of
scipy 1.17 is no oracle: NaN for a one-sided truncation, refused for a support set by a shape).
"""
from __future__ import annotations

import math
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import integrate, stats

from sensitivity.analyses.posterior.priors import FAMILIES, check_prior_families, describe, log_density
from sensitivity.errors import ConfigError
from sensitivity.inputs.marginals import Truncated, marginal
from sensitivity.inputs.space import ParameterSpace
from workflows.init import FILES

tf = pytest.importorskip("tensorflow")

ROOT = Path(__file__).resolve().parents[2]

#: Parameters of each family (shapes, loc, scale): a test case per entry; a family added to FAMILIES
#: without cases here fails :func:`test_log_density_equals_scipy`.
CASES: dict[str, list[dict[str, float]]] = {
    "alpha": [{"a": 1.7, "loc": -0.5, "scale": 2.0}],
    "anglit": [{"loc": 1.0, "scale": 0.5}],
    "arcsine": [{"loc": -1.0, "scale": 3.0}],
    "beta": [{"a": 2.5, "b": 0.7, "loc": 1.0, "scale": 2.0}, {"a": 0.5, "b": 3.0}, {"a": 1.0, "b": 1.0}],
    "betaprime": [{"a": 2.0, "b": 3.5, "scale": 0.5}],
    "bradford": [{"c": 3.0, "loc": 1.0}],
    "burr": [{"c": 3.0, "d": 0.6, "scale": 2.0}],
    "burr12": [{"c": 2.0, "d": 1.5, "loc": -1.0}],
    "cauchy": [{"loc": 1.0, "scale": 0.3}],
    "chi": [{"df": 3.0, "scale": 0.5}, {"df": 0.8}],
    "chi2": [{"df": 3.0, "loc": 1.0, "scale": 2.0}, {"df": 1.2}],
    "cosine": [{"loc": 0.5, "scale": 0.2}],
    "dgamma": [{"a": 1.6, "loc": 1.0, "scale": 0.5}],
    "dweibull": [{"c": 2.1, "scale": 2.0}],
    "erlang": [{"a": 3.0, "scale": 0.5}],
    "expon": [{"loc": 1.0, "scale": 2.0}],
    "exponpow": [{"b": 2.5, "scale": 3.0}],
    "exponweib": [{"a": 2.0, "c": 1.5, "loc": 0.5}],
    "f": [{"dfn": 5.0, "dfd": 7.0, "scale": 2.0}],
    "fatiguelife": [{"c": 0.6, "loc": -1.0, "scale": 2.0}],
    "fisk": [{"c": 3.5, "scale": 2.0}],
    "foldnorm": [{"c": 1.3, "scale": 0.5}],
    "gamma": [{"a": 0.5}, {"a": 3.0, "loc": 1.0, "scale": 2.0}],
    "genextreme": [{"c": 0.3, "loc": 2.0, "scale": 0.5}, {"c": -0.4}, {"c": 0.0, "scale": 2.0}],
    "gengamma": [{"a": 2.0, "c": 1.5, "scale": 2.0}, {"a": 1.5, "c": -0.7}],
    "gennorm": [{"beta": 1.5, "loc": 1.0}, {"beta": 4.0, "scale": 2.0}],
    "genpareto": [{"c": 0.3, "scale": 2.0}, {"c": -0.4, "loc": 1.0}, {"c": 0.0}],
    "gibrat": [{"loc": 1.0, "scale": 2.0}],
    "gompertz": [{"c": 0.8, "scale": 2.0}],
    "gumbel_l": [{"loc": 2.0, "scale": 0.5}],
    "gumbel_r": [{"loc": 2.0, "scale": 0.5}],
    "halfcauchy": [{"loc": 1.0, "scale": 2.0}],
    "halfgennorm": [{"beta": 0.7, "scale": 2.0}],
    "halflogistic": [{"loc": -1.0, "scale": 0.5}],
    "halfnorm": [{"loc": 1.0, "scale": 2.0}],
    "hypsecant": [{"loc": 1.0, "scale": 0.5}],
    "invgamma": [{"a": 2.5, "scale": 3.0}],
    "invgauss": [{"mu": 0.7, "scale": 2.0}],
    "invweibull": [{"c": 2.5, "loc": 1.0}],
    "johnsonsb": [{"a": 0.5, "b": 1.5, "loc": 1.0, "scale": 2.0}],
    "johnsonsu": [{"a": 0.5, "b": 1.5, "loc": 1.0, "scale": 2.0}],
    "laplace": [{"loc": 1.0, "scale": 0.5}],
    "levy": [{"loc": 1.0, "scale": 0.5}],
    "levy_l": [{"loc": 1.0, "scale": 0.5}],
    "loggamma": [{"c": 0.8, "scale": 2.0}],
    "logistic": [{"loc": 1.0, "scale": 0.5}],
    "loglaplace": [{"c": 3.0, "scale": 2.0}],
    "lognorm": [{"s": 0.5, "scale": 2.0}, {"s": 1.5, "loc": -1.0, "scale": 0.3}],
    "loguniform": [{"a": 0.01, "b": 100.0}],
    "lomax": [{"c": 1.5, "scale": 2.0}],
    "maxwell": [{"loc": 1.0, "scale": 2.0}],
    "mielke": [{"k": 2.0, "s": 3.5, "scale": 2.0}],
    "moyal": [{"loc": 1.0, "scale": 0.5}],
    "nakagami": [{"nu": 1.7, "scale": 2.0}],
    "norm": [{"loc": 1.0, "scale": 0.2}],
    "pareto": [{"b": 2.5, "scale": 2.0}],
    "powerlaw": [{"a": 1.7, "loc": 1.0}, {"a": 0.6}],
    "rayleigh": [{"loc": 1.0, "scale": 2.0}],
    "rdist": [{"c": 3.0, "scale": 2.0}],
    "recipinvgauss": [{"mu": 0.6, "scale": 2.0}],
    "reciprocal": [{"a": 0.5, "b": 20.0, "scale": 2.0}],
    "semicircular": [{"loc": 1.0, "scale": 2.0}],
    "t": [{"df": 3.0, "loc": 1.0, "scale": 0.5}, {"df": 0.7}],
    "trapezoid": [{"c": 0.2, "d": 0.7, "loc": 1.0, "scale": 2.0}, {"c": 0.0, "d": 0.5}, {"c": 0.4, "d": 1.0}],
    "triang": [{"c": 0.3, "loc": 1.0, "scale": 2.0}, {"c": 0.0}, {"c": 1.0}],
    "truncexpon": [{"b": 2.5, "scale": 2.0}],
    "truncnorm": [{"a": -1.5, "b": 2.0, "loc": 1.0, "scale": 2.0}, {"a": 8.0, "b": 9.0}, {"a": -30.0, "b": -29.0}],
    "truncweibull_min": [{"c": 2.5, "a": 0.3, "b": 1.8, "scale": 2.0}],
    "uniform": [{"loc": -1.0, "scale": 3.0}],
    "wald": [{"loc": 1.0, "scale": 2.0}],
    "weibull_max": [{"c": 1.7, "loc": 1.0}],
    "weibull_min": [{"c": 0.8, "scale": 2.0}, {"c": 2.5}],
}

QUANTILES = np.array([1e-12, 1e-9, 1e-6, 1e-3, 0.03, 0.17, 0.41, 0.63, 0.86])  # and the same from the top


def _truncations(base):
    """Untruncated, below, above and on both sides (at quantiles of the untruncated law)."""
    low, mid, high = (float(base.ppf(q)) for q in (0.2, 0.45, 0.8))
    return [None, (low, None), (None, high), (low, high), (mid, high)]


def _oracle(frozen):
    """scipy's log-density of the marginal: the frozen law's ``logpdf`` (scipy's ``truncnorm`` for a
    truncated normal), or for a ``Truncated`` one its base law's less the log of the mass by quadrature."""
    if not isinstance(frozen, Truncated):
        return frozen.logpdf
    base = frozen.base
    with np.errstate(over="ignore"), warnings.catch_warnings():  # scipy's pdf far out on an open side; quad's
        warnings.simplefilter("ignore", integrate.IntegrationWarning)  # doubt at a singular end: the 1e-10 decides
        mass = integrate.quad(base.pdf, frozen.lower, frozen.upper, epsabs=0.0, epsrel=1e-13, limit=200)[0]
    return lambda x: base.logpdf(x) - math.log(mass)


def _points(frozen):
    """Points from the 1e-12 to the 1 - 1e-12 quantile, the finite ends of the support and beyond them."""
    with warnings.catch_warnings():  # boost's beta ppf may give up near 1e-12: these need not be exact quantiles
        warnings.simplefilter("ignore", RuntimeWarning)
        inside = np.unique(np.concatenate([frozen.ppf(QUANTILES), frozen.isf(QUANTILES)]))
    lower, upper = frozen.support()
    width = float(frozen.isf(0.25) - frozen.ppf(0.25))
    ends = [e for e in (lower, upper) if np.isfinite(e)]
    outside = [lower - width, lower - 1e-9 * width] if np.isfinite(lower) else []
    outside += [upper + 1e-9 * width, upper + width] if np.isfinite(upper) else []
    inside = inside[(inside > lower) & (inside < upper)]
    return inside, np.array(ends, float), np.array(outside, float)


def _cases():
    for name in sorted(FAMILIES):
        for i in range(len(CASES.get(name, [None]))):
            yield pytest.param(name, i, id=f"{name}-{i}")


def test_every_family_has_cases():
    assert sorted(CASES) == sorted(FAMILIES)


@pytest.mark.parametrize("name, case", list(_cases()))
def test_log_density_equals_scipy(name, case):
    """Values to 1e-10 (relative, absolute near 0) inside, scipy's value at the ends, -inf outside;
    gradients against central differences of scipy's logpdf; no NaN gradient anywhere."""
    params = CASES[name][case]
    base = getattr(stats, name)(**params)
    for truncate in _truncations(base):
        frozen = marginal(name, params, truncate, "test")
        where = f"{name}({params}) truncated to {truncate}"
        oracle = _oracle(frozen)
        inside, ends, outside = _points(frozen)
        lp = log_density(frozen)
        got = lp(tf.constant(inside)).numpy()
        np.testing.assert_allclose(got, oracle(inside), rtol=1e-10, atol=1e-10, err_msg=where)
        np.testing.assert_allclose(lp(tf.constant(ends)).numpy(), oracle(ends), rtol=1e-10,
                                   atol=1e-10, err_msg=where)
        assert np.all(lp(tf.constant(outside)).numpy() == -np.inf), where
        _check_gradient(lp, oracle, inside, frozen, where)
        x = tf.constant(np.concatenate([ends, outside]))
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = lp(x)
        assert not np.any(np.isnan(tape.gradient(y, x).numpy())), where


def _check_gradient(lp, oracle, x, frozen, where):
    """Central differences with a step of 1e-6 of the distance to the nearer end of the support, or of
    ``max(|x|, interquartile width)`` where that is smaller; points within 1e-3 of that size of an end
    (where such a step drowns in rounding) are left out."""
    width = float(frozen.isf(0.25) - frozen.ppf(0.25))
    lower, upper = frozen.support()
    size, gap = np.maximum(np.abs(x), width), np.minimum(x - lower, upper - x)
    keep = gap > 1e-3 * size
    x, h = x[keep], 1e-6 * np.minimum(gap, size)[keep]
    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y = lp(xt)
    grad = tape.gradient(y, xt).numpy()
    fd = (oracle(x + h) - oracle(x - h)) / (2 * h)
    np.testing.assert_allclose(grad, fd, rtol=2e-6, atol=1e-6 / width, err_msg=where)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_log_density_compiles_with_xla(name):
    """The density as the sampler compiles it (XLA) still equals scipy's."""
    frozen = marginal(name, CASES[name][0], None, "test")
    inside, ends, outside = _points(frozen)
    compiled = tf.function(log_density(frozen), jit_compile=True)
    got = compiled(tf.constant(np.concatenate([inside, ends, outside]))).numpy()
    expected = np.concatenate([frozen.logpdf(np.concatenate([inside, ends])), np.full(len(outside), -np.inf)])
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)


#: The space `sensitivity init` writes (uniform; norm truncated below; gumbel_r truncated on both sides) and the
#: original kinds (triangular and truncnormal on the bounds, lognormal, normal, uniform on the bounds).
INIT_SPACE = yaml.safe_load(FILES["conf/space/study.yaml"])["parameters"]
STUDY = [*INIT_SPACE,
         {"name": "d", "units": "1", "low": 1.0, "high": 3.0, "distribution": {"kind": "triangular", "mode": 1.5}},
         {"name": "e", "units": "1", "low": 0.0, "high": 2.0,
          "distribution": {"kind": "truncnormal", "mean": 0.5, "std": 1.0}},
         {"name": "f", "units": "1", "distribution": {"kind": "lognormal", "median": 2.0, "sigma_log": 0.3}},
         {"name": "g", "units": "1", "distribution": {"kind": "normal", "mean": -1.0, "std": 2.0}},
         {"name": "h", "units": "1", "low": -1.0, "high": 4.0}]


def test_space_prior_is_the_space_marginals():
    """The posterior's space prior: the sum of scipy's logpdf of each parameter's frozen distribution, for
    scipy families truncated on either side and the original kinds (uniform on the bounds, triangular,
    truncnormal, lognormal, normal)."""
    from sensitivity.analyses.posterior.density import _log_prior, space_prior

    space = ParameterSpace.from_records(STUDY)
    prior = space_prior(space)
    rng = np.random.default_rng(0)
    x = rng.uniform(space.bounds[:, 0], space.bounds[:, 1], (50, len(space)))
    expected = sum(_oracle(p.frozen_distribution())(x[:, j]) for j, p in enumerate(space.parameters))
    np.testing.assert_allclose(_log_prior(prior, len(space))(tf.constant(x)).numpy(), expected, rtol=1e-12)
    text = prior.description()
    assert "gumbel_r(loc=2, scale=0.5) truncated to [0, 6]" in text, text
    assert "truncnorm(a=-2.5, b=inf, loc=1, scale=0.2)" in text and "triang(c=0.25, loc=1, scale=2)" in text, text
    assert text.count("uniform(") == 2 and "lognorm(s=0.3, loc=0, scale=2)" in text, text


def test_describe_names_family_parameters_and_truncation():
    assert describe(stats.norm(1.0, 0.2)) == "norm(loc=1, scale=0.2)"
    frozen = marginal("gamma", {"a": 2.0, "scale": 3.0}, (None, 10.0), "p")
    assert describe(frozen) == "gamma(a=2, loc=0, scale=3) truncated to [0, 10]"


def test_family_without_a_tf_log_density_is_refused():
    space = ParameterSpace.from_records([*INIT_SPACE[:2], {"name": "c", "units": "1",
                                                           "distribution": {"kind": "skewnorm", "a": 2.0}}])
    with pytest.raises(ConfigError, match=r"^parameter 'c': distribution 'skewnorm' has no TF log-density for the "
                                          r"posterior; families that work: alpha, anglit, .*, weibull_min$"):
        check_prior_families(space)
    check_prior_families(ParameterSpace.from_records(STUDY))
    with pytest.raises(ConfigError, match="'skewnorm' has no TF log-density"):
        log_density(stats.skewnorm(2.0))


def test_the_check_imports_no_tensorflow():
    """The family table and the check run when the config is read, before TensorFlow is imported."""
    script = ("import sys\nfrom sensitivity.analyses.posterior.priors import check_prior_families\n"
              "from sensitivity.inputs.space import ParameterSpace\n"
              "check_prior_families(ParameterSpace.from_records([{'name': 'c', 'units': '1', 'distribution': "
              "{'kind': 'gumbel_r', 'loc': 2.0, 'scale': 0.5, 'truncate': [0.0, 6.0]}}]))\n"
              "print('imported:', sorted({'tensorflow', 'tensorflow_probability'} & set(sys.modules)))\n")
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "imported: []"
