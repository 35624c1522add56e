"""KIP-848 consumer groups (`group.protocol=consumer`) with stock confluent-kafka consumers:
members joining and leaving share the partitions with each record consumed once, the group and
its offsets survive a node restart and, on three nodes, the death of its coordinator's node; a
stale member epoch is fenced; a member's offsets go through transactions (TxnOffsetCommit)."""

import io
import socket
import struct
import time
from collections import Counter
from pathlib import Path
from typing import Any

from confluent_kafka import (
    Consumer,
    ConsumerGroupState,
    ConsumerGroupType,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import NewPartitions, NewTopic
from kafka import KafkaAdminClient  # type: ignore[import-untyped]
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer

from protocol import lenient
from protocol.registry import REGISTRY
from tests.waits import wait_for

from .clients import admin, ck_produce, create_topic, make_records
from .cluster import Cluster
from .node import Node

TOPIC, PARTS, GROUP = "kip848", 6, "g848"


def _node(workdir: Path) -> Node:
    return Node(
        workdir,
        group__consumer__heartbeat__interval__ms="300",
        group__consumer__session__timeout__ms="8000",
    )


def _consumer(node: Node, **conf: Any) -> Consumer:
    return _consumer_on(node.bootstrap, **conf)


def _consumer_on(bootstrap: str, topics: tuple[str, ...] = (TOPIC,), **conf: Any) -> Consumer:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": GROUP,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            **conf,
        }
    )
    c.subscribe(list(topics))
    return c


Seen = Counter[tuple[int, int]]


def _poll(cs: list[Consumer], seen: Seen) -> bool:
    """One round: each consumer takes what it gets and commits it before the next poll."""
    for c in cs:
        msgs: list[Message] = c.consume(num_messages=50, timeout=0.05)
        for m in msgs:
            assert not m.error(), m.error()
            seen[(m.partition() or 0, m.offset() or 0)] += 1
        if msgs:
            c.commit(asynchronous=False)
    return True


def _owned(cs: list[Consumer]) -> list[set[int]]:
    return [{tp.partition for tp in c.assignment()} for c in cs]


def _share(cs: list[Consumer], seen: Seen, timeout: float = 30) -> None:
    def ok() -> bool:
        _poll(cs, seen)
        a = _owned(cs)
        sizes = [len(x) for x in a]
        # balanced too: while a member still revokes, the target's other owners already hold
        # their new share (e.g. {0, 1}, {3, 4, 5}, {2} on the way to two each)
        return (
            all(a)
            and sum(sizes) == PARTS
            and set().union(*a) == set(range(PARTS))
            and max(sizes) - min(sizes) <= 1
        )

    wait_for(ok, timeout, f"{len(cs)} consumers to share {PARTS} partitions", step=0)


def _drain(cs: list[Consumer], seen: Seen, total: int, timeout: float = 30) -> None:
    wait_for(lambda: _poll(cs, seen) and len(seen) >= total, timeout, f"{total} records", step=0)


def _produce(node: Node, tag: str, n: int) -> None:
    assert ck_produce(node.bootstrap, TOPIC, make_records(tag, n, PARTS, headers=False)) == []


def _describe(node: Node) -> Any:
    a = admin(node.bootstrap)
    return a.describe_consumer_groups([GROUP], request_timeout=10)[GROUP].result(15)


def test_consumers_join_leave_restart(tmp_path: Path) -> None:
    node = _node(tmp_path / "n1")
    node.start()
    cs: list[Consumer] = []
    try:
        create_topic(node.bootstrap, TOPIC, PARTS)
        _produce(node, "a", 120)
        seen: Seen = Counter()
        cs = [_consumer(node), _consumer(node)]
        _share(cs, seen)
        _produce(node, "b", 120)
        cs.append(_consumer(node))  # a third member takes its share from the other two
        _share(cs, seen)
        assert all(len(a) == 2 for a in _owned(cs)), _owned(cs)
        _drain(cs, seen, 240)
        d = _describe(node)
        assert d.type == ConsumerGroupType.CONSUMER and d.state == ConsumerGroupState.STABLE
        assert len(d.members) == 3
        cs.pop(0).close()  # leaves: the other two take over its partitions
        _produce(node, "c", 120)
        _share(cs, seen)
        _drain(cs, seen, 360)
        assert sum(seen.values()) == 360 and max(seen.values()) == 1, "a record read twice"
        # restart with the members still in: they keep their ids, epochs and offsets
        before = {m.member_id for m in _describe(node).members}
        node.stop()
        node.start()
        _produce(node, "d", 60)
        _share(cs, seen, timeout=45)
        _drain(cs, seen, 420, timeout=45)
        assert sum(seen.values()) == 420 and max(seen.values()) == 1, "a record read twice"
        d = _describe(node)
        assert d.type == ConsumerGroupType.CONSUMER and {m.member_id for m in d.members} == before
        for c in cs:
            c.close()
        cs = []
        # a new member starts from the group's commits: only what came after
        _produce(node, "e", 30)
        node.stop()
        node.start()
        cs = [_consumer(node)]
        late: Seen = Counter()
        _drain(cs, late, 30)
        _poll(cs, late)
        assert len(late) == 30 and all(seen[k] == 0 for k in late), "committed offsets lost"
    finally:
        for c in cs:
            c.close()
        node.kill()


# -- raw requests: a stale member epoch is fenced ---------------------------------------------


def _call(node: Node, api_key: int, version: int, body: Any) -> Any:
    out = io.BytesIO()
    entity_writer(type(body))(out, body)
    cid = b"t848"
    head = struct.pack(">hhih", api_key, version, 7, len(cid)) + cid + b"\x00"
    payload = head + out.getvalue()
    with socket.create_connection(("127.0.0.1", node.port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(payload)) + payload)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            chunk = s.recv(65536)
            assert chunk, "connection closed"
            buf += chunk
    # after the size, the correlation id and the header's tagged fields
    value, _ = lenient.decode(REGISTRY.spec(api_key).response_type(version), buf, 4 + 4 + 1)
    return value


def test_stale_member_epoch_is_fenced(tmp_path: Path) -> None:
    node = _node(tmp_path / "n1")
    node.start()
    c: Consumer | None = None
    try:
        create_topic(node.bootstrap, TOPIC, PARTS)
        _produce(node, "a", 30)
        c = _consumer(node)
        seen: Seen = Counter()
        _share([c], seen)
        describe = REGISTRY.spec(69).request_type(1)(
            group_ids=(GROUP,), include_authorized_operations=False
        )
        group = _call(node, 69, 1, describe).groups[0]
        assert (group.error_code, group.group_state) == (ErrorCode.none, "Stable")
        member = group.members[0]
        epoch = member.member_epoch
        assert [p for tp in member.assignment.topic_partitions for p in tp.partitions] == list(
            range(PARTS)
        )
        hb_cls = REGISTRY.spec(68).request_type(1)
        stale = hb_cls(
            group_id=GROUP,
            member_id=member.member_id,
            member_epoch=epoch + 5,
            topic_partitions=None,
        )
        assert _call(node, 68, 1, stale).error_code == ErrorCode.fenced_member_epoch
        commit_cls = REGISTRY.spec(8).request_type(9)
        mod = __import__(commit_cls.__module__, fromlist=["x"])
        commit = commit_cls(
            group_id=GROUP,
            generation_id_or_member_epoch=epoch + 1,
            member_id=member.member_id,
            topics=(
                mod.OffsetCommitRequestTopic(
                    name=TOPIC,
                    partitions=(
                        mod.OffsetCommitRequestPartition(
                            partition_index=0, committed_offset=1, committed_metadata=None
                        ),
                    ),
                ),
            ),
        )
        r = _call(node, 8, 9, commit)
        assert r.topics[0].partitions[0].error_code == ErrorCode.stale_member_epoch
        # DescribeGroups (kafka-python decodes the members' classic protocol bytes)
        kp = KafkaAdminClient(bootstrap_servers=node.bootstrap, request_timeout_ms=10000)
        try:
            desc = kp.describe_groups([GROUP])[GROUP]
        finally:
            kp.close()
        assert (desc["error"], desc["group_state"], desc["protocol_type"]) == (
            None,
            "Stable",
            "consumer",
        )
        (m,) = desc["members"]
        assert m["member_metadata"]["topics"] == [TOPIC], m
        (assigned,) = m["member_assignment"]["assigned_partitions"]
        assert sorted(assigned["partitions"]) == list(range(PARTS)), m
        # ListGroups v5 filters by type
        a = admin(node.bootstrap)
        listed = a.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(15)
        assert [(g.group_id, g.type) for g in listed.valid] == [(GROUP, ConsumerGroupType.CONSUMER)]
        assert a.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(15).valid == []
        # the consumer itself is untouched and keeps consuming
        _drain([c], seen, 30)
    finally:
        if c is not None:
            c.close()
        node.kill()


# -- three nodes: the coordinator's node dies, the group carries on elsewhere ---------------------


def test_coordinator_node_killed_group_moves(tmp_path: Path) -> None:
    c = Cluster(
        tmp_path / "c",
        group__consumer__heartbeat__interval__ms="300",
        group__consumer__session__timeout__ms="15000",
        offsets__topic__num__partitions="3",
    ).start()
    cs: list[Consumer] = []
    try:
        a = admin(c.bootstrap)
        fs = a.create_topics([NewTopic(TOPIC, PARTS, 3)], operation_timeout=10)
        fs[TOPIC].result(15)
        assert ck_produce(c.bootstrap, TOPIC, make_records("a", 60, PARTS, headers=False)) == []
        seen: Seen = Counter()
        cs = [_consumer_on(c.bootstrap), _consumer_on(c.bootstrap)]
        _share(cs, seen, timeout=45)
        _drain(cs, seen, 60)
        d = a.describe_consumer_groups([GROUP], request_timeout=10)[GROUP].result(15)
        members = {m.member_id for m in d.members}
        victim = c.node(d.coordinator.id)
        victim.kill()
        survivors = ",".join(n.bootstrap for n in c.nodes if n is not victim)
        assert ck_produce(survivors, TOPIC, make_records("b", 60, PARTS, headers=False)) == []
        _share(cs, seen, timeout=60)
        _drain(cs, seen, 120, timeout=60)
        assert max(seen.values()) == 1, "a record read twice"
        after = admin(survivors)  # kept alive until its future resolves
        d = after.describe_consumer_groups([GROUP], request_timeout=10)[GROUP].result(15)
        assert d.coordinator.id != victim.node_id
        assert {m.member_id for m in d.members} == members  # same members, loaded elsewhere
    finally:
        for consumer in cs:
            consumer.close()
        c.stop()


# -- read-process-write: TxnOffsetCommit from a consumer-protocol member ---------------------------


def test_send_offsets_to_transaction(tmp_path: Path) -> None:
    node = Node(
        tmp_path / "n1",
        group__consumer__heartbeat__interval__ms="300",
        transaction__state__log__replication__factor="1",
        transaction__state__log__num__partitions="4",
    )
    node.start()
    c: Consumer | None = None
    try:
        create_topic(node.bootstrap, TOPIC, 2)
        create_topic(node.bootstrap, "out848", 1)
        assert ck_produce(node.bootstrap, TOPIC, make_records("a", 20, 2, headers=False)) == []
        c = _consumer(node, **{"isolation.level": "read_committed"})
        p = Producer(
            {
                "bootstrap.servers": node.bootstrap,
                "transactional.id": "tx848",
                "metadata.recovery.strategy": "none",
            }
        )
        p.init_transactions(15)
        got = 0
        deadline = time.monotonic() + 30
        while got < 20 and time.monotonic() < deadline:
            msgs = c.consume(10, 0.5)
            if not msgs:
                continue
            p.begin_transaction()
            for m in msgs:
                p.produce("out848", m.value())
            got += len(msgs)
            # the group metadata carries the member id and epoch the coordinator checks
            p.send_offsets_to_transaction(
                c.position(c.assignment()), c.consumer_group_metadata(), 10
            )
            p.commit_transaction(10)
        assert got == 20
        committed = c.committed([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)], timeout=10)
        assert [(tp.partition, tp.offset) for tp in committed] == [(0, 10), (1, 10)]
    finally:
        if c is not None:
            c.close()
        node.kill()


def test_new_partitions_are_assigned(tmp_path: Path) -> None:
    node = _node(tmp_path / "n1")
    node.start()
    cs: list[Consumer] = []
    try:
        create_topic(node.bootstrap, TOPIC, 2)
        cs = [_consumer(node), _consumer(node)]
        seen: Seen = Counter()

        def shared(n: int) -> bool:
            _poll(cs, seen)
            a = _owned(cs)
            return all(a) and sorted(p for ps in a for p in ps) == list(range(n))

        wait_for(lambda: shared(2), 30, "two consumers to own a partition each", step=0)
        a = admin(node.bootstrap)
        fs = a.create_partitions([NewPartitions(TOPIC, PARTS)], operation_timeout=10)
        fs[TOPIC].result(15)
        # the subscribed topic's metadata changed: a new assignment spreads all partitions
        wait_for(lambda: shared(PARTS), 30, f"the consumers to own all {PARTS}", step=0)
        assert sorted(map(len, _owned(cs))) == [3, 3]
    finally:
        for c in cs:
            c.close()
        node.kill()


def test_regex_subscription_and_range_assignor(tmp_path: Path) -> None:
    node = _node(tmp_path / "n1")
    node.start()
    cs: list[Consumer] = []
    try:
        create_topic(node.bootstrap, "rx-a", 2)
        create_topic(node.bootstrap, "other", 2)
        # a regex subscription (resolved by the coordinator) and a requested assignor
        rx = ("^rx-.*",)
        cs = [_consumer_on(node.bootstrap, rx, **{"group.remote.assignor": "range"}) for _ in "ab"]
        seen: Seen = Counter()

        def owned() -> list[list[tuple[str, int]]]:
            _poll(cs, seen)
            return [sorted((tp.topic, tp.partition) for tp in c.assignment()) for c in cs]

        def spread(topics: list[str]) -> bool:
            a = owned()
            return all(a) and sorted(x for ps in a for x in ps) == [
                (t, p) for t in topics for p in range(2)
            ]

        wait_for(lambda: spread(["rx-a"]), 30, "rx-a spread over both", step=0)
        create_topic(node.bootstrap, "rx-b", 2)  # matches: joins the subscription
        wait_for(lambda: spread(["rx-a", "rx-b"]), 30, "rx-b assigned too", step=0)
        # range: each member has the same partition index of both topics
        assert sorted(sorted({p for _, p in ps}) for ps in owned()) == [[0], [1]]
    finally:
        for c in cs:
            c.close()
        node.kill()
