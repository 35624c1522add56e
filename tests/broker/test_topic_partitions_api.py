"""DescribeTopicPartitions rows from a metadata image with several brokers (the integration
tests have one node): leaders without the request's listener, offline replicas, pagination
over partitions, as Kafka 4.1's metadata cache answers; and ListConfigResources' brokers."""

import uuid
from types import MappingProxyType

from kio.schema.errors import ErrorCode

from broker.api.config_resources import resource_names
from broker.api.topic_partitions import describe
from broker.metadata.image import (
    BROKER_RESOURCE,
    TOPIC_RESOURCE,
    BrokerImage,
    EndpointImage,
    MetadataImage,
    PartitionImage,
    TopicImage,
)

PLAIN = EndpointImage("PLAINTEXT", "127.0.0.1", 9092, 0)
OTHER = EndpointImage("INTERNAL", "127.0.0.1", 9093, 0)


def image() -> MetadataImage:
    brokers = {
        1: BrokerImage(1, 1, (PLAIN,), None, False),
        2: BrokerImage(2, 1, (PLAIN,), None, True),  # fenced
        3: BrokerImage(3, 1, (OTHER,), None, False),  # not on PLAINTEXT
    }
    parts = {
        0: PartitionImage(0, (1, 2, 3, 4), (1, 3), 1, 7, 9),
        1: PartitionImage(1, (3, 1), (3,), 3, 2, 2),  # leader without the listener
        2: PartitionImage(2, (2, 1), (2, 1), 2, 4, 4),  # fenced leader: still named
    }
    t = TopicImage("t", uuid.uuid4(), MappingProxyType(parts))
    u = TopicImage("u", uuid.uuid4(), MappingProxyType({0: PartitionImage(0, (1,), (1,), 1, 0, 0)}))
    return MetadataImage(
        topics=MappingProxyType({"t": t, "u": u}),
        brokers=MappingProxyType(brokers),
        configs=MappingProxyType({(TOPIC_RESOURCE, "t"): MappingProxyType({"a": "b"})}),
    )


def test_partition_rows_with_several_brokers() -> None:
    rows, cursor = describe(image(), ["t"], "PLAINTEXT", {}, 2000, skip_unknown=False)
    assert cursor is None
    (t,) = rows
    got = {
        p["partition_index"]: (
            p["leader_id"],
            p["leader_epoch"],
            p["replica_nodes"],
            p["isr_nodes"],
            p["offline_replicas"],
        )
        for p in t["partitions"]
    }
    assert got == {
        0: (1, 7, (1, 2, 3, 4), (1, 3), (2, 3, 4)),
        1: (-1, 2, (3, 1), (3,), (3,)),
        2: (2, 4, (2, 1), (2, 1), (2,)),
    }
    assert all(p["error_code"] == ErrorCode.none for p in t["partitions"])


def test_the_limit_cuts_inside_a_topic_or_before_the_next() -> None:
    img = image()
    rows, cursor = describe(img, ["t", "u"], "PLAINTEXT", {}, 2, skip_unknown=False)
    assert [(r["name"], [p["partition_index"] for p in r["partitions"]]) for r in rows] == [
        ("t", [0, 1])
    ]
    assert cursor == {"topic_name": "t", "partition_index": 2}
    rows, cursor = describe(img, ["t", "u"], "PLAINTEXT", {"t": 2}, 1, skip_unknown=False)
    assert [(r["name"], len(r["partitions"])) for r in rows] == [("t", 1)]
    assert cursor == {"topic_name": "u", "partition_index": 0}  # "t" used the whole limit
    rows, cursor = describe(img, ["t", "x", "u"], "PLAINTEXT", {"t": 9}, 5, skip_unknown=False)
    assert [(r["name"], r["error_code"], len(r["partitions"])) for r in rows] == [
        ("t", ErrorCode.none, 0),
        ("x", ErrorCode.unknown_topic_or_partition, 0),
        ("u", ErrorCode.none, 1),
    ]
    assert cursor is None
    rows, _ = describe(img, ["t", "x"], "PLAINTEXT", {}, 5, skip_unknown=True)
    assert [r["name"] for r in rows] == ["t"]


def test_config_resources_of_brokers_follow_the_listener() -> None:
    img = image()
    assert resource_names(img, BROKER_RESOURCE, "PLAINTEXT") == ["1", "2"]
    assert resource_names(img, BROKER_RESOURCE, "INTERNAL") == ["3"]
    assert resource_names(img, TOPIC_RESOURCE, "PLAINTEXT") == ["t", "u"]
    assert resource_names(img, 32, "PLAINTEXT") == []
