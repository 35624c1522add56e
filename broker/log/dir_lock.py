"""An exclusive lock on a log directory, as Kafka's ``.lock`` file.

Two processes on one log dir overwrite each other's segments at the same offsets, losing
acknowledged records without a word. Kafka takes ``flock(LOCK_EX | LOCK_NB)`` on
``<log.dir>/.lock`` for as long as it runs; so do the node and the tools that write there.
The lock dies with the process (kill -9 included), so there is never a stale lock to clean.
Our pid is written into the file only to name the holder in the error a second process gets.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import Final

LOCK_FILE: Final = ".lock"


class LogDirLockedError(Exception):
    """Another process holds the directory's lock."""


class DirLock:
    """Held from ``acquire`` until ``release`` (or process exit)."""

    def __init__(self, directory: Path, fd: int) -> None:
        self.directory = directory
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, directory: Path, purpose: str = "log directory") -> DirLock:
        path = directory / LOCK_FILE
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(path, fd)
            os.close(fd)
            raise LogDirLockedError(
                f"Failed to acquire lock on file {path}: the {purpose} {directory} is in use by "
                f"another process{holder}. Each node needs its own log.dirs "
                f"(and metadata.log.dir)."
            ) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(directory, fd)

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        os.close(fd)  # closing the descriptor drops the flock


def _holder(path: Path, fd: int) -> str:
    """`` (pid N: <command line>)`` when it can be told, from /proc/locks or the file."""
    pid = _flock_holder_pid(os.fstat(fd).st_ino)
    if pid is None:
        try:
            text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            pid = int(text) if text.isdigit() else None
        except OSError:
            pid = None
    if pid is None:
        return ""
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        cmd = ""
    return f" (pid {pid}: {cmd})" if cmd else f" (pid {pid})"


def _flock_holder_pid(inode: int) -> int | None:
    # /proc/locks: "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234567 0 EOF"
    try:
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split()
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5].rsplit(":", 1)[-1] == str(inode):
            try:
                return int(parts[4])
            except ValueError:
                return None
    return None
