"""A bounded LRU of open descriptors for sealed segments' log files (``log.max.open.files``).

Only the active segment of a partition keeps its log file open for good (``claim``: it is
written on every append), and those are counted and capped at the node's partition budget
(``configure``); older segments are read rarely, so their descriptors live here and are
opened on demand. A descriptor in use is pinned (``acquire``/``release``) and never closed under its
user: pinned entries are skipped by eviction, so the cache may briefly exceed its bound when
everything is pinned, and an entry discarded while pinned is closed by its last ``release``.

Out of descriptors (EMFILE/ENFILE) an open first closes idle cached descriptors and retries;
if that is not enough the ``OSError`` goes to the caller, which answers KAFKA_STORAGE_ERROR for
the partition (``is_fd_exhaustion``) and calls ``note_fd_exhaustion`` so the failure is
logged and counted (``kafka_log_open_file_failures_total``).
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Final

log = logging.getLogger(__name__)

DEFAULT_MAX_OPEN_FILES: Final = 1000
_EXHAUSTED: Final = frozenset({errno.EMFILE, errno.ENFILE})


def is_fd_exhaustion(exc: BaseException) -> bool:
    """True for "too many open files" (per process or system-wide)."""
    return isinstance(exc, OSError) and exc.errno in _EXHAUSTED


class _Stats:
    """Process-wide counters the metrics collector reads (ints: safe to read from any thread)."""

    def __init__(self) -> None:
        self.failures: dict[str, int] = {}


STATS = _Stats()


def note_fd_exhaustion(operation: str, what: str, exc: OSError) -> None:
    """Count a request or task that failed for want of a file descriptor, and log it: the
    1st, 10th, 100th time per operation, then every 1000th (a client retries, so it repeats)."""
    n = STATS.failures[operation] = STATS.failures.get(operation, 0) + 1
    if n in (1, 10, 100) or n % 1000 == 0:
        log.error(
            "%s of %s failed: out of file descriptors (%s; %d such failures of %s so far); "
            "raise the open-file limit (ulimit -n) or lower log.max.open.files or the "
            "partition count",
            operation,
            what,
            exc.strerror or os.strerror(exc.errno or 0),
            n,
            operation,
        )


class _Entry:
    __slots__ = ("fd", "pins")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.pins = 0


class OpenFileCache:
    """Descriptors keyed by their owner (a segment object), least recently used first."""

    def __init__(self, max_open: int = DEFAULT_MAX_OPEN_FILES) -> None:
        if max_open < 1:
            raise ValueError(f"max open files must be at least 1, not {max_open}")
        self.max_open = max_open
        self._entries: OrderedDict[object, _Entry] = OrderedDict()
        self._doomed: dict[object, _Entry] = {}  # discarded while pinned: closed at release
        # Segments live on the event loop, but a lock keeps the bookkeeping sound should a
        # worker thread ever read through the cache.
        self._lock = threading.Lock()
        self.opens = 0
        self.evictions = 0
        # Descriptors active segments hold (``claim``), and the most partitions may hold: past
        # it an append fails with EMFILE before the process is really out, so the reserve for
        # connections and other files stays (a limit lowered under existing partitions).
        self.owned = 0
        self.owned_limit: int | None = None

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def open_count(self) -> int:
        """Descriptors this cache holds open (pinned doomed ones included)."""
        return len(self._entries) + len(self._doomed)

    def resize(self, max_open: int) -> None:
        if max_open < 1:
            raise ValueError(f"max open files must be at least 1, not {max_open}")
        with self._lock:
            self.max_open = max_open
            self._evict(0)

    def acquire(self, key: object, path: Path) -> int:
        """Pin ``key``'s descriptor, opening ``path`` on a miss; pair with ``release``."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                self._entries.move_to_end(key)
                entry.pins += 1
                return entry.fd
            self._evict(1)
            fd = self._open(path)
            entry = self._entries[key] = _Entry(fd)
            entry.pins = 1
            self.opens += 1
            return fd

    def release(self, key: object) -> None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                entry.pins -= 1
                if entry.pins == 0 and len(self._entries) > self.max_open:
                    self._evict(0)
                return
            doomed = self._doomed.get(key)
            if doomed is not None:
                doomed.pins -= 1
                if doomed.pins == 0:
                    del self._doomed[key]
                    os.close(doomed.fd)

    def adopt(self, key: object, fd: int) -> None:
        """Take over an open descriptor (a segment just created or just sealed)."""
        with self._lock:
            if key in self._entries:
                os.close(fd)  # already cached: keep the one readers may have pinned
                self._entries.move_to_end(key)
                return
            self._evict(1)
            self._entries[key] = _Entry(fd)

    def claim(self, key: object, path: Path, *, exempt: bool = False) -> int:
        """A descriptor ``key``'s owner keeps (its segment is appended to): the cached one,
        unless pinned, else a new one. Refused with EMFILE past ``owned_limit``; ``exempt``
        ones (internal topics, the metadata log: the node cannot work without them, and the
        reserve covers them) are neither refused nor counted."""
        limit = self.owned_limit
        if limit is not None and self.owned >= limit and not exempt:
            raise OSError(
                errno.EMFILE,
                f"Too many open files: {self.owned} partitions hold their active segment "
                f"open, the most the open-file limit allows ({limit})",
                str(path),
            )
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and not entry.pins:
                del self._entries[key]
                self.owned += not exempt
                return entry.fd
        fd = self.open_file(path, os.O_RDWR)
        self.owned += not exempt
        return fd

    def unclaim(self, key: object, fd: int, *, close: bool, exempt: bool = False) -> None:
        """The owner is done with ``fd``: closed, or handed to the cache (sealed)."""
        self.owned -= not exempt
        if close:
            os.close(fd)
        else:
            self.adopt(key, fd)

    def discard(self, key: object) -> None:
        """Forget ``key`` (its segment closed or deleted); a pinned descriptor closes at its
        last release."""
        with self._lock:
            entry = self._entries.pop(key, None)
            if entry is None:
                return
            if entry.pins:
                self._doomed[key] = entry
            else:
                os.close(entry.fd)

    def close_all(self) -> None:
        with self._lock:
            for key in [k for k, e in self._entries.items() if not e.pins]:
                os.close(self._entries.pop(key).fd)

    # -- internals (lock held) ---------------------------------------------------------
    def _evict(self, room: int) -> None:
        """Close least recently used idle descriptors until ``room`` more fit the bound."""
        excess = len(self._entries) + room - self.max_open
        if excess <= 0:
            return
        # The oldest idle ones, found without copying every key (this runs for each open
        # once the cache is full: thousands of logs opening at a restart).
        victims: list[object] = []
        for key, entry in self._entries.items():
            if len(victims) >= excess:
                break
            if not entry.pins:
                victims.append(key)
        for key in victims:
            os.close(self._entries.pop(key).fd)
            self.evictions += 1

    def _shed(self) -> bool:
        """Out of descriptors: close idle ones (half, at least one) so the process can go on."""
        idle = [k for k, e in self._entries.items() if not e.pins]
        for key in idle[: max(1, len(idle) // 2)]:
            os.close(self._entries.pop(key).fd)
            self.evictions += 1
        return bool(idle)

    def _open(self, path: Path) -> int:
        while True:
            try:
                return os.open(path, os.O_RDWR)
            except OSError as exc:
                if not is_fd_exhaustion(exc) or not self._shed():
                    raise

    def open_file(self, path: Path, flags: int, mode: int = 0o644) -> int:
        """``os.open`` that, out of descriptors, first closes idle cached ones and retries
        (for the short-lived descriptors of index writes and new segments)."""
        while True:
            try:
                return os.open(path, flags, mode)
            except OSError as exc:
                if not is_fd_exhaustion(exc):
                    raise
                with self._lock:
                    if not self._shed():
                        raise


_default = OpenFileCache()


def default_cache() -> OpenFileCache:
    """The process's cache; the node sizes it from ``log.max.open.files`` at start."""
    return _default


# Descriptors kept back from the partitions' budget: connections, the metadata log, snapshots,
# checkpoints, the cleaner's files (a tenth of the limit, at least this many).
FD_RESERVE_MIN: Final = 256
_MIN_CACHE: Final = 16


def open_file_limit() -> int | None:
    """The process's soft RLIMIT_NOFILE; None when unlimited."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else int(soft)


def configure(max_open_files: int, limit: int | None = None) -> tuple[int, str] | None:
    """Size the process's cache from ``log.max.open.files`` and return the partition budget:
    (partitions a node can host at one descriptor each, why), or None without a limit.

    A cache that would leave too little of a small limit for partitions is shrunk (to a
    quarter of what the reserve leaves), with a warning."""
    limit = open_file_limit() if limit is None else limit
    if limit is None:
        _default.resize(max_open_files)
        _default.owned_limit = None
        return None
    reserve = max(FD_RESERVE_MIN, limit // 10)
    cache = min(max_open_files, max(_MIN_CACHE, (limit - reserve) // 4))
    if cache < max_open_files:
        log.warning(
            "log.max.open.files=%d is too much of the open-file limit %d: %d sealed "
            "segments' files will be held open at most",
            max_open_files,
            limit,
            cache,
        )
    _default.resize(cache)
    budget = max(0, limit - reserve - cache)
    _default.owned_limit = budget
    why = (
        f"open-file limit {limit} less {reserve} reserved for connections and other files "
        f"and {cache} for log.max.open.files"
    )
    return budget, why


def stats() -> tuple[int, int, int, int, dict[str, int]]:
    """(cached, bound, opens, evictions, failures per operation) of the process's cache, for
    the metrics endpoint (``LogFileStats``; plain ints, so any thread may read them)."""
    c = _default
    return c.open_count, c.max_open, c.opens, c.evictions, dict(STATS.failures)
