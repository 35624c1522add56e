"""`Node`: one node's parts, built in order from its server.properties, and the metadata image
they all follow.

``__init__`` only wires, one named construction step per module of this package; the methods
here are what the parts call back: the image's updates (the quorum's commit listener replaces it
and every part follows the delta) and the few requests the node answers for itself.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Mapping
from typing import Any

from .. import topic_configs
from ..api.broker_lifecycle import BrokerLifecycleApi
from ..api.client_throttle import ClientThrottle
from ..api.cluster import ClusterApi
from ..api.connection_requests import ConnectionRequests
from ..api.dispatcher import Dispatcher
from ..api.mirror import MirrorApi
from ..api.sasl import SaslApi
from ..api.services import Services
from ..cluster_view import ClusterView, PeerClients
from ..config.group_configs import GroupConfigDefaults
from ..config.server_config import ServerConfig
from ..controller.acls import AclController
from ..controller.active_duties import ActiveControllerDuties
from ..controller.alter_partition import AlterPartitionControl
from ..controller.cluster_control import ClusterControl
from ..controller.config_secrets import ConfigSecrets
from ..controller.controller import Controller
from ..controller.elections import LeaderElections
from ..controller.fd_budget import ReplicaBudget
from ..controller.mirrors import MirrorController
from ..controller.reassignment import Reassignments
from ..coordinator.group.coordinator import GroupCoordinator
from ..coordinator.mirror import MirrorCoordinator
from ..coordinator.shard_loading import CoordinatorShards
from ..coordinator.share.offsets_admin import ShareOffsetsAdmin
from ..coordinator.share.persister import SharePersister
from ..coordinator.share.state_coordinator import ShareStateCoordinator
from ..coordinator.txn import (
    TRANSACTION_STATE_TOPIC,
    LocalMarkerWriter,
    ProducerIdManager,
    TransactionCoordinator,
)
from ..coordinator.txn.remote import TxnVerification
from ..log.cleaner import LogCleaner
from ..log.clock import SystemClock
from ..log.config import LogConfig
from ..log.log_writer import ThreadedWriter
from ..log.manager import LogManager
from ..metadata.image import METADATA_TOPIC, TOPIC_RESOURCE, Delta, MetadataImage, apply_records
from ..metadata.mirror_states import MIRROR_NAME_CONFIG
from ..metadata.snapshot import snapshot_delta
from ..metrics.broker_metrics import BrokerMetrics
from ..mirror.fetcher import MirrorFetcherManager
from ..mirror.manager import MirrorManager
from ..mirror.metadata_sync import MirrorMetadataSync
from ..mirror.node_view import MirrorReactions, MirrorThrottle
from ..network.broker_clients import BrokerClients
from ..network.server import KafkaServer
from ..quorum.broker_lifecycle import BrokerLifecycleManager
from ..quorum.controller_channel import ControllerChannel
from ..quorum.controller_registration import ControllerRegistrar
from ..quorum.node_quorum import MetadataQuorum
from ..replication.alter_partition_sender import AlterPartitionSender
from ..replication.partition_state import ReplicationConfig
from ..replication.replica_fetcher import ReplicaFetchers
from ..replication.replica_manager import ReplicaManager
from ..security.authorizer import Authorizer
from ..security.listeners import ListenerSecurity, build_listener_security
from ..security.scram import Credential, Mechanism
from .api_handlers import build_apis
from .controller_parts import build_controller
from .coordinators import build_coordinators
from .lifecycle import run_maintenance, start_node, stop_node
from .metadata_quorum import build_quorum
from .mirroring import build_mirroring, wire_mirror_views
from .request_services import build_services
from .storage import build_storage

log = logging.getLogger("kmirror")


class Node:
    """One kmirror node: built by ``__init__``, run by `start`, `maintenance` and `stop`."""

    # The parts, by the construction step (module) that builds them.
    # storage
    config_secrets: ConfigSecrets
    default_log_config: LogConfig
    replica_budget: ReplicaBudget | None
    log_writer: ThreadedWriter
    logs: LogManager
    cleaner: LogCleaner
    meta_logs: LogManager
    # metadata_quorum
    quorum: MetadataQuorum
    controller_channel: ControllerChannel
    lifecycle_channel: ControllerChannel
    controller_registrar: ControllerRegistrar | None
    # controller_parts
    replicas: ReplicaManager
    controller: Controller
    acl_controller: AclController
    elections: LeaderElections
    cluster_control: ClusterControl
    alter_partition_control: AlterPartitionControl
    reassignments: Reassignments
    controller_duties: ActiveControllerDuties
    mirror_controller: MirrorController
    # coordinators
    groups: GroupCoordinator
    mirror_coordinator: MirrorCoordinator
    share_states: ShareStateCoordinator
    producer_ids: ProducerIdManager
    broker_clients: BrokerClients
    bootstrap_records: list[Any]  # bootstrap.checkpoint (kafka-storage.sh format --add-scram)
    marker_clients: BrokerClients
    mirror_state_clients: BrokerClients
    share_state_clients: BrokerClients
    replica_fetchers: ReplicaFetchers
    alter_partition_sender: AlterPartitionSender
    txn_markers: LocalMarkerWriter
    txn_coordinator: TransactionCoordinator
    txn_verification: TxnVerification
    _coordinator_shards: list[CoordinatorShards]
    # request_services
    authorizer: Authorizer | None
    services: Services
    # api_handlers
    cluster_api: ClusterApi
    mirror_api: MirrorApi
    share_persister: SharePersister
    share_offsets: ShareOffsetsAdmin
    client_throttle: ClientThrottle
    sasl_api: SaslApi
    lifecycle_api: BrokerLifecycleApi
    dispatcher: Dispatcher
    requests: ConnectionRequests
    # mirroring
    fetchers: MirrorFetcherManager
    mirrors: MirrorManager
    metadata_sync: MirrorMetadataSync
    mirror_throttle: MirrorThrottle
    mirror_reactions: MirrorReactions

    def __init__(
        self,
        config: ServerConfig,
        cluster_id: str,
        listener_security: Mapping[str, ListenerSecurity] | None = None,
    ) -> None:
        self.config = config
        # TLS contexts and SASL offers per listener (SecurityConfigError names a bad key)
        self.listener_security = (
            listener_security if listener_security is not None else build_listener_security(config)
        )
        self.cluster_id = cluster_id
        self.clock = SystemClock()
        self.metrics = BrokerMetrics()
        self.image = MetadataImage()
        # per-group dynamic configs fall back to these broker values, within these bounds
        self.group_defaults = GroupConfigDefaults.from_static(config.static_values)
        self._loaded = False  # the first committed records load the image (load_metadata)
        self.cluster_view = ClusterView(lambda: self.image, config)
        # this node's TLS/SASL to its peers (SecurityConfigError names a bad key)
        self.peers = PeerClients(config)
        self.server: KafkaServer | None = None
        self.broker_epoch = -1
        self.lifecycle: BrokerLifecycleManager | None = None
        self._duties: asyncio.Future[None] | None = None
        self._isr_checks: asyncio.Future[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        build_storage(self)
        build_quorum(self)
        build_controller(self)
        build_coordinators(self)
        build_services(self)
        build_apis(self)
        build_mirroring(self)
        wire_mirror_views(self)

    # -- metadata --------------------------------------------------------------------------

    def _log_config_for(self, topic: str) -> LogConfig:
        return topic_configs.log_config(self.config, self.image.config(TOPIC_RESOURCE, topic))

    def _replication_config_for(self, topic: str) -> ReplicationConfig:
        """replica.lag.time.max.ms and replica.fetch.wait.max.ms (broker), min.insync.replicas
        (topic, else broker), and whether the topic is mirrored (KIP-1279 mirror.name)."""
        configs = self.image.config(TOPIC_RESOURCE, topic)
        cfg = configs.get("min.insync.replicas")
        min_isr = int(cfg) if cfg is not None else self.config.min_insync_replicas
        return ReplicationConfig(
            self.config.replica_lag_time_max_ms,
            min_isr,
            mirrored=bool(configs.get(MIRROR_NAME_CONFIG)),
            replica_fetch_wait_max_ms=self.config.replica_fetch_wait_max_ms,
        )

    def _txn_coordinator_node(self, transactional_id: str) -> int | None:
        """The node leading the transactional id's ``__transaction_state`` partition."""
        return self.cluster_view.partition_leader(
            TRANSACTION_STATE_TOPIC, self.txn_coordinator.partition_for(transactional_id)
        )

    def _apply_committed(self, records: list[tuple[int, Any]]) -> None:
        """The quorum's commit listener: records under the high watermark, in offset order."""
        if not self._loaded:
            self.load_metadata(records)
        else:
            self.publish(records)

    def _load_snapshot(self, end_offset: int, records: list[tuple[int, Any]]) -> None:
        """A metadata snapshot replaces the image: at start as the first records, later (fetched
        from the leader) rebuilt from nothing and diffed with the image it replaces."""
        if not self._loaded:
            self.load_metadata(records)
            return
        old = self.image
        self.image, _ = apply_records(MetadataImage(), records, self.config_secrets.open)
        self._react(snapshot_delta(old, self.image))
        log.info("metadata snapshot below offset %d replaced the image", end_offset)

    def publish(self, records: list[tuple[int, Any]]) -> None:
        self.image, delta = apply_records(self.image, records, self.config_secrets.open)
        self._react(delta)

    def _react(self, delta: Delta) -> None:
        """Every part of the node follows the new image: hosted partitions, coordinator shards,
        mirroring."""
        self.replicas.apply_delta(self.image, delta)
        for shards in self._coordinator_shards:
            shards.sync(self.image)
        self.mirror_reactions.on_metadata(self.image, delta, serving=self.server is not None)

    def _on_hosted(self, keys: list[tuple[str, int]]) -> None:
        """Partitions whose logs were opened in the background after the metadata change that
        made them: the coordinators and mirroring look at them as they would have then."""
        for shards in self._coordinator_shards:
            shards.sync(self.image)
        self.mirror_reactions.on_hosted(self.image, keys)

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_event_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def load_metadata(self, records: list[tuple[int, Any]]) -> None:
        """The first committed records after start: build the image from nothing and clear what
        the log dirs hold that it no longer knows."""
        self._loaded = True
        self.image, delta = apply_records(MetadataImage(), records, self.config_secrets.open)
        self._remove_stray_partitions()
        self._react(delta)
        log.info("metadata loaded: %d records, %d topics", len(records), len(self.image.topics))

    def _remove_stray_partitions(self) -> None:
        """Partitions on disk that the metadata no longer knows (deleted while down)."""
        for plog in list(self.logs.all_logs()):
            topic = self.image.topics.get(plog.topic)
            if plog.topic == METADATA_TOPIC:
                continue
            if (
                topic is None
                or plog.partition not in topic.partitions
                or (plog.topic_id and plog.topic_id != topic.topic_id)
            ):
                log.info("removing stray partition %s-%d", plog.topic, plog.partition)
                self.logs.delete(plog.topic, plog.partition)

    # -- requests --------------------------------------------------------------------------

    async def _to_controller(self, api_key: int, body: Any) -> Any:
        """The broker lifecycle's requests: in process when this node is the active controller
        (its own controller needs no listener or ACL to register it), else over the channel."""
        if self.quorum.is_leader:
            return await self.lifecycle_api.local(api_key, body)
        return await self.lifecycle_channel.request(api_key, body)

    def _allocate_producer_ids(
        self, broker_id: int, broker_epoch: int
    ) -> Awaitable[tuple[int, int]] | None:
        if not self.quorum.is_leader:
            return None
        return self.controller.allocate_producer_ids(broker_epoch, broker_id)

    def _scram_credential(self, user: str, mechanism: Mechanism) -> Credential | None:
        found = self.image.scram.get((user, mechanism.type))
        if found is None and "metadata.version" not in self.image.features:
            # a fresh cluster, its bootstrap not committed yet: the nodes authenticate each
            # other with the credentials of their format (--add-scram)
            for r in self.bootstrap_records:
                if getattr(r, "name", None) == user and r.mechanism == mechanism.type:
                    return Credential(
                        bytes(r.salt), bytes(r.stored_key), bytes(r.server_key), r.iterations
                    )
        return found

    # -- lifecycle (lifecycle.py) -----------------------------------------------------------

    async def start(self) -> None:
        await start_node(self)

    async def maintenance(self) -> None:
        await run_maintenance(self)

    async def stop(self) -> None:
        await stop_node(self)
