"""KIP-1279 share group offset sync between two real kmirror nodes (refresh every 500 ms): a share
group that consumed and acknowledged part of a mirrored topic at the source gets the same
share-partition start offset at the destination, and after failover (kafka-mirrors.sh --remove)
a ShareConsumer of that group on the destination gets the rest and nothing acknowledged again.
A source without share groups is skipped quietly (a skip count, no error)."""

from pathlib import Path

from confluent_kafka import AcknowledgeType

from .clients import create_topic, wait_for
from .mirror_helpers import (
    create_mirror,
    mirror_tool,
    running,
    scrape,
    total,
    wait_caught_up,
    write_mirror_config,
)
from .node import Node
from .test_share_group_offsets import _spso
from .test_share_groups import GROUP, SHARE_NODE, TOPIC, _consumer, _poll, _poll_until, _produce

REFRESH_MS = "500"
ONE_REPLICA = {"share__coordinator__state__topic__replication__factor": "1"}


def _dst_spso(dst: Node) -> int | None:
    try:
        return _spso(dst, GROUP)
    except AssertionError:  # no such share group here yet
        return None


def test_share_group_resumes_on_the_destination_after_failover(tmp_path: Path) -> None:
    src = Node(tmp_path / "src", **(SHARE_NODE | ONE_REPLICA))
    dst = Node(
        tmp_path / "dst",
        **(SHARE_NODE | ONE_REPLICA),
        mirror__metadata__refresh__interval__ms=REFRESH_MS,
    )
    with running(src, dst):
        create_mirror(dst, "m1", write_mirror_config(tmp_path / "m.properties", src.bootstrap))
        create_topic(src.bootstrap, TOPIC, 1)
        _produce(src, 10)
        mirror_tool(dst, "--add", "--topic", TOPIC, "--mirror", "m1")
        wait_caught_up(src.bootstrap, dst.bootstrap, TOPIC, 1, "mirrored", 30)

        c = _consumer(src, **{"share.acknowledgement.mode": "explicit"})
        try:
            got = {m.offset(): m for m in _poll_until(c, 10, 30)}
            for o in range(6):
                c.acknowledge(got[o], AcknowledgeType.ACCEPT)
            c.commit_sync(15)
        finally:
            c.close()  # 6-9 released: the source's start offset is 6
        assert _spso(src, GROUP) == 6
        wait_for(lambda: _dst_spso(dst) == 6, 20, "the start offset synced", step=0.2)

        mirror_tool(dst, "--remove", "--topic", TOPIC, "--mirror", "m1")
        c = _consumer(dst, **{"share.acknowledgement.mode": "explicit"})
        try:
            rest = _poll_until(c, 4, 30)
            assert sorted(m.offset() for m in rest) == [6, 7, 8, 9]
            for m in rest:
                c.acknowledge(m, AcknowledgeType.ACCEPT)
            c.commit_sync(15)
            assert _poll(c, 1.0) == []  # nothing acknowledged at the source comes again
        finally:
            c.close()
        assert total(scrape(dst), "kafka_server_mirror_metadata_sync_errors_total") == 0


def test_source_without_share_groups_is_skipped(tmp_path: Path) -> None:
    src = Node(tmp_path / "src")  # share groups off: no DescribeShareGroupOffsets
    dst = Node(
        tmp_path / "dst",
        **(SHARE_NODE | ONE_REPLICA),
        mirror__metadata__refresh__interval__ms=REFRESH_MS,
    )
    with running(src, dst):
        create_mirror(dst, "m1", write_mirror_config(tmp_path / "m.properties", src.bootstrap))
        create_topic(src.bootstrap, TOPIC, 1)
        _produce(src, 3)
        mirror_tool(dst, "--add", "--topic", TOPIC, "--mirror", "m1")
        wait_caught_up(src.bootstrap, dst.bootstrap, TOPIC, 1, "mirrored", 30)
        skipped = "kafka_server_mirror_metadata_sync_skipped_total"
        wait_for(
            lambda: total(scrape(dst), skipped, mirror="m1", kind="share_groups") >= 2,
            20,
            "share group sync skipped",
            step=0.2,
        )
        assert total(scrape(dst), "kafka_server_mirror_metadata_sync_errors_total") == 0
