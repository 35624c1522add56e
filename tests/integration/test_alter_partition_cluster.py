"""AlterPartition (56) over the wire on three real nodes: a partition leader's broker identity
shrinks and expands the ISR of an RF=3 partition through the active controller.

The request goes out the way a broker sends it: `AlterPartitionSender` over a
`ControllerChannel` to the controller listeners (the channel finds the active controller by
NOT_CONTROLLER answers). What the test needs to impersonate the leader (its broker epoch, the
partition's leader and partition epochs) it reads from the metadata log with the shipped
``bin/kafka-dump-log.sh --cluster-metadata-decoder``; the resulting ISR is checked with a stock
client (confluent-kafka) and in the metadata log.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import NewTopic
from kio.schema.errors import ErrorCode

from broker.network.client import ReconnectingClient
from broker.quorum.controller_channel import ControllerChannel
from broker.replication.alter_partition_sender import AlterPartitionSender, Registration
from broker.replication.isr import AlterPartitionRequest

from .clients import admin, wait_for
from .cluster import Cluster, metadata_records

TOPIC = "isr-wire"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path).start()
    try:
        yield c
    finally:
        c.stop()


def _kafka_uuid(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


class Partition:
    """The partition's registration and the brokers' epochs, replayed from the metadata log."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        self.epochs: dict[int, int] = {}
        self.changes: list[dict[str, Any]] = []
        topic_id = None
        for r in records:
            d = r["data"]
            if r["type"] == "REGISTER_BROKER_RECORD":
                self.epochs[d["brokerId"]] = d["brokerEpoch"]
            elif r["type"] == "TOPIC_RECORD" and d["name"] == TOPIC:
                topic_id = d["topicId"]
            elif r["type"] == "PARTITION_RECORD" and d["topicId"] == topic_id:
                self.replicas = list(d["replicas"])
                self.isr = list(d["isr"])
                self.leader = d["leader"]
                self.leader_epoch = d["leaderEpoch"]
                self.partition_epoch = d["partitionEpoch"]
            elif r["type"] == "PARTITION_CHANGE_RECORD" and d["topicId"] == topic_id:
                self.changes.append(d)
                if d.get("isr") is not None:
                    self.isr = list(d["isr"])
                if d.get("leader", -2) != -2:
                    self.leader = d["leader"]
                    self.leader_epoch += 1
                self.partition_epoch += 1
        assert topic_id is not None, "the topic is not in the metadata log yet"
        self.topic_id = _kafka_uuid(topic_id)


def _channel(cluster: Cluster) -> ControllerChannel:
    # try each controller listener in turn: NOT_CONTROLLER makes the channel ask for the next
    turns = itertools.cycle(cluster.nodes)

    def leader() -> tuple[int, str, int]:
        n = next(turns)
        return n.node_id, "127.0.0.1", n.controller_port

    return ControllerChannel(
        leader,
        lambda _node, host, port: ReconnectingClient(
            host, port, "alter-partition-test", request_timeout_ms=10_000
        ),
        timeout_ms=30_000,
        retry_backoff_ms=20,
    )


def _stock_isr(bootstrap: str) -> set[int]:
    md = admin(bootstrap).list_topics(TOPIC, timeout=10)
    t = md.topics.get(TOPIC)
    p = None if t is None else t.partitions.get(0)
    return set() if p is None else set(p.isrs)  # not known to the node asked yet: empty


def test_alter_partition_shrinks_and_expands_the_isr(cluster: Cluster) -> None:
    a = admin(cluster.bootstrap)
    a.create_topics([NewTopic(TOPIC, 1, 3)], operation_timeout=10)[TOPIC].result(15)
    wait_for(lambda: _stock_isr(cluster.bootstrap) == {1, 2, 3}, 20, "an ISR of three")
    p = Partition(metadata_records(cluster.nodes[0]))
    assert sorted(p.replicas) == [1, 2, 3] and p.leader in p.replicas
    leader = p.leader
    stay, drop = (r for r in p.replicas if r != leader)
    epoch = p.epochs[leader]

    async def go() -> None:
        channel = _channel(cluster)
        try:
            sender = AlterPartitionSender(channel, leader, lambda: epoch)
            shrink = AlterPartitionRequest(
                1, leader, p.leader_epoch, p.partition_epoch, ((leader, epoch), (stay, -1))
            )
            out = await asyncio.wait_for(sender.send(p.topic_id, 0, shrink), 30)
            assert out == (
                ErrorCode.none,
                Registration((leader, stay), leader, p.leader_epoch, p.partition_epoch + 1),
            )
            # only the leader may change the ISR: a follower's own request is refused
            follower = AlterPartitionSender(channel, stay, lambda: p.epochs[stay])
            again = AlterPartitionRequest(
                2, stay, p.leader_epoch, p.partition_epoch + 1, ((stay, -1), (leader, -1))
            )
            assert await asyncio.wait_for(follower.send(p.topic_id, 0, again), 30) == (
                ErrorCode.invalid_request,
                None,
            )
            # a stale broker epoch refuses the whole request
            stale = await channel.request(
                56,
                {
                    "broker_id": leader,
                    "broker_epoch": epoch + 1000,
                    "topics": [
                        {
                            "topic_id": p.topic_id,
                            "partitions": [
                                {
                                    "partition_index": 0,
                                    "leader_epoch": p.leader_epoch,
                                    "new_isr_with_epochs": [
                                        {"broker_id": leader, "broker_epoch": -1}
                                    ],
                                    "partition_epoch": p.partition_epoch + 1,
                                }
                            ],
                        }
                    ],
                },
                3,
            )
            assert (stale.error_code, stale.topics) == (ErrorCode.stale_broker_epoch, ())
            expand = AlterPartitionRequest(
                3,
                leader,
                p.leader_epoch,
                p.partition_epoch + 1,
                ((leader, epoch), (stay, -1), (drop, p.epochs[drop])),
            )
            out = await asyncio.wait_for(sender.send(p.topic_id, 0, expand), 30)
            # INVALID_UPDATE_VERSION: the partition's real leader saw ``drop`` caught up and
            # expanded the ISR first (the metadata log must then show its expansion)
            if out[0] != ErrorCode.invalid_update_version:
                assert out == (
                    ErrorCode.none,
                    Registration(
                        (leader, stay, drop), leader, p.leader_epoch, p.partition_epoch + 2
                    ),
                )
            await sender.close()
            await follower.close()
        finally:
            await channel.close()

    asyncio.run(go())
    after = Partition(metadata_records(cluster.nodes[0]))
    isrs = [c["isr"] for c in after.changes if "isr" in c]
    assert isrs[0] == [leader, stay] and sorted(isrs[1]) == [1, 2, 3], after.changes
    assert (after.leader, after.leader_epoch) == (leader, p.leader_epoch)
    wait_for(lambda: _stock_isr(cluster.bootstrap) == {1, 2, 3}, 20, "the full ISR again")
