"""The compiled Jacobian as a standalone artifact: a TensorFlow SavedModel anyone can reload.

TensorFlow does not store "the analytical gradient" of a model: gradients are built by
automatic differentiation each time a function is traced. What can be stored is the traced
*Jacobian function* itself. :func:`export_jacobian` wraps the engine's own forward- or
reverse-mode construction (:func:`sensitivity.engine.jacobian.jacobian_functions`, the one
:func:`~sensitivity.engine.jacobian.compile_jacobian` compiles) in a ``tf.Module`` with fixed input
signatures ``[None, n_in]`` and saves it with ``tf.saved_model.save``. The graph that computes
``d output / d parameter`` is in the file; a process with only TensorFlow installed reloads it
and evaluates Jacobians at new points without ``GradientTape`` and without this package::

    import json, tensorflow as tf
    m = tf.saved_model.load("jacobian_model")
    out = m.value_and_jacobian(tf.constant(points, tf.float32))   # points [N, n_in]
    out["value"], out["jacobian"]                                 # [N, *out], [N, *out, n_in]
    meta = json.loads(m.metadata_json.numpy())                    # names, units, output dims

Functions (also exported as serving signatures of the same names, ``serving_default`` being
``value``): ``value``, ``jacobian``,
``value_and_jacobian`` and, optionally, ``hessian`` (the engine's compiled Hessian,
:func:`sensitivity.engine.hessian.hessian_of`), each taking ``x [N, n_in]`` in the export dtype
and returning a dict of tensors in physical units. Names and units travel as string variables
(``parameter_names``, ``parameter_units``, ``output_names``, ``output_units``) and as one JSON
document (``metadata_json``). With ``jit_compile`` the functions keep their XLA attribute: XLA
compiles once per batch size, so feed batches of a fixed size for full speed.

After writing, :func:`export_jacobian` checks the artifact in a fresh interpreter that cannot
import this package (:func:`check_export`): it reloads it, evaluates new points and compares
them with the in-process engine, and measures both throughputs.

References
----------
TensorFlow guide, "Using the SavedModel format", https://www.tensorflow.org/guide/saved_model
Griewank, A. & Walther, A. (2008), Evaluating Derivatives, 2nd ed., SIAM, doi:10.1137/1.9780898717761.
"""
from __future__ import annotations

import io
import json
import logging
import os
import site
import subprocess
import sys
import sysconfig
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from sensitivity import __version__
from sensitivity.datasets import write_directory_atomic
from sensitivity.errors import ConfigError, ModelError
from sensitivity.engine.hessian import hessian_of
from sensitivity.engine.jacobian import CompiledJacobian, jacobian_functions
from sensitivity.settings import EXPORT_NOISE_FACTOR, EXPORT_ULPS, HESSIAN_MAX_ROWS, ExportSettings
from sensitivity.units import quotient

log = logging.getLogger(__name__)

FORMAT = "sensitivity-jacobian-savedmodel/1"
SIGNATURES = ("value", "jacobian", "value_and_jacobian", "hessian")

#: The snippet logged after an export (``{path}``, ``{dtype}`` filled in): it needs TensorFlow only.
RELOAD_SNIPPET = """\
import json, numpy as np, tensorflow as tf
m = tf.saved_model.load("{path}")
meta = json.loads(m.metadata_json.numpy())          # parameter/output names, units, dims
x = tf.constant(np.random.rand(1024, {n_in}), tf.{dtype})   # [N, n_in] in physical units
out = m.value_and_jacobian(x)                       # dict: value [N, *out], jacobian [N, *out, n_in]
"""


# ----------------------------------------------------------------------------- building


def export_metadata(jac: CompiledJacobian, *, hessian: bool) -> dict[str, Any]:
    """Plain-data description embedded in the artifact: names, units, output dims, engine settings."""
    s = jac.surrogate
    flat_units = s.output.flat_units()
    return {
        "format": FORMAT,
        "sensitivity_version": __version__,
        "tensorflow_version": tf.__version__,
        "parameter_names": list(s.input_names),
        "parameter_units": list(s.input_units),
        "output": s.output.to_dict(),
        "output_shape": list(s.output.shape),
        "output_names": s.output.flat_names(),
        "output_units": flat_units,
        "jacobian_units": [[quotient(o, p) for p in s.input_units] for o in flat_units],
        "dtype": jac.dtype,
        "mode": jac.mode,
        "jit_compile": bool(jac.jit_compile),
        "chunk_size": int(jac.chunk_size),
        "signatures": [name for name in SIGNATURES if hessian or name != "hessian"],
        "surrogate_source": s.source,
        "surrogate_hash": s.content_hash,
    }


class JacobianModule(tf.Module):
    """A ``tf.Module`` holding the compiled value/Jacobian(/Hessian) functions of one surrogate.

    Build with :func:`build_module`; every function takes ``x [N, n_in]`` in the export dtype.
    """

    def __init__(self, jac: CompiledJacobian, *, hessian: bool = True, hessian_max_rows: int = HESSIAN_MAX_ROWS) -> None:
        super().__init__(name="sensitivity_jacobian")
        s = jac.surrogate
        n_in, out_shape = s.n_in, list(s.output.shape)
        meta = export_metadata(jac, hessian=hessian)
        strings = lambda values: tf.Variable(np.asarray(values, dtype=object).astype(bytes), trainable=False)
        self.parameter_names = strings(meta["parameter_names"])
        self.parameter_units = strings(meta["parameter_units"])
        self.output_names = strings(meta["output_names"])
        self.output_units = strings(meta["output_units"])
        self.metadata_json = tf.Variable(json.dumps(meta, sort_keys=True), trainable=False)
        flat_values, flat_jacobian = jacobian_functions(s, jac.mode, jac.forward_form)
        signature = [tf.TensorSpec([None, n_in], s.dtype, name="x")]
        compiled = lambda f: tf.function(f, input_signature=signature, jit_compile=jac.jit_compile,
                                         reduce_retracing=False)
        unflat = lambda y: tf.reshape(y, [-1, *out_shape])
        unflat_jac = lambda j: tf.reshape(j, [-1, *out_shape, n_in])

        def value(x: tf.Tensor) -> dict[str, tf.Tensor]:
            return {"value": unflat(flat_values(x))}

        def jacobian(x: tf.Tensor) -> dict[str, tf.Tensor]:
            return {"jacobian": unflat_jac(flat_jacobian(x)[1])}

        def value_and_jacobian(x: tf.Tensor) -> dict[str, tf.Tensor]:
            y, j = flat_jacobian(x)
            return {"value": unflat(y), "jacobian": unflat_jac(j)}

        self.value = compiled(value)
        self.jacobian = compiled(jacobian)
        self.value_and_jacobian = compiled(value_and_jacobian)
        if hessian:
            # the traced function of the engine's compiled Hessian, reused as it is
            inner = hessian_of(jac, max_rows=hessian_max_rows).function
            self.hessian = tf.function(lambda x: {"hessian": tf.reshape(inner(x), [-1, *out_shape, n_in, n_in])},
                                       input_signature=signature)
        # Track every variable the traced graphs read (Keras weights, a reloaded SavedModel's variables, the
        # dense path's folded kernels), whatever object owns them, so that they are saved with the functions:
        # each function may read its own (the values the raw kernels, the Jacobian the folded ones).
        self.model_variables = _captured_variables(
            [getattr(self, name).get_concrete_function() for name in SIGNATURES if hasattr(self, name)])

    def signatures(self) -> dict[str, Any]:
        """Concrete functions to export as serving signatures; ``serving_default`` is ``value``, so the
        artifact also loads as a surrogate (:func:`sensitivity.load_surrogate`) or in TF Serving."""
        names = [n for n in SIGNATURES if hasattr(self, n)]
        signatures = {n: getattr(self, n).get_concrete_function() for n in names}
        return {**signatures, "serving_default": signatures["value"]}


def build_module(jac: CompiledJacobian, *, hessian: bool = True,
                 hessian_max_rows: int = HESSIAN_MAX_ROWS) -> JacobianModule:
    """The exportable module of a compiled engine (same mode, dtype and ``jit_compile``)."""
    return JacobianModule(jac, hessian=hessian, hessian_max_rows=hessian_max_rows)


def _captured_variables(concretes: list[Any]) -> list[tf.Variable]:
    """Every variable the concrete functions read, once each, in the order first read."""
    seen, found = set(), []
    for v in (v for concrete in concretes for v in concrete.variables):
        if id(v) not in seen:
            seen.add(id(v))
            found.append(v)
    return found


def save_module(module: JacobianModule, path: str | Path) -> Path:
    """Save ``module`` as a SavedModel directory at ``path``, atomically (temporary dir + rename)."""
    return write_directory_atomic(path, lambda tmp: _save(module, tmp))


def _save(module: JacobianModule, directory: Path) -> None:
    try:
        tf.saved_model.save(module, str(directory), signatures=module.signatures())
    except (ValueError, TypeError, AssertionError) as err:  # TF's untracked-resource and tracing errors
        raise ModelError(f"export: the surrogate's functions cannot be saved as a SavedModel: {err}") from None


# ----------------------------------------------------------------------------- checking

#: The reload check, a script run by ``python -I -S`` (:func:`run_in_plain_tensorflow`), never imported.
RELOAD_SCRIPT = Path(__file__).with_name("reload_check.py")


@dataclass(frozen=True)
class ExportCheck:
    """What the fresh-process check of an exported artifact found.

    Attributes
    ----------
    path
        The SavedModel directory.
    n_points
        Number of new points compared.
    value_error, jacobian_error, hessian_error
        ``max |reloaded - engine| / max |engine|`` over the compared points (NaN: not compared).
    rtol
        Tolerance the errors were held to (given, or :func:`float_tolerance`).
    reload_seconds
        Time of ``tf.saved_model.load`` in the fresh process [s].
    reloaded_jacobians_per_second, engine_jacobians_per_second
        Best-of-repeats throughput on one chunk of the engine's size [Jacobians/s]
        (NaN when not measured).
    importable
        Whether the checking process could import ``sensitivity`` (must be False).
    metadata
        The metadata read back in that process.
    float_noise
        ``max |surrogate - engine| / max |engine|`` of values on the check points: two evaluations of one chain
        in the engine's dtype that differ only in the order of their operations (NaN: not measured).
    """

    path: str
    n_points: int
    value_error: float
    jacobian_error: float
    hessian_error: float
    rtol: float
    reload_seconds: float
    reloaded_jacobians_per_second: float
    engine_jacobians_per_second: float
    importable: bool
    metadata: dict
    float_noise: float = float("nan")

    @property
    def passed(self) -> bool:
        """All compared errors within ``rtol`` and the check process could not import this package."""
        errors = [e for e in (self.value_error, self.jacobian_error, self.hessian_error) if not np.isnan(e)]
        return not self.importable and all(e <= self.rtol for e in errors)

    @property
    def throughput_ratio(self) -> float:
        """Reloaded / in-process Jacobians per second (1 = same speed)."""
        return self.reloaded_jacobians_per_second / self.engine_jacobians_per_second

    def summary(self) -> dict[str, Any]:
        """Plain-data form (JSON/netCDF-attribute safe) without the metadata."""
        out = {k: v for k, v in asdict(self).items() if k != "metadata"}
        out.update(passed=self.passed, throughput_ratio=self.throughput_ratio)
        return out


def relative_error(actual: np.ndarray, reference: np.ndarray) -> float:
    """``max |actual - reference| / max |reference|`` (0 when both are zero)."""
    actual, reference = np.asarray(actual, float), np.asarray(reference, float)
    if actual.shape != reference.shape:
        return float("inf")
    scale = float(np.max(np.abs(reference))) if reference.size else 0.0
    diff = float(np.max(np.abs(actual - reference))) if reference.size else 0.0
    return diff / scale if scale > 0 else diff


def float_tolerance(dtype: str, noise: float) -> float:
    """The export check's tolerance when none is given: what rounding alone allows two evaluations to differ by.

    The reloaded artifact evaluates the engine's chain in the engine's dtype, but XLA's fusion and the matmul
    kernels may order its sums differently (another process, another batch size). Each order is within
    ``kappa u`` of exact arithmetic (u the unit roundoff; a length-k dot product within ``gamma_k = k u / (1 - k u)``,
    amplified by the layers that follow: Higham 2002, sections 3.1 and 3.5), so two orders differ by up to
    ``2 kappa u``. ``noise`` measures ``kappa u`` on the check points, as the gap between the engine and the
    surrogate's own eager function (another order of the same operations); the tolerance is
    :data:`~sensitivity.settings.EXPORT_NOISE_FACTOR` times it (the two errors, with a margin of 2), and at least
    :data:`~sensitivity.settings.EXPORT_ULPS` ulps of ``dtype``. On the demo SEIR surrogate (float32, four Dense
    layers, 100 outputs): noise 1.6e-6 (13 ulps), tolerance 6.2e-6; reloaded minus engine 2.2e-6 in values and
    1.8e-6 in Jacobians, the engine's own error against a float64 evaluation 2.2e-6.

    Parameters
    ----------
    dtype
        The engine's dtype (``"float32"`` or ``"float64"``).
    noise
        Measured relative rounding noise of the chain [1] (NaN: not measured).

    Returns
    -------
    float
        ``max(EXPORT_ULPS eps, EXPORT_NOISE_FACTOR noise)`` [1].

    References
    ----------
    Higham, N. J. (2002), Accuracy and Stability of Numerical Algorithms, 2nd ed., SIAM, doi:10.1137/1.9780898718027.
    """
    floor = EXPORT_ULPS * float(np.finfo(dtype).eps)
    return max(floor, EXPORT_NOISE_FACTOR * noise) if np.isfinite(noise) else floor


def plain_tensorflow_path() -> list[str]:
    """``sys.path`` entries for a process that has TensorFlow but not this project.

    The standard library and site-packages, without any entry that holds this project's packages;
    used with ``python -I -S`` so that ``.pth`` hooks (an editable install of this project) do not run.
    """
    dirs = [sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")]
    dirs += [*site.getsitepackages(), site.getusersitepackages()]
    dirs += [p for p in sys.path if "site-packages" in p or "dist-packages" in p]
    keep: list[str] = []
    for d in dirs:
        resolved = Path(d).resolve()
        ours = any((resolved / package).exists() for package in ("sensitivity", "workflows"))
        if resolved.is_dir() and not ours and str(resolved) not in keep:
            keep.append(str(resolved))
    return keep


def run_in_plain_tensorflow(path: str | Path, payload: dict[str, np.ndarray],
                            timeout: float = 600.0) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Reload ``path`` in a fresh ``python -I -S`` that cannot import this project; return ``(info, arrays)``."""
    buf = io.BytesIO()
    np.savez(buf, **payload)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    cmd = [sys.executable, "-I", "-S", str(RELOAD_SCRIPT), str(path), json.dumps(plain_tensorflow_path())]
    proc = subprocess.run(cmd, input=buf.getvalue(), capture_output=True, timeout=timeout, env=env,
                          cwd=str(Path(path).resolve().parent))
    marker = proc.stdout.find(b"@@RESULT@@")
    if proc.returncode != 0 or marker < 0:
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise ModelError(f"export check: reloading {path} in a plain TensorFlow process failed "
                         f"(exit {proc.returncode}): {' | '.join(tail)}")
    with np.load(io.BytesIO(proc.stdout[marker + len(b"@@RESULT@@"):])) as data:
        arrays = {k: data[k] for k in data.files}
    return json.loads(str(arrays.pop("info"))), arrays


def engine_rate(jac: CompiledJacobian, points: np.ndarray, seconds: float) -> float:
    """Best-of-repeats in-process throughput of ``jac`` on ``points`` [Jacobians/s]."""
    jac(points)
    best, t_end = float("inf"), time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        t = time.perf_counter()
        jac(points)
        best = min(best, time.perf_counter() - t)
    return len(points) / best


def check_export(
    path: str | Path,
    jac: CompiledJacobian,
    points: np.ndarray,
    *,
    rtol: float | None = ExportSettings.rtol,
    hessian_points: int = ExportSettings.hessian_points,
    bench_seconds: float = ExportSettings.bench_seconds,
) -> ExportCheck:
    """Reload an exported artifact in a fresh process without this package and compare it with ``jac``.

    Parameters
    ----------
    path
        The SavedModel directory written by :func:`export_jacobian`.
    jac
        The in-process engine it was exported from (the reference).
    points
        ``[N, n_in]`` new points in physical units.
    rtol
        Tolerance on ``max |reloaded - engine| / max |engine|`` of values, Jacobians and Hessians; None:
        :func:`float_tolerance` of the engine's dtype and the rounding noise measured on ``points``.
    hessian_points
        How many of ``points`` to compare Hessians on (0: none; ignored when none was exported).
    bench_seconds
        Time spent measuring each throughput on one chunk of ``jac.chunk_size`` points (0: skip).

    Returns
    -------
    ExportCheck
    """
    x = np.asarray(points, dtype=jac.dtype)
    if x.ndim != 2 or x.shape[1] != jac.surrogate.n_in or len(x) == 0:
        raise ConfigError(f"check points must have shape [N>0, {jac.surrogate.n_in}], got {list(x.shape)}")
    bench = _bench_points(x, jac.chunk_size) if bench_seconds > 0 else x[:0]
    payload = {"points": x, "hessian_points": x[:hessian_points], "bench_points": bench,
               "seconds": np.array(bench_seconds)}
    info, got = run_in_plain_tensorflow(path, payload)
    values, jacobian = jac(x)
    noise = relative_error(np.reshape(jac.surrogate(x), values.shape), values)
    tolerance = float_tolerance(jac.dtype, noise) if rtol is None else float(rtol)
    errors = [relative_error(got[k], values) for k in ("value", "value_only")]
    errors_j = [relative_error(got[k], jacobian) for k in ("jacobian", "jacobian_only", "signature_jacobian")]
    hessian_error = float("nan")
    if "hessian" in got:
        reference = hessian_of(jac)(x[:hessian_points])
        hessian_error = relative_error(got["hessian"].reshape(reference.shape), reference)
    rate = engine_rate(jac, bench, bench_seconds) if bench.size else float("nan")
    return ExportCheck(str(path), len(x), max(errors), max(errors_j), hessian_error, tolerance,
                       info["reload_seconds"], info["jacobians_per_second"], rate, bool(info["importable"]),
                       {k: info[k] for k in ("parameter_names", "parameter_units", "output_names", "output_units",
                                             "signatures", "metadata")}, noise)


def _bench_points(x: np.ndarray, chunk: int) -> np.ndarray:
    """One chunk of the engine's size, tiled from ``x`` (the shape XLA compiled for)."""
    return np.resize(x, (chunk, x.shape[1])).astype(x.dtype)


# ----------------------------------------------------------------------------- the verb


def export_jacobian(
    jac: CompiledJacobian,
    path: str | Path,
    *,
    hessian: bool = ExportSettings.hessian,
    check_points: np.ndarray | None = None,
    rtol: float | None = ExportSettings.rtol,
    bench_seconds: float = ExportSettings.bench_seconds,
    hessian_points: int = ExportSettings.hessian_points,
) -> ExportCheck | None:
    """Save the compiled Jacobian of ``jac`` as a standalone TF SavedModel and check it.

    Parameters
    ----------
    jac
        The compiled engine; its mode, dtype and ``jit_compile`` are exported as they are.
    path
        Directory to write (replaced atomically if it exists).
    hessian
        Also export the ``hessian`` function (``[N, *out, n_in, n_in]``).
    check_points
        ``[N, n_in]`` new points for :func:`check_export`; no check when None.
    rtol, bench_seconds, hessian_points
        See :func:`check_export`.

    Returns
    -------
    ExportCheck or None
        The check's findings. A failed comparison raises :class:`ModelError` and removes ``path``,
        so an artifact on disk has passed its check.

    Examples
    --------
    >>> check = export_jacobian(jac, "jacobian_model", check_points=space_points)  # doctest: +SKIP
    >>> check.jacobian_error < 1e-6, check.throughput_ratio                        # doctest: +SKIP
    """
    module = build_module(jac, hessian=hessian)
    path = Path(path)
    if check_points is None:
        save_module(module, path)
        return None

    holder: dict[str, ExportCheck] = {}

    def fill(tmp: Path) -> None:
        _save(module, tmp)
        result = check_export(tmp, jac, check_points, rtol=rtol, hessian_points=hessian_points if hessian else 0,
                              bench_seconds=bench_seconds)
        if not result.passed:
            raise ModelError(
                f"export check failed for {path}: value error {result.value_error:.2e}, jacobian error "
                f"{result.jacobian_error:.2e}, hessian error {result.hessian_error:.2e} (rtol {result.rtol:.2e}); "
                f"project importable in the check process: {result.importable}")
        holder["check"] = result

    write_directory_atomic(path, fill)
    return replace(holder["check"], path=str(path))
