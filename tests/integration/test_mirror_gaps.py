"""A compacted source log (offset gaps inside and between batches) is mirrored with the same gaps.

The source is a real kmirror node whose partition log is replaced, while it is stopped, with
batches shaped as Kafka's log cleaner leaves them: records missing inside a batch (offset deltas
skip), whole batches missing, a compressed batch, several leader epochs. The node recovers the
segment on restart; the destination mirrors it through kafka-mirrors.sh, and a stock consumer
sees the same offsets, gaps included, on both clusters.
"""

import time
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from protocol.records import Compression, Record, build_batch, scan_batches

from .clients import wait_for
from .mirror_helpers import create_mirror, end_offsets, write_mirror_config
from .node import Node

TOPIC = "compacted"


def _compacted_segment() -> tuple[bytes, list[int]]:
    """Batches as a cleaner leaves them, and the offsets of the records they hold."""
    ts = int(time.time() * 1000)
    batches = [
        # offsets 0, 2, 3 survive of 0..4 (last offset delta keeps the batch's range)
        build_batch(
            [
                Record(b"k0", b"v0", offset_delta=0),
                Record(b"k2", b"v2", offset_delta=2),
                Record(b"k3", b"v3", offset_delta=3),
            ],
            base_offset=0,
            partition_leader_epoch=0,
            last_offset_delta=4,
            base_timestamp=ts,
        ),
        # 5..9 cleaned away entirely; 10, 11 in epoch 1, gzip
        build_batch(
            [Record(b"k10", b"v10"), Record(b"k11", b"v11")],
            base_offset=10,
            partition_leader_epoch=1,
            compression=Compression.GZIP,
            base_timestamp=ts,
        ),
        # a lone survivor at 25 of a batch that covered 20..29
        build_batch(
            [Record(b"k25", b"v25", offset_delta=5)],
            base_offset=20,
            partition_leader_epoch=1,
            last_offset_delta=9,
            base_timestamp=ts,
        ),
        build_batch([Record(b"k30", b"v30")], base_offset=30, partition_leader_epoch=2),
    ]
    return b"".join(batches), [0, 2, 3, 10, 11, 25, 30]


def _seed_compacted_source(src: Node) -> list[int]:
    src.start()
    admin = AdminClient({"bootstrap.servers": src.bootstrap})
    topic = NewTopic(TOPIC, 1, 1, config={"cleanup.policy": "compact"})
    admin.create_topics([topic])[TOPIC].result(15)
    assert src.stop() == 0
    part = src.log_dir / f"{TOPIC}-0"
    data, offsets = _compacted_segment()
    for f in part.iterdir():
        if f.suffix in (".log", ".index", ".timeindex", ".txnindex"):
            f.unlink()
    (part / f"{0:020d}.log").write_bytes(data)
    (src.log_dir / ".kafka_cleanshutdown").unlink(missing_ok=True)  # recover the new segment
    src.start()
    return offsets


def _offsets(bootstrap: str) -> list[tuple[int, bytes]]:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"gaps-{bootstrap}",
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(TOPIC, 0, 0)])
    got: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 20
    while len(got) < 7 and time.monotonic() < deadline:
        for m in c.consume(20, timeout=0.5):
            assert not m.error(), m.error()
            got.append((m.offset(), m.value()))
    c.close()
    return got


def _data(node: Node) -> list[tuple[int, bytes]]:
    seg = node.log_dir / f"{TOPIC}-0" / f"{0:020d}.log"
    return [(v.base_offset, bytes(v.buffer)) for v in scan_batches(seg.read_bytes())]


def test_compaction_gaps_are_mirrored(tmp_path: Path) -> None:
    src = Node(tmp_path / "src")
    dst = Node(tmp_path / "dst")
    try:
        offsets = _seed_compacted_source(src)
        assert [o for o, _ in _offsets(src.bootstrap)] == offsets  # the source serves the gaps
        assert end_offsets(src.bootstrap, TOPIC, 1) == {0: 31}

        dst.start()
        create_mirror(
            dst, "m1", write_mirror_config(tmp_path / "mirror.properties", src.bootstrap), TOPIC
        )
        wait_for(
            lambda: end_offsets(dst.bootstrap, TOPIC, 1, missing_ok=True) == {0: 31},
            20,
            "the mirror to reach offset 31",
            step=0.1,
        )

        assert _data(dst) == _data(src)  # same batches, same offsets, byte for byte
        assert _offsets(dst.bootstrap) == _offsets(src.bootstrap)
        assert [o for o, _ in _offsets(dst.bootstrap)] == offsets
    finally:
        dst.kill()
        src.kill()
