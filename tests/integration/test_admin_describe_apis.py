"""DescribeTopicPartitions (75) and ListConfigResources (74) against a real node, with
kafka-python's KafkaAdminClient (``describe_topic_partitions``, ``list_config_resources``; raw
requests from kafka-python's protocol classes for what the admin client does not send), and the
authorization of these and of the log-dir APIs with a stock authorizer. librdkafka 2.16 sends
neither 74 nor 75 (its describe_topics is a Metadata request)."""

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from kafka import TopicPartitionReplica  # type: ignore[import-untyped]
from kafka.admin import KafkaAdminClient  # type: ignore[import-untyped]
from kafka.errors import ClusterAuthorizationFailedError  # type: ignore[import-untyped]
from kafka.protocol.admin import (  # type: ignore[import-untyped]
    DescribeLogDirsRequest,
    ListConfigResourcesRequest,
)

from .clients import create_topic
from .node import Node

STANDARD = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
NONE, UNKNOWN_TOPIC, INVALID_TOPIC, TOPIC_AUTHZ, CLUSTER_AUTHZ = 0, 3, 17, 29, 31
UNSUPPORTED_VERSION, INVALID_REQUEST = 35, 42
OPS_UNSET = -(2**31)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    n = Node(tmp_path_factory.mktemp("describe-apis") / "n1")
    n.start()
    for name, parts in (("dtp-a", 5), ("dtp-b", 2), ("dtp-c", 1)):
        create_topic(n.bootstrap, name, parts)
    yield n
    n.kill()


@pytest.fixture(scope="module")
def kp(node: Node) -> Iterator[KafkaAdminClient]:
    a = KafkaAdminClient(bootstrap_servers=node.bootstrap, request_timeout_ms=10000)
    yield a
    a.close()


def send(kp: KafkaAdminClient, request: Any) -> Any:
    return kp._manager.run(kp._manager.send, request)


def pages(kp: KafkaAdminClient, topics: list[str], limit: int) -> list[dict[str, Any]]:
    """Every page of a describe, following NextCursor (bounded)."""
    out, cursor = [], None
    for _ in range(50):
        page = kp.describe_topic_partitions(topics, response_partition_limit=limit, cursor=cursor)
        out.append(page)
        cursor = page["next_cursor"]
        if cursor is None:
            return out
    raise AssertionError("the cursor never ran out")


def summary(page: dict[str, Any]) -> list[tuple[str, int, list[int]]]:
    return [
        (t["name"], t["error_code"], [p["partition_index"] for p in t["partitions"]])
        for t in page["topics"]
    ]


# --- DescribeTopicPartitions ---------------------------------------------------------------


def test_api_versions_advertise_kafka_41_ranges(kp: KafkaAdminClient) -> None:
    versions = kp._manager.broker_version_data.api_versions
    assert versions[75] == (0, 0)
    assert versions[74] == (0, 1)
    assert versions[35] == (1, 4)
    assert versions[34] == (1, 2)


def test_pages_of_listed_topics_follow_the_cursor(kp: KafkaAdminClient) -> None:
    listed = ["dtp-b", "dtp-a", "dtp-zz-missing", "bad name!"]
    got = pages(kp, listed, limit=3)
    assert [summary(p) for p in got] == [
        [("bad name!", INVALID_TOPIC, []), ("dtp-a", NONE, [0, 1, 2])],
        [("dtp-a", NONE, [3, 4]), ("dtp-b", NONE, [0])],
        [("dtp-b", NONE, [1]), ("dtp-zz-missing", UNKNOWN_TOPIC, [])],
    ]
    assert [p["next_cursor"] for p in got] == [
        {"topic_name": "dtp-a", "partition_index": 3},
        {"topic_name": "dtp-b", "partition_index": 1},
        None,
    ]


def test_partition_details_come_from_the_metadata(kp: KafkaAdminClient) -> None:
    (page,) = pages(kp, ["dtp-a"], limit=2000)
    (topic,) = page["topics"]
    ids = {t["name"]: t["topic_id"] for t in kp.describe_topics(["dtp-a"])}  # Metadata
    assert topic["topic_id"] == uuid.UUID(str(ids["dtp-a"]))
    assert topic["is_internal"] is False
    assert topic["topic_authorized_operations"] not in (OPS_UNSET, 0)
    for p in topic["partitions"]:
        assert p["error_code"] == NONE
        assert (p["leader_id"], p["replica_nodes"], p["isr_nodes"]) == (1, [1], [1])
        assert p["leader_epoch"] >= 0
        assert p["offline_replicas"] == []
        assert not p["eligible_leader_replicas"] and not p["last_known_elr"]


def test_all_topics_in_pages_of_one_partition(kp: KafkaAdminClient) -> None:
    got = pages(kp, [], limit=1)
    seen = [
        (t["name"], p["partition_index"])
        for pg in got
        for t in pg["topics"]
        for p in t["partitions"]
    ]
    mine = [tp for tp in seen if tp[0].startswith("dtp-")]
    assert mine == [("dtp-a", i) for i in range(5)] + [("dtp-b", 0), ("dtp-b", 1), ("dtp-c", 0)]
    assert seen == sorted(seen) and len(seen) == len(set(seen))
    assert all(t["error_code"] == NONE for pg in got for t in pg["topics"])
    assert "__cluster_metadata" not in {name for name, _ in seen}
    (one,) = pages(kp, [], limit=2000)
    assert [
        (t["name"], [p["partition_index"] for p in t["partitions"]]) for t in one["topics"]
    ] == [(n, sorted(p for m, p in seen if m == n)) for n in dict.fromkeys(n for n, _ in seen)]


def test_a_bad_cursor_is_invalid_request_for_every_listed_topic(kp: KafkaAdminClient) -> None:
    page = kp.describe_topic_partitions(
        ["dtp-a", "dtp-b"], cursor={"topic_name": "dtp-c", "partition_index": 0}
    )
    assert summary(page) == [("dtp-a", INVALID_REQUEST, []), ("dtp-b", INVALID_REQUEST, [])]
    page = kp.describe_topic_partitions(
        ["dtp-a"], cursor={"topic_name": "dtp-a", "partition_index": -1}
    )
    assert summary(page) == [("dtp-a", INVALID_REQUEST, [])]
    assert page["next_cursor"] is None


# --- ListConfigResources -------------------------------------------------------------------


def test_list_config_resources_of_every_kind(kp: KafkaAdminClient) -> None:
    got = kp.list_config_resources()
    assert got["broker"] == ["1"] and got["broker_logger"] == ["1"]
    assert {"dtp-a", "dtp-b", "dtp-c"} <= set(got["topic"])
    assert "__cluster_metadata" not in got["topic"]
    assert set(got) == {"broker", "broker_logger", "topic"}  # no group or client metrics configs
    only = kp.list_config_resources(["TOPIC"])
    assert list(only) == ["topic"] and set(only["topic"]) == set(got["topic"])


def test_list_config_resources_v0_and_unsupported_types(kp: KafkaAdminClient) -> None:
    v0 = send(kp, ListConfigResourcesRequest(min_version=0, max_version=0))
    assert (v0.error_code, list(v0.config_resources)) == (NONE, [])  # client metrics: none
    mirror = send(kp, ListConfigResourcesRequest(resource_types=[2, 64]))
    assert (mirror.error_code, list(mirror.config_resources)) == (UNSUPPORTED_VERSION, [])


# --- authorization ---------------------------------------------------------------------------


def _allow(rtype: ResourceType, name: str, principal: str, op: AclOperation) -> AclBinding:
    return AclBinding(
        rtype, name, ResourcePatternType.LITERAL, principal, "*", op, AclPermissionType.ALLOW
    )


def _restart_with_acls(n: Node, *bindings: AclBinding) -> None:
    """Create ACLs as a super user, then restart without one: only the ACLs grant anything
    to ANONYMOUS (every client here), with allow.everyone.if.no.acl.found for the rest."""
    n.kill()
    n.settings["super.users"] = "User:ANONYMOUS"
    n.write_config()
    n.start()
    admin = AdminClient({"bootstrap.servers": n.bootstrap})
    for f in admin.create_acls(list(bindings)).values():
        f.result(10)
    n.kill()
    del n.settings["super.users"]
    n.write_config()
    n.start()


def test_authorization_of_the_describe_and_log_dir_apis(tmp_path: Path) -> None:
    """ANONYMOUS may describe topics without ACLs, not "secret" (alice's); on the cluster
    (alice's too) first nothing, then DESCRIBE only."""
    n = Node(
        tmp_path / "n1",
        authorizer__class__name=STANDARD,
        allow__everyone__if__no__acl__found="true",
    )
    n.start()
    try:
        create_topic(n.bootstrap, "open", 2)
        create_topic(n.bootstrap, "secret", 1)
        _restart_with_acls(
            n,
            _allow(ResourceType.TOPIC, "secret", "User:alice", AclOperation.ALL),
            _allow(ResourceType.BROKER, "kafka-cluster", "User:alice", AclOperation.ALL),
        )
        kp = KafkaAdminClient(bootstrap_servers=n.bootstrap, request_timeout_ms=10000)
        try:
            every = kp.describe_topic_partitions([])
            assert [t["name"] for t in every["topics"]] == ["open"]
            listed = kp.describe_topic_partitions(["secret", "open", "nope"])
            assert summary(listed) == [
                ("nope", UNKNOWN_TOPIC, []),
                ("open", NONE, [0, 1]),
                ("secret", TOPIC_AUTHZ, []),
            ]
            secret = listed["topics"][-1]
            assert secret["topic_id"] in (None, uuid.UUID(int=0))
            assert secret["topic_authorized_operations"] == OPS_UNSET
            assert listed["topics"][1]["topic_authorized_operations"] not in (OPS_UNSET, 0)

            with pytest.raises(ClusterAuthorizationFailedError):
                kp.list_config_resources()
            dirs = send(kp, DescribeLogDirsRequest(topics=None))
            assert (dirs.error_code, list(dirs.results)) == (CLUSTER_AUTHZ, [])
            moved = kp.alter_replica_log_dirs(
                {TopicPartitionReplica("open", 0, 1): str(n.log_dir.resolve())}
            )
            assert [e.errno for e in moved.values()] == [CLUSTER_AUTHZ]
        finally:
            kp.close()

        # DESCRIBE on the cluster opens DescribeLogDirs; ListConfigResources wants
        # DESCRIBE_CONFIGS (as Kafka 4.1's handler), AlterReplicaLogDirs ALTER.
        _restart_with_acls(
            n, _allow(ResourceType.BROKER, "kafka-cluster", "User:ANONYMOUS", AclOperation.DESCRIBE)
        )
        kp = KafkaAdminClient(bootstrap_servers=n.bootstrap, request_timeout_ms=10000)
        try:
            dirs = send(kp, DescribeLogDirsRequest(topics=None))
            assert dirs.error_code == NONE and len(dirs.results) == 1
            with pytest.raises(ClusterAuthorizationFailedError):
                kp.list_config_resources()
            moved = kp.alter_replica_log_dirs(
                {TopicPartitionReplica("open", 0, 1): str(n.log_dir.resolve())}
            )
            assert [e.errno for e in moved.values()] == [CLUSTER_AUTHZ]
        finally:
            kp.close()
    finally:
        n.kill()
