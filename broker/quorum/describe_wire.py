"""DescribeQuorum (55) v0-2 on the wire <-> the Raft core's ``QuorumDescription``.

As Kafka's ``KafkaRaftClient.handleDescribeQuorumRequest`` answers it:

- a request that does not name exactly ``__cluster_metadata-0``: UNKNOWN_TOPIC_OR_PARTITION on
  each partition it names;
- a node that is not the leader: NOT_LEADER_OR_FOLLOWER on ``__cluster_metadata-0``. Kafka
  leaves the partition's leader id and epoch at 0 there; we fill in the leader and epoch this
  node knows (-1: none) so a tool can go to the leader, and -1 as the high watermark;
- the leader: its high watermark (-1 until its first entry is committed), every voter (by id)
  and the observers that fetch from it, with end offsets and timestamps (v1+), directory ids
  (v2+; this quorum has none, so the zero uuid as Kafka sends for "no directory") and the
  voters' endpoints as ``Nodes`` (v2+).

Bodies are dicts for ``protocol.build.build``, which keeps the fields the version has.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..raft.outputs import NotLeader
from ..raft.progress import QuorumDescription, ReplicaDescription
from .wire import METADATA_TOPIC

DESCRIBE_QUORUM: Final = 55
NONE, NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION = 0, 6, 3
NO_DIRECTORY_ID: Final = uuid.UUID(int=0)

# Kafka's messages for the errors this API answers (Errors.message())
MESSAGES: Final = {
    UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    NOT_LEADER_OR_FOLLOWER: "For requests intended only for the leader, this error indicates "
    "that the broker is not the current leader. For requests intended for any replica, this "
    "error indicates that the broker is not a replica of the topic partition.",
}

# a voter's endpoints: (listener name, host, port)
Endpoint = tuple[str, str, int]


def names_metadata_partition(body: Any) -> bool:
    """Kafka's hasValidTopicPartition: one topic, ``__cluster_metadata``, one partition, 0."""
    topics = body.topics
    if len(topics) != 1 or topics[0].topic_name != METADATA_TOPIC:
        return False
    partitions = topics[0].partitions
    return len(partitions) == 1 and int(partitions[0].partition_index) == 0


def unknown_partition_body(body: Any) -> dict[str, Any]:
    """UNKNOWN_TOPIC_OR_PARTITION on every partition the request names."""
    err = {
        "error_code": UNKNOWN_TOPIC_OR_PARTITION,
        "error_message": MESSAGES[UNKNOWN_TOPIC_OR_PARTITION],
    }
    return {
        "error_code": NONE,
        "topics": [
            {
                "topic_name": t.topic_name,
                "partitions": [{"partition_index": p.partition_index, **err} for p in t.partitions],
            }
            for t in body.topics
        ],
    }


def top_level_error_body(code: int, message: str | None) -> dict[str, Any]:
    return {"error_code": code, "error_message": message, "topics": [], "nodes": []}


def _replica(
    r: ReplicaDescription, directories: Mapping[int, uuid.UUID] | None = None
) -> dict[str, Any]:
    directory = (directories or {}).get(r.replica_id)
    return {
        "replica_id": r.replica_id,
        "replica_directory_id": NO_DIRECTORY_ID if directory is None else directory,
        "log_end_offset": r.log_end_offset,
        "last_fetch_timestamp": r.last_fetch_timestamp,
        "last_caught_up_timestamp": r.last_caught_up_timestamp,
    }


def _nodes(
    voters: Sequence[ReplicaDescription], endpoints: Mapping[int, Sequence[Endpoint]]
) -> list[dict[str, Any]]:
    return [
        {
            "node_id": v.replica_id,
            "listeners": [
                {"name": name, "host": host, "port": port}
                for name, host, port in endpoints[v.replica_id]
            ],
        }
        for v in voters
        if v.replica_id in endpoints
    ]


def describe_response_body(
    described: QuorumDescription | NotLeader,
    endpoints: Mapping[int, Sequence[Endpoint]],
    directories: Mapping[int, uuid.UUID] | None = None,
) -> dict[str, Any]:
    """The response to a valid request, from the core's answer."""
    if isinstance(described, NotLeader):
        partition: dict[str, Any] = {
            "partition_index": 0,
            "error_code": NOT_LEADER_OR_FOLLOWER,
            "error_message": MESSAGES[NOT_LEADER_OR_FOLLOWER],
            "leader_id": described.leader_id,
            "leader_epoch": described.epoch,
            "high_watermark": -1,
        }
        nodes: list[dict[str, Any]] = []
    else:
        partition = {
            "partition_index": 0,
            "error_code": NONE,
            "error_message": None,
            "leader_id": described.leader_id,
            "leader_epoch": described.leader_epoch,
            "high_watermark": described.high_watermark,
            "current_voters": [_replica(v, directories) for v in described.voters],
            "observers": [_replica(o) for o in described.observers],
        }
        nodes = _nodes(described.voters, endpoints)
    return {
        "error_code": NONE,
        "error_message": None,
        "topics": [{"topic_name": METADATA_TOPIC, "partitions": [partition]}],
        "nodes": nodes,
    }
