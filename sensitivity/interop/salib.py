"""SALib interop: a :class:`~sensitivity.inputs.space.ParameterSpace` as a SALib problem, and back.

A SALib problem is a dict ``{num_vars, names, bounds, dists}`` (Herman & Usher, 2017; Iwanaga et
al., 2022). :func:`to_problem` writes one that SALib samples exactly as this package does, plus
keys SALib ignores that make the round trip lossless: ``units``, ``ranges`` (the space's
``[low, high]``), ``nominal``, ``long_names``, ``scales`` and ``correlation``.
:func:`from_problem` reads any SALib problem (those keys optional) as a space, so a SALib problem
file can define the space of every workflow.

Distributions (SALib ``dists`` entry and its ``bounds`` row <-> :class:`~sensitivity.inputs.space.Distribution`):

=============  ============================  ===========================================
SALib          ``bounds`` row                this package
=============  ============================  ===========================================
``unif``       ``[low, high]``               ``uniform`` on ``[low, high]``
``triang``     ``[low, high, c]``            ``triangular``, ``mode = low + c (high - low)``
``norm``       ``[mean, std]``               ``normal``
``truncnorm``  ``[low, high, mean, std]``    ``truncnormal``
``lognorm``    ``[mu, sigma]`` (ln space)    ``lognormal``, ``median = exp(mu)``, ``sigma_log = sigma``
=============  ============================  ===========================================

``logunif`` and ``weibull`` have no counterpart here and are refused with a clear error. For
``norm`` and ``lognorm`` SALib has no range; without ``ranges`` the space's bounds are the
``Phi(-5)`` and ``Phi(5)`` quantiles (probability 5.7e-7 outside).

References
----------
Herman, J. & Usher, W. (2017), SALib: An open-source Python library for sensitivity analysis,
JOSS 2(9), 97, doi:10.21105/joss.00097.
Iwanaga, T., Usher, W. & Herman, J. (2022), Toward SALib 2.0, Socio-Environmental Systems
Modelling 4, 18155, doi:10.18174/sesmo.18155.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from sensitivity.datasets import write_text_atomic
from sensitivity.errors import ConfigError, DataError, yaml_reason
from sensitivity.inputs.space import Parameter, ParameterSpace

_TAIL = 5.0  # default range of unbounded SALib distributions: +- 5 standard deviations (in ln space for lognorm)


def to_problem(space: ParameterSpace) -> dict[str, Any]:
    """The SALib problem dict of ``space`` (plain lists, JSON/YAML-safe); see :func:`check_problem_form`."""
    check_problem_form(space)
    forms = [_salib_form(p) for p in space.parameters]
    return {
        "num_vars": len(space),
        "names": list(space.names),
        "bounds": [bounds for _, bounds in forms],
        "dists": [dist for dist, _ in forms],
        "units": list(space.units),
        "ranges": [[float(p.low), float(p.high)] for p in space.parameters],
        "nominal": [float(p.nominal) for p in space.parameters],
        "long_names": [p.long_name for p in space.parameters],
        "scales": [p.scale for p in space.parameters],
        "correlation": None if space.correlation is None else np.asarray(space.correlation).tolist(),
    }


def check_problem_form(space: ParameterSpace) -> None:
    """Refuse a space SALib cannot describe exactly; a :class:`ConfigError` names the first parameter that has no
    SALib form. SALib knows uniform, triangular, normal, normal truncated on both sides and lognormal (scipy's
    ``uniform``, ``triang``, ``norm``, ``truncnorm``, ``lognorm`` with ``loc = 0``, or the original kinds)."""
    for p in space.parameters:
        _salib_form(p)


def _salib_form(p: Parameter) -> tuple[str, list[float]]:
    """``(SALib dist, its bounds row)`` of a parameter's law, through its scipy form (exact, or refused)."""
    d = p.distribution
    name, q = d.scipy_form(p.low, p.high)
    loc, scale = float(q.get("loc", 0.0)), float(q.get("scale", 1.0))
    truncate = (p.low, p.high) if d.kind == "truncnormal" else d.truncate
    if truncate is None:
        if name == "uniform":
            return "unif", [loc, loc + scale]
        if name == "triang":
            return "triang", [loc, loc + scale, float(q["c"])]
        if name == "norm":
            return "norm", [loc, scale]
        if name == "lognorm" and loc == 0.0:
            return "lognorm", [float(math.log(scale)), float(q["s"])]
    elif name == "norm" and None not in truncate:
        return "truncnorm", [float(truncate[0]), float(truncate[1]), loc, scale]
    raise ConfigError(f"parameter {p.name!r}: distribution {d.kind!r}"
                      f"{' truncated to ' + str(list(truncate)) if truncate is not None else ''} has no SALib "
                      "problem form (SALib knows uniform, triangular, normal, normal truncated on both sides, "
                      "lognormal)")


def from_problem(problem: Mapping[str, Any]) -> ParameterSpace:
    """A :class:`ParameterSpace` from a SALib problem dict (see the module docstring for the mapping).

    ``units`` defaults to ``"1"`` (dimensionless) for every parameter when the problem has none.
    """
    if not isinstance(problem, Mapping):
        raise DataError(f"a SALib problem must be a mapping, got {type(problem).__name__}")
    for key in ("names", "bounds"):
        if key not in problem:
            raise DataError(f"SALib problem: missing `{key}`")
    names = [str(n) for n in problem["names"]]
    n = len(names)
    if "num_vars" in problem and problem["num_vars"] != n:
        raise DataError(f"SALib problem: `num_vars` is {problem['num_vars']} but `names` has {n} entries")
    columns = {key: _column(problem, key, n, default)
               for key, default in (("bounds", None), ("dists", "unif"), ("units", "1"), ("ranges", None),
                                    ("nominal", None), ("long_names", ""), ("scales", "linear"))}
    records = []
    for i, name in enumerate(names):
        low, high, dist = _our_distribution(name, columns["dists"][i], columns["bounds"][i], columns["ranges"][i])
        record = {"name": name, "units": str(columns["units"][i]), "low": low, "high": high,
                  "long_name": str(columns["long_names"][i] or ""), "scale": columns["scales"][i],
                  "distribution": dist}
        if columns["nominal"][i] is not None:
            record["nominal"] = float(columns["nominal"][i])
        records.append(record)
    return ParameterSpace.from_records(records, problem.get("correlation"))


def _column(problem: Mapping[str, Any], key: str, n: int, default: Any) -> list[Any]:
    values = problem.get(key)
    if values is None:
        return [default] * n
    if isinstance(values, (str, bytes)) or len(values) != n:
        raise DataError(f"SALib problem: `{key}` must have one entry per name ({n}), got {values!r}")
    return list(values)


def _our_distribution(name: str, dist: str, bounds: Any, ranges: Any) -> tuple[float, float, dict]:
    """``(low, high, distribution record)`` of one SALib parameter."""
    b = [float(v) for v in (bounds or [])]
    expected = {"unif": 2, "triang": 3, "norm": 2, "truncnorm": 4, "lognorm": 2}
    if dist not in expected:
        raise ConfigError(f"SALib problem: parameter {name!r} has distribution {dist!r}; supported are "
                          f"{sorted(expected)} (logunif and weibull have no counterpart in a ParameterSpace)")
    if len(b) != expected[dist]:
        raise DataError(f"SALib problem: parameter {name!r} ({dist}) needs {expected[dist]} bounds values, got {b}")
    if dist == "unif":
        low, high, record = b[0], b[1], {"kind": "uniform"}
    elif dist == "triang":
        low, high = b[0], b[1]
        record = {"kind": "triangular", "mode": low + b[2] * (high - low)}
    elif dist == "truncnorm":
        low, high, record = b[0], b[1], {"kind": "truncnormal", "mean": b[2], "std": b[3]}
    elif dist == "norm":
        record = {"kind": "normal", "mean": b[0], "std": b[1]}
        low, high = b[0] - _TAIL * b[1], b[0] + _TAIL * b[1]
    else:
        record = {"kind": "lognormal", "median": math.exp(b[0]), "sigma_log": b[1]}
        low, high = math.exp(b[0] - _TAIL * b[1]), math.exp(b[0] + _TAIL * b[1])
    if ranges is not None:
        low, high = (float(v) for v in ranges)
    return low, high, record


def write_problem(space: ParameterSpace, path: str | Path) -> Path:
    """Write the SALib problem of ``space`` as JSON (readable by :func:`read_problem`, ``json.load``)."""
    return write_text_atomic(json.dumps(to_problem(space), indent=2) + "\n", path)


def read_problem(path: str | Path) -> ParameterSpace:
    """A space from a SALib problem file: JSON, or YAML (``.yaml``/``.yml``)."""
    import yaml

    path = Path(path)
    if not path.is_file():
        raise DataError(f"SALib problem file not found: {path}")
    try:
        problem = yaml.safe_load(path.read_text())  # YAML is a superset of JSON
    except UnicodeDecodeError:
        raise DataError(f"SALib problem file {path} is not a text file (not UTF-8): give JSON or YAML") from None
    except yaml.YAMLError as err:
        raise DataError(f"SALib problem file {path} is neither JSON nor YAML: {yaml_reason(err)}") from None
    return from_problem(problem)
