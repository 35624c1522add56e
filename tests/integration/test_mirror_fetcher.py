"""Mirror fetchers against real sources: a kmirror node process and librdkafka's mock cluster.

The destination side runs in-process (MirrorFetcherManager over a LogManager in tmp_path); data
is produced with stock confluent-kafka producers, and the mirrored batches are compared byte for
byte with the source's log segment files.
"""

from __future__ import annotations

import asyncio
import glob
import threading
import time
import uuid
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from broker.log.clock import SystemClock
from broker.log.config import LogConfig
from broker.log.manager import LogManager
from broker.mirror.fetcher import MirrorFetcherManager
from broker.mirror.source import SourceClient
from broker.replication.partition import Partition, sole_leader
from protocol.records import Record, build_batch, scan_batches

from .clients import create_topic, wait_for_async
from .mirror_helpers import MockCluster
from .node import Node

Batches = dict[int, bytes]  # base offset -> the batch's bytes


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    n = Node(tmp_path_factory.mktemp("mirror-source") / "src")
    n.start()
    yield n
    n.kill()


def produce(
    bootstrap: str, topic: str, count: int, size: int = 100, partitions: int = 1, chunk: int = 30
) -> None:
    """Idempotent lz4 producer; a flush every ``chunk`` records makes several batches."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "compression.type": "lz4",
            "linger.ms": 5,
            "message.timeout.ms": 30000,
        }
    )
    for i in range(count):
        value = (b"%08d" % i) * (size // 8)
        while True:
            try:
                p.produce(topic, value=value, key=b"k%d" % i, partition=i % partitions)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
        if (i + 1) % chunk == 0:
            assert p.flush(30) == 0, "producer did not deliver everything"
    assert p.flush(30) == 0, "producer did not deliver everything"


def segment_batches(partition_dir: Path) -> Batches:
    """Every whole batch in a partition directory's .log files."""
    out: Batches = {}
    for path in sorted(glob.glob(str(partition_dir / "*.log"))):
        data = Path(path).read_bytes()
        for view in scan_batches(data, allow_partial_tail=True):
            out[view.base_offset] = bytes(view.raw)
    return out


def dest_batches(logs: LogManager, topic: str, partition: int = 0) -> Batches:
    plog = logs.get(topic, partition)
    assert plog is not None
    out: Batches = {}
    offset = plog.log_start_offset
    for _ in range(100_000):
        if offset >= plog.log_end_offset:
            break
        result = plog.read(offset, 1 << 20, upper_bound=plog.log_end_offset)
        if not result.records:
            break
        for buf in result.records:
            for view in scan_batches(buf):
                if view.last_offset >= offset:
                    out[view.base_offset] = bytes(view.raw)
                offset = max(offset, view.next_offset)
    return out


def last_offset(batches: Batches) -> int:
    return max((next(iter(scan_batches(b))).last_offset for b in batches.values()), default=-1)


def assert_contiguous(batches: Batches, start: int) -> None:
    expected = None
    for base in sorted(batches):
        view = next(iter(scan_batches(batches[base])))
        if expected is not None:
            assert base == expected, f"gap or duplicate at offset {base}, expected {expected}"
        expected = view.next_offset
    assert min(batches) <= start


class Dest:
    """A destination log manager plus a fetcher manager, in this process."""

    def __init__(self, root: Path, **config: Any) -> None:
        self.logs = LogManager([root], LogConfig(**config), SystemClock())
        self.failed: list[tuple[str, str, int, str]] = []
        self.appended = 0
        self._owners: dict[tuple[str, int], Partition] = {}

        def on_appended(_t: str, _p: int) -> None:
            self.appended += 1

        self.fetchers = MirrorFetcherManager(
            7,
            self.partition,
            SystemClock(),
            on_failed=lambda *a: self.failed.append(a),
            on_appended=on_appended,
        )

    def partition(self, topic: str, partition: int) -> Partition | None:
        """The one owner of each log's appends, created on first use (this process leads)."""
        plog = self.logs.get(topic, partition)
        if plog is None:
            return None
        owner = self._owners.get((topic, partition))
        if owner is None or owner.log is not plog:
            owner = self._owners[(topic, partition)] = sole_leader(plog, SystemClock().now_ms)
        return owner

    def create(self, topic: str, partitions: int, topic_id: uuid.UUID | None) -> None:
        for p in range(partitions):
            self.logs.get_or_create(topic, p, topic_id)

    def leo(self, topic: str, partition: int = 0) -> int:
        plog = self.logs.get(topic, partition)
        return -1 if plog is None else plog.log_end_offset

    async def close(self) -> None:
        await self.fetchers.close()
        self.logs.close()


async def source_topic_id(bootstrap: str, topic: str) -> uuid.UUID | None:
    client = SourceClient({"bootstrap.servers": bootstrap}, "test-metadata")
    try:
        return (await client.topics([topic]))[topic].topic_id
    finally:
        await client.close()


async def dest_of(root: Path, bootstrap: str, topic: str) -> tuple[Dest, uuid.UUID | None]:
    """A Dest holding the source topic's partition 0 under the source's topic id, and that id."""
    tid = await source_topic_id(bootstrap, topic)
    dest = Dest(root)
    dest.create(topic, 1, tid)
    return dest, tid


def run(coro: Awaitable[None], timeout: float = 60) -> None:
    asyncio.run(asyncio.wait_for(coro, timeout))  # type: ignore[arg-type]


def test_source_client_reads_metadata_and_offsets(source: Node) -> None:
    create_topic(source.bootstrap, "sc", 2)
    produce(source.bootstrap, "sc", 20, partitions=2)

    async def main() -> None:
        client = SourceClient({"bootstrap.servers": source.bootstrap}, "test")
        try:
            assert await client.cluster_id()
            assert (await client.api_versions())[1][1] >= 13
            assert await client.brokers() == {1: ("127.0.0.1", source.port)}
            topics = await client.topics(["sc", "missing"])
            assert set(topics) == {"sc"}
            assert topics["sc"].topic_id is not None
            assert set(topics["sc"].partitions) == {0, 1}
            assert topics["sc"].partitions[0].leader_id == 1
            start, _ = await client.list_offsets("sc", 0, -2)
            assert start == 0
            end, _ = await client.list_offsets("sc", 1, -1)
            assert end == 10
            configs = await client.topic_configs(["sc"])
            assert "sc" in configs
        finally:
            await client.close()

    run(main())
    # SASL without a usable mechanism (Kafka's default GSSAPI is not served): the key is named
    with pytest.raises(ValueError, match=r"sasl\.mechanism: GSSAPI is not supported"):
        SourceClient({"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL"}, "x")


def test_mirror_is_byte_identical_and_follows_log_start(source: Node, tmp_path: Path) -> None:
    topic = "m1"
    create_topic(source.bootstrap, topic)
    produce(source.bootstrap, topic, 300)
    src_dir = source.log_dir / f"{topic}-0"

    async def main() -> None:
        dest, tid = await dest_of(tmp_path / "dest", source.bootstrap, topic)
        cfg = {"bootstrap.servers": source.bootstrap}
        try:
            await dest.fetchers.add("m", cfg, {(topic, 0): tid})
            await wait_for_async(lambda: dest.leo(topic) == 300, 20, "the first 300 records")
            src = segment_batches(src_dir)
            got = dest_batches(dest.logs, topic)
            assert got == src, "mirrored batches differ from the source's"
            assert len(got) > 1
            status = dest.fetchers.status("m", topic, 0)
            assert status is not None and status.lag == 0 and status.error is None
            assert status.source_high_watermark == 300 and status.local_log_end_offset == 300

            # Retention at the source inside a batch: the mirror's log start follows.
            admin = AdminClient({"bootstrap.servers": source.bootstrap})
            futs = admin.delete_records([TopicPartition(topic, 0, 145)])
            futs[TopicPartition(topic, 0, 145)].result(timeout=10)
            produce(source.bootstrap, topic, 10)
            plog = dest.logs.get(topic, 0)
            assert plog is not None
            await wait_for_async(lambda: plog.log_start_offset == 145, 10, "log start 145")

            # Paused while the source moves its log start past our end: on resume the mirror
            # restarts its log at the source's start (the batch straddling it included).
            await dest.fetchers.remove("m", [(topic, 0)])
            before = plog.log_end_offset
            produce(source.bootstrap, topic, 100)
            futs = admin.delete_records([TopicPartition(topic, 0, 385)])
            futs[TopicPartition(topic, 0, 385)].result(timeout=10)
            # `remove` returns once no fetch of the partition is in flight, and it is no longer
            # assigned to any fetcher: nothing can append to it from here on
            assert dest.fetchers.status("m", topic, 0) is None, "still assigned after remove"
            assert plog.log_end_offset == before, "a removed partition was still fetched"
            await dest.fetchers.add("m", cfg, {(topic, 0): tid})
            await wait_for_async(lambda: plog.log_end_offset == 410, 20, "offset 410")
            assert plog.log_start_offset == 385
            src = segment_batches(src_dir)
            got = dest_batches(dest.logs, topic)
            first = min(got)
            assert first == 370, "the batch straddling the source log start is kept whole"
            assert got == {o: b for o, b in src.items() if o >= first}
            assert_contiguous(got, 385)
            assert not dest.failed
        finally:
            await dest.close()

    run(main())


def test_local_log_ahead_of_the_source_is_truncated_by_epoch(source: Node, tmp_path: Path) -> None:
    """OFFSET_OUT_OF_RANGE above the source's end: OffsetForLeaderEpoch finds where we diverged."""
    topic = "diverge"
    create_topic(source.bootstrap, topic)
    produce(source.bootstrap, topic, 60)
    src_dir = source.log_dir / f"{topic}-0"

    async def main() -> None:
        dest, tid = await dest_of(tmp_path / "dest", source.bootstrap, topic)
        cfg = {"bootstrap.servers": source.bootstrap}
        try:
            await dest.fetchers.add("m", cfg, {(topic, 0): tid})
            await wait_for_async(lambda: dest.leo(topic) == 60, 20, "60 records")
            await dest.fetchers.remove("m", [(topic, 0)])
            plog = dest.logs.get(topic, 0)
            assert plog is not None
            epoch = plog.latest_epoch
            assert epoch is not None
            # Data the source never had, in the source's current epoch.
            fake = build_batch(
                [Record(value=b"not at the source")] * 5,
                base_offset=60,
                partition_leader_epoch=epoch,
            )
            plog.append_raw(fake, now_ms=0)
            assert plog.log_end_offset == 65
            await dest.fetchers.add("m", cfg, {(topic, 0): tid})
            await wait_for_async(lambda: plog.log_end_offset == 60, 10, "truncation to 60")
            produce(source.bootstrap, topic, 30)
            await wait_for_async(lambda: plog.log_end_offset == 90, 10, "offset 90")
            assert dest_batches(dest.logs, topic) == segment_batches(src_dir)
            assert not dest.failed
        finally:
            await dest.close()

    run(main())


def test_source_killed_and_restarted_mid_stream(tmp_path: Path) -> None:
    node = Node(tmp_path / "src")
    node.start()
    topic = "restart"
    try:
        create_topic(node.bootstrap, topic)
        produce(node.bootstrap, topic, 200)
        errors: list[BaseException] = []

        def writer() -> None:
            try:
                produce(node.bootstrap, topic, 1500, size=64)
            except BaseException as e:  # reported by the main thread
                errors.append(e)

        async def main() -> None:
            dest, tid = await dest_of(tmp_path / "dest", node.bootstrap, topic)
            try:
                await dest.fetchers.add(
                    "m", {"bootstrap.servers": node.bootstrap}, {(topic, 0): tid}
                )
                await wait_for_async(lambda: dest.leo(topic) >= 200, 20, "initial data")
                t = threading.Thread(target=writer, daemon=True)
                t.start()
                await asyncio.sleep(0.3)  # the kill lands while the writer is producing
                node.kill()
                await asyncio.sleep(0.5)  # down for a while: the fetcher retries meanwhile
                node.start()
                await asyncio.to_thread(t.join, 60)
                assert not t.is_alive() and not errors, errors
                src = segment_batches(node.log_dir / f"{topic}-0")
                end = last_offset(src) + 1
                assert end >= 1700
                await wait_for_async(lambda: dest.leo(topic) == end, 30, f"offset {end}")
                got = dest_batches(dest.logs, topic)
                assert got == src
                assert_contiguous(got, 0)
                assert not dest.failed
            finally:
                await dest.close()

        run(main(), timeout=120)
    finally:
        node.kill()


def test_throttle_limits_the_rate(source: Node, tmp_path: Path) -> None:
    topic = "throttled"
    create_topic(source.bootstrap, topic)
    produce(source.bootstrap, topic, 1000, size=1000)  # ~1 MB, compressible: measure batch bytes
    total = sum(len(b) for b in segment_batches(source.log_dir / f"{topic}-0").values())
    rate = max(total // 1, 50_000)  # bytes/s: the copy should take about one second

    async def main() -> None:
        dest, tid = await dest_of(tmp_path / "dest", source.bootstrap, topic)
        dest.fetchers.set_throttle(rate)
        dest.fetchers.set_throttled_replicas(lambda t, p: (t, p) == (topic, 0))
        try:
            start = time.monotonic()
            await dest.fetchers.add("m", {"bootstrap.servers": source.bootstrap}, {(topic, 0): tid})
            await wait_for_async(lambda: dest.leo(topic) == 1000, 20, "the throttled copy")
            elapsed = time.monotonic() - start
            expected = total / rate
            assert 0.6 * expected <= elapsed <= 2.5 * expected + 0.5, (elapsed, expected, total)
        finally:
            await dest.close()

    run(main())


# -- librdkafka's mock cluster as the source ------------------------------------------------


def test_mirror_from_librdkafka_mock_cluster(tmp_path: Path) -> None:
    mock = MockCluster(brokers=2)
    topic = "mocked"
    try:
        mock.create_topic(topic, 2)
        produce(mock.bootstrap, topic, 200, partitions=2)

        async def main() -> None:
            client = SourceClient({"bootstrap.servers": mock.bootstrap}, "test")
            try:
                info = (await client.topics([topic]))[topic]
                # The mock lacks DescribeConfigs: skipped, not an error.
                await client.topic_configs([topic])
            finally:
                await client.close()
            dest = Dest(tmp_path / "dest")
            dest.create(topic, 2, info.topic_id)
            try:
                await dest.fetchers.add(
                    "mock",
                    {"bootstrap.servers": mock.bootstrap},
                    {(topic, 0): info.topic_id, (topic, 1): info.topic_id},
                )
                await wait_for_async(
                    lambda: dest.leo(topic, 0) == 100 and dest.leo(topic, 1) == 100,
                    20,
                    "both partitions mirrored",
                )
                for p in (0, 1):
                    status = dest.fetchers.status("mock", topic, p)
                    assert status is not None and status.lag == 0, status
                    got = dest_batches(dest.logs, topic, p)
                    assert (
                        sum(next(iter(scan_batches(b))).record_count for b in got.values()) == 100
                    )
                assert not dest.failed
            finally:
                await dest.close()

        run(main())
    finally:
        mock.close()
