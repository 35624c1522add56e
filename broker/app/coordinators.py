"""The coordinators (groups, mirror states, share-partition states, transactions), the shards of
them this node holds, and the inter-broker clients and replica fetchers they work through.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..api.cluster import OFFSETS_TOPIC
from ..config.group_configs import GROUP_RESOURCE
from ..coordinator.group.config import GroupConfig
from ..coordinator.group.coordinator import GroupCoordinator
from ..coordinator.mirror import MirrorCoordinator
from ..coordinator.shard_loading import CoordinatorShards
from ..coordinator.share.state_coordinator import SHARE_STATE_TOPIC, ShareStateCoordinator
from ..coordinator.timer import LoopScheduler
from ..coordinator.txn import (
    TRANSACTION_STATE_TOPIC,
    LocalMarkerWriter,
    ProducerIdManager,
    TransactionCoordinator,
    TxnConfig,
)
from ..coordinator.txn.remote import ClusterMarkerWriter, TxnVerification
from ..metadata.mirror_states import MIRROR_STATE_TOPIC
from ..network.broker_clients import BrokerClients
from ..replication.alter_partition_sender import AlterPartitionSender
from ..replication.replica_fetcher import FetcherConfig, ReplicaFetchers

if TYPE_CHECKING:
    from .node import Node


def build_coordinators(node: Node) -> None:
    """Groups, mirror states and transactions, each with the shards this node holds."""
    config = node.config
    node.groups = GroupCoordinator(
        GroupConfig(
            num_partitions=config.offsets_topic_num_partitions,
            min_session_timeout_ms=config.group_min_session_timeout_ms,
            max_session_timeout_ms=config.group_max_session_timeout_ms,
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            max_group_size=config.group_max_size,
            offsets_retention_ms=config.offsets_retention_minutes * 60_000,
            offsets_retention_check_interval_ms=config.offsets_retention_check_interval_ms,
            consumer_session_timeout_ms=config.group_consumer_session_timeout_ms,
            consumer_heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
            consumer_assignors=config.group_consumer_assignors,
            consumer_max_size=config.group_consumer_max_size,
            consumer_migration_policy=config.group_consumer_migration_policy,
            share_session_timeout_ms=config.group_share_session_timeout_ms,
            share_heartbeat_interval_ms=config.group_share_heartbeat_interval_ms,
            share_max_size=config.group_share_max_size,
            group_overrides=lambda gid: node.image.config(GROUP_RESOURCE, gid),
        ),
        LoopScheduler(),
        lambda: _topics_view(node),
    )
    node.mirror_coordinator = MirrorCoordinator(config.mirror_topic_num_partitions, LoopScheduler())
    # KIP-932 share-partition states (loaded only where __share_group_state exists)
    node.share_states = ShareStateCoordinator(
        config.share_coordinator_state_topic_num_partitions, LoopScheduler()
    )
    # from the active controller wherever it is (services.controller routes the request)
    node.producer_ids = ProducerIdManager(lambda: node.services.controller.allocate_producer_ids(0))
    # To the other brokers (inter-broker listener), one set of connections per kind of
    # traffic, as Kafka keeps them apart: a request that waits on the other broker (a
    # marker or mirror-state write waiting for its commit) must never hold up the replica
    # fetches that commit it, nor the KIP-890 checks.
    node.broker_clients = BrokerClients(node.cluster_view.broker_endpoint, node.peers.broker)
    node.marker_clients = BrokerClients(node.cluster_view.broker_endpoint, node.peers.broker)
    node.mirror_state_clients = BrokerClients(node.cluster_view.broker_endpoint, node.peers.broker)
    node.share_state_clients = BrokerClients(node.cluster_view.broker_endpoint, node.peers.broker)
    node.replica_fetchers = ReplicaFetchers(
        config.node_id,
        lambda: BrokerClients(node.cluster_view.broker_endpoint, node.peers.replica_fetch),
        FetcherConfig(
            num_fetchers=config.num_replica_fetchers,
            max_bytes=config.replica_fetch_max_bytes,
            response_max_bytes=config.replica_fetch_response_max_bytes,
            wait_max_ms=config.replica_fetch_wait_max_ms,
            min_bytes=config.replica_fetch_min_bytes,
            backoff_ms=config.replica_fetch_backoff_ms,
        ),
        node.replicas.local_broker_epoch,
    )
    node.replicas.fetchers = node.replica_fetchers
    node.alter_partition_sender = AlterPartitionSender(
        node.controller_channel, config.node_id, node.replicas.local_broker_epoch
    )
    node.replicas.alter_sender = node.alter_partition_sender
    node.txn_markers = LocalMarkerWriter(
        node.replicas,
        node.clock.now_ms,
        OFFSETS_TOPIC,
        node.groups.complete_transaction,
        writable=lambda topic, partition: node.services.writable(topic, partition),
    )
    node.txn_coordinator = _transaction_coordinator(node)
    # KIP-890 checks with the transaction coordinator, on this node or another
    node.txn_verification = TxnVerification(
        node.txn_coordinator,
        node._txn_coordinator_node,
        config.node_id,
        node.broker_clients,
    )
    node._coordinator_shards = [
        _shards(node, OFFSETS_TOPIC, node.groups),
        _shards(node, MIRROR_STATE_TOPIC, node.mirror_coordinator),
        _shards(node, SHARE_STATE_TOPIC, node.share_states),
        _shards(node, TRANSACTION_STATE_TOPIC, node.txn_coordinator),
    ]


def _transaction_coordinator(node: Node) -> TransactionCoordinator:
    config = node.config
    return TransactionCoordinator(
        TxnConfig(
            num_partitions=config.transaction_state_log_num_partitions,
            max_timeout_ms=config.transaction_max_timeout_ms,
            abort_check_interval_ms=(
                config.transaction_abort_timed_out_transaction_cleanup_interval_ms
            ),
            id_expiration_ms=config.transactional_id_expiration_ms,
            id_expiration_check_interval_ms=(
                config.transaction_remove_expired_transaction_cleanup_interval_ms
            ),
        ),
        node.producer_ids.next_id,
        ClusterMarkerWriter(
            node.txn_markers,
            node.cluster_view.partition_leader,
            config.node_id,
            node.marker_clients,
        ),
        lambda group_id: (OFFSETS_TOPIC, node.groups.partition_for(group_id)),
        LoopScheduler(),
    )


def _shards(node: Node, topic: str, coordinator: Any) -> CoordinatorShards:
    return CoordinatorShards(
        topic, coordinator, node.config.node_id, node.replicas, node.clock.now_ms, node._spawn
    )


def _topics_view(node: Node) -> _TopicsView:
    """Topics as consumer groups see them: name -> (id, partition count)."""
    return _TopicsView(node.image.topics, node.image.offset)


class _TopicsView(Mapping[str, tuple[uuid.UUID, int]]):
    """A live read-only view of the image's topics for the group coordinator (no copy: a
    consumer group heartbeat looks at only its subscribed topics, or scans for a regex)."""

    def __init__(self, topics: Mapping[str, Any], version: int) -> None:
        self._topics = topics
        self.version = version  # the image's offset: the same topics while it stays

    def __getitem__(self, name: str) -> tuple[uuid.UUID, int]:
        t = self._topics[name]
        return t.topic_id, len(t.partitions)

    def __iter__(self) -> Iterator[str]:
        return iter(self._topics)

    def __len__(self) -> int:
        return len(self._topics)
