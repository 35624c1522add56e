"""A persistent ``--add`` pattern between two real kmirror nodes (metadata refresh every 500 ms):
topics created at the source later are mirrored under their source topic id, non-matching ones
are not, and a topic removed from the mirror is never brought back by the pattern.
Driven by kafka-mirrors.sh's main() and stock confluent-kafka clients."""

import io
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicCollection, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from broker.cli import mirrors as mirrors_cli

from .node import Node

MIRROR = "pm"
REFRESH_MS = 500


def _tool(dst: Node, *args: str) -> str:
    out, err = io.StringIO(), io.StringIO()
    rc = mirrors_cli.main(["--bootstrap-server", dst.bootstrap, *args], out, err)
    assert rc == 0, f"{args}: rc={rc}\n{out.getvalue()}\n{err.getvalue()}"
    return out.getvalue()


def _wait(what: str, check: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def _create(node: Node, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": node.bootstrap})
    for f in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(15)


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
    src.start()
    dst.start()
    try:
        props = tmp_path / "mirror.properties"
        props.write_text(f"bootstrap.servers={src.bootstrap}\n")
        _tool(dst, "--create", "--mirror", MIRROR, "--mirror-config", str(props))
        yield src, dst
    finally:
        dst.kill()
        src.kill()


def test_new_source_topics_matching_an_add_pattern_are_mirrored(pair: tuple[Node, Node]) -> None:
    src, dst = pair
    _create(src, "events.a")
    assert not _produce(src.bootstrap, "events.a", 5)
    out = _tool(dst, "--add", "--topic", r"events\..*", "--mirror", MIRROR)
    assert out.strip() == f"Added 1 topic(s) to mirror {MIRROR}: [events.a]", out

    # created at the source after --add: `other` first, so the refresh that brings events.new
    # has seen it too
    _create(src, "other")
    assert not _produce(src.bootstrap, "other", 3)
    _create(src, "events.new", 2)
    assert not _produce(src.bootstrap, "events.new", 20, partitions=2)
    _wait("events.new at the destination", lambda: "events.new" in _topics(dst.bootstrap))
    assert _topic_id(dst.bootstrap, "events.new") == _topic_id(src.bootstrap, "events.new")
    want = _records(src.bootstrap, "events.new", 2)
    assert len(want) == 20
    _wait("events.new's records", lambda: _records(dst.bootstrap, "events.new", 2) == want)
    assert "other" not in _topics(dst.bootstrap)
    described = _tool(dst, "--describe", "--mirror", MIRROR)
    assert " events.new " in described and "other" not in described, described

    # failover of events.a, then its local copy is deleted: the pattern must not re-create it
    _tool(dst, "--remove", "--topic", "events.a", "--mirror", MIRROR)
    _wait("events.a writable", lambda: not _produce(dst.bootstrap, "events.a", 1), timeout=30)
    admin = AdminClient({"bootstrap.servers": dst.bootstrap})
    admin.delete_topics(["events.a"])["events.a"].result(10)
    _wait("events.a deleted here", lambda: "events.a" not in _topics(dst.bootstrap))
    # a later topic proves refreshes ran after the deletion
    _create(src, "events.later")
    _wait("events.later at the destination", lambda: "events.later" in _topics(dst.bootstrap))
    assert "events.a" not in _topics(dst.bootstrap)

    # removing with the pattern's text stops its discovery (and fails over what it matched); a
    # pattern that matches nothing yet is kept all the same
    _tool(dst, "--remove", "--topic", r"events\..*", "--mirror", MIRROR)
    out = _tool(dst, "--add", "--topic", r"late\..*", "--mirror", MIRROR)
    assert "No topics match" in out and "keeps the pattern" in out, out
    _create(src, "events.after")
    _create(src, "late.x")
    _wait("late.x at the destination", lambda: "late.x" in _topics(dst.bootstrap))
    assert "events.after" not in _topics(dst.bootstrap)
