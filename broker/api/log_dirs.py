"""DescribeLogDirs v1-v4 (API key 35) and AlterReplicaLogDirs v1-v2 (API key 34), as Kafka 4.1.

DescribeLogDirs answers for every dir of ``log.dirs`` (absolute paths, in config order): the
partition logs it holds (all, or the requested partitions), their size and offset lag, and
during a move the partition's future replica in the target dir (``is_future_key``, lag = the
current log's end offset minus the future's); total and usable bytes (v4). A dir that is not
a readable, writable directory is KAFKA_STORAGE_ERROR without partitions. Needs DESCRIBE on
the cluster (otherwise CLUSTER_AUTHORIZATION_FAILED and no dirs).

AlterReplicaLogDirs moves partitions to another dir while they serve (``broker.log.
replica_move``): NONE once the move started (it finishes in the background; DescribeLogDirs
shows its progress); a second request for another dir replaces it, one for the current dir
cancels it. Errors per partition, as Kafka: LOG_DIR_NOT_FOUND (a path that is not one of
``log.dirs``), KAFKA_STORAGE_ERROR (that dir is unusable), UNKNOWN_TOPIC_OR_PARTITION,
REPLICA_NOT_AVAILABLE (the partition exists but has no replica here: it is created in that dir
when it comes), INVALID_TOPIC_EXCEPTION (name too long for a future dir). Needs ALTER on the
cluster (otherwise CLUSTER_AUTHORIZATION_FAILED for every partition).
"""

import os
import shutil
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.registry import REGISTRY

from ..log.replica_move import future_dir_name
from ..metadata.image import METADATA_TOPIC
from ..security.acls import AclOperation
from .authz import allowed_on_cluster
from .context import RequestContext
from .dispatcher import Api
from .services import Services

ALTER_REPLICA_LOG_DIRS: Final = 34
DESCRIBE_LOG_DIRS: Final = 35
MAX_DIR_NAME: Final = 255
_UNIQUE_ID_LEN: Final = 32  # a future dir's id: uuid4().hex

TopicPartition = tuple[str, int]
# topic -> partition rows of one log dir
DirTopics = dict[str, list[dict[str, Any]]]


def dir_usage(log_dir: Path) -> tuple[int, int] | None:
    """(total, usable) bytes of a usable log dir; None when it cannot be used."""
    try:
        if not log_dir.is_dir() or not os.access(log_dir, os.R_OK | os.W_OK | os.X_OK):
            return None
        usage = shutil.disk_usage(log_dir)
    except OSError:
        return None
    return usage.total, usage.free


class LogDirsApi:
    def __init__(self, services: Services) -> None:
        self.s = services

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [
            Api(35, self.describe_log_dirs, min_version=1, max_version=4),
            Api(34, self.alter_replica_log_dirs, min_version=1, max_version=2),
        ]

    def _dirs(self) -> dict[str, Path]:
        """Absolute path as Kafka reports it -> configured dir, in config order."""
        return {os.path.abspath(d): Path(d) for d in self.s.log_manager.log_dirs}

    # -- DescribeLogDirs ---------------------------------------------------------------------
    async def describe_log_dirs(self, ctx: RequestContext, req: Any) -> Any:
        cls = REGISTRY.spec(DESCRIBE_LOG_DIRS).response_type(ctx.api_version)
        if not allowed_on_cluster(self.s.authorizer, ctx, AclOperation.DESCRIBE):
            return build(
                cls,
                {
                    "throttle_time": 0,
                    "error_code": ErrorCode.cluster_authorization_failed,
                    "results": [],
                },
            )
        wanted: set[TopicPartition] | None = None
        if req.topics is not None:
            wanted = {(t.topic, p) for t in req.topics for p in t.partitions}
        by_dir = self._partitions_by_dir(wanted)
        results = []
        for path, log_dir in self._dirs().items():
            usage = dir_usage(log_dir)
            if usage is None:
                results.append({"error_code": ErrorCode.kafka_storage_error, "log_dir": path})
                continue
            topics = by_dir.get(log_dir.resolve(), {})
            results.append(
                {
                    "error_code": ErrorCode.none,
                    "log_dir": path,
                    "topics": [{"name": n, "partitions": ps} for n, ps in topics.items()],
                    "total_bytes": usage[0],
                    "usable_bytes": usage[1],
                }
            )
        return build(cls, {"throttle_time": 0, "error_code": ErrorCode.none, "results": results})

    def _partitions_by_dir(self, wanted: set[TopicPartition] | None) -> dict[Path, DirTopics]:
        logs = self.s.log_manager
        by_dir: dict[Path, DirTopics] = {}

        def add(log_dir: Path, topic: str, row: dict[str, Any]) -> None:
            by_dir.setdefault(log_dir.resolve(), {}).setdefault(topic, []).append(row)

        for plog in sorted(logs.all_logs(), key=lambda p: (p.topic, p.partition)):
            tp = (plog.topic, plog.partition)
            log_dir = logs.log_dir_of(*tp)
            if plog.topic == METADATA_TOPIC or log_dir is None:
                continue  # the metadata log is the quorum's, not a replica (as in Kafka)
            if wanted is not None and tp not in wanted:
                continue
            add(
                log_dir,
                plog.topic,
                {
                    "partition_index": plog.partition,
                    "partition_size": plog.size_bytes,
                    "offset_lag": max(plog.high_watermark - plog.log_end_offset, 0),
                    "is_future_key": False,
                },
            )
            move = logs.moves.get(*tp)
            if move is not None:
                size, end = move.progress(plog)
                add(
                    move.target,
                    plog.topic,
                    {
                        "partition_index": plog.partition,
                        "partition_size": size,
                        "offset_lag": plog.log_end_offset - end,
                        "is_future_key": True,
                    },
                )
        return by_dir

    # -- AlterReplicaLogDirs -----------------------------------------------------------------
    async def alter_replica_log_dirs(self, ctx: RequestContext, req: Any) -> Any:
        cls = REGISTRY.spec(ALTER_REPLICA_LOG_DIRS).response_type(ctx.api_version)
        if not allowed_on_cluster(self.s.authorizer, ctx, AclOperation.ALTER):
            # Kafka's error answer: one row per topic entry of each dir, as sent.
            denied = [
                (t.name, [(p, ErrorCode.cluster_authorization_failed) for p in t.partitions])
                for d in req.dirs
                for t in d.topics
            ]
            return build(cls, {"throttle_time": 0, "results": _result_rows(denied)})
        assignments: dict[TopicPartition, str] = {}
        for d in req.dirs:
            for t in d.topics:
                for p in t.partitions:
                    assignments[(t.name, p)] = d.path  # the last dir named wins, as in Kafka
        by_topic: dict[str, list[tuple[int, ErrorCode]]] = {}
        for (topic, partition), path in assignments.items():
            error = self._alter_one(topic, partition, path)
            by_topic.setdefault(topic, []).append((partition, error))
        return build(cls, {"throttle_time": 0, "results": _result_rows(by_topic.items())})

    def _alter_one(self, topic: str, partition: int, path: str) -> ErrorCode:
        if len(future_dir_name(topic, partition, "0" * _UNIQUE_ID_LEN)) > MAX_DIR_NAME:
            return ErrorCode.invalid_topic_exception
        target = self._dirs().get(path)
        if target is None:
            return ErrorCode.log_dir_not_found
        if dir_usage(target) is None:
            return ErrorCode.kafka_storage_error
        logs = self.s.log_manager
        move = logs.moves.get(topic, partition)
        if move is not None and move.target != target:
            logs.moves.cancel(topic, partition)
        hosted = self.s.replicas.get(topic, partition) if topic != METADATA_TOPIC else None
        if hosted is None or logs.get(topic, partition) is None:
            image = self.s.image()
            known = topic != METADATA_TOPIC and topic in image.topics
            if known and partition in image.topics[topic].partitions:
                logs.prefer_dir(topic, partition, target)
                return ErrorCode.replica_not_available
            return ErrorCode.unknown_topic_or_partition
        if logs.log_dir_of(topic, partition) != target:
            logs.moves.start(topic, partition, target)
        return ErrorCode.none


def _result_rows(
    by_topic: Iterable[tuple[str, list[tuple[int, ErrorCode]]]],
) -> list[dict[str, Any]]:
    return [
        {
            "topic_name": topic,
            "partitions": [{"partition_index": p, "error_code": e} for p, e in parts],
        }
        for topic, parts in by_topic
    ]
