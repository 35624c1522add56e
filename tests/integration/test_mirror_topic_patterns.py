"""A persistent ``--add`` pattern between two real kmirror nodes (metadata refresh every 500 ms):
topics created at the source later are mirrored under their source topic id, non-matching ones
are not, and a topic removed from the mirror is never brought back by the pattern.
Driven by kafka-mirrors.sh's main() and stock confluent-kafka clients."""

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient

from .clients import create_topic, wait_for
from .mirror_helpers import create_mirror, mirror_tool, running, write_mirror_config
from .node import Node

MIRROR = "pm"
REFRESH_MS = 500


def _produce(bootstrap: str, topic: str, n: int, partitions: int = 1) -> list[object]:
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "enable.idempotence": True,
            "message.timeout.ms": 5000,
        }
    )
    errors: list[object] = []
    for i in range(n):
        p.produce(
            topic,
            value=b"%s-%d" % (topic.encode(), i),
            partition=i % partitions,
            on_delivery=lambda e, m: errors.append(e) if e else None,
        )
    assert p.flush(20) == 0
    return errors


def _topics(bootstrap: str) -> set[str]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=5)
    return {n for n, t in md.topics.items() if t.error is None}


def _topic_id(bootstrap: str, topic: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (f,) = admin.describe_topics(TopicCollection([topic]), request_timeout=10).values()
    return str(f.result(10).topic_id)


def _records(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int, bytes]]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe", "enable.auto.commit": False})
    try:
        ends = {
            p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
            for p in range(partitions)
        }
        c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        got: list[tuple[int, int, bytes]] = []
        deadline = time.monotonic() + 15
        while len(got) < sum(ends.values()) and time.monotonic() < deadline:
            for m in c.consume(100, timeout=0.5):
                assert not m.error(), m.error()
                got.append((m.partition(), m.offset(), m.value()))
        return sorted(got)
    except KafkaException:
        return []
    finally:
        c.close()


@pytest.fixture()
def pair(tmp_path: Path) -> Iterator[tuple[Node, Node]]:
    src = Node(tmp_path / "src")
    dst = Node(tmp_path / "dst", mirror__metadata__refresh__interval__ms=str(REFRESH_MS))
    with running(src, dst):
        create_mirror(
            dst, MIRROR, write_mirror_config(tmp_path / "mirror.properties", src.bootstrap)
        )
        yield src, dst


def test_new_source_topics_matching_an_add_pattern_are_mirrored(pair: tuple[Node, Node]) -> None:
    src, dst = pair
    create_topic(src.bootstrap, "events.a")
    assert not _produce(src.bootstrap, "events.a", 5)
    out = mirror_tool(dst, "--add", "--topic", r"events\..*", "--mirror", MIRROR)
    assert out.strip() == f"Added 1 topic(s) to mirror {MIRROR}: [events.a]", out

    # created at the source after --add: `other` first, so the refresh that brings events.new
    # has seen it too
    create_topic(src.bootstrap, "other")
    assert not _produce(src.bootstrap, "other", 3)
    create_topic(src.bootstrap, "events.new", 2)
    assert not _produce(src.bootstrap, "events.new", 20, partitions=2)
    wait_for(
        lambda: "events.new" in _topics(dst.bootstrap),
        20,
        "events.new at the destination",
        step=0.1,
    )
    assert _topic_id(dst.bootstrap, "events.new") == _topic_id(src.bootstrap, "events.new")
    want = _records(src.bootstrap, "events.new", 2)
    assert len(want) == 20
    wait_for(
        lambda: _records(dst.bootstrap, "events.new", 2) == want,
        20,
        "events.new's records",
        step=0.1,
    )
    assert "other" not in _topics(dst.bootstrap)
    described = mirror_tool(dst, "--describe", "--mirror", MIRROR)
    assert " events.new " in described and "other" not in described, described

    # failover of events.a, then its local copy is deleted: the pattern must not re-create it
    mirror_tool(dst, "--remove", "--topic", "events.a", "--mirror", MIRROR)
    wait_for(lambda: not _produce(dst.bootstrap, "events.a", 1), 30, "events.a writable", step=0.1)
    admin = AdminClient({"bootstrap.servers": dst.bootstrap})
    admin.delete_topics(["events.a"])["events.a"].result(10)
    wait_for(
        lambda: "events.a" not in _topics(dst.bootstrap), 20, "events.a deleted here", step=0.1
    )
    # a later topic proves refreshes ran after the deletion
    create_topic(src.bootstrap, "events.later")
    wait_for(
        lambda: "events.later" in _topics(dst.bootstrap),
        20,
        "events.later at the destination",
        step=0.1,
    )
    assert "events.a" not in _topics(dst.bootstrap)

    # removing with the pattern's text stops its discovery (and fails over what it matched); a
    # pattern that matches nothing yet is kept all the same
    mirror_tool(dst, "--remove", "--topic", r"events\..*", "--mirror", MIRROR)
    out = mirror_tool(dst, "--add", "--topic", r"late\..*", "--mirror", MIRROR)
    assert "No topics match" in out and "keeps the pattern" in out, out
    create_topic(src.bootstrap, "events.after")
    create_topic(src.bootstrap, "late.x")
    wait_for(lambda: "late.x" in _topics(dst.bootstrap), 20, "late.x at the destination", step=0.1)
    assert "events.after" not in _topics(dst.bootstrap)
