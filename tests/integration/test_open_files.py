"""A node under a low open-file limit (RLIMIT_NOFILE) hosts more partitions than three
descriptors each would allow, serves produce and fetch on all of them while its descriptor
count stays bounded, and refuses up front a CreateTopics that would exceed its budget."""

import os
import re
import time
import urllib.request
from concurrent.futures import Future
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewPartitions, NewTopic

from .clients import admin
from .node import Node

LIMIT = 1024
CACHE = 64
TOPICS, PARTITIONS = 5, 100  # 500 partitions: more than LIMIT / 3 (three descriptors each)
ROUNDS = 3  # segment.ms rolls between rounds: three segments a partition, most of them sealed


def _fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def _produce_round(bootstrap: str, names: list[str], rnd: int) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "acks": "all"})
    errors: list[str] = []
    for name in names:
        for part in range(PARTITIONS):
            p.produce(
                name,
                value=f"{name}/{part}/{rnd}".encode(),
                partition=part,
                on_delivery=lambda err, _m: errors.append(str(err)) if err else None,
            )
        p.poll(0)
    assert p.flush(60) == 0 and errors == []


def _consume_all(bootstrap: str, names: list[str]) -> dict[tuple[str, int], list[bytes]]:
    c = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    )
    c.assign([TopicPartition(n, p, 0) for n in names for p in range(PARTITIONS)])
    got: dict[tuple[str, int], list[bytes]] = {}
    want = len(names) * PARTITIONS * ROUNDS
    deadline = time.monotonic() + 90
    n = 0
    while n < want and time.monotonic() < deadline:
        for m in c.consume(500, 1.0):
            if m.error():
                raise KafkaException(m.error())
            got.setdefault((m.topic(), m.partition()), []).append(m.value())
            n += 1
    c.close()
    return got


def _assert_refused(future: Future) -> None:
    try:
        future.result(30)
    except KafkaException as e:
        err = e.args[0]
        assert err.name() == "POLICY_VIOLATION", err
        assert f"open-file limit {LIMIT}" in err.str() and "budget" in err.str(), err.str()
    else:
        raise AssertionError("partitions over the descriptor budget were created")


def test_many_partitions_under_a_low_open_file_limit(tmp_path: Path) -> None:
    node = Node(tmp_path / "n", log__max__open__files=str(CACHE))
    node.open_file_limit = LIMIT
    node.start(60)
    try:
        assert node.proc is not None
        pid = node.proc.pid
        a = admin(node.bootstrap)
        names = [f"t{i}" for i in range(TOPICS)]
        new = [NewTopic(n, PARTITIONS, 1, config={"segment.ms": "300"}) for n in names]
        for f in a.create_topics(new, operation_timeout=60).values():
            f.result(90)
        for rnd in range(ROUNDS):
            if rnd:
                time.sleep(0.5)  # past segment.ms: the next append rolls
            _produce_round(node.bootstrap, names, rnd)
        segments = sum(
            1
            for n in names
            for p in range(PARTITIONS)
            for f in os.listdir(node.log_dir / f"{n}-{p}")
            if f.endswith(".log")
        )
        assert segments >= TOPICS * PARTITIONS * 2
        after_produce = _fd_count(pid)
        got = _consume_all(node.bootstrap, names)
        after_fetch = _fd_count(pid)
        assert len(got) == TOPICS * PARTITIONS
        for (name, part), values in got.items():
            assert values == [f"{name}/{part}/{r}".encode() for r in range(ROUNDS)]
        # One descriptor a partition, the bounded cache of sealed segments, and the rest of
        # the node (connections, metadata log, ...): never three a partition.
        bound = TOPICS * PARTITIONS + CACHE + 200
        assert after_produce <= bound and after_fetch <= bound, (after_produce, after_fetch)
        assert after_fetch < LIMIT

        # A topic that would take the node past its budget is refused whole, naming the limit.
        # Topics are checked in order: the first fits, the second does not.
        fs = a.create_topics(
            [NewTopic("fits", 50, 1), NewTopic("too-big", 400, 1)], operation_timeout=30
        )
        fs["fits"].result(30)
        _assert_refused(fs["too-big"])
        assert "too-big" not in a.list_topics(timeout=10).topics
        _assert_refused(a.create_partitions([NewPartitions("t0", 400)])["t0"])
        assert len(a.list_topics(timeout=10).topics["t0"].partitions) == PARTITIONS
        assert not [d for d in os.listdir(node.log_dir) if d.startswith("too-big-")]
        metrics = (
            urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/metrics", timeout=10)
            .read()
            .decode()
        )
        assert 'kafka_log_open_file_failures_total{operation="fetch"} 0.0' in metrics
        assert f"kafka_log_cached_open_files_max {float(CACHE)}" in metrics
        # the node process installs its GC policy (broker.gc_policy): its collections counted
        young = re.search(r'^kmirror_gc_collections_total\{generation="0"\} (\S+)$', metrics, re.M)
        assert young is not None and float(young.group(1)) > 0, metrics
        assert re.search(r"^kmirror_gc_frozen_objects \S+$", metrics, re.M)
        assert node.stop() == 0
    finally:
        node.kill()


def test_out_of_descriptors_fails_only_the_partitions_concerned(tmp_path: Path) -> None:
    """Partitions created under a higher limit, then served under a lower one: appends that
    cannot open their segment get KAFKA_STORAGE_ERROR, logged and counted; the node goes on
    serving the partitions it has descriptors for."""
    node = Node(tmp_path / "n", log__max__open__files=str(CACHE))
    node.open_file_limit = LIMIT
    node.start(60)
    names = [f"t{i}" for i in range(6)]
    try:
        a = admin(node.bootstrap)
        for f in a.create_topics(
            [NewTopic(n, PARTITIONS, 1) for n in names], operation_timeout=60
        ).values():
            f.result(90)
        assert node.stop() == 0
        node.open_file_limit = 400  # fewer descriptors than the 600 partitions need
        node.start(60)
        p = Producer(
            {
                "bootstrap.servers": node.bootstrap,
                "linger.ms": 20,
                "message.timeout.ms": 4000,
                "retry.backoff.ms": 200,
            }
        )
        delivered: list[tuple[str, int]] = []
        failed: list[tuple[str, int]] = []

        def report(err: object, m: object) -> None:
            (failed if err else delivered).append((m.topic(), m.partition()))  # type: ignore[attr-defined]

        for name in names:
            for part in range(PARTITIONS):
                p.produce(name, value=b"v", partition=part, on_delivery=report)
            p.poll(0)
        p.flush(30)
        assert len(delivered) + len(failed) == len(names) * PARTITIONS
        assert len(delivered) >= 50 and failed, (len(delivered), len(failed))
        assert node.proc is not None and node.proc.poll() is None  # still serving
        out = node.output.read_text(errors="replace")
        assert "produce of t" in out and "out of file descriptors" in out
        # A delivered partition still serves fetches.
        topic, part = delivered[0]
        c = Consumer(
            {"bootstrap.servers": node.bootstrap, "group.id": "unused", "enable.auto.commit": False}
        )
        c.assign([TopicPartition(topic, part, 0)])
        msgs = [m for m in c.consume(1, 20) if not m.error()]
        c.close()
        assert [m.value() for m in msgs] == [b"v"]
        metrics = (
            urllib.request.urlopen(f"http://127.0.0.1:{node.metrics_port}/metrics", timeout=10)
            .read()
            .decode()
        )
        count = [
            line
            for line in metrics.splitlines()
            if line.startswith('kafka_log_open_file_failures_total{operation="produce"}')
        ]
        assert count and float(count[0].split()[-1]) > 0, count
    finally:
        node.kill()
