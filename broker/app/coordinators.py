"""The coordinators (groups, mirror states, share-partition states, transactions), the shards of
them this node holds, and the inter-broker clients they work through.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..api.cluster import OFFSETS_TOPIC
from ..api.routed_controller import RoutedController
from ..cluster_view import ClusterView, PeerClients
from ..config.group_configs import GROUP_RESOURCE
from ..config.server_config import ServerConfig
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
from ..log.clock import Clock
from ..metadata.image import MetadataImage
from ..metadata.mirror_states import MIRROR_STATE_TOPIC
from ..network.broker_clients import BrokerClients
from ..replication.replica_manager import ReplicaManager


@dataclass(frozen=True, slots=True)
class Coordinators:
    """What `build_coordinators` made."""

    groups: GroupCoordinator
    mirror_coordinator: MirrorCoordinator
    share_states: ShareStateCoordinator
    producer_ids: ProducerIdManager
    # to the other brokers, one set of connections per kind of traffic (see below)
    broker_clients: BrokerClients
    marker_clients: BrokerClients
    mirror_state_clients: BrokerClients
    share_state_clients: BrokerClients
    txn_markers: LocalMarkerWriter
    txn_coordinator: TransactionCoordinator
    txn_verification: TxnVerification
    shards: tuple[CoordinatorShards, ...]  # what each coordinator holds here, from the image


def build_coordinators(
    config: ServerConfig,
    clock: Clock,
    image: Callable[[], MetadataImage],
    cluster_view: ClusterView,
    peers: PeerClients,
    replicas: ReplicaManager,
    controller: RoutedController,
    writable: Callable[[str, int], bool],
    spawn: Callable[[Coroutine[Any, Any, None]], None],
    delete_share_state: Callable[[str, uuid.UUID, int], Awaitable[None]],
) -> Coordinators:
    """Groups, mirror states, share states and transactions, each with the shards this node
    holds. ``writable``: may a transaction marker be written to the partition (KIP-1279);
    ``delete_share_state``: how a deleted share group's partition states go."""
    groups = GroupCoordinator(
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
            group_overrides=lambda gid: image().config(GROUP_RESOURCE, gid),
        ),
        LoopScheduler(),
        lambda: _topics_view(image()),
    )
    # The coordinator takes its deleter as an attribute, not a constructor argument: set
    # here, before anything can run.
    groups.share_state_deleter = delete_share_state
    mirror_coordinator = MirrorCoordinator(config.mirror_topic_num_partitions, LoopScheduler())
    # KIP-932 share-partition states (loaded only where __share_group_state exists)
    share_states = ShareStateCoordinator(
        config.share_coordinator_state_topic_num_partitions, LoopScheduler()
    )
    # from the active controller wherever it is (the routed controller sends the request)
    producer_ids = ProducerIdManager(lambda: controller.allocate_producer_ids(0))
    # To the other brokers (inter-broker listener), one set of connections per kind of
    # traffic, as Kafka keeps them apart: a request that waits on the other broker (a
    # marker or mirror-state write waiting for its commit) must never hold up the replica
    # fetches that commit it, nor the KIP-890 checks.
    broker_clients = BrokerClients(cluster_view.broker_endpoint, peers.broker)
    marker_clients = BrokerClients(cluster_view.broker_endpoint, peers.broker)
    mirror_state_clients = BrokerClients(cluster_view.broker_endpoint, peers.broker)
    share_state_clients = BrokerClients(cluster_view.broker_endpoint, peers.broker)
    txn_markers = LocalMarkerWriter(
        replicas, clock.now_ms, OFFSETS_TOPIC, groups.complete_transaction, writable=writable
    )
    txn_coordinator = TransactionCoordinator(
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
        producer_ids.next_id,
        ClusterMarkerWriter(
            txn_markers, cluster_view.partition_leader, config.node_id, marker_clients
        ),
        lambda group_id: (OFFSETS_TOPIC, groups.partition_for(group_id)),
        LoopScheduler(),
    )

    def txn_coordinator_node(transactional_id: str) -> int | None:
        """The node leading the transactional id's ``__transaction_state`` partition."""
        return cluster_view.partition_leader(
            TRANSACTION_STATE_TOPIC, txn_coordinator.partition_for(transactional_id)
        )

    def shards(topic: str, coordinator: Any) -> CoordinatorShards:
        return CoordinatorShards(topic, coordinator, config.node_id, replicas, clock.now_ms, spawn)

    return Coordinators(
        groups=groups,
        mirror_coordinator=mirror_coordinator,
        share_states=share_states,
        producer_ids=producer_ids,
        broker_clients=broker_clients,
        marker_clients=marker_clients,
        mirror_state_clients=mirror_state_clients,
        share_state_clients=share_state_clients,
        txn_markers=txn_markers,
        txn_coordinator=txn_coordinator,
        # KIP-890 checks with the transaction coordinator, on this node or another
        txn_verification=TxnVerification(
            txn_coordinator, txn_coordinator_node, config.node_id, broker_clients
        ),
        shards=(
            shards(OFFSETS_TOPIC, groups),
            shards(MIRROR_STATE_TOPIC, mirror_coordinator),
            shards(SHARE_STATE_TOPIC, share_states),
            shards(TRANSACTION_STATE_TOPIC, txn_coordinator),
        ),
    )


def _topics_view(image: MetadataImage) -> _TopicsView:
    """Topics as consumer groups see them: name -> (id, partition count)."""
    return _TopicsView(image.topics, image.offset)


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
