"""The log cleaner: compacts partitions whose topic has ``cleanup.policy`` with ``compact``.

``log.cleaner.threads`` workers (asyncio tasks, each handing its heavy work to its own worker
process, ``cleaner_worker``) loop like Kafka's cleaner threads: pick the filthiest compacted
partition no other worker holds, clean it, swap the result in; when none is cleanable, sleep
log.cleaner.backoff.ms. A partition's cleanable range runs from its first dirty offset
(``cleaner-offset-checkpoint`` per log dir, Kafka's format; else the log start) up to the
first uncleanable offset, min(last stable offset, active segment base, base of the first
segment younger than min.compaction.lag.ms), rounded down to a segment boundary. A partition
is picked when dirty bytes / (clean + dirty bytes) reaches min.cleanable.dirty.ratio, or its
oldest dirty data waited longer than max.compaction.lag.ms; the overdue first, then the
dirtiest. ``may_clean(topic, partition)`` can veto a partition (KIP-1279: a read-only mirror
partition must stay byte-identical to its source until failover).

The worker maps the dirty range (at most Kafka's offset map size: dedupe buffer / threads / 24
bytes * load factor keys; the rest waits for the next clean) and filters every closed segment
below the end (grouped while their sizes fit segment.bytes, as Kafka groups them) into
``<base>.log.cleaned`` files. Back on the loop, ``PartitionLog.replace_segments`` swaps the
files in at once, or drops them when the log changed meanwhile. Rules for records:
``compaction``.

An unexpected error while cleaning a partition (a corrupt batch, say) marks it uncleanable
until restart, with one ERROR line; the workers go on with the others. The figures Kafka's
LogCleaner and LogCleanerManager gauges report come from ``metrics_snapshot``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Final

from broker.metrics.cleaner_metrics import CleanerSnapshot

from .checkpoint import CheckpointError, read_offset_checkpoint, write_offset_checkpoint
from .cleaner_worker import (
    BYTES_PER_MAP_ENTRY,
    CleanAborted,
    Job,
    JobResult,
    Source,
    Throttle,
    init_worker,
    local_throttle,
    run_in_worker,
    run_job,
)
from .clock import Clock
from .manager import LogManager
from .partition_log import PartitionLog
from .segment import LogSegment, iter_headers
from .segment_swap import CLEANED_SUFFIX, remove_staged

CLEANER_OFFSET_CHECKPOINT: Final = "cleaner-offset-checkpoint"
_INT_MAX: Final = 2**31 - 1

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class CleanerConfig:
    enable: bool = True  # log.cleaner.enable
    backoff_ms: int = 15_000  # log.cleaner.backoff.ms: sleep when nothing was cleanable
    threads: int = 1  # log.cleaner.threads
    io_max_bytes_per_second: float = math.inf  # log.cleaner.io.max.bytes.per.second
    dedupe_buffer_size: int = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size
    dedupe_load_factor: float = 0.9  # log.cleaner.io.buffer.load.factor
    # Worker processes (the node); False runs jobs in threads of this process (tests).
    processes: bool = True

    @property
    def map_slots(self) -> int:
        per_worker = min(self.dedupe_buffer_size // max(self.threads, 1), _INT_MAX)
        return max(per_worker // BYTES_PER_MAP_ENTRY, 1)


@dataclass(frozen=True, slots=True)
class Cleanable:
    """A partition's cleanable range, computed on the loop."""

    log: PartitionLog
    first_dirty: int
    end: int  # first offset not cleaned this time (a segment boundary)
    clean_bytes: int
    dirty_bytes: int
    compaction_delay_ms: int  # how long dirty data waited past max.compaction.lag.ms

    @property
    def overdue(self) -> bool:
        """max.compaction.lag.ms passed: clean whatever the ratio."""
        return self.compaction_delay_ms > 0

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


@dataclass(slots=True)
class CleanStats:
    """One worker's last clean (Kafka's CleanerStats, the parts its gauges read)."""

    bytes_read: int = 0
    bytes_written: int = 0
    elapsed_s: float = 0.0
    buffer_utilization: float = 0.0


@dataclass(slots=True)
class _Worker:
    id: int
    task: asyncio.Task[None] | None = None
    last: CleanStats = field(default_factory=CleanStats)
    last_compaction_delay_ms: int = 0  # at its last pick (Kafka's PreCleanStats)
    dead: bool = False


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
        self._uncleanable: dict[str, set[TopicPartition]] = {}
        self._in_progress: set[TopicPartition] = set()
        self._stop = threading.Event()
        self._workers = [_Worker(i) for i in range(max(config.threads, 1))]
        self._started = False
        self._executor: Executor | None = None
        self._worker_stop: Any = None  # the stop flag the worker processes/threads see
        self._throttle: Throttle | None = None
        self._checkpoint_lock = asyncio.Lock()
        self._time_of_last_run_ms = clock.now_ms()
        self.max_dirty_ratio = 0.0
        # Totals since start (for logs and tests).
        self.passes = 0  # looks for a partition to clean
        self.bytes_read = 0
        self.bytes_written = 0

    # -- scheduling ----------------------------------------------------------------------
    def tick(self, now_ms: int) -> None:
        """Start the workers once (call from the maintenance loop; they run until close)."""
        if self._started or not self.config.enable or self._stop.is_set():
            return
        if self.config.threads < 1:
            return  # Kafka: no cleaner threads, no cleaning
        self._started = True
        loop = asyncio.get_running_loop()
        for worker in self._workers:
            worker.task = loop.create_task(self._run(worker), name=f"log-cleaner-{worker.id}")

    async def _run(self, worker: _Worker) -> None:
        """One worker's loop (Kafka's CleanerThread.doWork); an exception here kills the
        worker (dead-thread-count), a failing partition only marks the partition."""
        try:
            while not self._stop.is_set():
                found = self.grab(self._clock.now_ms(), worker)
                cleaned = False
                if found is not None:
                    try:
                        cleaned = await self.clean(found, worker)
                    except Exception as exc:  # Kafka's LogCleaningException: the partition
                        self._mark_uncleanable(found.log, repr(exc), exc)
                    finally:
                        self._in_progress.discard((found.log.topic, found.log.partition))
                self._forget_deleted()
                if not cleaned:
                    await asyncio.sleep(self.config.backoff_ms / 1000)
        except asyncio.CancelledError:
            raise
        except Exception:
            worker.dead = True
            log.exception("log cleaner worker %d died", worker.id)

    async def close(self) -> None:
        """Stop: workers notice between batches; nothing is swapped in after this."""
        self._stop.set()
        if self._worker_stop is not None:
            self._worker_stop.set()
        tasks = [w.task for w in self._workers if w.task is not None and not w.task.done()]
        for task in tasks:
            task.cancel()
        for task in tasks:
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
        earliest_dirty_ts = math.inf
        clean_until = now_ms - max(cfg.max_compaction_lag_ms, 0)
        for seg, nxt in itertools.pairwise(segments):
            if clean_until > 0 and nxt.base_offset > first_dirty:
                # Kafka's compaction delay looks at every closed dirty segment (a header read
                # each, skipped with the default max.compaction.lag.ms: nothing is ever late).
                ts = _first_batch_timestamp(seg.fd, seg.size)
                if ts is not None and ts > 0:
                    earliest_dirty_ts = min(earliest_dirty_ts, ts)
            if nxt.base_offset > uncleanable:
                continue
            end = nxt.base_offset
            if nxt.base_offset <= first_dirty:
                clean_bytes += seg.size
            else:
                dirty_bytes += seg.size
        if end <= first_dirty or dirty_bytes == 0:
            return None
        delay = int(clean_until - earliest_dirty_ts) if earliest_dirty_ts < clean_until else 0
        return Cleanable(plog, first_dirty, end, clean_bytes, dirty_bytes, delay)

    def _candidates(self, now_ms: int, skip: Iterable[TopicPartition] = ()) -> list[Cleanable]:
        """Compacted partitions with something dirty, none held by a worker or uncleanable."""
        out = []
        held = self._in_progress.union(skip)
        bad = set().union(*self._uncleanable.values())
        for plog in self._logs.all_logs():
            tp = (plog.topic, plog.partition)
            if not plog.config.compact or tp in held or tp in bad:
                continue
            if plog.producer_state is None:
                continue  # not hosted: no first unstable offset to stop before open txns
            if not self._may_clean(plog.topic, plog.partition):
                continue
            found = self.cleanable(plog, now_ms)
            if found is not None:
                out.append(found)
        return out

    def candidates(self, now_ms: int) -> list[Cleanable]:
        """Partitions to clean now, most overdue/dirtiest first."""
        out = [
            c
            for c in self._candidates(now_ms)
            if c.overdue or c.dirty_ratio >= c.log.config.min_cleanable_dirty_ratio
        ]
        out.sort(key=lambda c: (not c.overdue, -c.dirty_ratio))
        return out

    def grab(
        self, now_ms: int, worker: _Worker | None = None, skip: Iterable[TopicPartition] = ()
    ) -> Cleanable | None:
        """Kafka's grabFilthiestCompactedLog: note the run, the dirtiest ratio and the worst
        compaction delay; pick the partition to clean and mark it held."""
        self.passes += 1
        self._time_of_last_run_ms = now_ms
        found = self._candidates(now_ms, skip)
        self.max_dirty_ratio = max((c.dirty_ratio for c in found), default=0.0)
        ready = [
            c for c in found if c.overdue or c.dirty_ratio >= c.log.config.min_cleanable_dirty_ratio
        ]
        if not ready:
            return None
        if worker is not None:
            worker.last_compaction_delay_ms = max(c.compaction_delay_ms for c in found)
        best = min(ready, key=lambda c: (not c.overdue, -c.dirty_ratio))
        self._in_progress.add((best.log.topic, best.log.partition))
        return best

    # -- cleaning ------------------------------------------------------------------------
    async def clean_all(self) -> int:
        """Clean every cleanable partition once, one after the other, as worker 0 (tests and
        tools); returns how many were cleaned."""
        cleaned = 0
        done: set[TopicPartition] = set()
        while not self._stop.is_set():
            found = self.grab(self._clock.now_ms(), self._workers[0], skip=done)
            if found is None:
                break
            tp = (found.log.topic, found.log.partition)
            done.add(tp)
            try:
                if await self.clean(found, self._workers[0]):
                    cleaned += 1
            finally:
                self._in_progress.discard(tp)
        return cleaned

    async def clean(self, found: Cleanable, worker: _Worker | None = None) -> bool:
        plog = found.log
        tp = (plog.topic, plog.partition)
        job, originals = self._make_job(found)
        log.info(
            "%s: beginning cleaning up to offset %d (dirty from %d, %d dirty bytes, ratio %.2f)",
            plog.name,
            found.end,
            found.first_dirty,
            found.dirty_bytes,
            found.dirty_ratio,
        )
        try:
            result = await asyncio.get_running_loop().run_in_executor(
                self._get_executor(), *self._call(job)
            )
        except CleanAborted as exc:
            log.info("%s: cleaning stopped: %s", plog.name, exc)
            return False
        except OSError:
            log.exception("%s: cleaning failed; will retry", plog.name)
            return False
        except BrokenProcessPool:
            if self._stop.is_set():
                return False
            self._executor = None  # a worker process died: start new ones next time
            self._mark_uncleanable(plog, "its cleaner worker process died")
            return False
        except Exception as exc:
            if self._stop.is_set():
                return False
            self._mark_uncleanable(plog, f"{type(exc).__name__}: {exc}")
            return False
        if self._stop.is_set():
            for base in result.staged:
                remove_staged(plog.dir, base, CLEANED_SUFFIX)
            return False
        # Back on the loop: swap every group in; stop at the first the log no longer matches.
        swapped_all = True
        by_base = {segs[0].base_offset: (segs, sizes) for segs, sizes in originals}
        pending = list(result.staged)
        try:
            while pending:
                segs, sizes = by_base[pending[0]]
                ok = plog.replace_segments(segs, sizes)
                del pending[0]
                if not ok:
                    swapped_all = False
                    break
        except Exception:
            self._drop_staged(plog, pending)
            raise
        self._drop_staged(plog, pending)
        if not swapped_all:
            log.info("%s: log changed while cleaning; will retry", plog.name)
            return False
        st = result.stats
        self.bytes_read += st.bytes_read
        self.bytes_written += st.bytes_written
        if worker is not None:
            worker.last = CleanStats(
                st.bytes_read, st.bytes_written, result.elapsed_s, result.buffer_utilization
            )
        log.info(
            "%s: cleaned offsets [%d, %d) (dirty from %d) in %.1f s: %d -> %d bytes, %d/%d "
            "records kept, offset map %.0f%% full",
            plog.name,
            plog.segments[0].base_offset,
            result.end,
            found.first_dirty,
            result.elapsed_s,
            st.bytes_read,
            st.bytes_written,
            st.records_kept,
            st.records_read,
            100 * result.buffer_utilization,
        )
        self._checkpoints[tp] = result.end
        await self._write_checkpoint(tp)
        return True

    @staticmethod
    def _drop_staged(plog: PartitionLog, bases: Iterable[int]) -> None:
        """Staged groups not swapped in (a committed ``.swap`` stays for the restart)."""
        for base in bases:
            remove_staged(plog.dir, base, CLEANED_SUFFIX)

    def _mark_uncleanable(
        self, plog: PartitionLog, why: str, exc: BaseException | None = None
    ) -> None:
        log_dir = self._logs.log_dir_of(plog.topic, plog.partition) or plog.dir.parent
        self._uncleanable.setdefault(str(log_dir), set()).add((plog.topic, plog.partition))
        log.error(
            "%s: cannot clean, marking the partition uncleanable: %s",
            plog.name,
            why,
            exc_info=exc,  # a traceback only for errors of this process (bugs)
        )

    def _forget_deleted(self) -> None:
        """Kafka's maintainUncleanablePartitions: deleted partitions leave the set."""
        if not self._uncleanable:
            return  # the usual case: no walk over every log after each cleaning pass
        live = {(p.topic, p.partition) for p in self._logs.all_logs()}
        for log_dir, tps in list(self._uncleanable.items()):
            tps &= live
            if not tps:
                del self._uncleanable[log_dir]

    def _get_executor(self) -> Executor:
        if self._executor is None:
            n = max(self.config.threads, 1)
            rate = self.config.io_max_bytes_per_second
            if self.config.processes:
                ctx = multiprocessing.get_context("spawn")
                self._worker_stop = ctx.Event()
                state = ctx.Array("d", [time.monotonic(), 0.0], lock=False)
                self._throttle = Throttle(rate, ctx.Lock(), state)
                self._executor = ProcessPoolExecutor(
                    n,
                    mp_context=ctx,
                    initializer=init_worker,
                    initargs=(self._worker_stop, self._throttle, os.getpid()),
                )
            else:
                from concurrent.futures import ThreadPoolExecutor

                self._worker_stop = self._stop
                self._throttle = local_throttle(rate)
                self._executor = ThreadPoolExecutor(n, thread_name_prefix="kmirror-log-cleaner")
        return self._executor

    def _call(self, job: Job) -> tuple[Callable[..., JobResult]]:
        if self.config.processes:
            return (partial(run_in_worker, job),)
        assert self._throttle is not None
        return (partial(run_job, job, self._stop, self._throttle),)

    def _make_job(self, found: Cleanable) -> tuple[Job, list[tuple[list[LogSegment], list[int]]]]:
        plog = found.log
        cfg = plog.config
        chosen = [s for s in plog.segments[:-1] if s.base_offset < found.end]
        ends = [s.base_offset for s in plog.segments[1 : len(chosen) + 1]]
        sources: list[Source] = []
        for seg, end in zip(chosen, ends, strict=True):
            st = os.fstat(seg.fd)
            sources.append(
                Source(
                    seg.base_offset,
                    end,
                    seg.size,
                    str(seg.log_path),
                    (st.st_dev, st.st_ino),
                    st.st_mtime_ns,
                )
            )
        index_sizes = [(s.index.size_in_bytes, s.time_index.size_in_bytes) for s in chosen]
        groups = _group(sources, index_sizes, cfg.segment_bytes, cfg.segment_index_bytes)
        producers = {} if plog.producer_state is None else plog.producer_state.active_producers
        last_data = {p: e.last_data_offset for p, e in producers.items() if e.last_data_offset >= 0}
        last_epochs = {p: e.producer_epoch for p, e in producers.items() if e.last_data_offset < 0}
        job = Job(
            dir=str(plog.dir),
            name=plog.name,
            first_dirty=found.first_dirty,
            end=found.end,
            groups=groups,
            ctx_aborted=plog.aborted_transactions(chosen[0].base_offset, found.end),
            last_data_offsets=last_data,
            last_marker_epochs=last_epochs,
            now_ms=self._clock.now_ms(),
            delete_retention_ms=cfg.delete_retention_ms,
            index_interval_bytes=cfg.index_interval_bytes,
            max_index_size=cfg.segment_index_bytes,
            map_slots=self.config.map_slots,
            map_load_factor=self.config.dedupe_load_factor,
        )
        by_base = {s.base_offset: s for s in chosen}
        originals: list[tuple[list[LogSegment], list[int]]] = [
            ([by_base[src.base] for src in group], [src.size for src in group]) for group in groups
        ]
        return job, originals

    async def _write_checkpoint(self, tp: TopicPartition) -> None:
        log_dir = self._logs.log_dir_of(*tp)
        if log_dir is None:
            return
        live = {
            (p.topic, p.partition)
            for p in self._logs.all_logs()
            if self._logs.log_dir_of(p.topic, p.partition) == log_dir
        }
        entries = {k: v for k, v in self._checkpoints.items() if k in live}
        # The fsyncs off the loop; one writer at a time so an older map never lands last.
        async with self._checkpoint_lock:
            await asyncio.to_thread(
                write_offset_checkpoint, log_dir / CLEANER_OFFSET_CHECKPOINT, entries
            )

    # -- metrics -------------------------------------------------------------------------
    def metrics_snapshot(self) -> CleanerSnapshot:
        """Kafka's LogCleaner and LogCleanerManager gauges (on the loop, once per scrape)."""
        now = self._clock.now_ms()
        workers = self._workers if self._started else self._workers[:1]
        read = sum(w.last.bytes_read for w in workers)
        written = sum(w.last.bytes_written for w in workers)
        counts = {str(d): 0 for d in self._logs.log_dirs}
        sizes = dict(counts)
        for log_dir, tps in self._uncleanable.items():
            counts[log_dir] = len(tps)
            for tp in tps:
                plog = self._logs.get(*tp)
                found = self.cleanable(plog, now) if plog is not None else None
                sizes[log_dir] = sizes.get(log_dir, 0) + (found.dirty_bytes if found else 0)
        return CleanerSnapshot(
            max_buffer_utilization_percent=int(
                100 * max(w.last.buffer_utilization for w in workers)
            ),
            cleaner_recopy_percent=int(100 * written / max(read, 1)),
            max_clean_time_secs=int(max(w.last.elapsed_s for w in workers)),
            max_compaction_delay_secs=int(max(w.last_compaction_delay_ms for w in workers) / 1000),
            dead_thread_count=sum(w.dead for w in self._workers),
            max_dirty_percent=int(100 * self.max_dirty_ratio),
            time_since_last_run_ms=max(now - self._time_of_last_run_ms, 0),
            uncleanable_partitions_count=counts,
            uncleanable_bytes=sizes,
        )

    @property
    def uncleanable(self) -> set[TopicPartition]:
        return set().union(*self._uncleanable.values())


def _group(
    sources: list[Source],
    index_sizes: list[tuple[int, int]],
    segment_bytes: int,
    max_index_size: int,
) -> list[list[Source]]:
    """Adjacent segments merged while the sizes (log and both indexes) fit one segment and
    every offset stays within a 32-bit delta of the group's base (Kafka's grouping)."""
    groups: list[list[Source]] = []
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
