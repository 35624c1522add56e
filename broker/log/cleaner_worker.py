"""The log cleaner's heavy part: map the dirty range, filter every segment below its end into
``<base>.log.cleaned`` files. Runs in a worker process (``log.cleaner.threads`` of them) so
that parsing records never holds the event loop's GIL; the loop only picks partitions and
swaps the results in (``cleaner``).

A job names closed segments by path and inode: a segment renamed or replaced since the loop
built the job is not the one opened (``CleanAborted``), one truncated under the worker is
noticed by its size. Every read and write goes through a ``Throttle`` shared by all workers
(log.cleaner.io.max.bytes.per.second), and between batches the worker checks the shared stop
flag and that its parent is alive (a worker must never write into a log dir after the node
that gave it the job died: a restarted node may be cleaning the same partition).
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import os
import signal
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

from protocol.errors import CorruptRecordError
from protocol.records import BatchView, scan_batches
from protocol.records.batch import LOG_OVERHEAD
from protocol.txn_index import AbortedTxn, encode_entries

from .compaction import (
    AbortedIndex,
    FilterContext,
    FilterStats,
    TxnState,
    build_offset_map,
    filter_batches,
)
from .index import NO_TIMESTAMP, OffsetIndex, TimeIndex, TimestampOffset
from .segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX
from .segment_swap import CLEANED_SUFFIX, remove_staged, segment_file

READ_CHUNK: Final = 1 << 20
# Kafka's Throttler periods: at least 300 ms.
THROTTLE_PERIOD_S: Final = 0.3
THROTTLE_MIN_SLEEP_S: Final = 0.01
# Kafka's SkimpyOffsetMap: a 16-byte MD5 of the key and an 8-byte offset per slot.
BYTES_PER_MAP_ENTRY: Final = 24
# The worker runs below the node's priority: cleaning is background work.
WORKER_NICE: Final = 5
_PR_SET_PDEATHSIG: Final = 1


class StopFlag(Protocol):
    def is_set(self) -> bool: ...
    def wait(self, timeout: float | None = None) -> bool: ...


class CleanAborted(Exception):
    """The worker stopped: shutdown, its parent gone, or a segment changed under it."""


@dataclass(frozen=True, slots=True)
class Source:
    """One closed segment as the worker sees it."""

    base: int
    end: int  # the next segment's base offset
    size: int
    path: str
    inode: tuple[int, int]  # (st_dev, st_ino) when the job was built
    mtime_ns: int


@dataclass(slots=True)
class Job:
    dir: str
    name: str
    first_dirty: int
    end: int
    groups: list[list[Source]]
    ctx_aborted: list[AbortedTxn]
    last_data_offsets: dict[int, int]
    last_marker_epochs: dict[int, int]
    now_ms: int
    delete_retention_ms: int
    index_interval_bytes: int
    max_index_size: int
    map_slots: int  # Kafka's offset map slots: dedupe buffer per worker / 24
    map_load_factor: float  # log.cleaner.io.buffer.load.factor


@dataclass(slots=True)
class JobResult:
    staged: list[int]  # base offsets of the groups written, in order
    end: int  # first offset not cleaned: below the job's end when the offset map filled up
    stats: FilterStats = field(default_factory=FilterStats)
    map_entries: int = 0
    buffer_utilization: float = 0.0  # map entries / slots, as Kafka reports it
    elapsed_s: float = 0.0


class Throttle:
    """log.cleaner.io.max.bytes.per.second over every worker, as Kafka's Throttler: bytes read
    and written are counted in periods of at least 300 ms and a worker whose bytes put the
    period ahead of the rate sleeps until they are not. Kafka only looks at the end of each
    period, so a clean shorter than one runs unthrottled; this one sleeps as soon as the period
    is 10 ms ahead. The sleep holds the lock, so every worker waits. ``state`` is a shared
    ``[period start (monotonic s), bytes]`` pair (a multiprocessing array for processes)."""

    def __init__(self, rate: float, lock: Any, state: Any) -> None:
        self.rate = rate
        self._lock = lock
        self._state = state

    @property
    def enabled(self) -> bool:
        return 0 < self.rate < math.inf

    def observe(self, n: int, stop: StopFlag) -> None:
        if not self.enabled:
            return
        with self._lock:
            state = self._state
            state[1] += n
            elapsed = time.monotonic() - state[0]
            ahead = state[1] / self.rate - elapsed
            if ahead > THROTTLE_MIN_SLEEP_S:
                stop.wait(ahead)
            if elapsed >= THROTTLE_PERIOD_S:
                state[0] = time.monotonic()
                state[1] = 0


def local_throttle(rate: float) -> Throttle:
    """A throttle for workers that are threads of this process."""
    return Throttle(rate, threading.Lock(), [time.monotonic(), 0.0])


# -- worker process setup ----------------------------------------------------------------------
_stop: StopFlag | None = None
_throttle: Throttle | None = None
_parent = 0


def init_worker(stop: StopFlag, throttle: Throttle, parent: int) -> None:
    """ProcessPoolExecutor initializer: die with the node, run below its priority, ignore the
    terminal's Ctrl-C (the node stops its workers itself)."""
    global _stop, _throttle, _parent
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(0)  # the node died before the line above took effect
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with contextlib.suppress(OSError):
        os.nice(WORKER_NICE)
    _stop, _throttle, _parent = stop, throttle, parent


def run_in_worker(job: Job) -> JobResult:
    assert _stop is not None and _throttle is not None
    return run_job(job, _stop, _throttle, _parent)


# -- the job -------------------------------------------------------------------------------------
class _Guard:
    """Between batches: stop requested? parent gone? Then abort."""

    def __init__(self, stop: StopFlag, throttle: Throttle, parent: int) -> None:
        self.stop = stop
        self.throttle = throttle
        self._parent = parent

    def check(self) -> None:
        if self.stop.is_set():
            raise CleanAborted("the cleaner is stopping")
        if self._parent and os.getppid() != self._parent:
            raise CleanAborted("the node is gone")

    def io(self, n: int) -> None:
        self.throttle.observe(n, self.stop)


def _open(src: Source) -> int:
    try:
        fd = os.open(src.path, os.O_RDONLY)
    except FileNotFoundError:
        raise CleanAborted(f"segment {src.base} is gone") from None
    st = os.fstat(fd)
    if (st.st_dev, st.st_ino) != src.inode or st.st_size < src.size:
        os.close(fd)
        raise CleanAborted(f"segment {src.base} changed")
    return fd


def _iter_batches(src: Source, fd: int, guard: _Guard) -> Iterator[BatchView]:
    """The segment's batches, read in chunks, CRCs checked."""
    pos = 0
    while pos < src.size:
        guard.check()
        want = min(READ_CHUNK, src.size - pos)
        buf = os.pread(fd, want, pos)
        if len(buf) < want:
            raise CleanAborted(f"segment {src.base} shrank while being cleaned")
        guard.io(len(buf))
        used = 0
        for view in scan_batches(buf, allow_partial_tail=True):
            used = view.position + view.size
            yield view
        if used == 0:  # one batch larger than the chunk
            length = int.from_bytes(buf[8:12], "big", signed=True) if len(buf) >= 12 else -1
            size = LOG_OVERHEAD + length
            if length < 0 or size <= len(buf) or pos + size > src.size:
                raise CorruptRecordError(f"segment {src.base}: torn batch at byte {pos}", pos)
            buf = os.pread(fd, size, pos)
            if len(buf) < size:
                raise CleanAborted(f"segment {src.base} shrank while being cleaned")
            guard.io(len(buf))
            for view in scan_batches(buf):
                used = view.size
                yield view
        pos += used


class _SegmentWriter:
    """Writes ``<base>.log.cleaned`` and its indexes (``.cleaned``), indexing as recovery
    does: an offset/time entry before a batch once index.interval.bytes were written."""

    def __init__(
        self, directory: Path, base: int, interval: int, max_index_size: int, guard: _Guard
    ) -> None:
        self.directory = directory
        self.base = base
        self._guard = guard
        remove_staged(directory, base, CLEANED_SUFFIX)
        self.log_path = segment_file(directory, base, LOG_SUFFIX, CLEANED_SUFFIX)
        self._fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.index = OffsetIndex(
            segment_file(directory, base, INDEX_SUFFIX, CLEANED_SUFFIX), base, max_index_size
        )
        self.time_index = TimeIndex(
            segment_file(directory, base, TIME_INDEX_SUFFIX, CLEANED_SUFFIX), base, max_index_size
        )
        self._interval = interval
        self._pos = 0
        self._last_index_pos = 0
        self._max_ts = TimestampOffset(NO_TIMESTAMP, base)

    def append(self, data: bytes | bytearray | memoryview) -> None:
        view = BatchView(data)
        last = view.last_offset
        if view.max_timestamp > self._max_ts.timestamp:
            self._max_ts = TimestampOffset(view.max_timestamp, last)
        if self._pos - self._last_index_pos > self._interval:
            if not self.index.is_full():
                self.index.append(last, self._pos)
            if not self.time_index.is_full():
                self.time_index.maybe_append(self._max_ts.timestamp, self._max_ts.offset)
            self._last_index_pos = self._pos
        mv = memoryview(data)
        written = 0
        while written < mv.nbytes:
            written += os.pwrite(self._fd, mv[written:], self._pos + written)
        self._pos += mv.nbytes
        self._guard.io(mv.nbytes)

    def finish(self, txn_entries: Sequence[AbortedTxn], mtime_ns: int) -> None:
        ts = self._max_ts
        self.time_index.maybe_append(ts.timestamp, ts.offset, skip_full_check=True)
        self.index.close()
        self.time_index.close()
        os.fsync(self._fd)
        os.close(self._fd)
        if txn_entries:
            path = segment_file(self.directory, self.base, TXN_INDEX_SUFFIX, CLEANED_SUFFIX)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                data = encode_entries(list(txn_entries))
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
        # Retention by time falls back to the mtime when no timestamp is left: keep the old one.
        os.utime(self.log_path, ns=(mtime_ns, mtime_ns))

    def abort(self) -> None:
        self.index.close_handle()
        self.time_index.close_handle()
        with contextlib.suppress(OSError):
            os.close(self._fd)
        remove_staged(self.directory, self.base, CLEANED_SUFFIX)


def _map_dirty(job: Job, guard: _Guard, aborted: AbortedIndex) -> tuple[dict[bytes, int], int]:
    """The key -> latest offset map of the dirty range and the range's end: lowered to the
    base of the first batch that did not fit when the map holds slots * load factor keys (as
    Kafka stops mapping when its map is full; the rest waits for the next clean)."""
    offset_map: dict[bytes, int] = {}
    limit = max(1, int(job.map_slots * job.map_load_factor))
    end = job.end
    for group in job.groups:
        for src in group:
            if src.end <= job.first_dirty:
                continue
            fd = _open(src)
            try:
                for batch in _iter_batches(src, fd, guard):
                    if batch.base_offset >= end:
                        break
                    size = len(offset_map)
                    build_offset_map([batch], job.first_dirty, end, aborted, offset_map)
                    if len(offset_map) > limit and size > 0:
                        return offset_map, max(batch.base_offset, job.first_dirty + 1)
            finally:
                os.close(fd)
    return offset_map, end


def run_job(job: Job, stop: StopFlag, throttle: Throttle, parent: int = 0) -> JobResult:
    """Map, filter, stage every group below the end; returns what was staged."""
    started = time.monotonic()
    guard = _Guard(stop, throttle, parent)
    directory = Path(job.dir)
    staged: list[int] = []
    try:
        aborted = AbortedIndex(job.ctx_aborted)
        offset_map, end = _map_dirty(job, guard, aborted)
        result = JobResult(staged, end)
        ctx = FilterContext(
            offset_map,
            aborted,
            job.last_data_offsets,
            end=end,
            now_ms=job.now_ms,
            delete_retention_ms=job.delete_retention_ms,
            upper_bound=job.end,
            last_marker_epochs=job.last_marker_epochs,
        )
        txns = TxnState(job.ctx_aborted)
        for group in job.groups:
            if group[0].base >= end:
                break
            writer = _SegmentWriter(
                directory, group[0].base, job.index_interval_bytes, job.max_index_size, guard
            )
            try:
                for src in group:
                    fd = _open(src)
                    try:
                        for kept in filter_batches(
                            _iter_batches(src, fd, guard), ctx, txns, result.stats
                        ):
                            writer.append(kept)
                    finally:
                        os.close(fd)
                writer.finish(txns.take_kept(), max(src.mtime_ns for src in group))
            except BaseException:
                writer.abort()
                raise
            staged.append(group[0].base)
        result.map_entries = len(offset_map)
        result.buffer_utilization = len(offset_map) / max(job.map_slots, 1)
        result.elapsed_s = time.monotonic() - started
        return result
    except BaseException:
        for base in staged:
            remove_staged(directory, base, CLEANED_SUFFIX)
        raise
