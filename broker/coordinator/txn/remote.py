"""A transaction whose partitions, or whose coordinator, are on other nodes.

- ``ClusterMarkerWriter``: a COMMIT/ABORT marker goes to the node that leads the partition: this
  node's own partitions through ``LocalMarkerWriter``, the others as WriteTxnMarkers (27) v1 to
  their leader, as Kafka's TransactionMarkerChannelManager sends them. A partition with no
  leader right now answers NOT_LEADER_OR_FOLLOWER (the coordinator retries), one that no
  longer exists UNKNOWN_TOPIC_OR_PARTITION (skipped), a leader that cannot be reached
  NOT_LEADER_OR_FOLLOWER (retried).
- ``TxnVerification``: KIP-890's "is this partition in the producer's transaction?" asked of the
  transaction coordinator wherever it is: in process on its node, else AddPartitionsToTxn v4
  with VerifyOnly (Kafka's AddPartitionsToTxnManager). Everything else is the local
  coordinator's (``__getattr__``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Final

from kio.schema.errors import ErrorCode

from ...network.broker_clients import BrokerClients
from ...network.errors import NetworkError
from ..runtime import EndMarker
from .markers import MarkerResult, MarkerWriter

log = logging.getLogger(__name__)

WRITE_TXN_MARKERS: Final = 27
ADD_PARTITIONS_TO_TXN: Final = 24
_MARKERS_VERSION: Final = 1
_VERIFY_VERSION: Final = 4

TopicPartition = tuple[str, int]
# (topic, partition) -> its leader's broker id; -1: no leader now; None: no such partition
LeaderOf = Callable[[str, int], int | None]
# transactional id -> the broker id leading its __transaction_state partition, None: none now
CoordinatorOf = Callable[[str], int | None]


class ClusterMarkerWriter:
    def __init__(
        self, local: MarkerWriter, leader_of: LeaderOf, node_id: int, clients: BrokerClients
    ) -> None:
        self._local = local
        self._leader_of = leader_of
        self._node_id = node_id
        self._clients = clients

    async def write_marker(self, topic: str, partition: int, marker: EndMarker) -> MarkerResult:
        leader = self._leader_of(topic, partition)
        if leader is None:
            return ErrorCode.unknown_topic_or_partition
        if leader == self._node_id:
            return await self._local.write_marker(topic, partition, marker)
        if leader < 0:
            return ErrorCode.not_leader_or_follower
        body = {
            "markers": [
                {
                    "producer_id": marker.producer_id,
                    "producer_epoch": marker.producer_epoch,
                    "transaction_result": marker.commit,
                    "topics": [{"name": topic, "partition_indexes": [partition]}],
                    "coordinator_epoch": marker.coordinator_epoch,
                }
            ]
        }
        try:
            resp = await self._clients.request(leader, WRITE_TXN_MARKERS, body, _MARKERS_VERSION)
        except (NetworkError, TimeoutError, OSError) as e:
            log.info("marker for %s-%d to broker %d: %s; retrying", topic, partition, leader, e)
            return ErrorCode.not_leader_or_follower
        for m in resp.markers:
            for t in m.topics:
                for p in t.partitions:
                    if t.name == topic and p.partition_index == partition:
                        return ErrorCode(p.error_code)
        return ErrorCode.unknown_server_error


class TxnVerification:
    def __init__(
        self, local: Any, coordinator_of: CoordinatorOf, node_id: int, clients: BrokerClients
    ) -> None:
        self._local = local  # broker.coordinator.txn.TxnCoordinator
        self._coordinator_of = coordinator_of
        self._node_id = node_id
        self._clients = clients

    def __getattr__(self, name: str) -> Any:
        return getattr(self._local, name)

    async def verify_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: frozenset[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        node = self._coordinator_of(transactional_id) if transactional_id else self._node_id
        if node is None or node < 0:
            return dict.fromkeys(partitions, ErrorCode.coordinator_not_available)
        if node == self._node_id:
            found: dict[TopicPartition, ErrorCode] = await self._local.verify_partitions(
                transactional_id, producer_id, epoch, partitions
            )
            return found
        topics: dict[str, list[int]] = {}
        for t, p in sorted(partitions):
            topics.setdefault(t, []).append(p)
        body = {
            "transactions": [
                {
                    "transactional_id": transactional_id,
                    "producer_id": producer_id,
                    "producer_epoch": epoch,
                    "verify_only": True,
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                }
            ]
        }
        try:
            resp = await self._clients.request(node, ADD_PARTITIONS_TO_TXN, body, _VERIFY_VERSION)
        except (NetworkError, TimeoutError, OSError) as e:
            log.info("verifying %s with broker %d: %s", transactional_id, node, e)
            return dict.fromkeys(partitions, ErrorCode.coordinator_not_available)
        if resp.error_code != ErrorCode.none:
            return dict.fromkeys(partitions, ErrorCode(resp.error_code))
        out = dict.fromkeys(partitions, ErrorCode.unknown_server_error)
        for txn in resp.results_by_transaction:
            for t in txn.topic_results:
                for p in t.results_by_partition:
                    if (t.name, p.partition_index) in out:
                        out[(t.name, p.partition_index)] = ErrorCode(p.partition_error_code)
        return out

    async def verify_offsets(
        self, transactional_id: str, producer_id: int, epoch: int, group_id: str
    ) -> ErrorCode:
        """Is the group's offsets partition in the transaction (before a TxnOffsetCommit)?"""
        tp = self._local.offsets_partition(group_id)
        found = await self.verify_partitions(transactional_id, producer_id, epoch, frozenset({tp}))
        return found[tp]
