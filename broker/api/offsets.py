"""ListOffsets v1-v10 (OffsetForLeaderEpoch is ``leader_epochs``).

ListOffsets special timestamps: -1 latest (the high watermark, or the LSO for READ_COMMITTED),
-2 earliest, -3 max timestamp (v7+), -4 earliest local (v8+: the log start, no tiered storage
here), -5 earliest pending upload (v9+: none, so -1 with no error, as Kafka does without tiered
storage). With an authorizer, it needs DESCRIBE on the topic (TOPIC_AUTHORIZATION_FAILED).

A consumer's lookup (replica id -1) answers only offsets below what it may fetch (the HW, or the
LSO for READ_COMMITTED); a timestamp found at or past it gets -1. A leader elected with a log
longer than its high watermark (its epoch starts past the HW until the followers fetch again)
answers latest, and a timestamp it finds nowhere or past that bound, with OFFSET_NOT_AVAILABLE
(v5+; LEADER_NOT_AVAILABLE before), as Kafka's Partition.fetchOffsetForTimestamp does: the
client retries, instead of reading an end offset that would move backwards.
"""

from typing import Any

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.registry import REGISTRY

from ..replication.replica_manager import leader_epoch_error
from ..security.acls import AclOperation, ResourceType
from .authz import allowed
from .context import RequestContext
from .dispatcher import Api
from .services import Services

LIST_OFFSETS = 2
LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5
CONSUMER_REPLICA_ID = -1
OFFSET_NOT_AVAILABLE_VERSION = 5


class OffsetsApi:
    def __init__(self, services: Services) -> None:
        self.s = services

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [
            Api(2, self.list_offsets, min_version=1, max_version=10),
        ]

    def _denied(self, ctx: RequestContext, topic: str) -> bool:
        authz = self.s.authorizer
        return authz is not None and not allowed(
            authz, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, topic
        )

    def _leader(self, topic: str, partition: int, req_partition: Any) -> tuple[Any, ErrorCode]:
        """The hosted partition, or None and the error the partition answers with."""
        hosted = self.s.replicas.get(topic, partition)
        if hosted is None:
            return None, self.s.not_hosted_error(topic, partition)
        error = leader_epoch_error(hosted, getattr(req_partition, "current_leader_epoch", -1))
        return (None, error) if error is not None else (hosted, ErrorCode.none)

    async def list_offsets(self, ctx: RequestContext, req: Any) -> Any:
        committed = getattr(req, "isolation_level", 0) == 1
        topics = []
        for t in req.topics:
            parts = []
            denied = self._denied(ctx, t.name)
            for p in t.partitions:
                row: dict[str, Any] = {
                    "partition_index": p.partition_index,
                    "error_code": ErrorCode.none,
                    "timestamp": -1,
                    "offset": -1,
                    "leader_epoch": -1,
                }
                parts.append(row)
                if denied:
                    row["error_code"] = ErrorCode.topic_authorization_failed
                    continue
                hosted, error = self._leader(t.name, p.partition_index, p)
                if hosted is None:
                    row["error_code"] = error
                    continue
                plog = hosted.log
                ts = p.timestamp
                client = getattr(req, "replica_id", -1) == CONSUMER_REPLICA_ID
                lso = getattr(plog, "last_stable_offset", None)
                fetchable = lso if committed and lso is not None else plog.high_watermark
                lagging = client and _hw_lags_epoch_start(hosted)
                not_available = (
                    ErrorCode.offset_not_available
                    if ctx.api_version >= OFFSET_NOT_AVAILABLE_VERSION
                    else ErrorCode.leader_not_available
                )
                if ts == LATEST and lagging:
                    row["error_code"] = not_available
                elif ts == LATEST and getattr(req, "replica_id", -1) >= 0:
                    # a follower resetting after OFFSET_OUT_OF_RANGE wants the log end
                    row["offset"] = plog.log_end_offset
                    row["leader_epoch"] = hosted.leader_epoch
                elif ts == LATEST:
                    row["offset"] = fetchable
                    row["leader_epoch"] = hosted.leader_epoch
                elif ts in (EARLIEST, EARLIEST_LOCAL):
                    row["offset"] = plog.log_start_offset
                    row["leader_epoch"] = self._epoch_at(plog, plog.log_start_offset)
                elif ts == EARLIEST_PENDING_UPLOAD:
                    pass
                elif ts < 0 and ts != MAX_TIMESTAMP:
                    row["error_code"] = ErrorCode.invalid_request
                else:
                    found = (
                        plog.max_timestamp_offset()
                        if ts == MAX_TIMESTAMP
                        else plog.offset_for_timestamp(ts)
                    )
                    if client and (found is None or found[0] >= fetchable):
                        # not (yet) readable by a consumer: nothing, or retry if lagging
                        if lagging:
                            row["error_code"] = not_available
                    elif found is not None:
                        row["offset"], row["timestamp"], row["leader_epoch"] = found
            topics.append({"name": t.name, "partitions": parts})
        cls = REGISTRY.spec(LIST_OFFSETS).response_type(ctx.api_version)
        return build(cls, {"throttle_time": 0, "topics": topics})

    @staticmethod
    def _epoch_at(plog: Any, offset: int) -> int:
        cache = getattr(plog, "leader_epoch_cache", None)
        fn = getattr(cache, "epoch_for_offset", None)
        if fn is None:
            return -1
        e = fn(offset)
        return -1 if e is None else int(e)


def _hw_lags_epoch_start(hosted: Any) -> bool:
    """A leader whose high watermark has not reached the start of its leader epoch yet."""
    return bool(hosted.is_leader) and hosted.leader.epoch_start_offset > hosted.log.high_watermark
