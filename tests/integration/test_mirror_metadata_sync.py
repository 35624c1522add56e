"""The mirror metadata sync between two real kmirror nodes (refresh every 500 ms): topic configs,
partition increases, consumer group offsets and source-side topic deletion reach the destination.
Driven by kafka-mirrors.sh's main() and stock confluent-kafka clients."""

import asyncio
import time
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
)

from .clients import create_topic, wait_for
from .mirror_helpers import (
    MockCluster,
    create_mirror,
    describe_rows,
    end_offsets,
    mirror_tool,
    running,
    wait_caught_up,
    write_mirror_config,
)
from .node import Node

MIRROR = "m1"
REFRESH_MS = 500


def _produce(bootstrap: str, topic: str, n: int, partition: int | None = None) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    errors: list[object] = []
    for i in range(n):
        kwargs = {} if partition is None else {"partition": partition}
        p.produce(
            topic,
            value=b"v%d" % i,
            on_delivery=lambda e, m: errors.append(e) if e else None,
            **kwargs,
        )
    assert p.flush(20) == 0 and not errors, errors


def _partitions(bootstrap: str, topic: str) -> int:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=5)
    t = md.topics.get(topic)
    return 0 if t is None or t.error is not None else len(t.partitions)


def _topic_config(bootstrap: str, topic: str) -> dict[str, str]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    entries = admin.describe_configs([res])[res].result(10)
    return {k: str(v.value) for k, v in entries.items()}


def _mirror(dst: Node, src: Node, topic: str, partitions: int) -> None:
    """Create ``topic`` at the source with a little data, add it to the mirror, wait for it."""
    create_topic(src.bootstrap, topic, partitions)
    _produce(src.bootstrap, topic, 10)
    mirror_tool(dst, "--add", "--topic", topic, "--mirror", MIRROR)
    wait_caught_up(src.bootstrap, dst.bootstrap, topic, partitions, f"{topic} mirrored", 20)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Node, Node]]:
    base = tmp_path_factory.mktemp("mirror-sync")
    src = Node(base / "src")
    dst = Node(base / "dst", mirror__metadata__refresh__interval__ms=str(REFRESH_MS))
    with running(src, dst):
        create_mirror(dst, MIRROR, write_mirror_config(base / "mirror.properties", src.bootstrap))
        yield src, dst


def test_topic_config_change_propagates(pair: tuple[Node, Node]) -> None:
    src, dst = pair
    _mirror(dst, src, "cfg", 1)
    admin = AdminClient({"bootstrap.servers": src.bootstrap})
    res = ConfigResource(
        ConfigResource.Type.TOPIC,
        "cfg",
        incremental_configs=[
            ConfigEntry("retention.ms", "123456789", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("min.insync.replicas", "2", incremental_operation=AlterConfigOpType.SET),
        ],
    )
    admin.incremental_alter_configs([res])[res].result(10)
    assert _topic_config(src.bootstrap, "cfg")["retention.ms"] == "123456789"
    wait_for(
        lambda: _topic_config(dst.bootstrap, "cfg").get("retention.ms") == "123456789",
        10,
        "retention.ms at the destination",
        step=0.1,
    )
    # min.insync.replicas is on the KIP's default exclude list: never copied
    assert _topic_config(src.bootstrap, "cfg")["min.insync.replicas"] == "2"
    assert _topic_config(dst.bootstrap, "cfg").get("min.insync.replicas") != "2"


def test_partition_increase_propagates_and_is_mirrored(pair: tuple[Node, Node]) -> None:
    src, dst = pair
    _mirror(dst, src, "grow", 1)
    admin = AdminClient({"bootstrap.servers": src.bootstrap})
    admin.create_partitions([NewPartitions("grow", 3)])["grow"].result(10)
    _produce(src.bootstrap, "grow", 7, partition=2)
    wait_for(
        lambda: _partitions(dst.bootstrap, "grow") == 3,
        20,
        "3 partitions at the destination",
        step=0.1,
    )
    ends = wait_caught_up(src.bootstrap, dst.bootstrap, "grow", 3, "the new partition mirrored", 20)
    assert ends[2] == 7


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_group_offsets_follow_and_a_consumer_switches_clusters(
    pair: tuple[Node, Node], protocol: str
) -> None:
    """A classic group, and a KIP-848 consumer-protocol group, move to the destination."""
    src, dst = pair
    topic, group = f"orders-{protocol}", f"billing-{protocol}"
    _mirror(dst, src, topic, 2)  # 10 records
    _produce(src.bootstrap, topic, 30)
    ends = wait_caught_up(src.bootstrap, dst.bootstrap, topic, 2, f"{topic} caught up", 20)
    total = sum(ends.values())
    assert total == 40

    def consumer(bootstrap: str) -> Consumer:
        return Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "group.protocol": protocol,
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",  # a missing commit would show as reprocessing
            }
        )

    seen: set[tuple[int, int]] = set()
    c = consumer(src.bootstrap)
    c.subscribe([topic])
    deadline = time.monotonic() + 20
    while len(seen) < 25 and time.monotonic() < deadline:
        for m in c.consume(25 - len(seen), timeout=0.5):
            assert not m.error(), m.error()
            seen.add((m.partition(), m.offset()))
    assert len(seen) == 25, len(seen)
    # a partition none of the 25 came from has no commit (librdkafka reports -1001 for it)
    committed = {
        tp.partition: tp.offset for tp in c.commit(asynchronous=False) or [] if tp.offset >= 0
    }
    c.close()
    committed_at = time.monotonic()

    def dst_committed() -> dict[int, int]:
        probe = Consumer({"bootstrap.servers": dst.bootstrap, "group.id": group})
        try:
            tps = probe.committed([TopicPartition(topic, p) for p in range(2)], timeout=5)
            return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}
        except KafkaException:
            return {}
        finally:
            probe.close()

    wait_for(lambda: dst_committed() == committed, 10, "the offsets at the destination", step=0.1)
    took = time.monotonic() - committed_at
    assert took < 3 * REFRESH_MS / 1000 + 2, took  # within a refresh (plus probe overhead)

    # the same group on the destination resumes where it left off: no record seen twice
    c = consumer(dst.bootstrap)
    c.subscribe([topic])
    rest: list[tuple[int, int]] = []
    deadline = time.monotonic() + 20
    while len(rest) < total - 25 and time.monotonic() < deadline:
        for m in c.consume(50, timeout=0.5):
            assert not m.error(), m.error()
            rest.append((m.partition(), m.offset()))
    c.close()
    assert not set(rest) & seen, sorted(set(rest) & seen)
    assert len(rest) == total - 25 and seen | set(rest) == {
        (p, o) for p, end in ends.items() for o in range(end)
    }


def test_topic_deleted_at_source_becomes_writable(pair: tuple[Node, Node]) -> None:
    src, dst = pair
    _mirror(dst, src, "doomed", 1)
    admin = AdminClient({"bootstrap.servers": src.bootstrap})
    admin.delete_topics(["doomed"])["doomed"].result(10)

    def writable() -> bool:
        p = Producer({"bootstrap.servers": dst.bootstrap, "message.timeout.ms": 2000})
        errors: list[object] = []
        p.produce("doomed", b"local", on_delivery=lambda e, m: errors.append(e) if e else None)
        return p.flush(5) == 0 and not errors

    wait_for(writable, 20, "the destination topic writable (STOPPED)", step=0.1)
    assert end_offsets(dst.bootstrap, "doomed", 1)[0] > 10  # the mirrored data is still there
    rows = describe_rows(dst, MIRROR, "doomed")
    assert rows and all(r[6] == "STOPPED" for r in rows), rows


def test_sync_against_librdkafka_mock_cluster() -> None:
    """A source lacking DescribeConfigs, ListGroups and DescribeAcls: partitions still expand,
    the rest is skipped and counted, nothing fails."""
    from broker.mirror.source import SourceClient
    from tests.broker.test_mirror_metadata_sync import World

    mock = MockCluster()
    try:
        mock.create_topic("mocked", 2)

        async def main() -> None:
            probe = SourceClient({"bootstrap.servers": mock.bootstrap}, "probe")
            try:
                info = (await probe.topics(["mocked"]))["mocked"]
            finally:
                await probe.close()
            w = World(None, request_timeout_ms=5000)
            sync = await w.setup({"bootstrap.servers": mock.bootstrap})
            await w.mirrored_topic("mocked", 1, topic_id=info.topic_id)
            await sync.refresh_now("m")
            await sync.refresh_now("m")
            assert len(w.q.image.topics["mocked"].partitions) == 2
            assert w.mirror_name("mocked") == "m"
            assert not sync.errors, sync.errors
            for kind in ("topic_configs", "groups", "acls", "share_groups"):
                assert sync.skipped[("m", kind)] == 2, (kind, sync.skipped)
            assert sync.last_refresh_ms["m"] > 0
            await sync.close()

        asyncio.run(asyncio.wait_for(main(), 30))
    finally:
        mock.close()
