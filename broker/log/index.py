"""Sparse offset and time indexes in Kafka's file formats.

Offset index entry (8 bytes): int32 offset relative to the segment base, int32 byte position
of the batch whose *last* offset that is. Time index entry (12 bytes): int64 timestamp, int32
relative offset (of the last offset of the batch holding that max timestamp so far).

Like Kafka, a new index file is preallocated to ``segment.index.bytes`` (rounded down to whole
entries; sparse on Linux) and trimmed to its entries when the segment becomes inactive or is
closed. A segment's indexes are lazy: their files are created when first needed (entries to
write, a flush, a roll, a close with records), so a new partition costs no index files. Valid entries live in memory (a bytearray) so lookups never touch the disk, and no
descriptor is held between operations (a partition must cost one descriptor at most):
appended entries stay in memory until the segment flushes, rolls (``trim``) or closes, which
write them in one ``pwrite`` through a short-lived descriptor. A kill -9 loses only entries of
segments past the recovery point, and recovery rebuilds those segments' indexes anyway.
Opening reads the file only up to its first hole, and drops trailing all-zero entries: the
preallocated tail of an index a crash left untrimmed (10 MiB of zeros by default) is neither
read nor taken for entries.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path
from typing import ClassVar, NamedTuple

from .errors import CorruptIndexError
from .file_cache import default_cache

log = logging.getLogger(__name__)

_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
NO_TIMESTAMP = -1


def data_end(fd: int, size: int) -> int:
    """Where the file's data ends: its first hole (entries are written in order from byte 0,
    so nothing follows it), or ``size`` where holes are not reported."""
    try:
        return min(os.lseek(fd, 0, os.SEEK_HOLE), size)
    except (OSError, AttributeError):
        return size


class OffsetPosition(NamedTuple):
    offset: int
    position: int


class TimestampOffset(NamedTuple):
    timestamp: int
    offset: int


class _Index:
    entry_size: ClassVar[int]

    def __init__(
        self,
        path: Path,
        base_offset: int,
        max_index_size: int,
        *,
        lazy: bool = False,
        missing: bool = False,
    ) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_index_size = max_index_size
        existed = False if missing else path.exists()  # missing: the caller knows (a new log)
        self.newly_created = not existed
        # A missing file is created when first needed (an entry written, a flush, a close):
        # thousands of new, still empty partitions cost no index files (Kafka's LazyIndex).
        self._on_disk = existed or not lazy
        if existed:
            fd = os.open(path, os.O_RDONLY)
            try:
                size = os.fstat(fd).st_size
                end = data_end(fd, size)
                raw = os.pread(fd, end, 0) if end else b""
            finally:
                os.close(fd)
            self._file_len = size
            usable = len(raw) - len(raw) % self.entry_size
            # Trailing all-zero entries are the preallocated tail of an index a crash left
            # untrimmed, not entries (offsets and timestamps grow, so none can be all zero
            # after the first, and a first (0, 0) says nothing a lookup does not assume).
            used = len(raw[:usable].rstrip(b"\0"))
            usable = -(-used // self.entry_size) * self.entry_size
            self._data = bytearray(raw[:usable])
            self._length_ok = size % self.entry_size == 0
        else:
            if max_index_size < self.entry_size:
                raise ValueError(f"invalid max index size {max_index_size}")
            self._file_len = self._round(max_index_size)
            if self._on_disk:
                self._create_file()
            self._data = bytearray()
            self._length_ok = True
        self.entries = len(self._data) // self.entry_size
        self._written = self.entries  # entries the file holds; the rest wait for a flush
        self._dirty = True  # the file may differ from what was last fsynced
        self._closed = False
        self._gone = False

    def _create_file(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, self._file_len)
        finally:
            os.close(fd)
        self._on_disk = True

    @property
    def on_disk(self) -> bool:
        """The file exists (a lazy index's is created when first needed)."""
        return self._on_disk

    def materialize(self) -> None:
        """Create a lazy index's file now (preallocated as usual)."""
        if not self._on_disk and not self._gone:
            try:
                self._create_file()
            except FileNotFoundError:  # its directory was removed under the node
                log.warning("%s is gone; its index entries stay in memory only", self.path)
                self._gone = True

    def _round(self, size: int) -> int:
        return size - size % self.entry_size

    @property
    def max_entries(self) -> int:
        return self._file_len // self.entry_size

    @property
    def size_in_bytes(self) -> int:
        return self.entries * self.entry_size

    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def relative(self, offset: int) -> int:
        rel = offset - self.base_offset
        if not 0 <= rel <= 2**31 - 1:
            raise ValueError(f"offset {offset} does not fit index based at {self.base_offset}")
        return rel

    def can_append_offset(self, offset: int) -> bool:
        return 0 <= offset - self.base_offset <= 2**31 - 1

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"index {self.path} is closed")

    def _write_entry(self, entry: bytes) -> None:
        self._check_open()
        pos = self.entries * self.entry_size
        self._data += entry
        self.entries += 1
        if pos + self.entry_size > self._file_len:
            self._file_len = pos + self.entry_size

    def _open(self) -> int | None:
        """A short-lived descriptor; None once the file is gone (its directory was removed
        under the node: as with a held descriptor of an unlinked file, writes go nowhere)."""
        if self._gone:
            return None
        self.materialize()
        try:
            return default_cache().open_file(self.path, os.O_WRONLY)
        except FileNotFoundError:
            log.warning("%s is gone; its index entries stay in memory only", self.path)
            self._gone = True
            return None

    def _truncate_file(self, size: int) -> None:
        if self._on_disk and not self._gone:
            try:
                os.truncate(self.path, size)
            except FileNotFoundError:
                log.warning("%s is gone; its index entries stay in memory only", self.path)
                self._gone = True

    def _persist(self, fd: int | None = None) -> None:
        """Write the entries appended since the last write, in one ``pwrite``."""
        if self.entries <= self._written:
            return
        own = fd is None
        if fd is None:
            fd = self._open()
            if fd is None:
                return
        start = self._written * self.entry_size
        pending = memoryview(self._data)[start:]
        try:
            done = 0
            while done < pending.nbytes:
                done += os.pwrite(fd, pending[done:], start + done)
        finally:
            pending.release()
            if own:
                os.close(fd)
        self._written = self.entries
        self._dirty = True

    def begin_bulk(self) -> None:
        """A rebuild starts: its entries stay in memory (as every entry does) until
        ``end_bulk``."""

    def end_bulk(self) -> None:
        """A rebuild is done: its entries are written in one call, or, for a lazy index whose
        file does not exist yet, left in memory like any appended entry until the segment
        flushes, rolls or closes (the rebuilt segment lies past the recovery point: a crash
        before that flush rebuilds them again). A restart of thousands of partitions written
        since their last flush created two preallocated files per partition here."""
        if self._on_disk:
            self.write_pending()

    def write_pending(self) -> None:
        """Bring the file up to the entries in memory (not fsynced): for a reader of the file."""
        if not self._closed:
            self._persist()

    def _truncate_to_entries(self, n: int) -> None:
        if n >= self.entries:
            return
        self._check_open()
        preallocated = self._file_len > self.entries * self.entry_size
        del self._data[n * self.entry_size :]
        self.entries = n
        self._written = min(self._written, n)
        # Drop the stale tail on disk too (truncate zero-fills when the file grows again), so
        # a crash cannot resurrect entries past the new end.
        self._truncate_file(n * self.entry_size)
        if preallocated:
            self._truncate_file(self._file_len)
        else:
            self._file_len = n * self.entry_size
        self._dirty = True

    def resize(self, new_size: int) -> None:
        rounded = max(self._round(new_size), self.entries * self.entry_size)
        if rounded != self._file_len:
            self._check_open()
            self._truncate_file(rounded)
            self._file_len = rounded
            self._dirty = True

    def trim(self) -> None:
        """Write pending entries and cut the file to them (the segment stops growing)."""
        if not self._closed:
            self._persist()
        self.resize(self.entries * self.entry_size)

    def reset(self) -> None:
        self._truncate_to_entries(0)
        self.resize(self.max_index_size)

    def flush(self) -> None:
        """Write pending entries and fsync, through one short-lived descriptor."""
        if self._closed or (not self._dirty and self.entries <= self._written):
            return
        fd = self._open()
        if fd is None:
            return
        try:
            self._persist(fd)
            os.fsync(fd)
        finally:
            os.close(fd)
        self._dirty = False

    def close(self) -> None:
        if not self._closed:
            self.materialize()
            self.trim()
            self.flush()
            self._closed = True

    def close_handle(self) -> None:
        """Stop using the file without writing what is pending (it is going away)."""
        self._closed = True

    def delete(self) -> None:
        self.close_handle()
        self.path.unlink(missing_ok=True)

    def rename(self, new_path: Path) -> None:
        if self._on_disk:
            os.replace(self.path, new_path)
        self.path = new_path

    def raw(self) -> bytes:
        return bytes(self._data)

    def _check_length(self) -> None:
        if not self._length_ok:
            raise CorruptIndexError(
                f"index file {self.path} has {self._file_len} bytes, not a multiple of "
                f"{self.entry_size}"
            )


class OffsetIndex(_Index):
    entry_size = _OFFSET_ENTRY.size

    def entry(self, n: int) -> OffsetPosition:
        rel, pos = _OFFSET_ENTRY.unpack_from(self._data, n * self.entry_size)
        return OffsetPosition(self.base_offset + rel, pos)

    @property
    def last_offset(self) -> int:
        return self.entry(self.entries - 1).offset if self.entries else self.base_offset

    def _slot_for(self, offset: int) -> int:
        """Largest slot whose offset is <= ``offset``; -1 if none."""
        rel = offset - self.base_offset
        lo, hi = 0, self.entries - 1
        if hi < 0 or _OFFSET_ENTRY.unpack_from(self._data, 0)[0] > rel:
            return -1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if _OFFSET_ENTRY.unpack_from(self._data, mid * self.entry_size)[0] <= rel:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def lookup(self, offset: int) -> OffsetPosition:
        slot = self._slot_for(offset)
        return OffsetPosition(self.base_offset, 0) if slot < 0 else self.entry(slot)

    def append(self, offset: int, position: int) -> None:
        if self.entries and offset <= self.last_offset:
            raise ValueError(
                f"offset {offset} is not above the last indexed offset {self.last_offset} "
                f"in {self.path}"
            )
        if self.is_full():
            raise ValueError(f"index {self.path} is full ({self.entries} entries)")
        self._write_entry(_OFFSET_ENTRY.pack(self.relative(offset), position))

    def truncate_to(self, offset: int) -> None:
        """Drop entries for offsets >= ``offset``."""
        slot = self._slot_for(offset)
        if slot < 0:
            keep = 0
        elif self.entry(slot).offset == offset:
            keep = slot
        else:
            keep = slot + 1
        self._truncate_to_entries(keep)

    def sanity_check(self, log_size: int) -> None:
        """Cheap O(1) checks (Kafka's spirit): whole entries, ends inside the segment."""
        self._check_length()
        if not self.entries:
            return
        first, last = self.entry(0), self.entry(self.entries - 1)
        if first.offset < self.base_offset or last.offset < first.offset:
            raise CorruptIndexError(
                f"offset index {self.path}: entries run from {first.offset} to {last.offset} "
                f"with base offset {self.base_offset}"
            )
        if last.position < first.position or last.position >= log_size:
            raise CorruptIndexError(
                f"offset index {self.path}: last position {last.position} is outside the "
                f"{log_size}-byte log"
            )

    def floor_position(self, position: int) -> int | None:
        """Largest indexed position <= ``position`` (positions only grow), if any."""
        lo, hi = 0, self.entries - 1
        if hi < 0 or self.entry(0).position > position:
            return None
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.entry(mid).position <= position:
                lo = mid
            else:
                hi = mid - 1
        return self.entry(lo).position


class TimeIndex(_Index):
    entry_size = _TIME_ENTRY.size

    def __init__(
        self,
        path: Path,
        base_offset: int,
        max_index_size: int,
        *,
        lazy: bool = False,
        missing: bool = False,
    ) -> None:
        super().__init__(path, base_offset, max_index_size, lazy=lazy, missing=missing)
        self._last = self._read_last()

    def _read_last(self) -> TimestampOffset:
        if not self.entries:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        return self.entry(self.entries - 1)

    def entry(self, n: int) -> TimestampOffset:
        ts, rel = _TIME_ENTRY.unpack_from(self._data, n * self.entry_size)
        return TimestampOffset(ts, self.base_offset + rel)

    @property
    def last_entry(self) -> TimestampOffset:
        return self._last

    def is_full(self) -> bool:
        # The last slot is kept for the entry written when the segment rolls (as Kafka does).
        return self.entries >= self.max_entries - 1

    def lookup(self, timestamp: int) -> TimestampOffset:
        """Largest entry with timestamp <= ``timestamp``, else (-1, base offset)."""
        lo, hi = 0, self.entries - 1
        if hi < 0 or self.entry(0).timestamp > timestamp:
            return TimestampOffset(NO_TIMESTAMP, self.base_offset)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.entry(mid).timestamp <= timestamp:
                lo = mid
            else:
                hi = mid - 1
        return self.entry(lo)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        if not skip_full_check and self.is_full():
            raise ValueError(f"time index {self.path} is full ({self.entries} entries)")
        if self.entries and offset < self._last.offset:
            raise ValueError(
                f"offset {offset} is below the last time-indexed offset {self._last.offset}"
            )
        if self.entries and timestamp < self._last.timestamp:
            raise ValueError(
                f"timestamp {timestamp} is below the last indexed timestamp {self._last.timestamp}"
            )
        # Only a strictly larger timestamp earns an entry (same as Kafka).
        if timestamp > self._last.timestamp:
            self._write_entry(_TIME_ENTRY.pack(timestamp, self.relative(offset)))
            self._last = TimestampOffset(timestamp, offset)

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose offset is >= ``offset``."""
        keep = self.entries
        while keep and self.entry(keep - 1).offset >= offset:
            keep -= 1
        self._truncate_to_entries(keep)
        self._last = self._read_last()

    def reset(self) -> None:
        super().reset()
        self._last = self._read_last()

    def sanity_check(self) -> None:
        self._check_length()
        if not self.entries:
            return
        first, last = self.entry(0), self._last
        if last.timestamp < first.timestamp or last.offset < self.base_offset:
            raise CorruptIndexError(
                f"time index {self.path}: last entry {tuple(last)} is before the first "
                f"{tuple(first)} or below base offset {self.base_offset}"
            )
