"""A user's simulator as untrusted input: one checked, batched float64 map that training, verification and
refinement run.

A simulator is any Python callable (or an importable ``"package.module:function"``) that maps parameter
points ``[N, n]`` to outputs ``[N, *out]`` with numpy; a simulator of one scalar may return ``[N]`` (one
named output, as for a surrogate function). :func:`simulator_from` checks its keyword arguments against its
signature before any run, and every result: an exception (``SystemExit`` included), something that is not an
array of real numbers, another shape than ``[N, *out]``, a NaN or an infinity, and (with
:attr:`SimulatorSettings.timeout`) a call past its time limit are each a one-line :class:`ModelError` naming the
simulator, the point and what it returned.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import numpy as np

from sensitivity.errors import ConfigError, ModelError

#: A batched simulator: ``[N, n]`` float64 parameter points -> ``[N, *out]`` float64 outputs.
Simulator = Callable[[np.ndarray], np.ndarray]


@dataclass(frozen=True)
class SimulatorSettings:
    """How a user's simulator is run.

    Parameters
    ----------
    timeout
        Seconds one call of the simulator (one batch of points) may take [s]; past it the call fails naming the
        simulator and the batch. A number runs the simulator in a worker process started with ``spawn``
        (:mod:`sensitivity.surrogates.simulator_worker`), which is killed when the time is up (a process is the
        only thing Python can abandon mid-call); None: no limit, the simulator runs in this process.
    """

    timeout: float | None = None

    def __post_init__(self) -> None:
        t = self.timeout
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, float)) or not math.isfinite(t)
                              or t <= 0):
            raise ConfigError(f"`timeout` must be a number of seconds > 0 (or null: no limit), got {t!r}")


def simulator_from(source: str | Callable[..., Any], kwargs: Mapping[str, Any] | None = None, *,
                   what: str = "`training.simulator`", output_shape: tuple[int, ...] | None = None,
                   settings: SimulatorSettings = SimulatorSettings()) -> "CheckedSimulator":
    """The simulator ``source`` as a checked float64 numpy map ``[N, n] -> [N, *out]``.

    Parameters
    ----------
    source
        A callable, or ``"package.module:function"`` imported from ``sys.path``
        (:func:`sensitivity.surrogates.load.import_callable`), or a picklable callable object such as a program
        (:class:`sensitivity.simulators.program.Program`): its ``label`` names it, its ``fingerprint()`` identifies
        its runs (:attr:`CheckedSimulator.identity`), and its own one-line :class:`ModelError` (a program's run:
        the point and the kept folder) is reported whole.
    kwargs
        Keyword arguments bound to it (e.g. ``{"scale": 1.0}``), checked against its signature here.
    what
        How error messages name it (the config key).
    output_shape
        The per-point output shape ``out`` every call must return; None: any ``[N, ...]``.
    settings
        How it is run (:class:`SimulatorSettings`).

    Raises
    ------
    ConfigError
        A key of ``kwargs`` is not a parameter of the simulator.
    ModelError
        ``source`` cannot be imported; later, from a call: see :class:`CheckedSimulator`.
    """
    from sensitivity.surrogates.load import bind_checked, import_callable

    target = import_callable(source, what=what) if isinstance(source, str) else source
    label = source if isinstance(source, str) else getattr(source, "label", None) or getattr(
        source, "__qualname__", repr(source))
    bound = bind_checked(target, dict(kwargs or {}), label, what=_kwargs_key(what),
                         hint="keyword arguments of another simulator? give this one's own")
    return CheckedSimulator(source, bound, dict(kwargs or {}), f"simulator {label} ({what})", output_shape, settings)


class CheckedSimulator:
    """A simulator whose every call is checked (built by :func:`simulator_from`).

    Calling it with points ``[N, n]`` returns ``[N, *out]`` float64, or raises a one-line :class:`ModelError`
    naming the simulator, the point (or the batch) and what came back: an exception or ``sys.exit``, a value that
    is not an array of real numbers, another shape, a NaN or an infinity, a call past ``settings.timeout``.
    :meth:`close` stops its worker process (one with a timeout); it is also stopped when the object is collected.
    """

    def __init__(self, source: str | Callable[..., Any], bound: Callable[[np.ndarray], Any], kwargs: dict[str, Any],
                 label: str, output_shape: tuple[int, ...] | None, settings: SimulatorSettings) -> None:
        self.label, self.output_shape, self.settings = label, output_shape, settings
        self.source, self.kwargs = source, dict(kwargs)
        self._bound, self._worker, self._why = bound, None, "`simulator.timeout`"
        if settings.timeout is not None:
            from sensitivity.surrogates.simulator_worker import SimulatorWorker

            self._worker = SimulatorWorker(source, kwargs, label)

    def replica(self, why: str) -> CheckedSimulator:
        """The same simulator, its checks and its time limit, run in a worker process of its own (started with
        ``spawn``) whatever ``settings.timeout`` says: one of several that run batches side by side. ``why``
        names the setting that asks for it in the error of a simulator that cannot run in a worker (not
        importable). Close it when done."""
        from sensitivity.surrogates.simulator_worker import SimulatorWorker

        twin = CheckedSimulator.__new__(CheckedSimulator)
        twin.label, twin.output_shape, twin.settings = self.label, self.output_shape, self.settings
        twin.source, twin.kwargs, twin._bound, twin.code = self.source, self.kwargs, self._bound, self.code
        twin._worker, twin._why = SimulatorWorker(self.source, self.kwargs, self.label, why=why), why
        return twin

    #: A hash of the simulator's code (its module's and what that imports from its folder), set by the caller that
    #: can compute it: part of :attr:`identity`, so that runs recorded before an edit of the code are not reused.
    code: str = ""

    @property
    def identity(self) -> str:
        """What identifies the simulator's runs in a fingerprint: a source's own ``fingerprint()`` (a program: the
        files it reads), else the source as text, with :attr:`code` where given."""
        fingerprint = getattr(self.source, "fingerprint", None)
        identity = fingerprint() if callable(fingerprint) else str(self.source)
        return f"{identity} {self.code}" if self.code else identity

    def __call__(self, points: np.ndarray) -> np.ndarray:
        points = np.asarray(points, dtype=np.float64)
        return self._checked(self._run(points), points)

    def close(self) -> None:
        """Stop the worker process, if any."""
        if self._worker is not None:
            self._worker.close()

    def _run(self, points: np.ndarray) -> Any:
        from sensitivity.surrogates.simulator_worker import STARTUP_S, SimulatorWorker

        if self._worker is None:
            try:
                return self._bound(points)
            except ModelError as err:  # the source's own one-line account (a program: its point and kept folder)
                raise ModelError(f"{self.label}: {err}") from None
            except (Exception, SystemExit) as err:  # a user's code: sys.exit(0) must not end the run silently
                raise ModelError(f"{self.label} raised {_exception(err)} {_batch(points)}") from None
        if self._worker.closed:  # stopped by an earlier call past its limit (or its death): a fresh one, so that a
            # rerun of a batch (a Dask retry) is judged on its own, not reported as the dead worker's exit code
            self._worker = SimulatorWorker(self.source, self.kwargs, self.label, why=self._why)
        reply = self._worker.call(points, self.settings.timeout)
        if reply.status == "ok":
            return reply.value
        if reply.status == "failed":
            raise ModelError(f"{self.label}: {reply.value}")
        if reply.status == "raised":
            raise ModelError(f"{self.label} raised {_one_line(reply.value)} {_batch(points)}")
        if reply.status == "timeout" and reply.value == "start":
            raise ModelError(f"{self.label}: its worker process did not start (import the simulator) within "
                             f"{STARTUP_S:g} s")
        if reply.status == "timeout":  # only with a time limit: without one the worker is waited for
            raise ModelError(f"{self.label} did not return within `simulator.timeout` = {self.settings.timeout:g} s "
                             f"{_batch(points)}; its worker was stopped")
        raise ModelError(f"{self.label}: its worker process ended (exit code {reply.value}) {_batch(points)}")

    def _checked(self, raw: Any, points: np.ndarray) -> np.ndarray:
        n = len(points)
        try:
            values = np.asarray(raw)
        except Exception:  # noqa: BLE001 (a ragged or exotic object)
            values = np.asarray(None)
        if values.dtype.kind not in "iuf":
            raise ModelError(f"{self.label} returned {_shown(raw)} ({type(raw).__name__}, dtype {values.dtype}) "
                             f"{_batch(points)}; expected real numbers [N, *out]")
        values = values.astype(np.float64)
        if values.ndim == 1 and values.shape[0] == n:  # one scalar per point: one named output
            values = values[:, None]
        expected = None if self.output_shape is None else [n, *self.output_shape]
        if values.ndim < 2 or values.shape[0] != n or (expected is not None and list(values.shape) != expected):
            shape = expected if expected is not None else f"[{n}, ...]"
            raise ModelError(f"{self.label} returned shape {list(values.shape)} for {n} points; expected {shape}")
        bad = ~np.isfinite(values.reshape(n, -1))
        if bad.any():
            i, j = (int(k) for k in np.argwhere(bad)[0])
            raise ModelError(f"{self.label} returned {values.reshape(n, -1)[i, j]} (output {j}) at point {i} of {n}, "
                             f"x = {_point(points[i])}; {int(bad.any(axis=1).sum())} point(s) non-finite; a "
                             "simulator must return finite numbers")
        return values


def _kwargs_key(what: str) -> str:
    """The config key of the kwargs of the simulator ``what`` (`training.simulator_kwargs`)."""
    return f"{what[:-1]}_kwargs`" if what.endswith("`") else f"{what} kwargs"


def _exception(err: BaseException) -> str:
    if isinstance(err, SystemExit):
        return f"SystemExit (sys.exit({err.code!r}))"
    return _one_line(f"{type(err).__name__}: {err}")


def _one_line(text: str) -> str:
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    text = lines[0] if lines else ""
    if text.startswith("SystemExit: "):
        text = f"SystemExit (sys.exit({text[12:]}))"
    return text if len(text) <= 200 else text[:197] + "..."


def _shown(raw: Any) -> str:
    text = repr(raw).replace("\n", " ")
    return text if len(text) <= 60 else text[:57] + "..."


def _point(x: np.ndarray) -> str:
    return "[" + ", ".join(f"{v:.6g}" for v in x) + "]"


def _batch(points: np.ndarray) -> str:
    if len(points) == 1:
        return f"at x = {_point(points[0])}"
    return f"on a batch of {len(points)} points (the first x = {_point(points[0])})" if len(points) else \
        "on an empty batch"


#: A batched simulator Jacobian: ``[N, n]`` float64 points -> ``[N, *out, n]`` float64 ``dy/dx``.
SimulatorJacobian = Callable[[np.ndarray], np.ndarray]


def simulator_jacobian_from(source: str | Callable[..., Any], kwargs: Mapping[str, Any] | None = None, *,
                            output_shape: tuple[int, ...] | None = None,
                            what: str = "`training.simulator_jacobian`") -> SimulatorJacobian:
    """The simulator's Jacobian function ``source`` as a float64 numpy map ``[N, n] -> [N, *out, n]``.

    Parameters
    ----------
    source
        A callable, or ``"package.module:function"`` imported from ``sys.path``.
    kwargs
        Keyword arguments bound to it (the simulator's, e.g. ``{"scale": 1.0}``).
    output_shape
        The simulator's per-point output shape ``out``; None: only ``[N, ..., n]`` is checked.
    what
        How error messages name it (the config key).

    Raises
    ------
    ModelError
        ``source`` cannot be imported, or a call returns another shape than ``[N, *out, n]`` (one line naming
        ``what``).
    """
    from sensitivity.surrogates.load import bind_checked, import_callable

    target = import_callable(source, what=what) if isinstance(source, str) else source
    label = source if isinstance(source, str) else getattr(source, "__qualname__", repr(source))
    bound = bind_checked(target, dict(kwargs or {}), label, what="`training.simulator_kwargs` (of the Jacobian)",
                         hint="the simulator's keyword arguments must suit its Jacobian function too")

    def jacobian(points: np.ndarray) -> np.ndarray:
        points = np.asarray(points, dtype=np.float64)
        values = np.asarray(bound(points), dtype=np.float64)
        n = points.shape[1]
        expected = None if output_shape is None else [len(points), *output_shape, n]
        if (expected is not None and list(values.shape) != expected) or values.ndim < 2 or \
                values.shape[0] != len(points) or values.shape[-1] != n:
            shape = f"{expected}" if expected is not None else f"[{len(points)}, *out, {n}]"
            raise ModelError(f"{what} must return [N, *out, n] = {shape} for {len(points)} points of {n} parameters, "
                             f"got shape {list(values.shape)}")
        return values

    return jacobian
