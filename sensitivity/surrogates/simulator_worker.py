"""A user's simulator in a worker process that can be abandoned: a call past its time limit kills the worker.

The worker is started with ``spawn`` (never ``fork``: the parent may have run TensorFlow, whose threads a forked
child would inherit half-locked), imports the simulator itself, and answers one batch of points at a time over a
pipe. :meth:`SimulatorWorker.call` reports what happened as data (:class:`Reply`); the caller
(:mod:`sensitivity.surrogates.simulator`) turns every failure into one line.
"""
from __future__ import annotations

import multiprocessing
import pickle
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping

import numpy as np

from sensitivity.errors import ConfigError, ModelError

#: Seconds the worker may take to start and import the simulator's module, on top of the first call's limit
#: (a module that imports TensorFlow takes ~5 s; a cold disk several times that).
STARTUP_S = 120.0


@dataclass(frozen=True)
class Reply:
    """What one call came back with: ``ok`` (``value``: the returned array), ``failed`` (``value``: the message of
    the simulator's own :class:`~sensitivity.errors.ModelError`), ``raised`` (``value``: any other exception as
    ``Type: message``), ``timeout`` or ``died`` (``value``: the worker's exit code)."""

    status: Literal["ok", "failed", "raised", "timeout", "died"]
    value: Any = None


class SimulatorWorker:
    """The simulator ``source`` (an importable ``"package.module:function"`` or a picklable callable) with
    ``kwargs`` bound, in a spawned process.

    Parameters
    ----------
    source
        What the worker imports and calls.
    kwargs
        Its keyword arguments (already checked against its signature by the caller).
    label
        How errors name it.
    why
        The setting that runs it in a worker process, named in the error of a simulator that is not importable.
    """

    def __init__(self, source: str | Callable[..., Any], kwargs: Mapping[str, Any], label: str, *,
                 why: str = "`simulator.timeout`") -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, source, dict(kwargs)), daemon=True,
                                        name=f"simulator {label}")
        try:
            self._process.start()
        except (pickle.PicklingError, AttributeError, TypeError) as err:
            raise ConfigError(f"{why} runs the simulator in a worker process, so it must be importable "
                              f"('package.module:function'); {label} is not ({type(err).__name__}: {err})") from None
        finally:
            child.close()
        self._started = False
        self._finalizer = weakref.finalize(self, _stop, self._process, self._conn)

    def call(self, points: np.ndarray, timeout: float | None) -> Reply:
        """The simulator's reply for ``points``, waiting at most ``timeout`` seconds for it (None: as long as it takes;
        the worker's start, on the first call, has :data:`STARTUP_S` of its own); a ``timeout`` or ``died`` reply
        closes the worker (a later call finds it dead). A worker that does not start in time replies ``timeout`` with value ``start``."""
        try:
            if not self._started:
                if not self._conn.poll(STARTUP_S):
                    self.close()
                    return Reply("timeout", "start")
                self._conn.recv()  # "ready": the simulator's module is imported
                self._started = True
            if not self._process.is_alive():
                return Reply("died", self._process.exitcode)
            self._conn.send(points)
            if not self._conn.poll(timeout):
                self.close()
                return Reply("timeout")
            status, value = self._conn.recv()
        except (EOFError, OSError):
            self._process.join(5.0)
            code = self._process.exitcode
            self.close()
            return Reply("died", code)
        return Reply(status, value)

    @property
    def closed(self) -> bool:
        """Whether the worker was stopped (closed, or after a call past its time limit or its death)."""
        return not self._finalizer.alive

    def close(self) -> None:
        """Kill the worker (idempotent)."""
        self._finalizer()


def _stop(process, conn) -> None:
    conn.close()
    if process.is_alive():
        process.kill()
    process.join(5.0)


def _serve(conn, source: str | Callable[..., Any], kwargs: dict[str, Any]) -> None:
    """The worker's loop: import the simulator, then answer each batch of points with ``(status, value)``."""
    import functools

    try:
        from sensitivity.surrogates.load import import_callable

        target = import_callable(source, what="simulator") if isinstance(source, str) else source
        fn, failure = functools.partial(target, **kwargs), None
    except BaseException as err:  # noqa: BLE001 (a user's module may raise anything, SystemExit included)
        fn, failure = None, f"{type(err).__name__}: {err}"
    conn.send(("ready", None))
    while True:
        try:
            points = conn.recv()
        except (EOFError, OSError):
            return
        if fn is None:
            conn.send(("raised", failure))
            continue
        try:
            reply = ("ok", fn(points))
        except ModelError as err:  # the simulator's own one-line account, sent whole
            reply = ("failed", str(err))
        except BaseException as err:  # noqa: BLE001 (SystemExit too: the parent reports it)
            reply = ("raised", f"{type(err).__name__}: {err}")
        try:
            conn.send(reply)
        except Exception:  # noqa: BLE001 (an object that cannot be pickled: send what numpy makes of it)
            try:
                conn.send(("ok", np.asarray(reply[1])))
            except Exception as err:  # noqa: BLE001
                conn.send(("raised", f"a result that cannot be sent back ({type(err).__name__}: {err})"))
