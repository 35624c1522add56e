"""Independent Kafka-protocol servers as mirror sources: noida-db and Tansu (PyPI wheels).

Each peer runs as our own child on a free loopback port (``peer_brokers``); a stock
confluent-kafka producer writes to it (idempotent, compressed); a kmirror destination mirrors
the topic with ``kafka-mirrors.sh``, and stock consumers read the same records at the same
offsets from both. Then failover (``--remove``) makes the copy writable. Quirks of a peer as a
source (noida has no topic ids in Metadata: fetched by name) are handled by the mirror and logged.
"""

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient  # type: ignore[attr-defined]

from . import peer_brokers
from .clients import (
    CODEC_IDS,
    Rec,
    ck_produce,
    ck_read_all,
    create_topic,
    make_records,
    stored_codecs,
    wait_for,
)
from .mirror_helpers import create_mirror, describe_rows, mirror_tool, write_mirror_config
from .node import Node

TOPIC = "orders"
PARTITIONS = 2
Peer = Callable[[Path], AbstractContextManager[str]]
# (peer, the codec its producer uses, whether its Metadata carries topic ids)
PEERS = {
    "noida": (peer_brokers.noida, "lz4", False),
    "tansu": (peer_brokers.tansu, "zstd", True),
}


@pytest.fixture(params=sorted(PEERS))
def peer(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, bool]]:
    start, codec, has_ids = PEERS[request.param]
    with start(tmp_path) as bootstrap:
        yield bootstrap, codec, has_ids


def _read(bootstrap: str, n: int) -> list[Rec]:
    recs = ck_read_all(bootstrap, TOPIC, PARTITIONS, n)
    return sorted(recs, key=lambda r: (r.partition, r.offset))


def _produce(bootstrap: str, recs: list[Rec], codec: str) -> None:
    conf = {"compression.type": codec, "enable.idempotence": True, "batch.size": 4096}
    errors = ck_produce(bootstrap, TOPIC, recs, **conf)
    assert not errors, errors


def _topic_id(bootstrap: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    desc = admin.describe_topics(TopicCollection([TOPIC]))[TOPIC].result(20)
    return str(desc.topic_id)


def test_peer_broker_as_a_mirror_source(peer: tuple[str, str, bool], tmp_path: Path) -> None:
    src, codec, has_ids = peer
    create_topic(src, TOPIC, PARTITIONS)
    first = make_records("a", 200, PARTITIONS)
    _produce(src, first, codec)
    source = _read(src, len(first))
    assert len(source) == len(first)

    dst = Node(tmp_path / "dst", mirror__metadata__refresh__interval__ms="500")
    dst.start()
    try:
        create_mirror(dst, "pm", write_mirror_config(tmp_path / "mirror.properties", src), TOPIC)
        wait_for(lambda: _read(dst.bootstrap, len(source)) == source, 30, "the mirrored copy")
        if has_ids:  # the copy keeps the source's topic id
            assert _topic_id(dst.bootstrap) == _topic_id(src)

        # it keeps following the source
        second = make_records("b", 100, PARTITIONS)
        _produce(src, second, codec)
        source = _read(src, len(first) + len(second))
        assert len(source) == len(first) + len(second)
        wait_for(lambda: _read(dst.bootstrap, len(source)) == source, 30, "the second round")
        # same offsets (Rec compares partition, offset, key, value, headers, timestamp)
        assert [(r.partition, r.offset) for r in _read(dst.bootstrap, len(source))] == [
            (r.partition, r.offset) for r in source
        ]

        def caught_up() -> bool:
            rows = describe_rows(dst, "pm", TOPIC)
            return len(rows) == PARTITIONS and all(
                r[3] == r[4] and r[5] == "0" and r[6] == "MIRRORING" for r in rows
            )

        wait_for(caught_up, 15, "describe: lag 0, MIRRORING", step=0.2)
        # the producer's batches, kept by the peer and by the mirror as they were
        assert stored_codecs(dst.log_dir, TOPIC) == {CODEC_IDS[codec]}

        # failover: the copy becomes writable and keeps every mirrored record below new ones
        mirror_tool(dst, "--remove", "--topic", TOPIC, "--mirror", "pm")
        third = make_records("c", 10, PARTITIONS)
        wait_for(
            lambda: not ck_produce(dst.bootstrap, TOPIC, third, **{"message.timeout.ms": 2000}),
            30,
            "writable after failover",
            step=0.3,
        )
        after = _read(dst.bootstrap, len(source) + len(third))
        assert set(source) <= set(after)  # same records at the same offsets
        assert {r.value for r in third} <= {r.value for r in after}
        log = (dst.workdir / "node.out").read_text(errors="replace")
        assert "Traceback" not in log and " ERROR " not in log, dst.log_tail(60)
    finally:
        dst.kill()
