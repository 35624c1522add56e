"""Stock clients against one real node: produce (acks, codecs), consume (earliest/latest/time),
consumer groups across a restart, and an idempotent producer across a restart.

Records are always read back by a different library than the one that wrote them.
"""

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_END, Consumer, KafkaError, Message, Producer, TopicPartition
from kafka import KafkaConsumer  # type: ignore[import-untyped]
from kafka import TopicPartition as KpTP

from .clients import (
    CODEC_IDS,
    READERS,
    Rec,
    aio_produce,
    by_partition,
    ck_consumer,
    ck_drain,
    ck_produce,
    ck_read_all,
    ck_rec,
    create_topic,
    kcat_produce,
    kcat_read_all,
    kp_drain,
    kp_produce,
    make_records,
    stored_codecs,
    wait_for,
)
from .node import Node

# kafka-python group joins: on a loaded machine its range assignor can lack the topic's metadata
# for longer than the tests wait; bin/test.sh runs this module alone
pytestmark = pytest.mark.serial

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
N = 30
PARTS = 3


@pytest.fixture(scope="module")
def mnode(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    n = Node(tmp_path_factory.mktemp("clients") / "node1")
    n.start()
    yield n
    n.kill()


def check_same(reader: str, got: list[Rec], want: list[Rec]) -> None:
    assert len(got) == len(want), f"{reader} read {len(got)} records, {len(want)} produced"
    assert by_partition(got) == by_partition(want), f"{reader} read different records or order"


def check_codec(node: Node, topic: str, codec: str | None) -> None:
    """The batches on disk carry the codec (librdkafka sends a batch that compression does not
    shrink, e.g. one short record, uncompressed: so 'none' may appear next to it)."""
    stored = stored_codecs(node.log_dir, topic)
    want = CODEC_IDS[codec]
    assert want in stored and stored <= {0, want}, f"{codec}: stored batches use codecs {stored}"


# --- 1. produce: acks and codecs, each read back by another library ---------------------------


@pytest.mark.parametrize("acks", [0, 1, -1])
def test_confluent_acks(mnode: Node, acks: int) -> None:
    topic = f"ck-acks{acks}"
    create_topic(mnode.bootstrap, topic, PARTS)
    recs = make_records(topic, N, PARTS)
    assert ck_produce(mnode.bootstrap, topic, recs, acks=acks) == []
    # acks=0 may lose records in general; on loopback to a healthy node all of them arrive.
    check_same("kafka-python", READERS["kafka-python"](mnode.bootstrap, topic, PARTS, N), recs)


@pytest.mark.parametrize(
    ("codec", "reader"),
    [
        ("none", "kafka-python"),
        ("gzip", "aiokafka"),
        ("snappy", "kcat"),
        ("lz4", "kafka-python"),
        ("zstd", "aiokafka"),
    ],
)
def test_confluent_codecs(mnode: Node, codec: str, reader: str) -> None:
    topic = f"ck-{codec}"
    create_topic(mnode.bootstrap, topic, PARTS)
    recs = make_records(topic, N, PARTS)
    if reader == "kcat":  # kcat -J cannot tell a null value from an empty one
        recs = [Rec(r.partition, r.key, r.value or b"x", r.headers) for r in recs]
    assert ck_produce(mnode.bootstrap, topic, recs, acks=-1, **{"compression.type": codec}) == []
    check_same(reader, READERS[reader](mnode.bootstrap, topic, PARTS, N), recs)
    check_codec(mnode, topic, codec)


@pytest.mark.parametrize("codec", CODECS)
def test_kcat_produce(mnode: Node, codec: str) -> None:
    topic = f"kcat-{codec}"
    create_topic(mnode.bootstrap, topic, 2)
    want = []
    for p in range(2):
        # Repetitive values: librdkafka sends a batch uncompressed when compressing does not shrink it.
        recs = [
            Rec(p, f"k{p}-{i}".encode(), f"{codec}-v{p}-{i}-".encode() * 8, (("src", b"kcat"),))
            for i in range(12)
        ]
        kcat_produce(
            mnode.bootstrap,
            topic,
            [f"{r.key.decode()}:{r.value.decode()}" for r in recs if r.key and r.value],
            p,
            codec,
        )
        want += recs
    check_same("confluent", ck_read_all(mnode.bootstrap, topic, 2, len(want)), want)
    # kcat's librdkafka (2.0.2) compresses gzip/snappy/lz4 only when ApiVersions shows Produce
    # v0 (Kafka 4 keeps advertising it for that reason, KAFKA-18659); else it sends plain batches.
    check_codec(mnode, topic, codec)


@pytest.mark.parametrize(
    ("codec", "acks", "reader"),
    [
        (None, 0, "confluent"),
        ("gzip", 1, "aiokafka"),
        ("lz4", "all", "confluent"),
        ("snappy", 1, "aiokafka"),
        ("zstd", "all", "confluent"),
    ],
)
def test_kafka_python_produce(mnode: Node, codec: str | None, acks: int | str, reader: str) -> None:
    topic = f"kp-{codec}-{acks}"
    create_topic(mnode.bootstrap, topic, PARTS)
    # kafka-python cannot send null header values
    recs = make_records(topic, N, PARTS, null_header=False)
    kp_produce(mnode.bootstrap, topic, recs, acks=acks, compression_type=codec)
    check_same(reader, READERS[reader](mnode.bootstrap, topic, PARTS, N), recs)
    check_codec(mnode, topic, codec)


@pytest.mark.parametrize(
    ("codec", "acks"), [(None, 0), ("gzip", 1), ("snappy", "all"), ("lz4", 1), ("zstd", "all")]
)
def test_aiokafka_produce(mnode: Node, codec: str | None, acks: int | str) -> None:
    topic = f"aio-{codec}-{acks}"
    create_topic(mnode.bootstrap, topic, PARTS)
    recs = make_records(topic, N, PARTS)
    aio_produce(mnode.bootstrap, topic, recs, acks=acks, compression_type=codec)
    check_same("kafka-python", READERS["kafka-python"](mnode.bootstrap, topic, PARTS, N), recs)
    check_codec(mnode, topic, codec)


def test_large_records(mnode: Node) -> None:
    topic = "big"
    create_topic(mnode.bootstrap, topic, 1)
    big = os.urandom(900_000)  # incompressible, under max.message.bytes (1048588)
    p = Producer({"bootstrap.servers": mnode.bootstrap, "message.max.bytes": 4_000_000, "acks": -1})
    results: list[KafkaError | None] = []
    for value in (big, os.urandom(1_500_000), b"small"):
        p.produce(topic, value=value, on_delivery=lambda err, _m: results.append(err))
        p.flush(20)
    assert results[0] is None and results[2] is None, results
    assert results[1] is not None and results[1].code() == KafkaError.MSG_SIZE_TOO_LARGE, results[1]

    # A fetch size below one batch still returns that whole batch (KIP-74).
    got = ck_drain_assigned(
        mnode.bootstrap,
        topic,
        2,
        **{"max.partition.fetch.bytes": 1024, "fetch.max.bytes": 1024, "message.max.bytes": 1000},
    )
    assert [(r.offset, r.value) for r in got] == [(0, big), (1, b"small")]
    kc = KafkaConsumer(
        bootstrap_servers=mnode.bootstrap, max_partition_fetch_bytes=1024, fetch_max_bytes=1024
    )
    try:
        kc.assign([KpTP(topic, 0)])
        kc.seek_to_beginning()
        got = kp_drain(kc, 2, 15)
    finally:
        kc.close()
    assert [(r.offset, r.value) for r in got] == [(0, big), (1, b"small")]


def ck_drain_assigned(bootstrap: str, topic: str, n: int, **conf: object) -> list[Rec]:
    c = ck_consumer(bootstrap, **conf)
    try:
        c.assign([TopicPartition(topic, 0, 0)])
        return ck_drain(c, n, 15)
    finally:
        c.close()


# --- 2. consume: earliest, latest, by timestamp ------------------------------------------------


def test_consume_earliest_group_and_kcat(mnode: Node) -> None:
    topic = "earliest"
    create_topic(mnode.bootstrap, topic, 2)
    recs = make_records(topic, 20, 2)
    assert ck_produce(mnode.bootstrap, topic, recs) == []
    c = ck_consumer(mnode.bootstrap, **{"group.id": "g-earliest"})
    try:
        c.subscribe([topic])
        got = ck_drain(c, 20, 15, idle=0.3)
    finally:
        c.close()
    check_same("confluent group", got, recs)
    raw = kcat_read_all(mnode.bootstrap, topic)
    assert [r.offset for r in raw if r.partition == 0] == list(range(10))
    # kcat -J cannot tell an empty value from a null one: compare both as null.
    got_kcat = [Rec(r.partition, r.key, r.value or None, r.headers) for r in raw]
    check_same(
        "kcat", got_kcat, [Rec(r.partition, r.key, r.value or None, r.headers) for r in recs]
    )


def test_consume_latest(mnode: Node) -> None:
    topic = "latest"
    create_topic(mnode.bootstrap, topic, 2)
    assert ck_produce(mnode.bootstrap, topic, make_records("old", 10, 2)) == []
    c = KafkaConsumer(
        bootstrap_servers=mnode.bootstrap,
        group_id="g-latest",
        auto_offset_reset="latest",
        enable_auto_commit=False,
    )
    try:
        c.subscribe([topic])
        early: list[object] = []

        def assigned() -> bool:
            early.extend(c.poll(timeout_ms=100).values())
            return len(c.assignment()) == 2

        wait_for(assigned, 15, "assignment")
        assert early == [], "a consumer reset to latest read old records"
        # position() resolves the reset to the log end before anything new is written.
        assert [c.position(KpTP(topic, p)) for p in range(2)] == [5, 5]
        new = make_records("new", 8, 2)
        assert ck_produce(mnode.bootstrap, topic, new) == []
        got = kp_drain(c, 8, 15)
    finally:
        c.close()
    check_same("kafka-python latest", got, new)


def test_consume_from_timestamp(mnode: Node) -> None:
    topic = "by-time"
    create_topic(mnode.bootstrap, topic, 1)
    t0 = int(time.time() * 1000) - 100_000
    recs = [Rec(0, f"k{i}".encode(), f"v{i}".encode(), (), -1, t0 + 1000 * i) for i in range(20)]
    assert ck_produce(mnode.bootstrap, topic, recs) == []

    c = ck_consumer(mnode.bootstrap)
    try:
        found = c.offsets_for_times(
            [TopicPartition(topic, 0, t0 + 7500)], timeout=10
        ) + c.offsets_for_times([TopicPartition(topic, 0, t0 + 7000)], timeout=10)
        assert [tp.offset for tp in found] == [8, 7]
        late = c.offsets_for_times([TopicPartition(topic, 0, t0 + 10**6)], timeout=10)[0]
        assert late.offset in (-1, OFFSET_END), "a time after every record has no offset"
        c.assign([TopicPartition(topic, 0, 8)])
        got = ck_drain(c, 12, 10)
    finally:
        c.close()
    assert [(r.offset, r.key, r.timestamp) for r in got] == [
        (i, f"k{i}".encode(), t0 + 1000 * i) for i in range(8, 20)
    ]

    kc = KafkaConsumer(bootstrap_servers=mnode.bootstrap, enable_auto_commit=False)
    try:
        tp = KpTP(topic, 0)
        ot = kc.offsets_for_times({tp: t0 + 12_000})[tp]
        assert (ot.offset, ot.timestamp) == (12, t0 + 12_000)
        assert kc.offsets_for_times({tp: t0 + 10**6})[tp] is None
    finally:
        kc.close()


# --- 3. consumer group: rebalances, committed offsets, restart --------------------------------


def _poll_all(cs: list[Consumer], seen: list[Rec], rounds: int = 1) -> bool:
    """Poll each member (records go to seen); True, so it can lead an `and` in a wait condition."""
    for _ in range(rounds):
        for c in cs:
            for m in c.consume(num_messages=100, timeout=0.05):
                assert not m.error(), m.error()
                seen.append(ck_rec(m))
    return True


def _assignments(cs: list[Consumer]) -> list[set[int]]:
    return [{tp.partition for tp in c.assignment()} for c in cs]


def _stable(cs: list[Consumer], seen: list[Rec], parts: int, timeout: float = 25) -> list[set[int]]:
    """Poll every member until each owns something and together they own every partition once."""

    def ok() -> bool:
        _poll_all(cs, seen)
        a = _assignments(cs)
        return all(a) and sum(map(len, a)) == parts and set().union(*a) == set(range(parts))

    wait_for(ok, timeout, f"{len(cs)} members to share {parts} partitions", step=0)
    return _assignments(cs)


@pytest.mark.parametrize("strategy", ["range", "cooperative-sticky"])
def test_consumer_group_rebalance_commit_restart(tmp_path: Path, strategy: str) -> None:
    node = Node(tmp_path / "node1")
    node.start()
    try:
        _group_scenario(node, strategy)
    finally:
        node.kill()


def _group_scenario(node: Node, strategy: str) -> None:
    topic, parts, group = "grp6", 6, "g3"
    create_topic(node.bootstrap, topic, parts)
    assert ck_produce(node.bootstrap, topic, make_records("a", 60, parts, headers=False)) == []
    conf = {
        "group.id": group,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 200,
        "partition.assignment.strategy": strategy,
    }
    cs = [ck_consumer(node.bootstrap, **conf) for _ in range(3)]
    try:
        for c in cs:
            c.subscribe([topic])
        seen: list[Rec] = []
        a3 = _stable(cs, seen, parts)
        assert sorted(map(len, a3)) == [2, 2, 2], a3
        # Members may have read records before the group settled; wait until each member has
        # read its own partitions to the end (10 records each), then commit those positions.

        def at_end() -> bool:
            _poll_all(cs, seen)
            return all(tp.offset == 10 for c in cs for tp in c.position(c.assignment()))

        wait_for(at_end, 15, "every member to reach the end of its partitions")
        for c in cs:
            c.commit(asynchronous=False)

        cs.append(ck_consumer(node.bootstrap, **conf))
        cs[-1].subscribe([topic])
        after: list[Rec] = []
        a4 = _stable(cs, after, parts)
        assert sorted(map(len, a4)) == [1, 1, 2, 2], a4
        # New owners start at the committed offsets: nothing is delivered again.
        _poll_all(cs, after, rounds=5)
        assert after == [], (
            f"committed records were delivered again after the rebalance: {after[:5]}"
        )

        cs.pop(0).close()  # a member leaves
        a3b = _stable(cs, after, parts)
        assert sorted(map(len, a3b)) == [2, 2, 2], a3b
        _poll_all(cs, after, rounds=3)
        assert after == []
        committed = cs[0].committed([TopicPartition(topic, p) for p in range(parts)], timeout=10)
        assert [tp.offset for tp in committed] == [10] * parts
    finally:
        for c in cs:
            c.close()

    # Uncommitted tail, then restart on the same dirs: the group resumes after the commits.
    tail = make_records("b", 12, parts, headers=False)
    assert ck_produce(node.bootstrap, topic, tail) == []
    assert node.stop() == 0, node.log_tail()
    node.start()
    c = ck_consumer(node.bootstrap, **conf)
    try:
        c.subscribe([topic])
        got = ck_drain(c, 12, 25, idle=0.5)
    finally:
        c.close()
    assert sorted((r.partition, r.offset) for r in got) == sorted(
        (p, 10 + i) for p in range(parts) for i in range(2)
    )
    assert by_partition(Rec(r.partition, r.key, r.value) for r in got) == by_partition(tail)


# --- 4. idempotent producer across a restart ---------------------------------------------------


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_idempotent_producer_across_restart(tmp_path: Path, how: str) -> None:
    node = Node(tmp_path / "node1")
    node.start()
    try:
        topic, total = "idem", 2000
        create_topic(node.bootstrap, topic, 2)
        p = Producer(
            {
                "bootstrap.servers": node.bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 2,
                "batch.num.messages": 50,
                "message.timeout.ms": 40000,
                "reconnect.backoff.ms": 50,
                "retry.backoff.ms": 50,
            }
        )
        delivered: list[int] = []
        errors: list[str] = []

        def cb(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                errors.append(str(err))
            else:
                delivered.append(int(msg.value() or b"-1"))

        outstanding_at_restart = -1

        def restart() -> None:
            nonlocal outstanding_at_restart
            outstanding_at_restart = len(p)
            if how == "stop":
                assert node.stop() == 0, node.log_tail()
            else:
                node.kill()
            node.start()

        deadline = time.monotonic() + 60
        for i in range(total):
            p.produce(topic, value=str(i).encode(), partition=i % 2, on_delivery=cb)
            p.poll(0)
            if i == total // 2 - 1:  # the first half acknowledged before the restart...
                p.flush(20)
            if i == total * 3 // 4 - 1:  # ...and a quarter queued, not yet acknowledged, at it
                restart()
            assert time.monotonic() < deadline
        assert outstanding_at_restart > 0, "the restart should happen with records in flight"
        left = p.flush(45)
        assert left == 0, f"{left} records not delivered after the restart:\n{node.log_tail()}"
        assert errors == [], f"delivery errors {errors[:3]}:\n{node.log_tail()}"
        assert sorted(delivered) == list(range(total))

        got = ck_read_all(node.bootstrap, topic, 2, total, timeout=30)
        values = [int(r.value or b"-1") for r in got]
        dups = len(values) - len(set(values))
        lost = total - len(set(values))
        assert (dups, lost) == (0, 0), f"{dups} duplicates, {lost} lost"
        for part in range(2):  # per-partition order is the send order
            vs = [v for r, v in zip(got, values, strict=True) if r.partition == part]
            assert vs == sorted(vs)
    finally:
        node.kill()
