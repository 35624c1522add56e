"""The hand-written Fetch request writer against kio's, byte for byte, over every version the
fetchers send (4-19), consumers and followers, names and topic ids, sessions and forgotten
partitions."""

import datetime
import random
import uuid
from collections.abc import Sequence
from typing import Any

import pytest

from protocol.build import build
from protocol.fetch_codec import (
    CONSUMER_REPLICA_ID,
    FETCH,
    READ_COMMITTED,
    FetchPartitionRequest,
    encode_fetch_request,
)
from protocol.registry import REGISTRY, body_bytes


def encode_fetch_request_kio(
    version: int,
    *,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    session_id: int,
    session_epoch: int,
    partitions: Sequence[FetchPartitionRequest],
    forgotten: Sequence[tuple[str, uuid.UUID | None, int]],
    by_topic_id: bool,
    isolation_level: int = READ_COMMITTED,
    replica_id: int = CONSUMER_REPLICA_ID,
    replica_epoch: int = -1,
) -> bytes:
    """``encode_fetch_request`` through kio's generic writer: the reference."""
    topics: dict[Any, list[dict[str, Any]]] = {}
    mirror_epochs = version >= 19
    for p in partitions:
        key = p.topic_id if by_topic_id else p.topic
        fields: dict[str, Any] = {
            "partition": p.partition,
            "current_leader_epoch": p.current_leader_epoch,
            "fetch_offset": p.fetch_offset,
            "last_fetched_epoch": p.last_fetched_epoch,
            "log_start_offset": p.log_start_offset,
            "partition_max_bytes": p.max_bytes,
        }
        if mirror_epochs:
            fields["mirror_leader_epoch"] = p.mirror_leader_epoch
        topics.setdefault(key, []).append(fields)
    forgot: dict[Any, list[int]] = {}
    for name, tid, partition in forgotten:
        forgot.setdefault(tid if by_topic_id else name, []).append(partition)
    tkey = "topic_id" if by_topic_id else "topic"
    body: Any = build(
        REGISTRY.spec(FETCH).request_type(version),
        {
            "cluster_id": None,
            "replica_id": replica_id,
            "replica_state": {"replica_id": replica_id, "replica_epoch": replica_epoch},
            "max_wait": datetime.timedelta(milliseconds=max_wait_ms),
            "min_bytes": min_bytes,
            "max_bytes": max_bytes,
            "isolation_level": isolation_level,
            "session_id": session_id,
            "session_epoch": session_epoch,
            "topics": [{tkey: k, "partitions": v} for k, v in topics.items()],
            "forgotten_topics_data": [{tkey: k, "partitions": v} for k, v in forgot.items()],
            "rack_id": "",
        },
    )
    return body_bytes(body)


def _case(rng: random.Random, version: int) -> dict[str, object]:
    topics = [(f"topic-{i}-{'x' * rng.randrange(0, 200)}", uuid.uuid4()) for i in range(3)]
    parts = [
        FetchPartitionRequest(
            name,
            tid,
            rng.randrange(0, 5000),
            rng.randrange(-1, 1 << 40),
            rng.randrange(-1, 1000),
            rng.randrange(-1, 1000),
            rng.randrange(-1, 1 << 40),
            rng.randrange(0, 1 << 31),
            rng.choice([-1, -1, rng.randrange(0, 1 << 31)]),
        )
        for name, tid in topics
        for _ in range(rng.randrange(0, 4))
    ]
    follower = rng.random() < 0.5
    return {
        "max_wait_ms": rng.randrange(0, 1 << 31),
        "min_bytes": rng.randrange(0, 1 << 31),
        "max_bytes": rng.randrange(0, 1 << 31),
        "session_id": rng.randrange(0, 1 << 31),
        "session_epoch": rng.randrange(-1, 1 << 31),
        "partitions": parts,
        "forgotten": [
            (name, tid, rng.randrange(0, 300))
            for name, tid in topics
            for _ in range(rng.randrange(0, 3))
        ],
        "by_topic_id": version >= 13,
        "isolation_level": rng.randrange(0, 2),
        "replica_id": rng.randrange(0, 1000) if follower else -1,
        "replica_epoch": rng.randrange(0, 1 << 40) if follower and version >= 15 else -1,
    }


@pytest.mark.parametrize("version", range(4, 20))
def test_bytes_match_kio(version: int) -> None:
    rng = random.Random(version)
    for _ in range(40):
        case = _case(rng, version)
        assert encode_fetch_request(version, **case) == encode_fetch_request_kio(  # type: ignore[arg-type]
            version,
            **case,  # type: ignore[arg-type]
        ), case


def test_an_empty_incremental_request_matches_kio() -> None:
    for version in (7, 12, 15, 19):
        args = {
            "max_wait_ms": 500,
            "min_bytes": 1,
            "max_bytes": 1 << 20,
            "session_id": 9,
            "session_epoch": 4,
            "partitions": [],
            "forgotten": [],
            "by_topic_id": version >= 13,
        }
        assert encode_fetch_request(version, **args) == encode_fetch_request_kio(  # type: ignore[arg-type]
            version,
            **args,  # type: ignore[arg-type]
        )
