"""KIP-848 mixed groups with stock clients: a confluent-kafka consumer on the classic protocol
and one on the consumer protocol (`group.protocol=consumer`) in one group. The classic group
is upgraded when the consumer-protocol member joins, both consume with every record read once
across them (the mixed group also survives a node restart), and when the consumer-protocol
member leaves the group goes back to classic and the classic member takes every partition."""

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupType, KafkaException, Message
from kafka import KafkaConsumer  # type: ignore[import-untyped]
from kafka.coordinator.assignors.range import (  # type: ignore[import-untyped]
    RangePartitionAssignor,
)

from tests.waits import wait_for

from .clients import admin, ck_produce, create_topic, make_records
from .node import Node

TOPIC, PARTS, GROUP = "mixed", 6, "gmix"
Seen = Counter[tuple[int, int]]


def _consumer(node: Node, protocol: str, strategy: str = "") -> Consumer:
    conf: dict[str, Any] = {
        "bootstrap.servers": node.bootstrap,
        "group.id": GROUP,
        "group.protocol": protocol,
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
    }
    if protocol == "classic":
        conf |= {
            "partition.assignment.strategy": strategy,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
        }
    c = Consumer(conf)
    c.subscribe([TOPIC])
    return c


class _KafkaPython:
    """kafka-python's classic consumer behind the few calls the test makes."""

    def __init__(self, node: Node) -> None:
        self.c = KafkaConsumer(
            TOPIC,
            bootstrap_servers=node.bootstrap,
            group_id=GROUP,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            session_timeout_ms=6000,
            heartbeat_interval_ms=300,
            partition_assignment_strategy=[RangePartitionAssignor],
        )

    def consume(self, num_messages: int, timeout: float) -> list[tuple[int, int]]:
        got = self.c.poll(timeout_ms=int(timeout * 1000), max_records=num_messages)
        return [(m.partition, m.offset) for ms in got.values() for m in ms]

    def commit(self) -> None:
        self.c.commit()

    def assignment(self) -> set[int]:
        return {tp.partition for tp in self.c.assignment()}

    def close(self) -> None:
        self.c.close()


AnyConsumer = Consumer | _KafkaPython


def _poll(cs: list[AnyConsumer], seen: Seen) -> bool:
    """One round: each consumer takes what it gets and commits it before its next poll."""
    for c in cs:
        if isinstance(c, _KafkaPython):
            got = c.consume(50, 0.05)
            for key in got:
                seen[key] += 1
            if got:
                c.commit()
            continue
        msgs: list[Message] = c.consume(num_messages=50, timeout=0.05)
        for m in msgs:
            assert not m.error(), m.error()
            seen[(m.partition() or 0, m.offset() or 0)] += 1
        if msgs:
            c.commit(asynchronous=False)
    return True


def _owned(cs: list[AnyConsumer]) -> list[set[int]]:
    out = []
    for c in cs:
        if isinstance(c, _KafkaPython):
            out.append(c.assignment())
            continue
        try:
            out.append({tp.partition for tp in c.assignment()})
        except KafkaException:
            out.append(set())
    return out


def _until_owned(cs: list[AnyConsumer], seen: Seen, sizes: list[int], what: str) -> None:
    def ok() -> bool:
        _poll(cs, seen)
        a = _owned(cs)
        return [len(x) for x in a] == sizes and set().union(*a) == set(range(PARTS))

    wait_for(ok, 60, what, step=0)


def _drain(cs: list[AnyConsumer], seen: Seen, total: int) -> None:
    wait_for(lambda: _poll(cs, seen) and len(seen) >= total, 45, f"{total} records", step=0)


def _produce(node: Node, tag: str, n: int) -> None:
    assert ck_produce(node.bootstrap, TOPIC, make_records(tag, n, PARTS, headers=False)) == []


def _group_type(node: Node) -> Any:
    a = admin(node.bootstrap)
    return a.describe_consumer_groups([GROUP], request_timeout=10)[GROUP].result(15)


# librdkafka cooperative: the classic member revokes what it loses and joins again with what it
# kept; librdkafka eager (range): it gives up everything before each join; kafka-python (range,
# eager, its own JoinGroup/SyncGroup versions and a subscription without owned partitions)
@pytest.mark.parametrize("strategy", ["cooperative-sticky", "range", "kafka-python"])
def test_classic_and_consumer_protocol_members_share_a_group(tmp_path: Path, strategy: str) -> None:
    node = Node(
        tmp_path / "n1",
        group__consumer__heartbeat__interval__ms="300",
        group__consumer__session__timeout__ms="8000",
        group__initial__rebalance__delay__ms="0",
    )
    node.start()
    cs: list[AnyConsumer] = []
    try:
        create_topic(node.bootstrap, TOPIC, PARTS)
        _produce(node, "a", 120)
        seen: Seen = Counter()
        cs = [
            _KafkaPython(node)
            if strategy == "kafka-python"
            else _consumer(node, "classic", strategy)
        ]
        _until_owned(cs, seen, [PARTS], "the classic consumer to own every partition")
        assert _group_type(node).type == ConsumerGroupType.CLASSIC
        # the consumer-protocol member joins: the group is converted and the partitions split
        cs.append(_consumer(node, "consumer"))
        _until_owned(cs, seen, [3, 3], "both consumers to share the partitions")
        d = _group_type(node)
        assert d.type == ConsumerGroupType.CONSUMER and len(d.members) == 2, d
        _produce(node, "b", 120)
        _drain(cs, seen, 240)
        assert sum(seen.values()) == 240 and max(seen.values()) == 1, "a record read twice"
        assert all(o for o in _owned(cs))
        # a restart: the mixed group comes back from its records, same members
        before = {m.member_id for m in d.members}
        node.stop()
        node.start()
        _produce(node, "r", 60)
        _drain(cs, seen, 300)
        d = _group_type(node)
        assert d.type == ConsumerGroupType.CONSUMER and {m.member_id for m in d.members} == before
        assert sum(seen.values()) == 300 and max(seen.values()) == 1, "a record read twice"
        # the consumer-protocol member leaves: back to a classic group, one member with all
        cs.pop().close()
        _until_owned(cs, seen, [PARTS], "the classic consumer to take every partition back")
        wait_for(
            lambda: _group_type(node).type == ConsumerGroupType.CLASSIC,
            20,
            "the group to be classic again",
        )
        _produce(node, "c", 60)
        _drain(cs, seen, 360)
        assert sum(seen.values()) == 360 and max(seen.values()) == 1, "a record read twice"
    finally:
        for c in cs:
            c.close()
        node.kill()
