"""A segment's ``.log`` file descriptor: owned while the segment is appended to, else cached.

The active segment owns its descriptor (appends cost no extra syscall); a sealed segment's
lives in the bounded ``OpenFileCache`` and is reopened on demand after eviction. Every read
pins it for exactly as long as it uses it, so eviction never closes a descriptor in use.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from .file_cache import OpenFileCache

T = TypeVar("T")


class SegmentFile:
    __slots__ = ("_cache", "_closed", "_exempt", "_fd", "path")

    def __init__(self, path: Path, cache: OpenFileCache) -> None:
        self.path = path
        self._cache = cache
        self._fd: int | None = None
        self._closed = False
        # internal topics and the metadata log are never refused a descriptor (claim)
        self._exempt = path.parent.name.startswith("__")

    def open(self) -> int:
        """Open (creating) the file, hand the descriptor to the cache; returns the size."""
        fd = self._cache.open_file(self.path, os.O_RDWR | os.O_CREAT)
        try:
            size = os.fstat(fd).st_size
        except BaseException:
            os.close(fd)
            raise
        self._cache.adopt(self, fd)
        return size

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def owned(self) -> int | None:
        """The descriptor appends hold, if any."""
        return self._fd

    @property
    def fd(self) -> int:
        """A descriptor for a use that ends before another file is opened (a cached one may be
        evicted then); longer uses pin it with ``acquire``/``release``."""
        if self._fd is not None:
            return self._fd
        fd = self.acquire()
        self._cache.release(self)
        return fd

    def acquire(self) -> int:
        """Pin the cached descriptor, opening it on demand; pair with ``release``."""
        if self._closed:
            raise ValueError(f"segment {self.path} is closed")
        return self._cache.acquire(self, self.path)

    def release(self) -> None:
        self._cache.release(self)

    def own(self) -> int:
        """Appends keep the descriptor: out of the cache, so eviction never closes it."""
        if self._closed:
            raise ValueError(f"segment {self.path} is closed")
        fd = self._fd = self._cache.claim(self, self.path, exempt=self._exempt)
        return fd

    def disown(self) -> None:
        """Sealed: the descriptor goes back to the cache (recent data is read soonest)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            self._cache.unclaim(self, fd, close=False, exempt=self._exempt)

    def pread(self, size: int, position: int) -> bytes:
        fd = self._fd
        if fd is not None:
            return os.pread(fd, size, position)
        fd = self.acquire()
        try:
            return os.pread(fd, size, position)
        finally:
            self._cache.release(self)

    def fsync(self) -> None:
        fd = self._fd
        if fd is not None:
            os.fsync(fd)
            return
        fd = self.acquire()
        try:
            os.fsync(fd)
        finally:
            self._cache.release(self)

    def iterate(self, walk: Callable[[int], Iterator[T]]) -> Iterator[T]:
        """``walk(fd)`` with the descriptor pinned until the iteration ends or is dropped."""
        if self._fd is not None:
            return walk(self._fd)
        return self._pinned(walk)

    def _pinned(self, walk: Callable[[int], Iterator[T]]) -> Iterator[T]:
        fd = self.acquire()
        try:
            yield from walk(fd)
        finally:
            self._cache.release(self)

    def close(self) -> None:
        self._closed = True
        self._cache.discard(self)
        fd, self._fd = self._fd, None
        if fd is not None:
            self._cache.unclaim(self, fd, close=True, exempt=self._exempt)
