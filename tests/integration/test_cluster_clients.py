"""Stock clients across the three nodes of the shipped cluster (issue 11 item 7).

One cluster from ``config/node-{1,2,3}.properties`` serves the whole module. Every client
bootstraps from ONE node and must find the rest through metadata and FindCoordinator:

- consumer groups whose coordinator is on each of the three nodes, never the bootstrap node:
  confluent-kafka, kafka-python and aiokafka members in one group split a 12-partition topic,
  commit what they read, and every node describes the same group and offsets;
- a transaction whose coordinator is on another node writes to partitions led by all three
  nodes: read_committed sees exactly the committed records; producer ids handed out by
  different nodes never collide;
- kafkajs produces to the three leaders and consumes in a group coordinated on another node;
- controlled shutdown (SIGTERM) of a node that does not lead the metadata quorum: its
  partitions go offline (one replica each), the others keep taking records, and when it
  comes back it leads them again with every acknowledged record intact.

A coordinator is the leader of the key's partition of its internal topic (Kafka's
abs(hashCode) % partitions), so the tests choose keys by computing that partition.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer  # type: ignore[import-untyped]
from aiokafka.coordinator.assignors.range import (  # type: ignore[import-untyped]
    RangePartitionAssignor as AioRange,
)
from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    KafkaException,
    Producer,
    TopicPartition,
)
from kafka import KafkaConsumer  # type: ignore[import-untyped]
from kafka.coordinator.assignors.range import (  # type: ignore[import-untyped]
    RangePartitionAssignor as KpRange,
)

from broker.coordinator.runtime import partition_for
from protocol.records import scan_batches
from tests.waits import wait_for, wait_value

from .clients import (
    Rec,
    admin,
    by_partition,
    ck_consumer,
    ck_drain,
    ck_produce,
    ck_read_all,
    create_topic,
    make_records,
)
from .cluster import Cluster
from .js_clients import missing_reason, run_ok
from .node import Node

OFFSETS, TXN_STATE = "__consumer_offsets", "__transaction_state"
_LEADER = re.compile(rb"metadata quorum: leader (\d+) at epoch (\d+)")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("cluster-clients")).start()
    try:
        for n in c.nodes:  # each node has learnt the others' registrations
            wait_for(
                functools.partial(lists_brokers, n, [1, 2, 3]),
                timeout=15,
                what=f"node {n.node_id} to list brokers 1, 2 and 3",
            )
        yield c
    finally:
        c.stop()


def lists_brokers(node: Node, ids: list[int]) -> bool:
    return sorted(admin(node.bootstrap).list_topics(timeout=10).brokers) == ids


# --- where things are ---------------------------------------------------------------------------


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """partition -> leader id, as the node answers Metadata."""
    md = admin(bootstrap).list_topics(topic, timeout=10)
    t = md.topics.get(topic)
    if t is None or t.error is not None:
        return {}
    return {p: pm.leader for p, pm in t.partitions.items()}


def all_led(bootstrap: str, topic: str, count: int | None = None) -> dict[int, int]:
    """The topic's leaders once every partition has one (and there are `count`, if given)."""
    return wait_value(
        lambda: (
            ls
            if (ls := leaders(bootstrap, topic))
            and (count is None or len(ls) == count)
            and all(v >= 0 for v in ls.values())
            else None
        ),
        timeout=15,
        what=f"every partition of {topic} to have a leader",
    )


def key_led_by(prefix: str, node_id: int, topic_leaders: dict[int, int]) -> str:
    """A coordinator key (group id, transactional id) whose coordinator is `node_id`."""
    n = len(topic_leaders)
    for i in range(10_000):
        key = f"{prefix}-{i}"
        if topic_leaders[partition_for(key, n)] == node_id:
            return key
    raise AssertionError(f"no {prefix} key lands on node {node_id}")


def coordinator_topic_leaders(c: Cluster, topic: str, touch: Callable[[], None]) -> dict[int, int]:
    """The internal topic's leaders; `touch` makes a client look a coordinator up (FindCoordinator
    creates the topic on first use)."""
    if topic not in admin(c.bootstrap).list_topics(timeout=10).topics:
        touch()
    return all_led(c.nodes[0].bootstrap, topic)


def other(c: Cluster, *not_ids: int) -> Node:
    return next(n for n in c.nodes if n.node_id not in not_ids)


def quorum_leader(node: Node) -> int:
    found = _LEADER.findall(node.output.read_bytes())
    return int(found[-1][0]) if found else -1


def group_topic_leaders(c: Cluster) -> dict[int, int]:
    def touch() -> None:
        # Asked again until it answers: while the topic is being made (and until its leader has
        # applied it), lookups answer COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR, as in Kafka,
        # and librdkafka hands those to the caller after a couple of retries.
        consumer = ck_consumer(c.nodes[0].bootstrap, **{"group.id": "warm-up"})

        def answered() -> bool | None:
            try:
                consumer.committed([TopicPartition("warm-up", 0)], timeout=5)
            except KafkaException:
                return None
            return True

        try:
            wait_value(answered, timeout=20, what="a group coordinator to answer", step=0.2)
        finally:
            consumer.close()

    return coordinator_topic_leaders(c, OFFSETS, touch)


# --- 1. consumer groups whose coordinator is elsewhere --------------------------------------------

GROUP_TOPIC, GROUP_PARTITIONS, PER_PARTITION = "group-spread", 12, 10
MEMBER_CONF = {"heartbeat_ms": 300, "session_ms": 6000}


@dataclass
class MemberState:
    """What one member thread saw, read by the test thread (appends and whole replacements
    only, so a read never sees a half-made value)."""

    name: str
    got: list[tuple[int, int]] = field(default_factory=list)  # (partition, offset)
    assignment: frozenset[int] = frozenset()
    error: BaseException | None = None


def _ck_member(bootstrap: str, group: str, stop: threading.Event, st: MemberState) -> None:
    c = ck_consumer(
        bootstrap,
        **{
            "group.id": group,
            "client.id": st.name,
            "partition.assignment.strategy": "range",
            "heartbeat.interval.ms": MEMBER_CONF["heartbeat_ms"],
            "session.timeout.ms": MEMBER_CONF["session_ms"],
        },
    )
    try:
        c.subscribe([GROUP_TOPIC])
        while not stop.is_set():
            msgs = c.consume(num_messages=100, timeout=0.2)
            for m in msgs:
                if m.error():
                    raise KafkaException(m.error())
                st.got.append((int(m.partition() or 0), int(m.offset() or 0)))
            # nothing to commit yet, or a rebalance is running: the next loop retries
            with contextlib.suppress(KafkaException):
                c.commit(asynchronous=False)
            st.assignment = frozenset(tp.partition for tp in c.assignment())
    finally:
        c.close()


def _kp_member(bootstrap: str, group: str, stop: threading.Event, st: MemberState) -> None:
    c = KafkaConsumer(
        GROUP_TOPIC,
        bootstrap_servers=bootstrap,
        group_id=group,
        client_id=st.name,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        partition_assignment_strategy=[KpRange],
        heartbeat_interval_ms=MEMBER_CONF["heartbeat_ms"],
        session_timeout_ms=MEMBER_CONF["session_ms"],
    )
    try:
        while not stop.is_set():
            for batch in c.poll(timeout_ms=200).values():
                st.got.extend((m.partition, m.offset) for m in batch)
            with contextlib.suppress(Exception):  # CommitFailedError (rebalance): next loop
                c.commit()
            st.assignment = frozenset(tp.partition for tp in c.assignment())
    finally:
        c.close()


def _aio_member(bootstrap: str, group: str, stop: threading.Event, st: MemberState) -> None:
    async def run() -> None:
        c = AIOKafkaConsumer(
            GROUP_TOPIC,
            bootstrap_servers=bootstrap,
            group_id=group,
            client_id=st.name,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            partition_assignment_strategy=(AioRange,),
            heartbeat_interval_ms=MEMBER_CONF["heartbeat_ms"],
            session_timeout_ms=MEMBER_CONF["session_ms"],
        )
        await c.start()
        try:
            while not stop.is_set():
                got = await c.getmany(timeout_ms=200)
                for batch in got.values():
                    st.got.extend((m.partition, m.offset) for m in batch)
                with contextlib.suppress(Exception):  # rebalance in progress: next loop
                    await c.commit()
                st.assignment = frozenset(tp.partition for tp in c.assignment())
        finally:
            await c.stop()

    asyncio.run(run())


def _guarded(fn: Callable[..., None], *args: Any) -> threading.Thread:
    st: MemberState = args[-1]

    def body() -> None:
        try:
            fn(*args)
        except BaseException as e:  # reported by the test thread
            st.error = e

    t = threading.Thread(target=body, name=st.name, daemon=True)
    t.start()
    return t


def committed_offsets(bootstrap: str, group: str, topic: str = GROUP_TOPIC) -> dict[int, int]:
    """The group's committed offsets for the topic (AdminClient.list_consumer_group_offsets)."""
    a = admin(bootstrap)
    fs = a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])
    res = fs[group].result(15)
    return {tp.partition: tp.offset for tp in res.topic_partitions if tp.topic == topic}


def describe(bootstrap: str, group: str) -> tuple[Any, ...]:
    """The group as `kafka-consumer-groups.sh --describe` shows it, via one node."""
    a = admin(bootstrap)
    d = a.describe_consumer_groups([group])[group].result(15)
    members = sorted(
        (
            m.client_id,
            m.member_id,
            tuple(sorted(tp.partition for tp in m.assignment.topic_partitions)),
        )
        for m in d.members
    )
    return (d.group_id, d.state.name, d.coordinator.id, d.partition_assignor, tuple(members))


@pytest.fixture(scope="module")
def group_topic(cluster: Cluster) -> str:
    create_topic(cluster.nodes[0].bootstrap, GROUP_TOPIC, GROUP_PARTITIONS)
    assert set(all_led(cluster.bootstrap, GROUP_TOPIC, GROUP_PARTITIONS).values()) == {1, 2, 3}
    recs = make_records("g", GROUP_PARTITIONS * PER_PARTITION, GROUP_PARTITIONS)
    assert ck_produce(cluster.nodes[1].bootstrap, GROUP_TOPIC, recs) == []
    return GROUP_TOPIC


@pytest.mark.parametrize("coordinator", [1, 2, 3])
def test_group_with_its_coordinator_on_another_node(
    cluster: Cluster, group_topic: str, coordinator: int
) -> None:
    group = key_led_by("grp", coordinator, group_topic_leaders(cluster))
    boot = other(cluster, coordinator)  # every member bootstraps from a node that is not it
    reader = other(cluster, coordinator, boot.node_id)
    stop = threading.Event()
    states = [MemberState(f"ck-{coordinator}"), MemberState(f"kp-{coordinator}")]
    states.append(MemberState(f"aio-{coordinator}"))
    threads = [
        _guarded(fn, boot.bootstrap, group, stop, st)
        for fn, st in zip((_ck_member, _kp_member, _aio_member), states, strict=True)
    ]
    everything = {(p, o) for p in range(GROUP_PARTITIONS) for o in range(PER_PARTITION)}

    def settled() -> bool:
        for st in states:
            assert st.error is None, f"{st.name}: {st.error!r}"
        parts = [st.assignment for st in states]
        return (
            all(parts)
            and sum(len(p) for p in parts) == GROUP_PARTITIONS
            and frozenset().union(*parts) == frozenset(range(GROUP_PARTITIONS))
            and everything <= {r for st in states for r in st.got}
        )

    try:
        wait_for(
            settled,
            timeout=25,
            what="three members splitting 12 partitions and reading every record",
            detail=lambda: [(st.name, sorted(st.assignment), len(st.got)) for st in states],
        )
        # committed offsets, read back through a node that is neither coordinator nor bootstrap
        wait_for(
            lambda: (
                committed_offsets(reader.bootstrap, group)
                == dict.fromkeys(range(GROUP_PARTITIONS), PER_PARTITION)
            ),
            timeout=10,
            what="every partition's offset committed",
            detail=lambda: committed_offsets(reader.bootstrap, group),
        )
        # kafka-consumer-groups.sh --describe through each node: one group, the same answer
        seen = [describe(n.bootstrap, group) for n in cluster.nodes]
        assert seen[0] == seen[1] == seen[2], seen
        gid, state, coord, assignor, members = seen[0]
        assert (gid, state, coord, assignor) == (group, "STABLE", coordinator, "range")
        assert sorted(m[0] for m in members) == sorted(st.name for st in states)
        by_member = {m[0]: frozenset(m[2]) for m in members}
        assert by_member == {st.name: st.assignment for st in states}
    finally:
        stop.set()
        for t in threads:
            t.join(15)
    assert not [t.name for t in threads if t.is_alive()], "members that did not close in 15 s"
    for st in states:
        assert st.error is None, f"{st.name}: {st.error!r}"
    # left cleanly (LeaveGroup through the coordinator): the group is empty, its offsets stay
    assert describe(reader.bootstrap, group)[1] == "EMPTY"
    assert committed_offsets(boot.bootstrap, group) == dict.fromkeys(
        range(GROUP_PARTITIONS), PER_PARTITION
    )


# --- 2. transactions across three leaders -----------------------------------------------------


def txn_topic_leaders(c: Cluster) -> dict[int, int]:
    def touch() -> None:
        def answered() -> bool | None:  # asked again, as for groups (see group_topic_leaders)
            p = Producer({"bootstrap.servers": c.nodes[0].bootstrap, "transactional.id": "warm-up"})
            try:
                p.init_transactions(10)
            except KafkaException:
                return None
            return True

        wait_value(answered, timeout=30, what="a transaction coordinator to answer", step=0.2)

    return coordinator_topic_leaders(c, TXN_STATE, touch)


def values(recs: list[Rec]) -> dict[int, list[bytes | None]]:
    out: dict[int, list[bytes | None]] = {}
    for r in sorted(recs, key=lambda r: (r.partition, r.offset)):
        out.setdefault(r.partition, []).append(r.value)
    return out


def test_transaction_spans_partitions_led_by_three_nodes(cluster: Cluster) -> None:
    topic, parts = "txn-spread", 6
    create_topic(cluster.nodes[2].bootstrap, topic, parts)
    assert set(all_led(cluster.bootstrap, topic, parts).values()) == {1, 2, 3}
    boot = cluster.nodes[0]
    coordinator = 2  # not the bootstrap node
    tid = key_led_by("txn", coordinator, txn_topic_leaders(cluster))
    p = Producer({"bootstrap.servers": boot.bootstrap, "transactional.id": tid, "linger.ms": 5})

    def txn(tag: str, commit: bool) -> None:
        p.begin_transaction()
        for part in range(parts):
            for i in range(3):
                p.produce(topic, value=f"{tag}-{part}-{i}".encode(), partition=part)
        if commit:
            p.commit_transaction(10)  # flushes first: every record acknowledged, or it raises
        else:
            assert p.flush(10) == 0
            p.abort_transaction(10)

    p.init_transactions(20)
    txn("one", commit=True)
    txn("aborted", commit=False)
    txn("two", commit=True)

    def want(*tags: str) -> dict[int, list[bytes | None]]:
        return {
            part: [f"{t}-{part}-{i}".encode() for t in tags for i in range(3)]
            for part in range(parts)
        }

    reader = other(cluster, boot.node_id, coordinator)
    assert values(read_from(reader, topic, parts, 6 * parts, "read_committed")) == want(
        "one", "two"
    )
    # the aborted records are in the logs: read_committed had something to leave out
    assert values(read_from(reader, topic, parts, 9 * parts, "read_uncommitted")) == want(
        "one", "aborted", "two"
    )


def read_from(node: Node, topic: str, parts: int, n: int, isolation: str) -> list[Rec]:
    c = ck_consumer(node.bootstrap, **{"isolation.level": isolation})
    try:
        c.assign([TopicPartition(topic, part, 0) for part in range(parts)])
        return ck_drain(c, n, timeout=15, idle=0.5)
    finally:
        c.close()


def producer_ids_on_disk(c: Cluster, topic: str, partition: int, leader: int) -> set[int]:
    """Producer ids of the partition's data batches, read from its leader's segment files."""
    out: set[int] = set()
    for seg in sorted((c.node(leader).log_dir / f"{topic}-{partition}").glob("*.log")):
        out.update(
            b.producer_id
            for b in scan_batches(seg.read_bytes(), allow_partial_tail=True)
            if not b.is_control
        )
    return out


def test_producer_ids_from_different_nodes_never_collide(cluster: Cluster) -> None:
    """Every node hands out producer ids from blocks the active controller allocates:
    idempotent producers bootstrapped on each node, and transactional ones whose coordinator
    is each node."""
    topic, parts = "pid-spread", 6
    create_topic(cluster.nodes[1].bootstrap, topic, parts)
    led = all_led(cluster.bootstrap, topic, parts)
    txn_leaders = txn_topic_leaders(cluster)
    free = sorted(led)
    plan: list[tuple[int, dict[str, Any]]] = []  # (partition, producer config)
    for n in cluster.nodes:
        part = next(q for q in free if led[q] == n.node_id)
        free.remove(part)
        tid = key_led_by("pid", n.node_id, txn_leaders)
        plan.append(
            (
                part,
                {"bootstrap.servers": other(cluster, n.node_id).bootstrap, "transactional.id": tid},
            )
        )
    for n, part in zip(cluster.nodes, free, strict=True):
        plan.append((part, {"bootstrap.servers": n.bootstrap, "enable.idempotence": True}))
    for part, conf in plan:
        p = Producer({**conf, "linger.ms": 0})
        transactional = "transactional.id" in conf
        if transactional:
            p.init_transactions(20)
            p.begin_transaction()
        p.produce(topic, value=b"x", partition=part)
        assert p.flush(15) == 0
        if transactional:
            p.commit_transaction(15)
    pids = {part: producer_ids_on_disk(cluster, topic, part, led[part]) for part, _ in plan}
    assert all(len(s) == 1 for s in pids.values()), pids
    flat = sorted(next(iter(s)) for s in pids.values())
    assert len(set(flat)) == len(flat), f"producer ids collide: {flat}"


# --- 3. kafkajs ----------------------------------------------------------------------------------


@pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")
def test_kafkajs_across_three_nodes(cluster: Cluster) -> None:
    """kafkajs produces to the three leaders and consumes in a group coordinated elsewhere.

    The topic is created, and awaited on every node, by confluent-kafka: kafkajs's
    createTopics(waitForLeaders) retries only LEADER_NOT_AVAILABLE, so when the node it asks
    has not applied the new topic yet (the forwarded CreateTopics returns once the controller
    committed it; the other nodes learn it one metadata fetch later, ~50-200 ms here) it fails
    with UNKNOWN_TOPIC_OR_PARTITION, as kafkajs users report on Kafka clusters (kafkajs issues
    #815, #1222)."""
    topic, parts, per = "js-spread", 6, 5
    create_topic(cluster.nodes[0].bootstrap, topic, parts)
    for n in cluster.nodes:
        assert set(all_led(n.bootstrap, topic, parts).values()) == {1, 2, 3}
    boot = cluster.nodes[2]
    group = key_led_by("jsg", 1, group_topic_leaders(cluster))  # coordinator: node 1
    messages = [
        {"key": f"k{p}-{i}", "value": f"v{p}-{i}", "partition": p}
        for p in range(parts)
        for i in range(per)
    ]
    sent, consumed, offsets, groups = run_ok(
        boot.bootstrap,
        [
            {"op": "produce", "topic": topic, "messages": messages},
            {"op": "consume", "groupId": group, "topics": [topic], "count": parts * per},
            {"op": "fetchOffsets", "groupId": group, "topics": [topic]},
            {"op": "listGroups"},
        ],
        timeout=40,
    )
    assert sorted((r["partition"], r["errorCode"]) for r in sent) == [(p, 0) for p in range(parts)]
    assert consumed["why"] == "count" and consumed["crash"] is None, consumed
    got: dict[int, list[tuple[str, str]]] = {}
    for r in sorted(consumed["records"], key=lambda r: (r["partition"], r["offset"])):
        got.setdefault(r["partition"], []).append((r["key"], r["value"]))
    assert got == {p: [(f"k{p}-{i}", f"v{p}-{i}") for i in range(per)] for p in range(parts)}
    assert [(x["partition"], x["offset"]) for x in offsets[0]["partitions"]] == [
        (p, per) for p in range(parts)
    ]
    assert group in {g["groupId"] for g in groups}  # ListGroups goes to every node
    # what kafkajs committed, as confluent-kafka reads it through another node
    assert committed_offsets(cluster.nodes[1].bootstrap, group, topic) == dict.fromkeys(
        range(parts), per
    )
    # and what it produced, read by confluent-kafka through another node
    ck = ck_read_all(cluster.nodes[1].bootstrap, topic, parts, parts * per)
    assert {p: [(r.key, r.value) for r in recs] for p, recs in group_by_partition(ck).items()} == {
        p: [(k.encode(), v.encode()) for k, v in got[p]] for p in range(parts)
    }


def group_by_partition(recs: list[Rec]) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = {}
    for r in sorted(recs, key=lambda r: (r.partition, r.offset)):
        out.setdefault(r.partition, []).append(r)
    return out


# --- 4. controlled shutdown ---------------------------------------------------------------------


def test_controlled_shutdown_of_a_node_and_its_return(cluster: Cluster) -> None:
    topic, parts = "cs-spread", 9
    create_topic(cluster.nodes[0].bootstrap, topic, parts)
    before = all_led(cluster.bootstrap, topic, parts)
    assert set(before.values()) == {1, 2, 3}
    leader = wait_value(
        lambda: ql if (ql := quorum_leader(cluster.nodes[0])) > 0 else None,
        timeout=10,
        what="a quorum leader",
    )
    victim = other(cluster, leader)
    survivors = [n for n in cluster.nodes if n is not victim]
    mine = sorted(p for p, ld in before.items() if ld == victim.node_id)
    theirs = sorted(p for p, ld in before.items() if ld != victim.node_id)
    acked = make_records("cs1", 90, parts)
    assert ck_produce(cluster.bootstrap, topic, acked, acks="all") == []

    assert victim.stop(timeout=30) == 0, victim.log_tail()
    # one replica each: the victim's partitions have no leader now, the others keep theirs.
    # The controller took its leadership away before approving the exit, so the survivors know
    # at once; a node that just vanished would be fenced only after broker.session.timeout.ms
    # (9 s), hence the short wait.
    wait_for(
        lambda: all(leaders(survivors[0].bootstrap, topic).get(p) == -1 for p in mine),
        timeout=4,
        what=f"partitions {mine} offline after node {victim.node_id} stopped",
        detail=lambda: leaders(survivors[0].bootstrap, topic),
    )
    now = leaders(survivors[1].bootstrap, topic)
    assert {p: now[p] for p in theirs} == {p: before[p] for p in theirs}
    more = [r for r in make_records("cs2", 60, parts) if r.partition in theirs]
    boot = ",".join(n.bootstrap for n in survivors)
    assert ck_produce(boot, topic, more, acks="all") == []

    victim.start(timeout=60)
    wait_for(
        lambda: leaders(survivors[0].bootstrap, topic) == before,
        timeout=20,
        what=f"node {victim.node_id} to lead {mine} again",
        detail=lambda: leaders(survivors[0].bootstrap, topic),
    )
    got = ck_read_all(victim.bootstrap, topic, parts, len(acked) + len(more), timeout=20)
    assert by_partition(got) == by_partition(acked + more)  # per partition: log order
