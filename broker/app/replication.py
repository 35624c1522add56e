"""The replica manager (the partitions this node hosts, leader or follower), the fetchers that
copy its followers from their leaders, and the sender of its ISR changes to the controller.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .. import topic_configs
from ..cluster_view import ClusterView, PeerClients
from ..config.server_config import ServerConfig
from ..log.clock import Clock
from ..log.config import LogConfig
from ..log.manager import LogManager
from ..metadata.image import TOPIC_RESOURCE, MetadataImage
from ..metadata.mirror_states import MIRROR_NAME_CONFIG
from ..network.broker_clients import BrokerClients
from ..quorum.controller_channel import ControllerChannel
from ..replication.alter_partition_sender import AlterPartitionSender
from ..replication.partition_state import ReplicationConfig
from ..replication.replica_fetcher import FetcherConfig, ReplicaFetchers
from ..replication.replica_manager import ReplicaManager


@dataclass(frozen=True, slots=True)
class Replication:
    """What `build_replication` made."""

    replicas: ReplicaManager
    replica_fetchers: ReplicaFetchers
    alter_partition_sender: AlterPartitionSender


def build_replication(
    config: ServerConfig,
    clock: Clock,
    logs: LogManager,
    image: Callable[[], MetadataImage],
    cluster_view: ClusterView,
    peers: PeerClients,
    controller_channel: ControllerChannel,
    on_hosted: Callable[[list[tuple[str, int]]], None],
) -> Replication:
    """The replica manager with its fetchers and its AlterPartition sender. ``on_hosted``:
    partitions whose logs were opened in the background (once serving, `defer_creation`)."""

    def log_config_for(topic: str) -> LogConfig:
        return topic_configs.log_config(config, image().config(TOPIC_RESOURCE, topic))

    def replication_config_for(topic: str) -> ReplicationConfig:
        """replica.lag.time.max.ms (broker), min.insync.replicas (topic, else broker), and
        whether the topic is mirrored (KIP-1279 mirror.name)."""
        configs = image().config(TOPIC_RESOURCE, topic)
        cfg = configs.get("min.insync.replicas")
        min_isr = int(cfg) if cfg is not None else config.min_insync_replicas
        return ReplicationConfig(
            config.replica_lag_time_max_ms, min_isr, mirrored=bool(configs.get(MIRROR_NAME_CONFIG))
        )

    def broker_epoch() -> int:
        """This node's broker epoch in the image (-1 until registered)."""
        b = image().brokers.get(config.node_id)
        return -1 if b is None else b.epoch

    fetchers = ReplicaFetchers(
        config.node_id,
        lambda: BrokerClients(cluster_view.broker_endpoint, peers.broker),
        FetcherConfig(
            num_fetchers=config.num_replica_fetchers,
            max_bytes=config.replica_fetch_max_bytes,
            response_max_bytes=config.replica_fetch_response_max_bytes,
            wait_max_ms=config.replica_fetch_wait_max_ms,
            min_bytes=config.replica_fetch_min_bytes,
            backoff_ms=config.replica_fetch_backoff_ms,
        ),
        broker_epoch,
    )
    sender = AlterPartitionSender(controller_channel, config.node_id, broker_epoch)
    replicas = ReplicaManager(
        config.node_id,
        logs,
        log_config_for,
        clock,
        replication_config_for,
        producer_id_expiration_ms=config.producer_id_expiration_ms,
        fetchers=fetchers,
        alter_sender=sender,
        on_hosted=on_hosted,
    )
    return Replication(replicas, fetchers, sender)
