"""The hand-written Fetch request writer against kio's, byte for byte, over every version the
fetchers send (4-19), consumers and followers, names and topic ids, sessions and forgotten
partitions."""

import random
import uuid

import pytest

from protocol.fetch_codec import (
    FetchPartitionRequest,
    encode_fetch_request,
    encode_fetch_request_kio,
)


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
