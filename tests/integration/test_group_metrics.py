"""The group coordinator's Prometheus series on a real node, after stock clients made groups of
every protocol: a classic consumer that committed and left, a KIP-848 consumer and a KIP-932
ShareConsumer that stay."""

import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer, Producer, ShareConsumer, TopicPartition

from .clients import create_topic
from .mirror_helpers import Samples, scrape, total
from .node import Node

P = "kafka_server_group_coordinator_metrics"


def _until(node: Node, ok: Callable[[Samples], bool], poll: Callable[[], None]) -> Samples:
    """Scrape (polling the clients meanwhile) until ``ok``; the last scrape if it never is."""
    deadline = time.monotonic() + 30
    while True:
        poll()
        samples = scrape(node)
        if ok(samples) or time.monotonic() > deadline:
            return samples


def test_group_coordinator_metrics(tmp_path: Path) -> None:
    node = Node(
        tmp_path / "node1",
        group__share__enable="true",
        group__share__heartbeat__interval__ms="300",
        share__coordinator__state__topic__num__partitions="1",
        share__coordinator__state__topic__replication__factor="1",
    )
    node.start()
    clients: list[Consumer | ShareConsumer] = []
    try:
        create_topic(node.bootstrap, "metered", 2)
        p = Producer({"bootstrap.servers": node.bootstrap})
        p.produce("metered", value=b"x", partition=0)
        assert p.flush(20) == 0
        boot = {"bootstrap.servers": node.bootstrap}
        classic = Consumer({**boot, "group.id": "classic-g", "enable.auto.commit": False})
        tps = [TopicPartition("metered", 0, 1), TopicPartition("metered", 1, 0)]
        classic.commit(offsets=tps, asynchronous=False)
        classic.close()
        modern = Consumer({**boot, "group.id": "modern-g", "group.protocol": "consumer"})
        modern.subscribe(["metered"])
        share = ShareConsumer({**boot, "group.id": "share-g"})
        share.subscribe(["metered"])
        clients += [modern, share]

        def poll() -> None:
            modern.poll(0.2)
            share.poll(0.2)

        def ready(s: Samples) -> bool:
            return (
                total(s, f"{P}_consumer_group_count", state="Stable") == 1
                and total(s, f"{P}_share_group_count", state="Stable") == 1
            )

        s = _until(node, ready, poll)
        assert total(s, f"{P}_group_count", protocol="classic") == 1
        assert total(s, f"{P}_group_count", protocol="consumer") == 1
        assert total(s, f"{P}_group_count", protocol="share") == 1
        assert total(s, f"{P}_classic_group_count", state="Empty") == 1
        assert total(s, f"{P}_consumer_group_count", state="Stable") == 1
        assert total(s, f"{P}_share_group_count", state="Stable") == 1
        assert total(s, f"{P}_offset_commit_total") == 2
        assert total(s, f"{P}_consumer_group_rebalance_total") >= 1
        assert total(s, f"{P}_share_group_rebalance_total") >= 1
        # the share member leaves: its group is Empty, and a new epoch was counted
        before = total(s, f"{P}_share_group_rebalance_total")
        share.close()
        clients.remove(share)
        s = _until(
            node,
            lambda s: total(s, f"{P}_share_group_count", state="Empty") == 1,
            lambda: modern.poll(0.2),
        )
        assert total(s, f"{P}_share_group_count", state="Empty") == 1
        assert total(s, f"{P}_share_group_rebalance_total") == before + 1
    finally:
        for c in clients:
            c.close()
        node.kill()
