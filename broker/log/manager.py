"""The log manager: every partition log in every log dir, and the per-dir checkpoint files.

On start it opens each ``<topic>-<partition>`` directory it finds (the topic id comes from
``partition.metadata``), recovering from the recovery point in
``recovery-point-offset-checkpoint`` unless the dir holds Kafka's ``.kafka_cleanshutdown``
marker. The app calls ``periodic`` every second; no duty walks every log at that pace:

- logs with work (a rolled segment to flush, files to purge, a flush.ms deadline, a new log
  start) ask for it through ``PartitionLog.on_background_work``, and only they are visited;
- retention runs every ``log.retention.check.interval.ms`` (Kafka: 5 min);
- the high watermark file every ``replica.high.watermark.checkpoint.interval.ms`` (5 s), the log
  start file every ``log.flush.start.offset.checkpoint.interval.ms`` (60 s) and at once when a
  log start moved; each file is written only when its contents changed;
- every ``log.flush.offset.checkpoint.interval.ms`` (60 s) a recovery checkpoint: each log is
  fsynced to its end and its producer state snapshotted there, so a restart after a kill -9
  validates and replays only what was written since (Kafka writes the checkpoint file on that
  interval but moves the recovery point only on flushes: a crash there re-validates the whole
  active segment).

With several log dirs (JBOD) a new partition goes to the dir holding the fewest, unless
AlterReplicaLogDirs named one for it; ``moves`` moves a partition to another dir while it serves
(see ``replica_move``). At start-up a ``-future`` dir is a move the stop interrupted (started
again by ``periodic``), and of two dirs of one partition the copy marked complete wins.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Final

from .background_flush import FlushPlan, sync_new_dirs
from .checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointError,
    fsync_dir,
    read_offset_checkpoint,
    write_atomically,
    write_offset_checkpoint,
)
from .clock import Clock
from .config import LogConfig
from .dir_lock import DirLock
from .log_writer import INLINE, LogWriter
from .partition_log import PartitionLog, partition_dir_name
from .replica_move import FUTURE_DIR_SUFFIX, MOVE_MARKER, ReplicaMover

CLEAN_SHUTDOWN_FILE: Final = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX: Final = "-delete"
_PARTITION_DIR: Final = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
_FUTURE_DIR: Final = re.compile(
    r"^(?P<topic>.+)-(?P<partition>\d+)\.[0-9a-f]+" + re.escape(FUTURE_DIR_SUFFIX) + "$"
)

_METADATA_TOPIC: Final = "__cluster_metadata"  # the Raft log (see _writer_for)
log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
_CHECKPOINT_FILES: Final = (
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    LOG_START_OFFSET_CHECKPOINT,
)


@dataclass(frozen=True)
class LogSchedule:
    """How often the periodic duties run; Kafka's keys and defaults."""

    retention_check_ms: int = 300_000  # log.retention.check.interval.ms
    recovery_checkpoint_ms: int = 60_000  # log.flush.offset.checkpoint.interval.ms
    start_checkpoint_ms: int = 60_000  # log.flush.start.offset.checkpoint.interval.ms
    hw_checkpoint_ms: int = 5_000  # replica.high.watermark.checkpoint.interval.ms
    producer_expiry_check_ms: int = 600_000  # producer.id.expiration.check.interval.ms


class LogManager:
    def __init__(
        self,
        log_dirs: list[Path],
        default_config: LogConfig,
        clock: Clock,
        *,
        schedule: LogSchedule | None = None,
        writer: LogWriter = INLINE,
    ) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is needed")
        self.schedule = schedule or LogSchedule()
        self.writer = writer  # every log's appends (log_writer): the node's thread, or inline
        now = clock.now_ms()
        self._last_run = dict.fromkeys(("retention", "recovery", "start", "hw", "expiry"), now)
        # logs that asked for background work (see PartitionLog.on_background_work)
        self._busy: dict[TopicPartition, PartitionLog] = {}
        # what each checkpoint file of each dir holds, so an unchanged one is not rewritten
        self._written: dict[tuple[Path, str], dict[TopicPartition, int]] = {}
        self._flusher: ThreadPoolExecutor | None = None  # background flushes, one at a time
        self._closing = False  # close() has begun: checkpoint files are written inline
        self._lowered_dirs: set[Path] = set()  # recovery-point files a truncation made stale
        self._unsynced_dirs: list[Path] = []  # new partition dirs, fsynced by the flush thread
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self._clock = clock
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._closed = False
        self._locks: list[DirLock] = []
        # AlterReplicaLogDirs for a partition not here yet: where it goes once created
        self._preferred_dir: dict[TopicPartition, Path] = {}
        # moves a stop interrupted (a -future dir was found): target dir, resumed by `periodic`
        self._interrupted_moves: dict[TopicPartition, Path] = {}
        self.moves = ReplicaMover(self)
        try:
            for log_dir in self.log_dirs:  # all locked before any is touched
                log_dir.mkdir(parents=True, exist_ok=True)
                self._locks.append(DirLock.acquire(log_dir))
            for log_dir in self.log_dirs:
                self._load_dir(log_dir)
            for tp, plog in self._logs.items():
                (plog.dir / MOVE_MARKER).unlink(missing_ok=True)
                if self._interrupted_moves.get(tp) == self._dir_of[tp]:
                    del self._interrupted_moves[tp]
            for tp in [tp for tp in self._interrupted_moves if tp not in self._logs]:
                del self._interrupted_moves[tp]
        except BaseException:
            self._release_locks()
            raise

    # -- loading -------------------------------------------------------------------------
    def _load_dir(self, log_dir: Path) -> None:
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery_points = self._read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
        log_starts = self._read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT)
        high_watermarks = self._read_checkpoint(log_dir / REPLICATION_OFFSET_CHECKPOINT)
        for child in sorted(log_dir.iterdir()):
            if not child.is_dir():
                continue
            if child.name.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(child, ignore_errors=True)  # a deletion interrupted by a crash
                continue
            future = _FUTURE_DIR.match(child.name)
            if future is not None:
                # A move the stop interrupted: its copy is redone from scratch.
                self._interrupted_moves[(future["topic"], int(future["partition"]))] = log_dir
                shutil.rmtree(child, ignore_errors=True)
                continue
            match = _PARTITION_DIR.match(child.name)
            if match is None:
                continue  # -stray, __cluster_metadata snapshots dirs, ...
            tp = (match["topic"], int(match["partition"]))
            if tp in self._logs and not self._keep_moved_copy(tp, child):
                continue
            plog = PartitionLog.open(
                log_dir,
                tp[0],
                tp[1],
                None,
                self.default_config,
                self._clock,
                recovery_point=recovery_points.get(tp, 0),
                log_start_offset=log_starts.get(tp),
                clean_shutdown=clean,
                writer=self._writer_for(tp[0]),
            )
            # The HW from the last checkpoint (clamped to the log); without one, the log start:
            # nothing is known committed until the ISR says so again.
            plog.high_watermark = high_watermarks.get(tp, plog.log_start_offset)
            self._add(tp, plog, log_dir)
        # Kafka removes the marker once loaded: a crash from here on is unclean.
        marker.unlink(missing_ok=True)

    def _keep_moved_copy(self, tp: TopicPartition, child: Path) -> bool:
        """Two dirs of one partition: a move stopped between its two renames. The copy marked
        complete wins (both hold the same records); True: load ``child`` instead of the other.
        Unmarked duplicates are an error, as in Kafka."""
        other = self._logs[tp]
        child_marked = (child / MOVE_MARKER).exists()
        if child_marked == (other.dir / MOVE_MARKER).exists():
            raise ValueError(
                f"duplicate log directories for {child.name}: {self._dir_of[tp]} and {child.parent}"
            )
        loser = other.dir if child_marked else child
        if child_marked:
            other.close_handles()
            del self._logs[tp]
            del self._dir_of[tp]
        log.warning("%s: removing %s, a copy was moved to another log dir", child.name, loser)
        doomed = loser.with_name(f"{loser.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        os.replace(loser, doomed)
        shutil.rmtree(doomed, ignore_errors=True)
        return child_marked

    def _writer_for(self, topic: str) -> LogWriter:
        """The metadata log writes inline: Raft fsyncs right after each append, and must not
        wait behind the partitions' queued writes (its fetches carry the brokers' heartbeats)."""
        return INLINE if topic == _METADATA_TOPIC else self.writer

    @staticmethod
    def _read_checkpoint(path: Path) -> dict[TopicPartition, int]:
        try:
            return read_offset_checkpoint(path)
        except CheckpointError as exc:
            log.warning("ignoring unreadable checkpoint: %s", exc)
            return {}

    # -- partitions ----------------------------------------------------------------------
    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def all_logs(self) -> list[PartitionLog]:
        return list(self._logs.values())

    def get_or_create(
        self,
        topic: str,
        partition: int,
        topic_id: uuid.UUID | None,
        config: LogConfig | None = None,
    ) -> PartitionLog:
        tp = (topic, partition)
        existing = self._logs.get(tp)
        if existing is not None:
            if topic_id is not None and existing.topic_id not in (None, topic_id):
                raise ValueError(
                    f"{partition_dir_name(topic, partition)} exists with topic id "
                    f"{existing.topic_id}, not {topic_id}"
                )
            if topic_id is not None and existing.topic_id is None:
                existing.adopt_topic_id(topic_id)
                self._unsynced_dirs.append(existing.dir)
            if config is not None:
                existing.update_config(config)
            return existing
        log_dir = self._preferred_dir.pop(tp, None) or self._pick_dir()
        plog = PartitionLog.open(
            log_dir,
            topic,
            partition,
            topic_id,
            config or self.default_config,
            self._clock,
            clean_shutdown=True,  # brand new: nothing to recover
            sync_files=False,  # fsynced by the flush thread: creating thousands stays fast
            writer=self._writer_for(topic),
        )
        self._add(tp, plog, log_dir)
        self._unsynced_dirs.append(plog.dir)
        return plog

    def _add(self, tp: TopicPartition, plog: PartitionLog, log_dir: Path) -> None:
        self._logs[tp] = plog
        self._dir_of[tp] = log_dir
        plog.on_background_work = self._wants_work
        plog.on_recovery_point_lowered = self._recovery_point_lowered
        if plog.has_background_work():
            self._busy[tp] = plog

    def _wants_work(self, plog: PartitionLog) -> None:
        self._busy[(plog.topic, plog.partition)] = plog

    def _recovery_point_lowered(self, plog: PartitionLog) -> None:
        """A truncation moved ``plog``'s recovery point back: its dir's recovery-point file is
        rewritten at once (in the flush thread; one write for all the truncations of one
        loop iteration), as Kafka's LogManager.truncateTo does. Until then a kill -9 finds the
        old point there (see LeaderEpochCache for why that stays safe)."""
        log_dir = self._dir_of.get((plog.topic, plog.partition))
        if log_dir is None or self._closing:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._checkpoint_dir(log_dir, (RECOVERY_POINT_CHECKPOINT,))
            return
        if not self._lowered_dirs:
            loop.call_soon(self._write_lowered)
        self._lowered_dirs.add(log_dir)

    def _write_lowered(self) -> None:
        dirs, self._lowered_dirs = self._lowered_dirs, set()
        if self._closing:
            return
        for log_dir in dirs:
            self._checkpoint_dir(log_dir, (RECOVERY_POINT_CHECKPOINT,))

    def _pick_dir(self) -> Path:
        if len(self.log_dirs) == 1:
            return self.log_dirs[0]
        counts = {d: 0 for d in self.log_dirs}
        for d in self._dir_of.values():
            counts[d] += 1
        return min(self.log_dirs, key=lambda d: counts[d])

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        return self._dir_of.get((topic, partition))

    def prefer_dir(self, topic: str, partition: int, log_dir: Path) -> None:
        """Create the partition in ``log_dir`` when it comes (AlterReplicaLogDirs before it)."""
        self._preferred_dir[(topic, partition)] = log_dir

    def relocated(self, topic: str, partition: int, log_dir: Path) -> None:
        """A move switched the partition's log to ``log_dir``: record it in both checkpoints."""
        tp = (topic, partition)
        old = self._dir_of[tp]
        self._dir_of[tp] = log_dir
        self._checkpoint_dir(old)
        self._checkpoint_dir(log_dir)

    def delete(self, topic: str, partition: int) -> bool:
        """Rename the partition dir to ``<tp>.<uuid>-delete`` then remove it (as Kafka does)."""
        tp = (topic, partition)
        self.moves.cancel(topic, partition)
        plog = self._logs.pop(tp, None)
        log_dir = self._dir_of.pop(tp, None)
        self._busy.pop(tp, None)
        if plog is None or log_dir is None:
            return False
        plog.on_background_work = None
        plog.on_recovery_point_lowered = None
        plog.close_handles()
        doomed = log_dir / f"{plog.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        os.replace(plog.dir, doomed)
        fsync_dir(log_dir)
        shutil.rmtree(doomed, ignore_errors=True)
        self._checkpoint_dir(log_dir)
        return True

    # -- checkpoints and background work -------------------------------------------------
    def checkpoint(self) -> None:
        """Write every checkpoint file of every dir (those whose contents changed)."""
        for log_dir in self.log_dirs:
            self._checkpoint_dir(log_dir)

    def _checkpoint_dir(self, log_dir: Path, files: tuple[str, ...] = _CHECKPOINT_FILES) -> None:
        logs = [(tp, plog) for tp, plog in self._logs.items() if self._dir_of[tp] == log_dir]
        for name in files:
            if name == RECOVERY_POINT_CHECKPOINT:
                offsets = {tp: plog.recovery_point for tp, plog in logs}
            elif name == REPLICATION_OFFSET_CHECKPOINT:
                offsets = {tp: plog.high_watermark for tp, plog in logs}
            else:  # like Kafka, only logs whose start moved past their first segment
                offsets = {
                    tp: plog.log_start_offset
                    for tp, plog in logs
                    if plog.log_start_offset > plog.segments[0].base_offset
                }
            key = (log_dir, name)
            if self._written.get(key) != offsets:
                self._written[key] = offsets
                self._write_checkpoint(key, offsets)

    def _write_checkpoint(self, key: tuple[Path, str], offsets: dict[TopicPartition, int]) -> None:
        """Write (and fsync) a checkpoint file in the flush thread when the node's loop runs:
        after every flush queued before it (a recovery point is written only once its data
        is durable), and never making the loop wait for the disk. Inline otherwise (tools,
        tests, the clean shutdown). A failed write is logged and retried at the next
        checkpoint."""
        path = key[0] / key[1]
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None or self._closing:
            write_offset_checkpoint(path, offsets)
            return
        if self._flusher is None:
            self._flusher = ThreadPoolExecutor(1, thread_name_prefix="log-flush")
        future = loop.run_in_executor(self._flusher, write_offset_checkpoint, path, offsets)

        def written(f: asyncio.Future[None]) -> None:
            exc = f.exception()
            if exc is not None:
                log.error("could not write %s: %s", path, exc)
                if self._written.get(key) is offsets:
                    del self._written[key]  # the next checkpoint writes it again

        future.add_done_callback(written)

    def _due(self, duty: str, every_ms: int, now_ms: int) -> bool:
        if now_ms - self._last_run[duty] < every_ms:
            return False
        self._last_run[duty] = now_ms
        return True

    def periodic(self, now_ms: int) -> None:
        """The maintenance tick (see the module docstring): the logs that asked for work, and
        each duty whose interval has passed."""
        sched = self.schedule
        if self._due("retention", sched.retention_check_ms, now_ms):
            for plog in list(self._logs.values()):
                self._background(plog, plog.delete_old_segments, now_ms)
        if self._due("expiry", sched.producer_expiry_check_ms, now_ms):
            for plog in self._logs.values():
                if plog.producer_state is not None:
                    plog.producer_state.remove_expired(now_ms)
        start_moved = False
        plans: list[tuple[PartitionLog, FlushPlan]] = []
        recovery = self._due("recovery", sched.recovery_checkpoint_ms, now_ms)
        if recovery:  # first: to the log end, it covers a due flush of the same log
            for plog in list(self._logs.values()):
                self._plan(plans, plog, partial(plog.plan_flush, snapshot=True))
        for tp, plog in list(self._busy.items()):
            if self._logs.get(tp) is not plog:
                del self._busy[tp]  # deleted or replaced since it asked
                continue
            self._plan(plans, plog, partial(plog.plan_due_flush, now_ms))
            self._background(plog, plog.purge_deleted_files, now_ms)
            start_moved |= self._start_unwritten(tp, plog)
            if not plog.has_background_work():
                del self._busy[tp]
        files: list[str] = []
        if plans or recovery or self._unsynced_dirs:
            self._flush_in_background(plans, write_recovery_points=recovery)
        if self._due("hw", sched.hw_checkpoint_ms, now_ms):
            files.append(REPLICATION_OFFSET_CHECKPOINT)
        if self._due("start", sched.start_checkpoint_ms, now_ms) or start_moved:
            files.append(LOG_START_OFFSET_CHECKPOINT)
        if files:
            for log_dir in self.log_dirs:
                self._checkpoint_dir(log_dir, tuple(files))
        self._resume_moves()

    @staticmethod
    def _plan(
        plans: list[tuple[PartitionLog, FlushPlan]],
        plog: PartitionLog,
        make: Callable[[], FlushPlan | None],
    ) -> None:
        try:
            plan = make()
        except OSError:
            log.exception("%s: could not plan its flush", plog.name)
            return
        if plan is not None:
            plans.append((plog, plan))

    def _flush_in_background(
        self, plans: list[tuple[PartitionLog, FlushPlan]], *, write_recovery_points: bool
    ) -> None:
        """fsyncs and snapshot writes in the flush thread, so the loop never waits for the
        disk; the recovery points move, and their file is written, once it is done. Without
        a running loop (tools, tests) they run here."""

        def done() -> None:
            for plog, plan in plans:
                plog.complete_flush(plan)
            if write_recovery_points and not self._closed:
                for log_dir in self.log_dirs:
                    self._checkpoint_dir(log_dir, (RECOVERY_POINT_CHECKPOINT,))

        new_dirs, self._unsynced_dirs = self._unsynced_dirs, []

        def work() -> None:
            sync_new_dirs(new_dirs)
            for _, plan in plans:
                plan.run()

        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            work()
            done()
            return
        if self._flusher is None:
            self._flusher = ThreadPoolExecutor(1, thread_name_prefix="log-flush")
        future = loop.run_in_executor(self._flusher, work)
        future.add_done_callback(lambda _f: done())

    @staticmethod
    def _background(plog: PartitionLog, work: Callable[[int], object], now_ms: int) -> None:
        try:
            work(now_ms)
        except OSError:
            log.exception("%s: background log work failed", plog.name)

    def _start_unwritten(self, tp: TopicPartition, plog: PartitionLog) -> bool:
        """The log start differs from what its dir's checkpoint file says."""
        log_dir = self._dir_of.get(tp)
        if log_dir is None:
            return False
        written = self._written.get((log_dir, LOG_START_OFFSET_CHECKPOINT), {}).get(tp)
        start = plog.log_start_offset
        return written != (start if start > plog.segments[0].base_offset else None)

    def _resume_moves(self) -> None:
        if not self._interrupted_moves:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # moves run on the node's loop
        for (topic, partition), target in self._interrupted_moves.items():
            log.info("%s: resuming its move to %s", partition_dir_name(topic, partition), target)
            self.moves.start(topic, partition, target)
        self._interrupted_moves.clear()

    def close(self) -> None:
        """Clean shutdown: flush and close every log, checkpoint, leave the clean marker."""
        if self._closed:
            return
        self._closing = True
        if self._flusher is not None:
            self._flusher.shutdown(wait=True)  # their completions find the logs closed
        sync_new_dirs(self._unsynced_dirs)
        self._unsynced_dirs = []
        self.moves.close()
        for plog in self._logs.values():
            plog.close()
        self.checkpoint()
        for log_dir in self.log_dirs:
            write_atomically(log_dir / CLEAN_SHUTDOWN_FILE, '{"version":0,"brokerEpoch":-1}')
        self._closed = True
        self._release_locks()

    def _release_locks(self) -> None:
        for lock in self._locks:
            lock.release()
        self._locks.clear()
