"""The log cleaner: compacts partitions whose topic has ``cleanup.policy`` with ``compact``.

Per pass, on the event loop, each compacted partition gets a cleanable range: from its first
dirty offset (``cleaner-offset-checkpoint`` per log dir, Kafka's format; else the log start)
up to the first uncleanable offset, min(last stable offset, active segment base, base of the
first segment younger than min.compaction.lag.ms), rounded down to a segment boundary. A
partition is cleaned when dirty bytes / (clean + dirty bytes) reaches
min.cleanable.dirty.ratio, or its oldest dirty data is older than max.compaction.lag.ms;
dirtiest first. ``may_clean(topic, partition)`` can veto a partition (KIP-1279: a read-only
mirror partition must stay byte-identical to its source until failover).

The heavy part runs in one worker thread, on duplicated descriptors of closed (immutable)
segments: build the key -> latest offset map over the dirty range, filter every segment
below the end (grouped while their sizes fit segment.bytes, as Kafka groups them) into
``<base>.log.cleaned`` with fresh ``.index``/``.timeindex`` and the old ``.txnindex``
entries. Back on the loop, ``PartitionLog.replace_segments`` swaps the files in at once, or
drops them when the log changed meanwhile. Rules for records: ``compaction``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from protocol.errors import CorruptRecordError, ProtocolError
from protocol.records import BatchView, scan_batches
from protocol.records.batch import LOG_OVERHEAD
from protocol.txn_index import AbortedTxn, encode_entries

from .checkpoint import CheckpointError, read_offset_checkpoint, write_offset_checkpoint
from .clock import Clock
from .compaction import AbortedIndex, FilterContext, FilterStats, build_offset_map, filter_batches
from .index import NO_TIMESTAMP, OffsetIndex, TimeIndex, TimestampOffset
from .manager import LogManager
from .partition_log import PartitionLog
from .segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    iter_headers,
)
from .segment_swap import CLEANED_SUFFIX, remove_staged, segment_file

CLEANER_OFFSET_CHECKPOINT: Final = "cleaner-offset-checkpoint"
_INT_MAX: Final = 2**31 - 1

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    enable: bool = True  # log.cleaner.enable
    backoff_ms: int = 15_000  # log.cleaner.backoff.ms: sleep when nothing was cleanable


@dataclass(frozen=True, slots=True)
class Cleanable:
    """A partition's cleanable range, computed on the loop."""

    log: PartitionLog
    first_dirty: int
    end: int  # first offset not cleaned this time (a segment boundary)
    clean_bytes: int
    dirty_bytes: int
    overdue: bool  # max.compaction.lag.ms passed: clean whatever the ratio

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


@dataclass(frozen=True, slots=True)
class _Source:
    """One closed segment as the worker sees it: a private descriptor and a fixed size."""

    base: int
    end: int  # the next segment's base offset
    size: int
    fd: int
    drop_tombstones: bool
    txn_entries: tuple[AbortedTxn, ...]
    mtime_ns: int


@dataclass(slots=True)
class _Job:
    dir: Path
    name: str
    first_dirty: int
    end: int
    groups: list[list[_Source]]
    ctx_aborted: list[AbortedTxn]
    last_data_offsets: dict[int, int]
    index_interval_bytes: int
    max_index_size: int
    stats: FilterStats = field(default_factory=FilterStats)


class CleanAborted(Exception):
    """The worker stopped: shutdown, or a segment changed under it."""


class LogCleaner:
    def __init__(
        self,
        logs: LogManager,
        config: CleanerConfig,
        clock: Clock,
        may_clean: Callable[[str, int], bool] | None = None,
    ) -> None:
        self._logs = logs
        self.config = config
        self._clock = clock
        self._may_clean = may_clean or (lambda _t, _p: True)
        self._checkpoints: dict[TopicPartition, int] = {}
        for log_dir in logs.log_dirs:
            try:
                self._checkpoints.update(
                    read_offset_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT)
                )
            except (CheckpointError, OSError) as exc:
                log.warning("ignoring unreadable cleaner checkpoint: %s", exc)
        self._uncleanable: set[TopicPartition] = set()
        self._stop = threading.Event()
        self._executor: ThreadPoolExecutor | None = None
        self._task: asyncio.Task[int] | None = None
        self._next_due_ms = 0
        # Totals since start (for logs and tests).
        self.passes = 0
        self.bytes_read = 0
        self.bytes_written = 0
        self.max_dirty_ratio = 0.0

    # -- scheduling ----------------------------------------------------------------------
    def tick(self, now_ms: int) -> None:
        """Start a cleaning pass unless one runs or the backoff has not passed (call from the
        maintenance loop)."""
        if not self.config.enable or self._stop.is_set():
            return
        if self._task is not None and not self._task.done():
            return
        if now_ms < self._next_due_ms:
            return
        self._task = asyncio.get_running_loop().create_task(self._pass())

    async def _pass(self) -> int:
        try:
            cleaned = await self.clean_all()
        except Exception:
            log.exception("log cleaner pass failed")
            cleaned = 0
        self._next_due_ms = self._clock.now_ms() + (0 if cleaned else self.config.backoff_ms)
        return cleaned

    async def close(self) -> None:
        """Stop: the worker notices between batches; nothing is swapped in after this."""
        self._stop.set()
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    # -- choosing ------------------------------------------------------------------------
    def first_dirty_offset(self, plog: PartitionLog) -> int:
        offset = self._checkpoints.get((plog.topic, plog.partition), plog.log_start_offset)
        if offset < plog.log_start_offset or offset > plog.log_end_offset:
            return plog.log_start_offset  # truncated or recreated since: start over
        return offset

    def cleanable(self, plog: PartitionLog, now_ms: int) -> Cleanable | None:
        """The partition's cleanable range, or None when there is nothing dirty to clean."""
        cfg = plog.config
        segments = plog.segments
        if len(segments) < 2:
            return None
        first_dirty = self.first_dirty_offset(plog)
        uncleanable = min(plog.last_stable_offset, segments[-1].base_offset)
        if cfg.min_compaction_lag_ms > 0:
            # Nothing from the first dirty segment written less than the lag ago.
            for seg, nxt in itertools.pairwise(segments):
                if nxt.base_offset > first_dirty and (
                    seg.largest_timestamp > now_ms - cfg.min_compaction_lag_ms
                ):
                    uncleanable = min(uncleanable, seg.base_offset)
                    break
        end = segments[0].base_offset
        clean_bytes = dirty_bytes = 0
        first_dirty_ts: int | None = None
        for seg, nxt in itertools.pairwise(segments):
            if nxt.base_offset > uncleanable:
                break
            end = nxt.base_offset
            if nxt.base_offset <= first_dirty:
                clean_bytes += seg.size
            else:
                dirty_bytes += seg.size
                if first_dirty_ts is None:
                    first_dirty_ts = _first_batch_timestamp(seg.fd, seg.size)
        if end <= first_dirty or dirty_bytes == 0:
            return None
        overdue = (
            first_dirty_ts is not None
            and first_dirty_ts >= 0
            and now_ms - first_dirty_ts > cfg.max_compaction_lag_ms
        )
        return Cleanable(plog, first_dirty, end, clean_bytes, dirty_bytes, overdue)

    def candidates(self, now_ms: int) -> list[Cleanable]:
        """Partitions to clean now, most overdue/dirtiest first."""
        out = []
        max_ratio = 0.0
        for plog in self._logs.all_logs():
            tp = (plog.topic, plog.partition)
            if not plog.config.compact or tp in self._uncleanable:
                continue
            if plog.producer_state is None:
                continue  # not hosted: no first unstable offset to stop before open txns
            if not self._may_clean(plog.topic, plog.partition):
                continue
            found = self.cleanable(plog, now_ms)
            if found is None:
                continue
            max_ratio = max(max_ratio, found.dirty_ratio)
            if found.overdue or found.dirty_ratio >= plog.config.min_cleanable_dirty_ratio:
                out.append(found)
        self.max_dirty_ratio = max_ratio
        out.sort(key=lambda c: (not c.overdue, -c.dirty_ratio))
        return out

    # -- cleaning ------------------------------------------------------------------------
    async def clean_all(self) -> int:
        """One pass over every cleanable partition; returns how many were cleaned."""
        self.passes += 1
        cleaned = 0
        for found in self.candidates(self._clock.now_ms()):
            if self._stop.is_set():
                break
            if await self.clean(found):
                cleaned += 1
        return cleaned

    async def clean(self, found: Cleanable) -> bool:
        plog = found.log
        tp = (plog.topic, plog.partition)
        job, originals = self._make_job(found, self._clock.now_ms())
        loop = asyncio.get_running_loop()
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="kmirror-log-cleaner")
        try:
            staged = await loop.run_in_executor(self._executor, _run_job, job, self._stop)
        except CleanAborted as exc:
            log.info("%s: cleaning stopped: %s", plog.name, exc)
            return False
        except (ProtocolError, ValueError) as exc:
            log.error("%s: cannot clean, marking the partition uncleanable: %s", plog.name, exc)
            self._uncleanable.add(tp)
            return False
        except OSError:
            log.exception("%s: cleaning failed", plog.name)
            return False
        # Back on the loop: swap every group in; stop at the first the log no longer matches.
        swapped_all = True
        for (segs, sizes), base in zip(originals, staged, strict=True):
            assert segs[0].base_offset == base
            if not swapped_all:
                remove_staged(job.dir, base, CLEANED_SUFFIX)
            elif not plog.replace_segments(segs, sizes):
                swapped_all = False
        if not swapped_all:
            log.info("%s: log changed while cleaning; will retry", plog.name)
            return False
        self._checkpoints[tp] = found.end
        self._write_checkpoint(tp)
        st = job.stats
        self.bytes_read += st.bytes_read
        self.bytes_written += st.bytes_written
        log.info(
            "%s: cleaned offsets [%d, %d) (dirty from %d): %d -> %d bytes, %d/%d records kept",
            plog.name,
            plog.segments[0].base_offset,
            found.end,
            found.first_dirty,
            st.bytes_read,
            st.bytes_written,
            st.records_kept,
            st.records_read,
        )
        return True

    def _make_job(
        self, found: Cleanable, now_ms: int
    ) -> tuple[_Job, list[tuple[list[LogSegment], list[int]]]]:
        plog = found.log
        cfg = plog.config
        horizon = now_ms - cfg.delete_retention_ms
        chosen = [s for s in plog.segments[:-1] if s.base_offset < found.end]
        ends = [s.base_offset for s in plog.segments[1 : len(chosen) + 1]]
        sources: list[_Source] = []
        try:
            for seg, end in zip(chosen, ends, strict=True):
                sources.append(
                    _Source(
                        seg.base_offset,
                        end,
                        seg.size,
                        os.dup(seg.fd),
                        seg.largest_timestamp < horizon,
                        tuple(seg.txn_index.entries()),
                        os.stat(seg.log_path).st_mtime_ns,
                    )
                )
        except BaseException:
            for src in sources:
                os.close(src.fd)
            raise
        index_sizes = [(s.index.size_in_bytes, s.time_index.size_in_bytes) for s in chosen]
        groups = _group(sources, index_sizes, cfg.segment_bytes, cfg.segment_index_bytes)
        psm = plog.producer_state
        last_data = (
            {}
            if psm is None
            else {
                pid: e.last_data_offset
                for pid, e in psm.active_producers.items()
                if e.last_data_offset >= 0
            }
        )
        job = _Job(
            dir=plog.dir,
            name=plog.name,
            first_dirty=found.first_dirty,
            end=found.end,
            groups=groups,
            ctx_aborted=plog.aborted_transactions(chosen[0].base_offset, found.end),
            last_data_offsets=last_data,
            index_interval_bytes=cfg.index_interval_bytes,
            max_index_size=cfg.segment_index_bytes,
        )
        by_base = {s.base_offset: s for s in chosen}
        originals: list[tuple[list[LogSegment], list[int]]] = [
            ([by_base[src.base] for src in group], [src.size for src in group]) for group in groups
        ]
        return job, originals

    def _write_checkpoint(self, tp: TopicPartition) -> None:
        log_dir = self._logs.log_dir_of(*tp)
        if log_dir is None:
            return
        live = {
            (p.topic, p.partition)
            for p in self._logs.all_logs()
            if self._logs.log_dir_of(p.topic, p.partition) == log_dir
        }
        entries = {k: v for k, v in self._checkpoints.items() if k in live}
        write_offset_checkpoint(log_dir / CLEANER_OFFSET_CHECKPOINT, entries)


# -- the worker thread ----------------------------------------------------------------------
_READ_CHUNK: Final = 1 << 20


def _group(
    sources: list[_Source],
    index_sizes: list[tuple[int, int]],
    segment_bytes: int,
    max_index_size: int,
) -> list[list[_Source]]:
    """Adjacent segments merged while the sizes (log and both indexes) fit one segment and
    every offset stays within a 32-bit delta of the group's base (Kafka's grouping)."""
    groups: list[list[_Source]] = []
    i, n = 0, len(sources)
    while i < n:
        group = [sources[i]]
        size = sources[i].size
        idx, tidx = index_sizes[i]
        i += 1
        while (
            i < n
            and size + sources[i].size <= segment_bytes
            and idx + index_sizes[i][0] <= max_index_size
            and tidx + index_sizes[i][1] <= max_index_size
            and sources[i].end - 1 - group[0].base <= _INT_MAX
        ):
            size += sources[i].size
            idx += index_sizes[i][0]
            tidx += index_sizes[i][1]
            group.append(sources[i])
            i += 1
        groups.append(group)
    return groups


def _first_batch_timestamp(fd: int, size: int) -> int | None:
    for header in iter_headers(fd, 0, size):
        return header.max_timestamp
    return None


def _iter_batches(src: _Source, stop: threading.Event) -> Iterator[BatchView]:
    """The segment's batches, read in chunks through the private descriptor, CRCs checked."""
    pos = 0
    while pos < src.size:
        if stop.is_set():
            raise CleanAborted("the cleaner is stopping")
        want = min(_READ_CHUNK, src.size - pos)
        buf = os.pread(src.fd, want, pos)
        if len(buf) < want:
            raise CleanAborted(f"segment {src.base} shrank while being cleaned")
        used = 0
        for view in scan_batches(buf, allow_partial_tail=True):
            used = view.position + view.size
            yield view
        if used == 0:  # one batch larger than the chunk
            length = int.from_bytes(buf[8:12], "big", signed=True) if len(buf) >= 12 else -1
            size = LOG_OVERHEAD + length
            if length < 0 or size <= len(buf) or pos + size > src.size:
                raise CorruptRecordError(f"segment {src.base}: torn batch at byte {pos}", pos)
            buf = os.pread(src.fd, size, pos)
            if len(buf) < size:
                raise CleanAborted(f"segment {src.base} shrank while being cleaned")
            for view in scan_batches(buf):
                used = view.size
                yield view
        pos += used


class _SegmentWriter:
    """Writes ``<base>.log.cleaned`` and its indexes (``.cleaned``), indexing as recovery
    does: an offset/time entry before a batch once index.interval.bytes were written."""

    def __init__(self, directory: Path, base: int, interval: int, max_index_size: int) -> None:
        self.directory = directory
        self.base = base
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


def _run_job(job: _Job, stop: threading.Event) -> list[int]:
    """Worker thread: map, filter, stage every group; returns the staged base offsets."""
    staged: list[int] = []
    try:
        aborted = AbortedIndex(job.ctx_aborted)
        offset_map: dict[bytes, int] = {}
        for group in job.groups:
            for src in group:
                if src.end > job.first_dirty:
                    build_offset_map(
                        _iter_batches(src, stop), job.first_dirty, job.end, aborted, offset_map
                    )
        ctx = FilterContext(offset_map, aborted, job.last_data_offsets)
        for group in job.groups:
            writer = _SegmentWriter(
                job.dir, group[0].base, job.index_interval_bytes, job.max_index_size
            )
            try:
                for src in group:
                    for kept in filter_batches(
                        _iter_batches(src, stop),
                        ctx,
                        drop_tombstones=src.drop_tombstones,
                        stats=job.stats,
                    ):
                        writer.append(kept)
                entries = [e for src in group for e in src.txn_entries]
                writer.finish(entries, max(src.mtime_ns for src in group))
            except BaseException:
                writer.abort()
                raise
            staged.append(group[0].base)
        return staged
    except BaseException:
        for base in staged:
            remove_staged(job.dir, base, CLEANED_SUFFIX)
        raise
    finally:
        for group in job.groups:
            for src in group:
                with contextlib.suppress(OSError):
                    os.close(src.fd)
