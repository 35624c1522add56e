"""The log manager: every partition log in every log dir, and the per-dir checkpoint files.

On start it opens each ``<topic>-<partition>`` directory it finds (the topic id comes from
``partition.metadata``), recovering from the recovery point in
``recovery-point-offset-checkpoint`` unless the dir holds Kafka's ``.kafka_cleanshutdown``
marker. The app calls ``periodic`` for retention, time-based flushes and checkpoints.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Final

from .checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    CheckpointError,
    fsync_dir,
    read_offset_checkpoint,
    write_atomically,
    write_offset_checkpoint,
)
from .clock import Clock
from .config import LogConfig
from .dir_lock import DirLock
from .partition_log import PartitionLog, partition_dir_name

CLEAN_SHUTDOWN_FILE: Final = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX: Final = "-delete"
_PARTITION_DIR: Final = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


class LogManager:
    def __init__(self, log_dirs: list[Path], default_config: LogConfig, clock: Clock) -> None:
        if not log_dirs:
            raise ValueError("at least one log dir is needed")
        self.log_dirs = [Path(d) for d in log_dirs]
        self.default_config = default_config
        self._clock = clock
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._closed = False
        self._locks: list[DirLock] = []
        try:
            for log_dir in self.log_dirs:  # all locked before any is touched
                log_dir.mkdir(parents=True, exist_ok=True)
                self._locks.append(DirLock.acquire(log_dir))
            for log_dir in self.log_dirs:
                self._load_dir(log_dir)
        except BaseException:
            self._release_locks()
            raise

    # -- loading -------------------------------------------------------------------------
    def _load_dir(self, log_dir: Path) -> None:
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        recovery_points = self._read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT)
        log_starts = self._read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT)
        for child in sorted(log_dir.iterdir()):
            if not child.is_dir():
                continue
            if child.name.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(child, ignore_errors=True)  # a deletion interrupted by a crash
                continue
            match = _PARTITION_DIR.match(child.name)
            if match is None:
                continue  # -future, -stray, __cluster_metadata snapshots dirs, ...
            tp = (match["topic"], int(match["partition"]))
            if tp in self._logs:
                raise ValueError(
                    f"duplicate log directories for {child.name}: {self._dir_of[tp]} and {log_dir}"
                )
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
            )
            self._logs[tp] = plog
            self._dir_of[tp] = log_dir
        # Kafka removes the marker once loaded: a crash from here on is unclean.
        marker.unlink(missing_ok=True)

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
            if config is not None:
                existing.update_config(config)
            return existing
        log_dir = self._pick_dir()
        plog = PartitionLog.open(
            log_dir,
            topic,
            partition,
            topic_id,
            config or self.default_config,
            self._clock,
            clean_shutdown=True,  # brand new: nothing to recover
        )
        self._logs[tp] = plog
        self._dir_of[tp] = log_dir
        return plog

    def _pick_dir(self) -> Path:
        counts = {d: 0 for d in self.log_dirs}
        for d in self._dir_of.values():
            counts[d] += 1
        return min(self.log_dirs, key=lambda d: counts[d])

    def log_dir_of(self, topic: str, partition: int) -> Path | None:
        return self._dir_of.get((topic, partition))

    def delete(self, topic: str, partition: int) -> bool:
        """Rename the partition dir to ``<tp>.<uuid>-delete`` then remove it (as Kafka does)."""
        tp = (topic, partition)
        plog = self._logs.pop(tp, None)
        log_dir = self._dir_of.pop(tp, None)
        if plog is None or log_dir is None:
            return False
        plog.close_handles()
        doomed = log_dir / f"{plog.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}"
        os.replace(plog.dir, doomed)
        fsync_dir(log_dir)
        shutil.rmtree(doomed, ignore_errors=True)
        self._checkpoint_dir(log_dir)
        return True

    # -- checkpoints and background work -------------------------------------------------
    def checkpoint(self) -> None:
        for log_dir in self.log_dirs:
            self._checkpoint_dir(log_dir)

    def _checkpoint_dir(self, log_dir: Path) -> None:
        logs = [(tp, plog) for tp, plog in self._logs.items() if self._dir_of[tp] == log_dir]
        write_offset_checkpoint(
            log_dir / RECOVERY_POINT_CHECKPOINT,
            {tp: plog.recovery_point for tp, plog in logs},
        )
        # Like Kafka, only logs whose start moved past their first segment need an entry.
        write_offset_checkpoint(
            log_dir / LOG_START_OFFSET_CHECKPOINT,
            {
                tp: plog.log_start_offset
                for tp, plog in logs
                if plog.log_start_offset > plog.segments[0].base_offset
            },
        )

    def periodic(self, now_ms: int) -> None:
        """Retention, due flushes (rolled segments, flush.ms), file purges, checkpoints."""
        for plog in list(self._logs.values()):
            try:
                plog.delete_old_segments(now_ms)
                plog.flush_if_due(now_ms)
                plog.purge_deleted_files(now_ms)
            except OSError:
                log.exception("%s: background log work failed", plog.name)
        self.checkpoint()

    def flush_all(self) -> None:
        for plog in self._logs.values():
            plog.flush()

    def close(self) -> None:
        """Clean shutdown: flush and close every log, checkpoint, leave the clean marker."""
        if self._closed:
            return
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
