"""The run lock: an exclusive, non-blocking ``flock`` on the file a run writes, so two runs never write one result.

Every writer of a result takes it: a result set's publication, the block store's parts, a merge.
"""
from __future__ import annotations

import datetime as _dt
import fcntl
import os
import socket
from pathlib import Path

from sensitivity.errors import DataError, disk_error


class RunBusy(DataError):
    """Another live process holds the lock of the file this run would write."""


class RunLock:
    """An exclusive, non-blocking ``flock`` on ``path`` held by this process; stale files never block.

    The lock file holds the holder's pid, host and start time for the refusal message. Locks are
    re-entrant within one process (counted), so a caller that failed mid-run can retry in the same
    interpreter.
    """

    _held: dict[Path, tuple[int, int]] = {}  # path -> (fd, count), this process's locks

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).absolute()

    def acquire(self) -> None:
        """Take the lock or raise :class:`DataError` naming the holder."""
        if self.path in self._held:
            fd, count = self._held[self.path]
            self._held[self.path] = (fd, count + 1)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:
                raise disk_error(self.path, e) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                raise RunBusy(f"{self.path.with_suffix('')} is being written by another run ({holder}); wait for "
                                "it to finish or stop it, or write elsewhere") from None
            try:  # the file may have been unlinked by the previous holder between our open and flock
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        info = f"pid {os.getpid()} on {socket.gethostname()} since {_dt.datetime.now().isoformat(timespec='seconds')}"
        os.ftruncate(fd, 0)
        os.write(fd, info.encode())
        self._held[self.path] = (fd, 1)

    def release(self) -> None:
        """Release one hold; the last one removes the file and drops the lock."""
        if self.path not in self._held:
            return
        fd, count = self._held.pop(self.path)
        if count > 1:
            self._held[self.path] = (fd, count - 1)
            return
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        os.close(fd)


def _read_holder(fd: int) -> str:
    try:
        return os.pread(fd, 256, 0).decode(errors="replace").strip() or "holder unknown"
    except OSError:
        return "holder unknown"
