"""DescribeProducers (API key 61) against a node, through kafka-python's admin client: an
idempotent producer's state, a transactional producer's open transaction, and the errors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka import TopicPartition  # type: ignore[import-untyped]
from kafka.admin import KafkaAdminClient  # type: ignore[import-untyped]
from kafka.errors import UnknownTopicOrPartitionError  # type: ignore[import-untyped]

from .clients import create_topic
from .node import Node

TXN_SETTINGS = {
    "transaction__state__log__replication__factor": "1",
    "transaction__state__log__num__partitions": "2",
}


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    n = Node(Path(tmp_path_factory.mktemp("producers")) / "n1", **TXN_SETTINGS)
    n.start()
    yield n
    n.kill()


def _describe(node: Node, *tps: TopicPartition) -> dict[TopicPartition, list[object]]:
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        states = admin.describe_producers(list(tps))
    finally:
        admin.close()
    return {tp: list(s.active_producers) for tp, s in states.items()}


def test_idempotent_and_transactional_producers(node: Node) -> None:
    create_topic(node.bootstrap, "described", 2)
    tp0, tp1 = TopicPartition("described", 0), TopicPartition("described", 1)
    assert _describe(node, tp0, tp1) == {tp0: [], tp1: []}

    idem = Producer({"bootstrap.servers": node.bootstrap, "enable.idempotence": True})
    for i in range(3):
        idem.produce("described", value=b"%d" % i, partition=0)
        assert idem.flush(10) == 0  # one batch per record: sequences 0, 1, 2
    (state,) = _describe(node, tp0)[tp0]
    assert state.producer_id >= 0 and state.producer_epoch == 0  # type: ignore[attr-defined]
    assert state.last_sequence == 2  # type: ignore[attr-defined]
    assert state.current_transaction_start_offset == -1  # type: ignore[attr-defined]
    assert state.last_timestamp > 0  # type: ignore[attr-defined]

    txn = Producer({"bootstrap.servers": node.bootstrap, "transactional.id": "describe-1"})
    txn.init_transactions(30)
    txn.begin_transaction()
    txn.produce("described", value=b"t", partition=1)
    assert txn.flush(10) == 0
    (open_state,) = _describe(node, tp1)[tp1]
    assert open_state.current_transaction_start_offset == 0  # type: ignore[attr-defined]
    txn.commit_transaction(30)
    (done,) = _describe(node, tp1)[tp1]
    assert done.producer_id == open_state.producer_id  # type: ignore[attr-defined]
    assert done.current_transaction_start_offset == -1  # type: ignore[attr-defined]
    assert done.coordinator_epoch >= 0  # type: ignore[attr-defined]


def test_unknown_partitions(node: Node) -> None:
    create_topic(node.bootstrap, "known", 1)
    admin = KafkaAdminClient(bootstrap_servers=node.bootstrap)
    try:
        # broker_id: ask the node directly, so the error is its answer, not a client-side
        # metadata lookup's.
        for tp in (TopicPartition("no-such-topic", 0), TopicPartition("known", 7)):
            with pytest.raises(UnknownTopicOrPartitionError):
                admin.describe_producers([tp], broker_id=1)
        assert list(admin.describe_producers([TopicPartition("known", 0)], broker_id=1)) == [
            TopicPartition("known", 0)
        ]
    finally:
        admin.close()
