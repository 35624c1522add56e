"""DescribeTopicPartitions v0 (API key 75): the paginated topic describe of Kafka 4 tools.

As Kafka 4.1: an empty topic list means every topic. Topics are answered in name order, from the
cursor's topic (its partitions from the cursor's index) on, until ``ResponsePartitionLimit``
partitions (at most max.request.partition.size.limit, at least 1) are out; then ``NextCursor``
names the first topic and partition left out. A cursor whose topic is not among the listed topics,
or with a negative partition, makes every listed topic INVALID_REQUEST. A listed topic the
metadata does not know is UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an illegal
name); when listing every topic there are no such rows.

Authorization: DESCRIBE on each topic. Listing every topic leaves out the ones denied; a listed
topic that is denied comes last, TOPIC_AUTHORIZATION_FAILED with no topic id, whether or not it
exists. Described topics carry the principal's authorized operations on them.

Partitions come from the metadata image: leader (-1 when the leader has no endpoint on the
request's listener), leader epoch, replicas, ISR, and the replicas that are offline (their broker
unregistered, fenced or without that listener). The image keeps no eligible leader replicas
(ELR is off, as without eligible.leader.replicas.version), so those lists are empty.
"""

import uuid
from typing import Any, Final

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.registry import REGISTRY

from ..controller.topics import topic_name_error
from ..metadata.image import METADATA_TOPIC, MetadataImage, PartitionImage, TopicImage
from ..security.acls import AclOperation, ResourceType
from .authz import allowed, operations_bits
from .context import RequestContext
from .dispatcher import Api
from .services import Services

API_KEY: Final = 75
VERSIONS: Final = (0, 0)
# Kafka's max.request.partition.size.limit default, used while the config has no such key.
DEFAULT_PARTITION_LIMIT: Final = 2000
NO_LEADER: Final = -1


class TopicPartitionsApi:
    def __init__(self, services: Services) -> None:
        self.s = services

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [
            Api(75, self.describe_topic_partitions, max_version=0),
        ]

    def _limit_config(self) -> int:
        return int(
            getattr(self.s.config, "max_request_partition_size_limit", DEFAULT_PARTITION_LIMIT)
        )

    async def describe_topic_partitions(self, ctx: RequestContext, req: Any) -> Any:
        cls = REGISTRY.spec(API_KEY).response_type(ctx.api_version)
        image = self.s.image()
        listed = [t.name for t in req.topics]
        fetch_all = not listed
        cursor = req.cursor
        cursor_topic = cursor.topic_name if cursor is not None else ""
        if fetch_all:
            names = {n for n in image.topics if n != METADATA_TOPIC and n >= cursor_topic}
        else:
            names = {n for n in listed if n >= cursor_topic}
            if cursor is not None and cursor_topic not in names:
                return _invalid_request(cls, listed)
        if cursor is not None and cursor.partition_index < 0:
            return _invalid_request(cls, listed)

        authz = self.s.authorizer
        authorized: list[str] = []
        denied: list[dict[str, Any]] = []
        for name in sorted(names):
            if allowed(authz, ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                authorized.append(name)
            elif not fetch_all:
                denied.append(
                    {
                        "error_code": ErrorCode.topic_authorization_failed,
                        "name": name,
                        "topic_id": None,
                        "is_internal": False,
                        "partitions": (),
                    }
                )

        limit = max(min(self._limit_config(), req.response_partition_limit), 1)
        start = {cursor_topic: cursor.partition_index} if cursor is not None else {}
        rows, next_cursor = describe(
            image, authorized, ctx.listener, start, limit, skip_unknown=fetch_all
        )
        for row in rows:
            row["topic_authorized_operations"] = operations_bits(
                authz, ctx, ResourceType.TOPIC, row["name"]
            )
        return build(
            cls,
            {"throttle_time": 0, "topics": rows + denied, "next_cursor": next_cursor},
        )


def describe(
    image: MetadataImage,
    names: list[str],
    listener: str,
    start: dict[str, int],
    limit: int,
    *,
    skip_unknown: bool,
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Topic rows for ``names`` (in that order) until ``limit`` partitions; the next cursor."""
    rows: list[dict[str, Any]] = []
    remaining = limit
    for name in names:
        if remaining <= 0:
            # Every partition of the topics before was answered: go on from this one.
            return rows, {"topic_name": name, "partition_index": 0}
        topic = image.topics.get(name)
        if topic is None:
            if not skip_unknown:
                rows.append(_unknown_topic(name))
            continue
        first = start.get(name, 0)
        count = len(topic.partitions)
        upper = min(count, first + remaining)
        parts = [
            _partition_row(image, topic.partitions[p], listener)
            for p in range(first, upper)
            if p in topic.partitions
        ]
        rows.append(_topic_row(topic, parts))
        if upper < count:
            return rows, {"topic_name": name, "partition_index": upper}
        remaining -= len(parts)
    return rows, None


def _topic_row(topic: TopicImage, parts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "error_code": ErrorCode.none,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.is_internal,
        "partitions": parts,
    }


def _unknown_topic(name: str) -> dict[str, Any]:
    error = (
        ErrorCode.invalid_topic_exception
        if topic_name_error(name)
        else ErrorCode.unknown_topic_or_partition
    )
    return {
        "error_code": error,
        "name": name,
        "topic_id": None,
        "is_internal": name.startswith("__"),
        "partitions": (),
    }


def _partition_row(image: MetadataImage, p: PartitionImage, listener: str) -> dict[str, Any]:
    leader = image.brokers.get(p.leader)
    reachable = leader is not None and leader.endpoint(listener) is not None
    return {
        "error_code": ErrorCode.none,
        "partition_index": p.partition,
        "leader_id": p.leader if reachable else NO_LEADER,
        "leader_epoch": p.leader_epoch,
        "replica_nodes": p.replicas,
        "isr_nodes": p.isr,
        "eligible_leader_replicas": (),
        "last_known_elr": (),
        "offline_replicas": tuple(r for r in p.replicas if _offline(image, r, listener)),
    }


def _offline(image: MetadataImage, broker_id: int, listener: str) -> bool:
    b = image.brokers.get(broker_id)
    return b is None or b.fenced or b.endpoint(listener) is None


def _invalid_request(cls: type, listed: list[str]) -> Any:
    """Kafka's error answer: every listed topic with the error, nothing else."""
    return build(
        cls,
        {
            "throttle_time": 0,
            "topics": [
                {
                    "error_code": ErrorCode.invalid_request,
                    "name": name,
                    "topic_id": uuid.UUID(int=0),
                    "is_internal": False,
                    "partitions": (),
                }
                for name in listed
            ],
            "next_cursor": None,
        },
    )
