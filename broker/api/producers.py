"""DescribeProducers v0 (API key 61): the active producers of partitions, from producer state.

What ``kafka-transactions.sh describe-producers`` and the admin clients' ``describe_producers``
show: per producer id its epoch, last sequence, last batch timestamp, the coordinator epoch of
its last transaction marker and the first offset of its open transaction (-1: none). As in
Kafka: an illegal topic name is INVALID_TOPIC_EXCEPTION; with an authorizer, a topic the
principal may not READ is TOPIC_AUTHORIZATION_FAILED; a topic the metadata does not know is
UNKNOWN_TOPIC_OR_PARTITION; a partition of a known topic not hosted here (or without producer
state yet) is NOT_LEADER_OR_FOLLOWER.
"""

from typing import Any

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.registry import REGISTRY

from ..controller.topics import topic_name_error
from ..security.acls import AclOperation, ResourceType
from .authz import allowed
from .context import RequestContext
from .dispatcher import Api
from .services import Services

API_KEY = 61
VERSIONS = (0, 0)


class ProducersApi:
    def __init__(self, services: Services) -> None:
        self.s = services

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [
            Api(61, self.describe_producers, max_version=0),
        ]

    async def describe_producers(self, ctx: RequestContext, req: Any) -> Any:
        image = self.s.image()
        topics = []
        for t in req.topics:
            name = t.name
            error: ErrorCode | None = None
            message: str | None = None
            bad_name = topic_name_error(name)
            if bad_name is not None:
                error, message = ErrorCode.invalid_topic_exception, bad_name
            elif not allowed(self.s.authorizer, ctx, AclOperation.READ, ResourceType.TOPIC, name):
                error = ErrorCode.topic_authorization_failed
            elif name not in image.topics:
                error = ErrorCode.unknown_topic_or_partition
            parts = []
            for index in t.partition_indexes:
                if error is not None:
                    parts.append(
                        {
                            "partition_index": index,
                            "error_code": error,
                            "error_message": message,
                            "active_producers": (),
                        }
                    )
                else:
                    parts.append(self._partition(name, int(index)))
            topics.append({"name": name, "partitions": parts})
        cls = REGISTRY.spec(API_KEY).response_type(ctx.api_version)
        return build(cls, {"throttle_time": 0, "topics": topics})

    def _partition(self, topic: str, index: int) -> dict[str, Any]:
        row: dict[str, Any] = {
            "partition_index": index,
            "error_code": ErrorCode.none,
            "active_producers": (),
        }
        if index not in self.s.image().topics[topic].partitions:
            row["error_code"] = ErrorCode.unknown_topic_or_partition
            return row
        hosted = self.s.replicas.get(topic, index)
        psm = getattr(hosted.log, "producer_state", None) if hosted is not None else None
        if psm is None:
            row["error_code"] = ErrorCode.not_leader_or_follower
            return row
        row["active_producers"] = [
            {
                "producer_id": entry.producer_id,
                "producer_epoch": entry.producer_epoch,
                "last_sequence": entry.last_seq,
                "last_timestamp": entry.last_timestamp,
                "coordinator_epoch": entry.coordinator_epoch,
                "current_txn_start_offset": (
                    -1 if entry.current_txn_first_offset is None else entry.current_txn_first_offset
                ),
            }
            for entry in psm.active_producers.values()
        ]
        return row
