"""PEST / PEST++ interop: the exact Jacobian at one point as a PEST JCO binary, with the noise.

PEST and PEST++ estimate a Jacobian by finite differences (``n + 1`` model runs). With a surrogate,
the engine gives it exactly; :func:`write_pest` stores it in the binary format PEST writes to
``case.jco`` / ``case.jcb`` (read by ``pyemu.Jco.from_binary``, PEST's JCO2MAT, PEST++), and the
observation noise as a PEST uncertainty file (``START STANDARD_DEVIATION``; the PEST weight of an
observation is ``1 / std``), read by ``pyemu.Cov.from_uncfile``. A pyEMU linear analysis then runs on
them directly::

    sc = pyemu.Schur(jco="jacobian.jcb", obscov="jacobian.unc", parcov=prior)
    sc.posterior_parameter            # (J^T W J + prior^-1)^-1

Binary layouts (all little-endian), chosen by :func:`jco_bytes`:

* ``"pest"`` (PEST's compressed JCO): a header of three int32 ``(-n_par, -n_obs, nnz)``; ``nnz``
  packed records ``(int32 k, float64 value)`` of the non-zero entries, ``k = row + col * n_obs + 1``
  (1-based, column-major); then the parameter names as 12-byte and the observation names as
  20-byte blank-padded ASCII fields.
* ``"pest++"`` (PEST++'s long-name binary, for names longer than PEST's 12/20 characters): a header
  ``(n_par, n_obs, nnz)`` (positive); records ``(int32 row, int32 col, float64 value)``, 0-based;
  then every name in a 200-byte field.

PEST names are case-insensitive (readers lower-case them) and hold no spaces.

The Jacobian is ``d observation / d parameter`` in physical units, untransformed: a PEST control
file that log-transforms a parameter expects sensitivities to ``log10(parameter)``
(multiply that column by ``parameter * ln 10``).

References
----------
Doherty, J. (2018), PEST Model-Independent Parameter Estimation, User Manual Part I, 7th ed.,
Watermark Numerical Computing (JCO file, uncertainty files).
White, J. T., Fienen, M. N. & Doherty, J. E. (2016), A python framework for environmental model
uncertainty analysis, Environmental Modelling & Software 85, 217-228, doi:10.1016/j.envsoft.2016.08.017.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from sensitivity.datasets import open_result, write_bytes_atomic, write_text_atomic
from sensitivity.errors import ConfigError, DataError
from sensitivity.outputs.spec import OutputSpec

log = logging.getLogger(__name__)

#: Name widths of PEST's JCO format [characters]; PEST++'s long-name format allows LONG_NAME_LENGTH.
PARAMETER_NAME_LENGTH, OBSERVATION_NAME_LENGTH, LONG_NAME_LENGTH = 12, 20, 200
FORMATS = ("auto", "pest", "pest++")

_HEADER = np.dtype([("ncol", "<i4"), ("nrow", "<i4"), ("nnz", "<i4")])
_RECORD = np.dtype([("k", "<i4"), ("value", "<f8")])  # packed: 12 bytes, as PEST writes it
_COO_RECORD = np.dtype([("row", "<i4"), ("col", "<i4"), ("value", "<f8")])  # PEST++ long-name format


@dataclass(frozen=True)
class PestFiles:
    """The files written by :func:`write_pest`."""

    jacobian: Path
    uncertainty: Path | None
    parameter_names: list[str]
    observation_names: list[str]


def pest_names(names: Sequence[str], max_length: int, what: str) -> list[str]:
    """Validate names for PEST: non-empty, no whitespace, at most ``max_length`` characters,
    unique regardless of case. Returns them lower-cased (as PEST and pyEMU read them)."""
    out: list[str] = []
    for name in names:
        name = str(name)
        if not name or any(c.isspace() for c in name) or not name.isascii():
            raise ConfigError(f"PEST {what} name {name!r} must be non-empty ASCII without spaces")
        if len(name) > max_length:
            raise ConfigError(f"PEST {what} name {name!r} has {len(name)} characters; PEST allows {max_length}")
        if name.lower() in out:
            raise ConfigError(f"PEST {what} names must be unique regardless of case, got {name!r} twice")
        out.append(name.lower())
    return out


def observation_names(spec: OutputSpec) -> list[str]:
    """PEST observation names of a model's flat outputs (C order).

    Named scalars keep their labels; a series or a field becomes ``<name>_<k>`` with ``k`` the flat
    index (the name shortened to fit PEST's 20 characters).
    """
    if len(spec.dims) == 1 and spec.dims[0].is_labels:
        return [str(v) for v in spec.dims[0].values]
    digits = len(str(spec.size - 1))
    base = spec.name[: OBSERVATION_NAME_LENGTH - digits - 1]
    return [f"{base}_{k}" for k in range(spec.size)]


def jco_bytes(jacobian: np.ndarray, parameter_names: Sequence[str], observation_names: Sequence[str],
              format: str = "auto") -> bytes:
    """Encode ``jacobian [n_obs, n_par]`` as a PEST binary Jacobian (see the module docstring).

    ``format="auto"`` writes PEST's own format when every name fits its 12/20 characters, else
    PEST++'s long-name format (read by PEST++ and pyEMU, not by PEST itself).
    """
    if format not in FORMATS:
        raise ConfigError(f"`format` must be one of {FORMATS}, got {format!r}")
    j = np.asarray(jacobian, dtype=np.float64)
    if j.ndim != 2:
        raise DataError(f"`jacobian` must be [n_obs, n_par], got shape {list(j.shape)}")
    n_obs, n_par = j.shape
    fits = (all(len(str(n)) <= PARAMETER_NAME_LENGTH for n in parameter_names)
            and all(len(str(n)) <= OBSERVATION_NAME_LENGTH for n in observation_names))
    classic = format == "pest" or (format == "auto" and fits)
    par_len, obs_len = (PARAMETER_NAME_LENGTH, OBSERVATION_NAME_LENGTH) if classic else (LONG_NAME_LENGTH,) * 2
    pars = pest_names(parameter_names, par_len, "parameter")
    obs = pest_names(observation_names, obs_len, "observation")
    if (len(pars), len(obs)) != (n_par, n_obs):
        raise DataError(f"`jacobian` is [{n_obs}, {n_par}] but there are {len(obs)} observation and "
                        f"{len(pars)} parameter names")
    if not np.isfinite(j).all():
        row, col = np.argwhere(~np.isfinite(j))[0]
        raise DataError(f"the Jacobian is not finite at observation {obs[row]!r}, parameter {pars[col]!r}: "
                        f"{j[row, col]}; PEST cannot store it")
    rows, cols = np.nonzero(j.T)[::-1]  # column-major order of the non-zeros
    if classic:
        records = np.empty(rows.size, _RECORD)
        records["k"] = rows + cols * n_obs + 1
        header = np.array([(-n_par, -n_obs, rows.size)], _HEADER)
    else:
        records = np.empty(rows.size, _COO_RECORD)
        records["row"], records["col"] = rows, cols
        header = np.array([(n_par, n_obs, rows.size)], _HEADER)
    records["value"] = j[rows, cols]
    names = [n.ljust(par_len) for n in pars] + [n.ljust(obs_len) for n in obs]
    return header.tobytes() + records.tobytes() + "".join(names).encode("ascii")


def uncertainty_text(names: Sequence[str], std: np.ndarray) -> str:
    """A PEST uncertainty file with one ``START STANDARD_DEVIATION`` block (``std`` > 0, finite)."""
    std = np.asarray(std, dtype=float)
    if std.shape != (len(names),):
        raise DataError(f"`std` must have {len(names)} entries (one per name), got shape {list(std.shape)}")
    bad = ~(np.isfinite(std) & (std > 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataError(f"observation standard deviation must be finite and > 0, got {std[i]} for {names[i]!r}")
    lines = ["START STANDARD_DEVIATION", *(f"  {n:<20s} {s:.17g}" for n, s in zip(names, std)),
             "END STANDARD_DEVIATION", ""]
    return "\n".join(lines)


def write_pest(
    path: str | Path,
    jacobian: np.ndarray,
    parameter_names: Sequence[str],
    observation_names: Sequence[str],
    observation_std: np.ndarray | float | None = None,
    format: str = "auto",
) -> PestFiles:
    """Write a Jacobian as a PEST JCO binary (``path``) and the noise as ``path`` with suffix ``.unc``.

    Parameters
    ----------
    path
        The binary file, conventionally ``<case>.jcb`` or ``<case>.jco``.
    jacobian
        ``[n_obs, n_par]`` d observation / d parameter in physical units; must be finite.
    parameter_names, observation_names
        PEST names: no spaces, unique regardless of case, at most 12 and 20 characters for PEST's
        format, 200 for PEST++'s.
    observation_std
        Standard deviation of each observation's noise [observation units] (scalar or ``[n_obs]``);
        written as a PEST uncertainty file (weight = 1 / std). None: no uncertainty file.
    format
        ``"pest"``, ``"pest++"`` or ``"auto"`` (see :func:`jco_bytes`).

    Returns
    -------
    PestFiles
    """
    path = Path(path)
    data = jco_bytes(jacobian, parameter_names, observation_names, format)
    obs = pest_names(observation_names, LONG_NAME_LENGTH, "observation")
    unc = None
    if observation_std is not None:
        std = np.broadcast_to(np.asarray(observation_std, dtype=float), (len(obs),))
        unc = write_text_atomic(uncertainty_text(obs, std), path.with_suffix(".unc"))
    write_bytes_atomic(data, path)
    return PestFiles(path, unc, pest_names(parameter_names, LONG_NAME_LENGTH, "parameter"), obs)


def write_pest_at(
    jac,
    point: np.ndarray,
    path: str | Path,
    *,
    calibration: str | Path | None = None,
    std_variable: str = "observation_std",
    sigma: Sequence[float] | float | None = None,
    format: str = "auto",
) -> PestFiles:
    """Write the Jacobian of a compiled engine at one point as PEST files (:func:`write_pest`).

    Parameters
    ----------
    jac
        The compiled engine (:class:`~sensitivity.engine.jacobian.CompiledJacobian`); its flat outputs are the
        observations, named by :func:`observation_names`.
    point
        ``[n_par]`` the parameters [parameter units], e.g. :func:`calibration_point`.
    path
        The binary file; the noise goes to ``path`` with suffix ``.unc``.
    calibration
        A calibration result: the outputs it did not observe are left out, and its ``std_variable``
        gives the noise (:func:`observations_from`).
    std_variable
        The noise variable of ``calibration``.
    sigma
        Standard deviation of the observation noise [output units], a scalar or one per output;
        overrides the calibration's. Without either, no ``.unc`` file (PEST weights default to 1).
    format
        ``"pest"``, ``"pest++"`` or ``"auto"`` (see :func:`jco_bytes`).

    Returns
    -------
    PestFiles
        The files, with the names of the observations written.
    """
    names = observation_names(jac.surrogate.output)
    observed, std = np.ones(len(names), bool), None
    if calibration is not None:
        observed, std = observations_from(calibration, len(names), std_variable)
    if sigma is not None:
        given = np.asarray(sigma, dtype=float)
        if given.ndim > 1 or given.size not in (1, len(names)):
            raise ConfigError(f"`sigma` must be a scalar or have one entry per output ({len(names)}), "
                              f"got shape {list(given.shape)}")
        std = np.broadcast_to(given.ravel() if given.ndim else given, (len(names),))
    keep = np.flatnonzero(observed)
    if len(keep) < len(names):
        log.info("PEST: %d of %d outputs were not observed and are left out", len(names) - len(keep), len(names))
    if std is None:
        log.warning("PEST: no observation noise (sigma, or a calibration with known noise): no .unc file; "
                    "PEST weights default to 1")
    return write_pest(path, jacobian_at(jac, point)[keep], jac.surrogate.input_names, [names[i] for i in keep],
                      None if std is None else std[keep], format=format)


def jacobian_at(jac, point: np.ndarray) -> np.ndarray:
    """``[n_obs, n_par]`` Jacobian of the flat outputs of a compiled engine at one ``point [n_par]``."""
    x = np.asarray(point, dtype=float).reshape(1, -1)
    _, j = jac(x)
    return np.asarray(j, dtype=np.float64).reshape(jac.surrogate.output_size, jac.surrogate.n_in)


def calibration_point(path: str | Path, parameter_names: Sequence[str], *, estimate: str = "estimate",
                      start: int | None = None) -> np.ndarray:
    """The estimate ``(start, parameter)`` of a calibration result at ``start`` (default: its ``best_start``),
    in the order of ``parameter_names``.

    Unlike :func:`sensitivity.datasets.read_estimate` it does not need a finite covariance: the PEST
    Jacobian of a rank-deficient fit is what a pyEMU identifiability analysis wants.
    """
    with open_result(path) as ds:
        if estimate not in ds.variables:
            raise DataError(f"{path}: no variable `{estimate}` (variables: {sorted(map(str, ds.data_vars))})")
        var = ds[estimate]
        if "start" in var.dims:
            if start is None:
                if "best_start" not in ds.variables:
                    raise DataError(f"{path}: `{estimate}` has {ds.sizes['start']} starts and no `best_start`")
                start = int(ds["best_start"].values)
            if not 0 <= start < ds.sizes["start"]:
                raise DataError(f"{path}: start must be in [0, {ds.sizes['start']}), got {start}")
            var = var.isel(start=start)
        if var.dims != ("parameter",) or "parameter_name" not in ds.coords:
            raise DataError(f"{path}: `{estimate}` must be on (start?, parameter) with `parameter_name` labels")
        stored = [str(n) for n in ds["parameter_name"].values]
        if sorted(stored) != sorted(parameter_names):
            raise DataError(f"{path}: parameters {stored} do not match the model's {list(parameter_names)}")
        point = var.values.astype(float)[[stored.index(n) for n in parameter_names]]
    if not np.isfinite(point).all():
        raise DataError(f"{path}: `{estimate}` is not finite at start {start}: {point}")
    return point


def observations_from(path: str | Path, n_outputs: int, std_variable: str = "observation_std",
                      observed_variable: str = "observed") -> tuple[np.ndarray, np.ndarray | None]:
    """Which outputs a calibration fitted, and their noise, from its result file.

    Returns ``(observed [n_outputs] bool, std [n_outputs] or None)``: ``observed`` from the flag variable
    ``observed_variable`` when present, else where ``std`` is finite, else every output; ``std`` is None
    when the file has no ``std_variable`` or it is NaN on an observed output (noise unknown: unit weights).
    """
    with open_result(path) as ds:
        read = {name: np.asarray(ds[name].values).ravel() for name in (std_variable, observed_variable)
                if name in ds.variables}
    for name, values in read.items():
        if values.size != n_outputs:
            raise DataError(f"{path}: `{name}` has {values.size} entries but the model has {n_outputs} outputs")
    std = read.get(std_variable)
    std = None if std is None else std.astype(float)
    if observed_variable in read:
        observed = read[observed_variable].astype(bool)
    else:
        observed = np.isfinite(std) if std is not None and np.isfinite(std).any() else np.ones(n_outputs, bool)
    if not observed.any():
        raise DataError(f"{path}: no output was observed (`{observed_variable}` / `{std_variable}`)")
    if std is not None and not np.isfinite(std[observed]).all():
        std = None
    return observed, std
