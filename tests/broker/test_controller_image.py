"""Controller + metadata image over an in-memory one-voter quorum."""

import asyncio
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from broker.controller.controller import (
    APPEND,
    DELETE,
    SET,
    SUBTRACT,
    ConfigChange,
    ConfigValidationError,
    Controller,
    TopicSpec,
    Validators,
)
from broker.metadata.image import TOPIC_RESOURCE, MetadataImage, apply_records
from protocol.metadata_records import decode_metadata_record, encode_metadata_record


class MemoryQuorum:
    """Commits by applying to an image, round-tripping each record through the wire framing."""

    def __init__(self) -> None:
        self.image = MetadataImage()
        self.offset = -1
        self.deltas: list[Any] = []

    async def append(self, records: list[Any]) -> int:
        pairs = []
        for r in records:
            self.offset += 1
            pairs.append((self.offset, decode_metadata_record(encode_metadata_record(r))))
        self.image, delta = apply_records(self.image, pairs)
        self.deltas.append(delta)
        return self.offset


def _topic_config(key: str, value: str) -> str:
    if key not in ("retention.ms", "cleanup.policy", "min.insync.replicas"):
        raise ConfigValidationError(f"Unknown topic config name: {key}")
    if key == "retention.ms" and not value.lstrip("-").isdigit():
        raise ConfigValidationError(f"Invalid value {value} for configuration retention.ms")
    return value


def _controller(q: MemoryQuorum) -> Controller:
    v = Validators(
        topic_config=_topic_config,
        broker_config=lambda k, v: v,
        list_keys=frozenset({"cleanup.policy"}),
        default_partitions=3,
    )
    c = Controller(q, lambda: q.image, v, node_id=1)
    asyncio.run(
        c.register_broker([("PLAINTEXT", "localhost", 9092, 0)], None, {"metadata.version": 26})
    )
    return c


def test_register_broker_unfenced() -> None:
    q = MemoryQuorum()
    _controller(q)
    b = q.image.brokers[1]
    assert not b.fenced and b.endpoint("PLAINTEXT") is not None
    assert q.image.features["metadata.version"] == 26


def test_create_topic_defaults_and_errors() -> None:
    q = MemoryQuorum()
    c = _controller(q)
    res = asyncio.run(
        c.create_topics(
            [
                TopicSpec("a"),
                TopicSpec("b", 2, 1, configs={"retention.ms": "1000"}),
                TopicSpec("bad/name"),
                TopicSpec("c", 0),
                TopicSpec("d", 1, 3),
                TopicSpec("e", configs={"nope": "1"}),
                TopicSpec("dup"),
                TopicSpec("dup"),
            ],
            False,
        )
    )
    codes = {r.name: r.error for r in res}
    assert codes["a"] == ErrorCode.none and codes["b"] == ErrorCode.none
    assert codes["bad/name"] == ErrorCode.invalid_topic_exception
    assert codes["c"] == ErrorCode.invalid_partitions
    assert codes["d"] == ErrorCode.invalid_replication_factor
    assert codes["e"] == ErrorCode.invalid_config
    assert codes["dup"] == ErrorCode.invalid_request
    img = q.image
    assert len(img.topics["a"].partitions) == 3
    assert img.topics["b"].partitions[1].leader == 1
    assert img.config(TOPIC_RESOURCE, "b") == {"retention.ms": "1000"}
    assert set(img.topics) == {"a", "b"}
    again = asyncio.run(c.create_topics([TopicSpec("a")], False))
    assert again[0].error == ErrorCode.topic_already_exists


def test_validate_only_writes_nothing() -> None:
    q = MemoryQuorum()
    c = _controller(q)
    before = q.offset
    res = asyncio.run(c.create_topics([TopicSpec("v")], True))
    assert res[0].error == ErrorCode.none and q.offset == before and "v" not in q.image.topics


def test_delete_topic_and_partitions_increase() -> None:
    q = MemoryQuorum()
    c = _controller(q)
    asyncio.run(c.create_topics([TopicSpec("t", 1)], False))
    tid = q.image.topics["t"].topic_id
    res = asyncio.run(c.create_partitions([("t", 4, None), ("t2", 2, None)], False))
    assert [r.error for r in res] == [ErrorCode.none, ErrorCode.unknown_topic_or_partition]
    assert sorted(q.image.topics["t"].partitions) == [0, 1, 2, 3]
    res = asyncio.run(c.create_partitions([("t", 2, None)], False))
    assert res[0].error == ErrorCode.invalid_partitions
    res = asyncio.run(c.delete_topics(["t", "missing"]))
    assert [r.error for r in res] == [ErrorCode.none, ErrorCode.unknown_topic_or_partition]
    assert "t" not in q.image.topics and tid not in q.image.topic_names
    assert q.deltas[-1].deleted_topics[0].name == "t"


@pytest.mark.parametrize(
    "internal",
    ["__consumer_offsets", "__transaction_state", "__share_group_state", "__mirror_state"],
)
def test_internal_topics_are_not_deleted(internal: str) -> None:
    """The coordinators' own topics: refused (INVALID_REQUEST, naming the topic); the other
    topics of the same request go."""
    q = MemoryQuorum()
    c = _controller(q)
    asyncio.run(c.create_topics([TopicSpec(internal, 1), TopicSpec("t", 1)], False))
    res = asyncio.run(c.delete_topics([internal, "t"]))
    assert [r.error for r in res] == [ErrorCode.invalid_request, ErrorCode.none]
    assert internal in (res[0].message or "") and "internal" in (res[0].message or "")
    assert internal in q.image.topics and "t" not in q.image.topics


def test_incremental_and_legacy_alter_configs() -> None:
    q = MemoryQuorum()
    c = _controller(q)
    asyncio.run(c.create_topics([TopicSpec("t", 1, configs={"retention.ms": "5"})], False))
    res = asyncio.run(
        c.alter_configs(
            [
                ConfigChange(
                    TOPIC_RESOURCE,
                    "t",
                    [
                        ("cleanup.policy", APPEND, "compact"),
                        ("cleanup.policy", APPEND, "delete"),
                        ("retention.ms", DELETE, None),
                    ],
                )
            ],
            False,
        )
    )
    assert res[0].error == ErrorCode.none
    assert q.image.config(TOPIC_RESOURCE, "t") == {"cleanup.policy": "compact,delete"}
    asyncio.run(
        c.alter_configs(
            [ConfigChange(TOPIC_RESOURCE, "t", [("cleanup.policy", SUBTRACT, "compact")])], False
        )
    )
    assert q.image.config(TOPIC_RESOURCE, "t") == {"cleanup.policy": "delete"}
    bad = asyncio.run(
        c.alter_configs([ConfigChange(TOPIC_RESOURCE, "t", [("retention.ms", SET, "soon")])], False)
    )
    assert bad[0].error == ErrorCode.invalid_config and "retention.ms" in (bad[0].message or "")
    legacy = asyncio.run(
        c.alter_configs(
            [
                ConfigChange(
                    TOPIC_RESOURCE, "t", [("min.insync.replicas", SET, "1")], replace_all=True
                )
            ],
            False,
        )
    )
    assert legacy[0].error == ErrorCode.none
    assert q.image.config(TOPIC_RESOURCE, "t") == {"min.insync.replicas": "1"}
    missing = asyncio.run(c.alter_configs([ConfigChange(TOPIC_RESOURCE, "zz", [])], False))
    assert missing[0].error == ErrorCode.unknown_topic_or_partition


def test_producer_id_blocks_do_not_overlap() -> None:
    q = MemoryQuorum()
    c = _controller(q)
    a = asyncio.run(c.allocate_producer_ids(0))
    b = asyncio.run(c.allocate_producer_ids(0))
    assert a[0] + a[1] <= b[0]


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "sp ace", "ü"])
def test_invalid_topic_names(name: str) -> None:
    from broker.controller.topics import topic_name_error

    assert topic_name_error(name)


def test_valid_topic_names() -> None:
    from broker.controller.topics import topic_name_error

    assert topic_name_error("a.b_c-D9") is None and topic_name_error("a" * 249) is None


def test_partition_count_is_capped() -> None:
    from broker.controller.controller import MAX_PARTITIONS_PER_TOPIC

    q = MemoryQuorum()
    c = _controller(q)
    res = asyncio.run(c.create_topics([TopicSpec("huge", 2**31 - 1)], False))
    assert res[0].error == ErrorCode.invalid_partitions and "limit" in (res[0].message or "")
    asyncio.run(c.create_topics([TopicSpec("small", 1)], False))
    res = asyncio.run(c.create_partitions([("small", MAX_PARTITIONS_PER_TOPIC + 1, None)], False))
    assert res[0].error == ErrorCode.invalid_partitions and "huge" not in q.image.topics


def test_create_partitions_checks_manual_assignments() -> None:
    """Kafka's checks of each new partition's manual assignment (an empty one was an
    IndexError that closed the client's connection)."""
    q = MemoryQuorum()
    c = _controller(q)
    asyncio.run(c.create_topics([TopicSpec("t", 1, 1)], False))
    for assignment, wanted in (
        ([], "empty replica list"),
        ([1, 1], "broker 1 more than once"),
        ([7], "broker 7, but no such broker"),
    ):
        [r] = asyncio.run(c.create_partitions([("t", 2, [assignment])], False))
        assert r.error == ErrorCode.invalid_replica_assignment, assignment
        assert wanted in (r.message or ""), r.message
    assert sorted(q.image.topics["t"].partitions) == [0]
    [r] = asyncio.run(c.create_partitions([("t", 2, [[1]])], False))
    assert r.error == ErrorCode.none and sorted(q.image.topics["t"].partitions) == [0, 1]
