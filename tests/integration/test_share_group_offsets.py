"""AlterShareGroupOffsets / DeleteShareGroupOffsets (v0) with confluent-kafka's ShareConsumer:
an empty share group's start offset altered, the next consumer starts there (even though the
partition leader had the old state cached); deleted, the next one starts from the reset point;
refused while members are active (NON_EMPTY_GROUP); alter makes a group not there yet; bad
input gets Kafka's codes; READ ACLs on the group and topics as Kafka; on three nodes the
leaders pick up offsets altered at the group coordinator."""

import time
from pathlib import Path
from typing import Any

from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.errors import ErrorCode

from protocol.registry import REGISTRY
from tests.waits import wait_for

from .clients import admin, create_topic
from .cluster import Cluster
from .node import Node
from .test_share_groups import (
    GROUP,
    SHARE_NODE,
    TOPIC,
    _call,
    _consumer,
    _describe,
    _node,
    _poll,
    _poll_until,
    _produce,
)

ALTER, DELETE, DESCRIBE_OFFSETS = 91, 92, 90


def _alter(node: Node, group: str, offsets: dict[tuple[str, int], int]) -> Any:
    cls = REGISTRY.spec(ALTER).request_type(0)
    mod = __import__(cls.__module__, fromlist=["AlterShareGroupOffsetsRequestTopic"])
    by_topic: dict[str, list[Any]] = {}
    for (t, p), start in offsets.items():
        by_topic.setdefault(t, []).append(
            mod.AlterShareGroupOffsetsRequestPartition(partition_index=p, start_offset=start)
        )
    topics = tuple(
        mod.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=tuple(ps))
        for t, ps in by_topic.items()
    )
    return _call(node, ALTER, cls(group_id=group, topics=topics), version=0)


def _alter_codes(resp: Any) -> dict[tuple[str, int], ErrorCode]:
    return {
        (t.topic_name, int(p.partition_index)): p.error_code
        for t in resp.responses
        for p in t.partitions
    }


def _delete(node: Node, group: str, topics: list[str]) -> Any:
    cls = REGISTRY.spec(DELETE).request_type(0)
    mod = __import__(cls.__module__, fromlist=["DeleteShareGroupOffsetsRequestTopic"])
    body = cls(
        group_id=group,
        topics=tuple(mod.DeleteShareGroupOffsetsRequestTopic(topic_name=t) for t in topics),
    )
    return _call(node, DELETE, body, version=0)


def _spso(node: Node, group: str, partition: int = 0) -> int:
    cls = REGISTRY.spec(DESCRIBE_OFFSETS).request_type(0)
    mod = __import__(cls.__module__, fromlist=["DescribeShareGroupOffsetsRequestGroup"])
    topic = mod.DescribeShareGroupOffsetsRequestTopic(topic_name=TOPIC, partitions=(partition,))
    req = cls(groups=(mod.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=(topic,)),))
    (g,) = _call(node, DESCRIBE_OFFSETS, req, version=0).groups
    assert g.error_code == ErrorCode.none, g
    (t,) = g.topics
    (p,) = t.partitions
    return int(p.start_offset)


def _find_coordinator(node: Node, group: str) -> int:
    """What an admin client does first (and what creates __consumer_offsets): the node id."""
    req = REGISTRY.spec(10).request_type(4)(key_type=0, coordinator_keys=(group,))
    found: list[int] = []

    def ask() -> bool:
        (c,) = _call(node, 10, req, version=4).coordinators
        found[:] = [int(c.node_id)]
        return c.error_code == ErrorCode.none

    wait_for(ask, 20, "the group coordinator")
    return found[0]


def _empty(node: Node) -> None:
    wait_for(lambda: not _describe(node).members, 20, "the share group is empty")


def test_alter_and_delete_move_where_consumers_start(tmp_path: Path) -> None:
    node = _node(tmp_path / "n1")
    node.start()
    c: ShareConsumer | None = None
    try:
        create_topic(node.bootstrap, TOPIC, 1)
        _produce(node, 10)
        c = _consumer(node, **{"share.acknowledgement.mode": "explicit"})
        got = {m.offset(): m for m in _poll_until(c, 10, 20)}
        for o in range(3):
            c.acknowledge(got[o], AcknowledgeType.ACCEPT)
        c.commit_sync(15)
        # a member is active: both are refused, nothing changes
        resp = _alter(node, GROUP, {(TOPIC, 0): 7})
        assert resp.error_code == ErrorCode.non_empty_group, resp
        assert _alter_codes(resp) == {(TOPIC, 0): ErrorCode.non_empty_group}
        assert _delete(node, GROUP, [TOPIC]).error_code == ErrorCode.non_empty_group
        assert _spso(node, GROUP) == 3
        c.close()  # 3-9 released; the leader keeps the state cached
        c = None
        _empty(node)

        resp = _alter(node, GROUP, {(TOPIC, 0): 7})
        assert resp.error_code == ErrorCode.none, resp
        assert _alter_codes(resp) == {(TOPIC, 0): ErrorCode.none}
        assert _spso(node, GROUP) == 7
        c = _consumer(node, **{"share.acknowledgement.mode": "explicit"})
        again = _poll_until(c, 3, 30)
        assert sorted((m.offset(), m.delivery_count()) for m in again) == [(7, 1), (8, 1), (9, 1)]
        for m in again:
            c.acknowledge(m, AcknowledgeType.ACCEPT)
        c.commit_sync(15)
        assert _poll(c, 1.0) == []
        assert _spso(node, GROUP) == 10
        c.close()
        c = None
        _empty(node)

        resp = _delete(node, GROUP, [TOPIC])
        assert resp.error_code == ErrorCode.none, resp
        assert [(t.topic_name, t.error_code) for t in resp.responses] == [(TOPIC, ErrorCode.none)]
        assert _spso(node, GROUP) == -1
        c = _consumer(node)  # from share.auto.offset.reset (earliest here) again
        everything = _poll_until(c, 10, 30)
        assert sorted(m.offset() for m in everything) == list(range(10))
    finally:
        if c is not None:
            c.close()
        node.kill()


def test_alter_creates_a_group_and_bad_input_gets_kafka_codes(tmp_path: Path) -> None:
    node = _node(tmp_path / "n1")
    node.start()
    c: ShareConsumer | None = None
    classic: Consumer | None = None
    try:
        create_topic(node.bootstrap, TOPIC, 2)
        p = Producer({"bootstrap.servers": node.bootstrap})
        for i in range(6):
            p.produce(TOPIC, value=b"v%d" % i, partition=i % 2)
        assert p.flush(10) == 0
        # a group not there yet is made (empty), with the given start offsets
        _find_coordinator(node, "fresh")
        resp = _alter(node, "fresh", {(TOPIC, 0): 1, (TOPIC, 1): 0})
        assert resp.error_code == ErrorCode.none, resp
        assert set(_alter_codes(resp).values()) == {ErrorCode.none}
        assert _describe(node, "fresh").group_state == "Empty"
        assert _spso(node, "fresh", 0) == 1
        # per partition: unknown topic or partition, a negative offset; the rest goes through
        resp = _alter(
            node,
            "fresh",
            {(TOPIC, 0): 2, (TOPIC, 5): 0, ("nope", 0): 0, (TOPIC, 1): -1},
        )
        assert resp.error_code == ErrorCode.none, resp
        assert _alter_codes(resp) == {
            (TOPIC, 0): ErrorCode.none,
            (TOPIC, 5): ErrorCode.unknown_topic_or_partition,
            ("nope", 0): ErrorCode.unknown_topic_or_partition,
            (TOPIC, 1): ErrorCode.invalid_request,
        }
        assert _spso(node, "fresh", 0) == 2
        # a share consumer of the made group starts at the altered offsets
        c = _consumer(node, "fresh")
        got = _poll_until(c, 4, 30)
        got += _poll(c, 1.0)
        assert sorted((m.partition(), m.offset()) for m in got) == [(0, 2), (1, 0), (1, 1), (1, 2)]
        # delete of an unknown group, an unknown topic; an empty group id
        assert _delete(node, "nobody", [TOPIC]).error_code == ErrorCode.group_id_not_found
        assert _alter(node, "", {(TOPIC, 0): 0}).error_code == ErrorCode.invalid_group_id
        # a classic consumer group's id is no share group
        classic = Consumer(
            {
                "bootstrap.servers": node.bootstrap,
                "group.id": "classic",
                "enable.auto.commit": False,
            }
        )
        classic.subscribe([TOPIC])
        deadline = time.monotonic() + 20
        while not classic.assignment() and time.monotonic() < deadline:
            classic.poll(0.2)
        assert classic.assignment()
        resp = _alter(node, "classic", {(TOPIC, 0): 0})
        assert resp.error_code == ErrorCode.group_id_not_found, resp
        assert _delete(node, "classic", [TOPIC]).error_code == ErrorCode.group_id_not_found
    finally:
        if c is not None:
            c.close()
        if classic is not None:
            classic.close()
        node.kill()


def test_acls_read_on_the_group_and_each_topic(tmp_path: Path) -> None:
    """With an authorizer (as Kafka): READ on the group, else GROUP_AUTHORIZATION_FAILED for
    the whole request; READ on each topic, else TOPIC_AUTHORIZATION_FAILED for it."""
    node = _node(
        tmp_path / "n1",
        authorizer__class__name="org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        allow__everyone__if__no__acl__found="true",
    )
    node.start()
    try:
        create_topic(node.bootstrap, TOPIC, 1)
        create_topic(node.bootstrap, "secret", 1)
        admin = AdminClient({"bootstrap.servers": node.bootstrap})
        deny = [
            AclBinding(
                rtype,
                name,
                ResourcePatternType.LITERAL,
                "User:ANONYMOUS",
                "*",
                AclOperation.READ,
                AclPermissionType.DENY,
            )
            for rtype, name in ((ResourceType.TOPIC, "secret"), (ResourceType.GROUP, "locked"))
        ]
        for f in admin.create_acls(deny).values():
            f.result(10)
        _find_coordinator(node, GROUP)

        def refused() -> bool:  # ACLs reach the node through the metadata log
            return _alter(node, "locked", {(TOPIC, 0): 0}).error_code != ErrorCode.none

        wait_for(refused, 20, "the group ACL in force")
        resp = _alter(node, "locked", {(TOPIC, 0): 0})
        assert resp.error_code == ErrorCode.group_authorization_failed
        assert _alter_codes(resp) == {(TOPIC, 0): ErrorCode.group_authorization_failed}
        resp = _delete(node, "locked", [TOPIC])
        assert resp.error_code == ErrorCode.group_authorization_failed
        resp = _alter(node, GROUP, {(TOPIC, 0): 0, ("secret", 0): 0})
        assert resp.error_code == ErrorCode.none, resp
        assert _alter_codes(resp) == {
            (TOPIC, 0): ErrorCode.none,
            ("secret", 0): ErrorCode.topic_authorization_failed,
        }
        resp = _delete(node, GROUP, [TOPIC, "secret"])
        assert {t.topic_name: t.error_code for t in resp.responses} == {
            TOPIC: ErrorCode.none,
            "secret": ErrorCode.topic_authorization_failed,
        }
    finally:
        node.kill()


def test_three_nodes_leaders_pick_up_altered_offsets(tmp_path: Path) -> None:
    """The group coordinator, the share coordinators and the partition leaders spread over three
    nodes: alter on the group coordinator re-initializes each share-partition at its share
    coordinator, and each leader (with the old state cached) serves from the new offset."""
    c = Cluster(tmp_path / "c", **SHARE_NODE, offsets__topic__num__partitions="3").start()
    cs: list[ShareConsumer] = []
    try:
        a = admin(c.bootstrap)
        a.create_topics([NewTopic(TOPIC, 3, 3)], operation_timeout=10)[TOPIC].result(15)
        wait_for(lambda: all(c.known_everywhere(TOPIC, p) for p in range(3)), 20, "the topic")
        p = Producer({"bootstrap.servers": c.bootstrap, "linger.ms": 5})
        for i in range(30):
            p.produce(TOPIC, value=f"v{i}".encode(), partition=i % 3)
        assert p.flush(15) == 0
        cs = [ShareConsumer({"bootstrap.servers": c.bootstrap, "group.id": GROUP})]
        cs[0].subscribe([TOPIC])
        seen: set[tuple[int, int]] = set()
        deadline = time.monotonic() + 60
        while len(seen) < 30 and time.monotonic() < deadline:
            seen |= {(m.partition(), m.offset()) for m in _poll(cs[0], 0.1)}
        assert len(seen) == 30
        cs[0].commit_sync(15)  # all accepted: every start offset is 10
        cs.pop().close()
        coordinator = c.node(_find_coordinator(c.nodes[0], GROUP))
        wait_for(lambda: not _describe(coordinator).members, 20, "the share group is empty")
        resp = _alter(coordinator, GROUP, {(TOPIC, p): 7 for p in range(3)})
        assert set(_alter_codes(resp).values()) == {ErrorCode.none}, resp
        cs = [ShareConsumer({"bootstrap.servers": c.bootstrap, "group.id": GROUP})]
        cs[0].subscribe([TOPIC])
        again: set[tuple[int, int]] = set()
        deadline = time.monotonic() + 60
        while len(again) < 9 and time.monotonic() < deadline:
            again |= {(m.partition(), m.offset()) for m in _poll(cs[0], 0.1)}
        again |= {(m.partition(), m.offset()) for m in _poll(cs[0], 1.0)}
        assert again == {(p, o) for p in range(3) for o in (7, 8, 9)}
    finally:
        for consumer in cs:
            consumer.close()
        c.stop()
