"""Composition root: builds one node from its server.properties and runs its parts.

`Node` only wires, in named construction steps called from ``__init__``: storage (secrets
codec, log dirs with their crash recovery, the cleaner), the metadata quorum and its channels to
the active controller, the controller with its parts and unasked duties, the coordinators
(groups, transactions, mirror states) and the shards of them this node holds, the services the
request handlers share, the API handlers with their dispatcher, and mirroring (fetchers, the
state driver, the metadata sync, and `broker.mirror.node_view` for what they ask of the node).
It owns the metadata image: the quorum's commit listener replaces it, and every part follows
the delta.

Start-up order: logs (crash recovery) -> controller listener -> quorum (its snapshot, then
committed records into the image) -> client listeners -> broker registration (serving once
unfenced) -> metrics. Shutdown reverses it and leaves a clean-shutdown marker so the next start
skips CRC recovery. The process around the node (signals, exit codes, the storage check) is
`broker.node_process`; how it finds and reaches the other nodes, `broker.cluster_view`.
"""

import asyncio
import logging
import os
import time
import uuid
from collections.abc import Awaitable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from . import topic_configs
from .api.acls import AclsApi
from .api.alter_partition import AlterPartitionApi
from .api.api_versions import FEATURES
from .api.api_versions import make_handler as api_versions_handler
from .api.authz import allowed_on_cluster
from .api.broker_lifecycle import BrokerLifecycleApi
from .api.client_quotas import ClientQuotasApi
from .api.client_throttle import ClientThrottle
from .api.cluster import OFFSETS_TOPIC, ClusterApi
from .api.config_resources import ConfigResourcesApi
from .api.configs import ConfigsApi
from .api.connection_requests import ConnectionRequests
from .api.consumer_group import ConsumerGroupApi
from .api.dispatcher import Api, Dispatcher
from .api.elect_leaders import ElectLeadersApi
from .api.envelope import EnvelopeApi
from .api.fetch import FetchApi
from .api.forwarding import Forwarder
from .api.group import GroupApi
from .api.leader_epochs import LeaderEpochsApi
from .api.log_admin import LogAdminApi
from .api.log_dirs import LogDirsApi
from .api.metadata import MetadataApi
from .api.mirror import MirrorApi
from .api.mirror_state import MirrorStateApi
from .api.offsets import OffsetsApi
from .api.produce import ProduceApi
from .api.producer_id_blocks import ProducerIdBlocksApi
from .api.producers import ProducersApi
from .api.quorum import QuorumApi
from .api.reassignments import ReassignmentsApi
from .api.routed_controller import RoutedController, RoutedMirrorController
from .api.sasl import SaslApi
from .api.scram_credentials import ScramCredentialsApi
from .api.services import Services
from .api.share_fetch import ShareFetchApi
from .api.share_group import ShareGroupApi
from .api.share_offset_changes import ShareOffsetChangesApi
from .api.share_offsets import ShareOffsetsApi
from .api.share_state import ShareStateApi
from .api.topic_partitions import TopicPartitionsApi
from .api.topics import TopicsApi
from .api.txn import TxnApi
from .cluster_view import ClusterView, PeerClients
from .config import group_configs
from .config.group_configs import GROUP_RESOURCE, GroupConfigDefaults
from .config.server_config import ServerConfig
from .controller.acls import AclController
from .controller.active_duties import ActiveControllerDuties
from .controller.alter_partition import AlterPartitionControl
from .controller.broker_configs import describe_broker_configs, validate_broker_config
from .controller.client_quotas import ClientQuotaController
from .controller.cluster_control import ClusterControl
from .controller.config_secrets import ConfigSecrets
from .controller.controller import Controller, Validators
from .controller.elections import LeaderBalance, LeaderElections
from .controller.fd_budget import ReplicaBudget
from .controller.mirrors import MirrorController
from .controller.partition_change import UncleanElection
from .controller.reassignment import Reassignments
from .controller.scram import ScramController
from .coordinator.group.config import GroupConfig
from .coordinator.group.coordinator import GroupCoordinator
from .coordinator.mirror import MirrorCoordinator
from .coordinator.shard_loading import CoordinatorShards
from .coordinator.share.offsets_admin import ShareOffsetsAdmin
from .coordinator.share.partition import ShareConfig
from .coordinator.share.persister import SharePersister
from .coordinator.share.sessions import ShareSessions
from .coordinator.share.state_coordinator import SHARE_STATE_TOPIC, ShareStateCoordinator
from .coordinator.timer import LoopScheduler
from .coordinator.txn import (
    TRANSACTION_STATE_TOPIC,
    LocalMarkerWriter,
    ProducerIdManager,
    TransactionCoordinator,
    TxnConfig,
)
from .coordinator.txn.remote import ClusterMarkerWriter, TxnVerification
from .log import file_cache
from .log.cleaner import CleanerConfig, LogCleaner
from .log.clock import SystemClock
from .log.config import LogConfig
from .log.log_writer import INLINE_BYTES, ThreadedWriter
from .log.manager import LogManager, LogSchedule
from .metadata.image import (
    METADATA_TOPIC,
    METADATA_TOPIC_ID,
    TOPIC_RESOURCE,
    Delta,
    MetadataImage,
    apply_records,
)
from .metadata.mirror_states import MIRROR_NAME_CONFIG, MIRROR_STATE_TOPIC
from .metadata.snapshot import image_info, image_records, snapshot_delta
from .metrics.broker_metrics import BrokerMetrics, StateSnapshot
from .metrics.log_file_metrics import LogFileStats
from .metrics.on_loop import read_on_loop
from .mirror.fetcher import MirrorFetcherManager
from .mirror.manager import MirrorManager
from .mirror.metadata_sync import MirrorMetadataSync
from .mirror.metrics_snapshot import build_snapshot
from .mirror.node_view import (
    THROTTLED_REPLICAS_KEY,
    MirrorReactions,
    MirrorSources,
    MirrorStatusView,
    MirrorThrottle,
)
from .mirror.remote_states import RoutedMirrorStates
from .network.broker_clients import BrokerClients
from .network.node_server import advertised_endpoints, node_server
from .network.server import KafkaServer
from .quorum.broker_lifecycle import BrokerLifecycleManager, BrokerState
from .quorum.controller_channel import ControllerChannel
from .quorum.node_quorum import MetadataQuorum
from .quorum.quorum_metrics import quorum_snapshot
from .quorum.voters import check_node_links, quorum_voters
from .raft.outputs import RaftConfig
from .replication.alter_partition_sender import AlterPartitionSender
from .replication.partition_state import ReplicationConfig
from .replication.replica_fetcher import FetcherConfig, ReplicaFetchers
from .replication.replica_manager import ReplicaManager
from .security import password_encoder
from .security.acls import AclOperation
from .security.authorizer import build_authorizer
from .security.listeners import ListenerSecurity, build_listener_security
from .security.scram import Credential, Mechanism

log = logging.getLogger("kmirror")

MAINTENANCE_INTERVAL_S = 1.0
CONTROLLER_CHANNEL_TIMEOUT_MS = 60_000  # Kafka's forwarding channel retries as long
SESSION_CHECK_INTERVAL_S = 1.0
CONTROLLED_SHUTDOWN_TIMEOUT_S = 5.0
LIST_CONFIG_KEYS = frozenset(  # list-type topic keys: APPEND/SUBTRACT work on them
    {
        "cleanup.policy",
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
        THROTTLED_REPLICAS_KEY,
    }
)


def _monotonic_ms() -> int:
    """Broker sessions are measured on a monotonic clock, not wall time."""
    return time.monotonic_ns() // 1_000_000


class StartupError(Exception):
    pass


class PublishingQuorum:
    """The controller's commits: through the metadata quorum, answered once every record is
    applied to this node's image (the quorum's commit listener applies them)."""

    def __init__(self, node: "Node") -> None:
        self._node = node

    async def append(self, records: Sequence[Any]) -> int:
        return await self._node.quorum.append(records)


class Node:
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
        self.peers = PeerClients(config.node_id)
        self.server: KafkaServer | None = None
        self.broker_epoch = -1
        self.lifecycle: BrokerLifecycleManager | None = None
        self._duties: asyncio.Future[None] | None = None
        self._isr_checks: asyncio.Future[None] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._build_storage()
        self._build_quorum()
        self._build_controller()
        self._build_coordinators()
        self._build_services()
        self._build_apis()
        self._build_mirroring()
        self._wire_mirror_views()

    # -- construction ----------------------------------------------------------------------

    def _build_storage(self) -> None:
        """The log dirs (crash recovery runs here), their cleaner, the metadata log's dir."""
        config = self.config
        # secrets at rest: encoded in ConfigRecords, decoded into the image
        self.config_secrets = ConfigSecrets(password_encoder.from_config(config))
        self.default_log_config = topic_configs.log_config(config, {})
        log_dirs = [Path(d) for d in config.log_dirs]
        # One descriptor per partition at rest plus a bounded cache: the budget CreateTopics
        # and CreatePartitions are checked against (controller/fd_budget).
        budget = file_cache.configure(config.log_max_open_files)
        self.replica_budget = None if budget is None else ReplicaBudget(*budget)
        schedule = LogSchedule(
            retention_check_ms=config.log_retention_check_interval_ms,
            recovery_checkpoint_ms=config.log_flush_offset_checkpoint_interval_ms,
            start_checkpoint_ms=config.log_flush_start_offset_checkpoint_interval_ms,
            hw_checkpoint_ms=config.replica_high_watermark_checkpoint_interval_ms,
            producer_expiry_check_ms=config.producer_id_expiration_check_interval_ms,
        )
        # Appends are written by one thread, so the loop never waits for the disk (log_writer).
        self.log_writer = ThreadedWriter(inline_bytes=_writer_inline_bytes())
        self.logs = LogManager(
            log_dirs, self.default_log_config, self.clock, schedule=schedule, writer=self.log_writer
        )
        # KIP-1279: a read-only mirror partition stays byte-identical to its source; and, as
        # Kafka pauses it, the cleaner leaves a partition alone while it moves to another dir.
        self.cleaner = LogCleaner(
            self.logs,
            CleanerConfig(
                config.log_cleaner_enable,
                config.log_cleaner_backoff_ms,
                config.log_cleaner_threads,
                config.log_cleaner_io_max_bytes_per_second,
                config.log_cleaner_dedupe_buffer_size,
                config.log_cleaner_io_buffer_load_factor,
            ),
            self.clock,
            may_clean=lambda topic, partition: (
                self.services.writable(topic, partition)
                and self.logs.moves.get(topic, partition) is None
            ),
        )
        meta_dir = Path(config.metadata_log_dir)
        self.meta_logs = (
            self.logs
            if meta_dir in log_dirs
            else LogManager([meta_dir], self.default_log_config, self.clock, schedule=schedule)
        )

    def _build_quorum(self) -> None:
        """The metadata quorum over ``__cluster_metadata-0``, and the channels to its leader."""
        config = self.config
        metadata_log = self.meta_logs.get_or_create(
            METADATA_TOPIC,
            0,
            METADATA_TOPIC_ID,
            LogConfig(segment_bytes=64 * 1024 * 1024, retention_ms=-1, retention_bytes=-1),
        )
        voters = quorum_voters(config)
        check_node_links(config, voters)
        self.quorum = MetadataQuorum(
            config.node_id,
            voters,
            metadata_log,
            self.cluster_id,
            now_ms=self.clock.now_ms,
            client_factory=self.peers.quorum,
            apply=self._apply_committed,
            # the active controller's duties are built with the controller, after the quorum
            on_leader_change=lambda leader, epoch: self.controller_duties.on_leader_change(
                leader, epoch
            ),
            config=RaftConfig(
                cluster_id=self.cluster_id,
                election_timeout_ms=config.controller_quorum_election_timeout_ms,
                fetch_timeout_ms=config.controller_quorum_fetch_timeout_ms,
                max_bytes_between_snapshots=config.metadata_log_max_record_bytes_between_snapshots,
                max_snapshot_interval_ms=config.metadata_log_max_snapshot_interval_ms,
            ),
            snapshot_source=lambda: (self.image.offset, image_records(self.image)),
            load_snapshot=self._load_snapshot,
        )
        # to whichever node leads the quorum: forwarded requests, broker registration/heartbeats
        self.controller_channel = ControllerChannel(
            self.quorum.leader_endpoint,
            self.peers.controller,
            timeout_ms=CONTROLLER_CHANNEL_TIMEOUT_MS,
        )
        # Kafka gives the lifecycle RPCs their own channel, bounded by half a session (KAFKA-14392)
        self.lifecycle_channel = ControllerChannel(
            self.quorum.leader_endpoint,
            self.peers.controller,
            timeout_ms=config.broker_session_timeout_ms // 2,
        )

    def _build_controller(self) -> None:
        """The replica manager, and the controller with its parts (it acts when this node leads
        the quorum)."""
        config = self.config
        self.replicas = ReplicaManager(
            config.node_id,
            self.logs,
            self._log_config_for,
            self.clock,
            self._replication_config_for,
            producer_id_expiration_ms=config.producer_id_expiration_ms,
        )
        self.controller = Controller(
            PublishingQuorum(self),
            lambda: self.image,
            Validators(
                topic_config=topic_configs.validate,
                broker_config=validate_broker_config,
                list_keys=LIST_CONFIG_KEYS,
                default_partitions=config.num_partitions,
                default_replication_factor=config.default_replication_factor,
                secrets=self.config_secrets,
                replica_budget=self.replica_budget,
                group_defaults=self.group_defaults,
            ),
            config.node_id,
            ready=self.quorum.wait_writable,
        )
        self.acl_controller = AclController(self.controller)
        self.elections = LeaderElections(self.controller)
        self.cluster_control = ClusterControl(
            self.controller,
            self.cluster_id,
            config.broker_session_timeout_ms,
            next_offset=lambda: self.quorum.end_offset,
            unclean=UncleanElection(config.unclean_leader_election_enable, config.node_id),
        )
        self.alter_partition_control = AlterPartitionControl(self.controller)
        self.reassignments = Reassignments(
            self.controller,
            UncleanElection(config.unclean_leader_election_enable, config.node_id),
        )
        self.controller_duties = ActiveControllerDuties(
            config.node_id,
            self.controller,
            self.cluster_control,
            lambda: self.quorum.is_leader,
            # written to the metadata log as Kafka 4.1's format does: the non-zero levels
            # (group.version 1 turns the KIP-848 consumer group protocol on)
            {n: lvl for n, (_lo, _hi, lvl) in FEATURES.items() if n in _LOGGED_FEATURES},
            self._spawn,
            _monotonic_ms,
            SESSION_CHECK_INTERVAL_S,
            leader_balance=(
                LeaderBalance(self.elections, config.leader_imbalance_check_interval_seconds * 1000)
                if config.auto_leader_rebalance_enable
                else None
            ),
        )
        self.mirror_controller = MirrorController(
            self.controller,
            state_topic_partitions=config.mirror_topic_num_partitions,
            state_topic_replication_factor=config.mirror_topic_replication_factor,
        )

    def _topics_view(self) -> "_TopicsView":
        """Topics as consumer groups see them: name -> (id, partition count)."""
        return _TopicsView(self.image.topics, self.image.offset)

    def _build_coordinators(self) -> None:
        """Groups, mirror states and transactions, each with the shards this node holds."""
        config = self.config
        self.groups = GroupCoordinator(
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
                group_overrides=lambda gid: self.image.config(GROUP_RESOURCE, gid),
            ),
            LoopScheduler(),
            self._topics_view,
        )
        self.mirror_coordinator = MirrorCoordinator(
            config.mirror_topic_num_partitions, LoopScheduler()
        )
        # KIP-932 share-partition states (loaded only where __share_group_state exists)
        self.share_states = ShareStateCoordinator(
            config.share_coordinator_state_topic_num_partitions, LoopScheduler()
        )
        # from the active controller wherever it is (services.controller routes the request)
        self.producer_ids = ProducerIdManager(
            lambda: self.services.controller.allocate_producer_ids(0)
        )
        # To the other brokers (inter-broker listener), one set of connections per kind of
        # traffic, as Kafka keeps them apart: a request that waits on the other broker (a
        # marker or mirror-state write waiting for its commit) must never hold up the replica
        # fetches that commit it, nor the KIP-890 checks.
        self.broker_clients = BrokerClients(self.cluster_view.broker_endpoint, self.peers.broker)
        self.marker_clients = BrokerClients(self.cluster_view.broker_endpoint, self.peers.broker)
        self.mirror_state_clients = BrokerClients(
            self.cluster_view.broker_endpoint, self.peers.broker
        )
        self.share_state_clients = BrokerClients(
            self.cluster_view.broker_endpoint, self.peers.broker
        )
        self.replica_fetchers = ReplicaFetchers(
            config.node_id,
            lambda: BrokerClients(self.cluster_view.broker_endpoint, self.peers.broker),
            FetcherConfig(
                num_fetchers=config.num_replica_fetchers,
                max_bytes=config.replica_fetch_max_bytes,
                response_max_bytes=config.replica_fetch_response_max_bytes,
                wait_max_ms=config.replica_fetch_wait_max_ms,
                min_bytes=config.replica_fetch_min_bytes,
                backoff_ms=config.replica_fetch_backoff_ms,
            ),
            self.replicas.local_broker_epoch,
        )
        self.replicas.fetchers = self.replica_fetchers
        self.alter_partition_sender = AlterPartitionSender(
            self.controller_channel, config.node_id, self.replicas.local_broker_epoch
        )
        self.replicas.alter_sender = self.alter_partition_sender
        self.txn_markers = LocalMarkerWriter(
            self.replicas,
            self.clock.now_ms,
            OFFSETS_TOPIC,
            self.groups.complete_transaction,
            writable=lambda topic, partition: self.services.writable(topic, partition),
        )
        self.txn_coordinator = self._transaction_coordinator()
        # KIP-890 checks with the transaction coordinator, on this node or another
        self.txn_verification = TxnVerification(
            self.txn_coordinator,
            self._txn_coordinator_node,
            config.node_id,
            self.broker_clients,
        )
        self._coordinator_shards = [
            self._shards(OFFSETS_TOPIC, self.groups),
            self._shards(MIRROR_STATE_TOPIC, self.mirror_coordinator),
            self._shards(SHARE_STATE_TOPIC, self.share_states),
            self._shards(TRANSACTION_STATE_TOPIC, self.txn_coordinator),
        ]

    def _transaction_coordinator(self) -> TransactionCoordinator:
        config = self.config
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
            self.producer_ids.next_id,
            ClusterMarkerWriter(
                self.txn_markers,
                self.cluster_view.partition_leader,
                config.node_id,
                self.marker_clients,
            ),
            lambda group_id: (OFFSETS_TOPIC, self.groups.partition_for(group_id)),
            LoopScheduler(),
        )

    def _shards(self, topic: str, coordinator: Any) -> CoordinatorShards:
        return CoordinatorShards(
            topic, coordinator, self.config.node_id, self.replicas, self.clock.now_ms, self._spawn
        )

    def _build_services(self) -> None:
        """The authorizer and what every request handler shares (`Services`)."""
        config = self.config
        self.authorizer = build_authorizer(
            config.authorizer_class_name,
            config.super_users or "",
            config.allow_everyone_if_no_acl_found,
            lambda: self.image.acls,
        )
        self.services = Services(
            node_id=config.node_id,
            cluster_id=self.cluster_id,
            image=lambda: self.image,
            # internal topics and producer id blocks reach the active controller from any node
            controller=RoutedController(
                self.controller,
                config.node_id,
                lambda: self.quorum.is_leader,
                lambda: self.controller_channel,
                lambda: self.broker_epoch,
            ),
            replicas=self.replicas,
            log_manager=self.logs,
            config=config,
            now_ms=self.clock.now_ms,
            auto_create_topics=config.auto_create_topics_enable,
            describe_topic_configs=lambda name: topic_configs.describe(
                config, self.image.config(TOPIC_RESOURCE, name)
            ),
            describe_broker_configs=lambda: describe_broker_configs(config, self.image),
            describe_group_configs=lambda name: group_configs.describe_rows(
                self.image.config(GROUP_RESOURCE, name), self.group_defaults
            ),
            authorizer=self.authorizer,
            controller_endpoints=lambda: [
                (v.node_id, v.host, v.port) for v in config.controller_quorum_voters
            ],
            active_controller=lambda: self.quorum.leader_id,
            controller_listeners=frozenset(config.controller_listener_names),
            verify_txn=(
                self.txn_verification.verify_partitions
                if config.transaction_partition_verification_enable
                else None
            ),
        )

    def _build_apis(self) -> None:
        """The API handlers (those other parts of the node call kept by name), the dispatcher
        and the handler the network server calls for each request frame."""
        config = self.config
        self.cluster_api = ClusterApi(
            self.services,
            config.offsets_topic_num_partitions,
            config.offsets_topic_replication_factor,
        )
        self.mirror_api = MirrorApi(self.services, self.mirror_controller)
        # KIP-932 share-partition state wherever its coordinator is, and share offsets admin
        # (AlterShareGroupOffsets, the mirror's share group sync)
        self.share_persister = SharePersister(
            self.share_states,
            lambda p: self.cluster_view.partition_leader(SHARE_STATE_TOPIC, p),
            config.node_id,
            self.share_state_clients,
            self.cluster_api.ensure_share_state_topic,
        )
        self.share_offsets = ShareOffsetsAdmin(self.groups, self.share_persister)
        self.groups.share_state_deleter = self.share_offsets.delete_state
        # client quotas (KIP-13/219), from the image's ClientQuotaRecords
        self.client_throttle = ClientThrottle(
            lambda: self.image,
            lambda: time.monotonic() * 1000,
            config.quota_window_num,
            config.quota_window_size_seconds,
            config.controller_quota_window_num,
            config.controller_quota_window_size_seconds,
        )
        self.sasl_api = SaslApi(self.listener_security, self._scram_credential)
        self.lifecycle_api = BrokerLifecycleApi(
            lambda: self.cluster_control if self.quorum.is_leader else None,
            lambda ctx: ctx.listener in config.controller_listener_names,
            _monotonic_ms,
            authorizer=lambda: self.authorizer,
        )
        self.dispatcher = self._build_dispatcher()
        self.requests = ConnectionRequests(
            self.dispatcher,
            self.sasl_api,
            self.clock.now_ms,
            config.connection_failed_authentication_delay_ms,
        )

    def _build_mirroring(self) -> None:
        """Fetchers, the state driver, the metadata sync and the throttle of KIP-1279 mirrors."""
        config = self.config
        self.fetchers = MirrorFetcherManager(
            config.node_id,
            self.replicas.get,
            self.clock,
            # the manager exists before any fetcher runs
            on_failed=lambda m, topic, p, why: self.mirrors.on_fetch_failed(m, topic, p, why),
            num_fetchers=max(1, config.mirror_num_replica_fetchers),
        )
        sources = MirrorSources(
            lambda: self.image,
            config.node_id,
            self.mirror_api.cluster_id_of,
            self.mirror_api.identity_problem,
        )
        routed_mirrors = RoutedMirrorController(
            self.mirror_controller,
            lambda: self.quorum.is_leader,
            lambda: self.controller_channel,
            lambda topic: getattr(self.image.topics.get(topic), "topic_id", None),
        )
        self.mirrors = MirrorManager(
            lambda: self.image,
            self.replicas,
            # states kept by the __mirror_state coordinator of this node or another
            RoutedMirrorStates(
                self.mirror_coordinator,
                lambda p: self.cluster_view.partition_leader(MIRROR_STATE_TOPIC, p),
                lambda topic_id: getattr(self.image.topic_by_id(topic_id), "name", None),
                config.node_id,
                self.mirror_state_clients,
            ),
            self.fetchers,
            bump_leader_epoch=routed_mirrors.bump_leader_epoch,
            clear_mirror_name=routed_mirrors.clear_mirror_name,
            source_cluster_id=sources.cluster_id,
            align_with_source=sources.align,
            verify_source=self.mirror_api.check_source,
            truncation_timeout_ms=config.mirror_truncation_timeout_ms,
            now_ms=self.clock.now_ms,
        )
        self.metadata_sync = MirrorMetadataSync(
            lambda: self.image,
            self.controller,
            self.mirror_controller,
            self.groups,
            default_interval_ms=lambda: config.mirror_metadata_refresh_interval_ms,
            known_cluster_id=self.mirror_api.cluster_id_of,
            ensure_offsets_topic=self.cluster_api.ensure_offsets_topic,
            client_id=f"kmirror-{config.node_id}-metadata-sync",
            acls=self.acl_controller,
            now_ms=self.clock.now_ms,
            share_offsets=self.share_offsets if config.group_share_enable else None,
        )
        self.mirror_throttle = MirrorThrottle(
            lambda: self.image,
            config.node_id,
            config.mirror_replication_throttled_rate,
            self.fetchers,
        )
        self.mirror_reactions = MirrorReactions(
            self.mirrors, self.mirror_throttle, self.metadata_sync
        )

    def _wire_mirror_views(self) -> None:
        """What the services and the mirror API (built before the mirror manager) read of it."""
        self.services.mirror_writable = self.mirrors.writable
        status = MirrorStatusView(
            lambda: self.image,
            self.clock.now_ms,
            self.mirror_coordinator,
            self.mirrors,
            self.fetchers,
            self.replicas,
        )
        self.mirror_api.states = status.states
        self.mirror_api.progress = status.progress
        self.mirror_api.reason = status.reason
        self.mirror_api.freshness = self.fetchers.freshness

    def _build_dispatcher(self) -> Dispatcher:
        """Every API this node serves, and how requests for the active controller get there."""
        cfg = self.config
        holder: dict[str, Dispatcher] = {}
        api_versions = api_versions_handler(
            lambda: holder["d"].supported_versions(),
            lambda: self.image.offset,
            {"share.version": 1 if self.config.group_share_enable else 0},
        )
        apis = [Api(18, api_versions, max_version=4), *self._apis()]
        is_active = lambda: self.quorum.is_leader  # noqa: E731 - False on a broker-only node
        if cfg.is_controller:
            apis += EnvelopeApi(
                lambda make_ctx, frame: holder["d"].handle_embedded(make_ctx, frame),
                cfg.controller_listener_names,
                self.authorizer,
                is_active_controller=is_active,
            ).apis()
        forwarding = (
            Forwarder(
                self.controller_channel,
                is_active,
                controller_listeners=cfg.controller_listener_names,
            )
            if "broker" in cfg.process_roles
            else None
        )
        d = Dispatcher(
            apis,
            on_request=self.metrics.on_request,
            forwarding=forwarding,
            quotas=self.client_throttle,
        )
        holder["d"] = d
        return d

    def _share_apis(self) -> list[Api]:
        """KIP-932: membership on the group coordinator, fetch/acknowledge on the leaders."""
        c = self.config
        share = ShareConfig(
            lock_duration_ms=c.group_share_record_lock_duration_ms,
            delivery_count_limit=c.group_share_delivery_count_limit,
            max_record_locks=c.group_share_partition_max_record_locks,
        )
        sessions = ShareSessions(
            c.group_share_max_share_sessions, evict_idle_ms=c.group_share_session_timeout_ms
        )
        persister = self.share_persister
        fetch = ShareFetchApi(
            self.services,
            share,
            c.share_auto_offset_reset,
            sessions,
            persister,
            group_overrides=lambda gid: self.image.config(GROUP_RESOURCE, gid),
        )
        return [
            *ShareGroupApi(self.groups, self.authorizer).apis(),
            *ShareOffsetsApi(self.services, self.groups, persister).apis(),
            *ShareOffsetChangesApi(self.services, self.share_offsets).apis(),
            *fetch.apis(),
            *ShareStateApi(self.share_states, self.authorizer).apis(),
        ]

    def _apis(self) -> list[Api]:
        s, m = self.services, self.metrics
        quorum = self._quorum_api()
        fetch = FetchApi(s, m.on_bytes_out, self.client_throttle)
        fetch.metadata_fetch = quorum.fetch
        fetch.quorum_peer = lambda ctx: (
            ctx.listener in self.config.controller_listener_names
            and allowed_on_cluster(self.authorizer, ctx, AclOperation.CLUSTER_ACTION)
        )
        groups = GroupApi(self.groups, lambda t: t in self.image.topics, self.authorizer)
        return [
            *MetadataApi(s).apis(),
            *ProduceApi(s, m.on_bytes_in, self.client_throttle).apis(),
            *fetch.apis(),
            *OffsetsApi(s).apis(),
            *LeaderEpochsApi(s).apis(),
            *ElectLeadersApi(s, self.elections, lambda: self.quorum.is_leader).apis(),
            *ReassignmentsApi(s, self.reassignments, lambda: self.quorum.is_leader).apis(),
            *self.cluster_api.apis(),
            *TxnApi(s, self.txn_verification, self.groups, self.txn_markers).apis(),
            *ProducersApi(s).apis(),
            *TopicsApi(s, self.client_throttle).apis(),
            *ConfigsApi(s).apis(),
            *LogAdminApi(s).apis(),
            *LogDirsApi(s).apis(),
            *TopicPartitionsApi(s).apis(),
            *ConfigResourcesApi(s).apis(),
            *groups.apis(),
            # KIP-848 groups unless group.coordinator.rebalance.protocols leaves them out
            *(
                ConsumerGroupApi(self.groups, self.authorizer).apis()
                if "consumer" in self.config.group_coordinator_rebalance_protocols
                else []
            ),
            # KIP-932 share groups when group.share.enable (Kafka 4.1's preview switch)
            *(self._share_apis() if self.config.group_share_enable else []),
            *MirrorStateApi(self.mirror_coordinator, lambda: self.image, self.authorizer).apis(),
            *self.mirror_api.apis(),
            *AclsApi(s, self.acl_controller).apis(),
            *self.sasl_api.apis(),
            *ScramCredentialsApi(s, ScramController(self.controller)).apis(),
            *ClientQuotasApi(s, ClientQuotaController(self.controller)).apis(),
            *quorum.apis(),
            *self.lifecycle_api.apis(),
            *AlterPartitionApi(
                lambda: self.alter_partition_control if self.quorum.is_leader else None,
                lambda ctx: ctx.listener in self.config.controller_listener_names,
                lambda: self.authorizer,
            ).apis(),
            *ProducerIdBlocksApi(s, self._allocate_producer_ids).apis(),
        ]

    def _quorum_api(self) -> QuorumApi:
        cfg = self.config
        return QuorumApi(
            lambda: self.quorum.driver,
            self.clock.now_ms,
            lambda: {
                v.node_id: [(cfg.controller_listener_names[0], v.host, v.port)]
                for v in cfg.controller_quorum_voters
            },
            lambda: self.authorizer,
        )

    # -- metadata --------------------------------------------------------------------------

    def _log_config_for(self, topic: str) -> LogConfig:
        return topic_configs.log_config(self.config, self.image.config(TOPIC_RESOURCE, topic))

    def _replication_config_for(self, topic: str) -> ReplicationConfig:
        """replica.lag.time.max.ms (broker), min.insync.replicas (topic, else broker), and
        whether the topic is mirrored (KIP-1279 mirror.name)."""
        configs = self.image.config(TOPIC_RESOURCE, topic)
        cfg = configs.get("min.insync.replicas")
        min_isr = int(cfg) if cfg is not None else self.config.min_insync_replicas
        return ReplicationConfig(
            self.config.replica_lag_time_max_ms,
            min_isr,
            mirrored=bool(configs.get(MIRROR_NAME_CONFIG)),
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
        return self.image.scram.get((user, mechanism.type))

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        cfg = self.config
        self.server = node_server(cfg, self.listener_security, self.requests.handle)
        self.server.ip_throttle = self.client_throttle.ip_connection_throttle_s
        # The controller listener first: the other voters reach this node's quorum there, and
        # the image comes from what the quorum has committed before clients are let in.
        await self.server.start(only=cfg.controller_listener_names)
        self.quorum.start()
        self._duties = asyncio.ensure_future(self.controller_duties.run())
        self._isr_checks = asyncio.ensure_future(
            self.replicas.run_isr_checks(self.config.replica_lag_time_max_ms / 2000)
        )
        await self.quorum.wait_caught_up()
        if not self._loaded:
            self.load_metadata([])
        # the logs of the image were opened above; big later batches open in the background
        self.replicas.on_hosted = self._on_hosted
        self.replicas.defer_creation = True
        self.mirror_throttle.apply()
        await self.server.start()
        endpoints = advertised_endpoints(cfg, self.server.bound_ports)
        if "broker" in cfg.process_roles:  # a controller-only node hosts no partitions
            await self._register_broker(endpoints)
        self.metadata_sync.on_metadata(self.image)
        if cfg.metrics_port:
            self._serve_metrics()
        log.info(
            "kmirror node %d started: cluster %s, listeners %s",
            cfg.node_id,
            self.cluster_id,
            ", ".join(f"{n}:{p}" for n, p in self.server.bound_ports.items()),
        )

    async def _register_broker(self, endpoints: list[tuple[str, str, int, int]]) -> None:
        """Registered through the active controller like any broker (in process when this node
        is that controller), serving once unfenced: caught up with the metadata log."""
        cfg = self.config
        self.lifecycle = BrokerLifecycleManager(
            cfg.node_id,
            self.cluster_id,
            uuid.uuid4(),
            endpoints,
            cfg.broker_rack,
            {name: (lo, hi) for name, (lo, hi, _lvl) in FEATURES.items()},
            self._to_controller,
            lambda: self.quorum.applied_offset,
            interval_ms=cfg.broker_heartbeat_interval_ms,
            session_timeout_ms=cfg.broker_session_timeout_ms,
        )
        self.lifecycle.start()
        await self.lifecycle.wait_unfenced()
        if self.lifecycle.state is not BrokerState.RUNNING:
            raise StartupError(f"the broker was not unfenced: {self.lifecycle.last_error}")
        self.broker_epoch = self.lifecycle.broker_epoch

    def _serve_metrics(self) -> None:
        """The Prometheus endpoint; each watcher reads its part on the event loop (or, for the
        immutable image, from any thread)."""
        loop = asyncio.get_running_loop()
        self.metrics.watch_state(read_on_loop(loop, self._state_snapshot, "partition metrics"))
        self.metrics.watch_mirrors(
            read_on_loop(
                loop,
                lambda: build_snapshot(self.image, self.mirrors, self.fetchers, self.metadata_sync),
                "mirror metrics",
            )
        )
        self.metrics.watch_quorum(
            read_on_loop(
                loop,
                lambda: quorum_snapshot(
                    self.quorum.driver.core,
                    self.clock.now_ms(),
                    lambda: sum(1 for b in self.image.brokers.values() if b.fenced),
                ),
                "quorum metrics",
            )
        )
        self.metrics.watch_quotas(
            read_on_loop(loop, self.client_throttle.metrics_snapshot, "quota metrics")
        )
        self.metrics.watch_groups(
            read_on_loop(loop, self.groups.metrics_snapshot, "group coordinator metrics")
        )
        self.metrics.watch_image(lambda: image_info(self.image))  # immutable: any thread
        self.metrics.watch_log_files(lambda: LogFileStats(*file_cache.stats()))  # any thread
        self.metrics.watch_cleaner(
            read_on_loop(loop, self.cleaner.metrics_snapshot, "cleaner metrics")
        )
        self.metrics.serve(self.config.metrics_host, self.config.metrics_port)

    def _state_snapshot(self) -> StateSnapshot:
        server = self.server
        return StateSnapshot(
            self._partition_stats(),
            len(server.connections) if server else 0,
            dict(server.rejected) if server else {},
            server.listener_snapshot() if server else {},
            ((server.queued_request_bytes, server.memory_depleted_seconds) if server else (0, 0.0)),
            tuple(self.replicas.stats()),  # type: ignore[arg-type]
            server.idle_closed if server else 0,
        )

    def _partition_stats(self) -> list[tuple[str, int, int, int, int]]:
        return [
            (t, p, h.log.size_bytes, h.log.log_end_offset, h.log.log_start_offset)
            for (t, p), h in list(self.replicas.partitions().items())
        ]

    async def maintenance(self) -> None:
        while True:
            await asyncio.sleep(MAINTENANCE_INTERVAL_S)
            try:
                now = self.clock.now_ms()
                self.logs.periodic(now)
                self.cleaner.tick(now)
                if self.meta_logs is not self.logs:
                    self.meta_logs.periodic(now)
            except Exception:
                log.exception("log maintenance failed")
            # Self-healing: a transition that failed (coordinator still loading, source down)
            # is retried; stable partitions cost a dictionary lookup.
            self.mirrors.reconcile_all()

    async def stop(self) -> None:
        if self._duties is not None:
            self._duties.cancel()
        if self.lifecycle is not None:
            await self._controlled_shutdown(self.lifecycle)
        if self.server is not None:
            await self.server.close()
        await self.metadata_sync.close()
        await self.mirrors.close()
        await self.fetchers.close()
        if self._isr_checks is not None:
            self._isr_checks.cancel()
        await self.replica_fetchers.close()
        await self.alter_partition_sender.close()
        await self.replicas.close()
        await self.txn_coordinator.close()  # before the groups: completions write to them
        await self.groups.close()
        await self.mirror_coordinator.close()
        await self.share_states.close()
        self.replicas.snapshot_all()
        await self.cleaner.close()
        await self.controller_channel.close()
        for clients in (
            self.broker_clients,
            self.marker_clients,
            self.mirror_state_clients,
            self.share_state_clients,
        ):
            await clients.close()
        await self.lifecycle_channel.close()
        await self.quorum.close()
        self.logs.close()  # drains every log's writes
        self.log_writer.stop()
        if self.meta_logs is not self.logs:
            self.meta_logs.close()
        log.info("kmirror node %d stopped", self.config.node_id)

    async def _controlled_shutdown(self, lifecycle: BrokerLifecycleManager) -> None:
        """Kafka's controlled shutdown: the controller moves this node's partition leadership
        away while it still serves, then approves the exit."""
        running = lifecycle.state is BrokerState.RUNNING
        if running and not await lifecycle.controlled_shutdown(CONTROLLED_SHUTDOWN_TIMEOUT_S):
            log.warning(
                "controlled shutdown not approved within %.0fs: stopping anyway",
                CONTROLLED_SHUTDOWN_TIMEOUT_S,
            )
        await lifecycle.close()


_LOGGED_FEATURES = ("metadata.version", "group.version")


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


def _writer_inline_bytes() -> int:
    """``KMIRROR_WRITER_INLINE_BYTES``: appends up to this size go straight to the file while
    the writer thread is idle (default 64 KiB). The fault tests set 0 so every append goes
    through the thread, the path a busy node takes."""
    value = os.environ.get("KMIRROR_WRITER_INLINE_BYTES")
    if value is None:
        return INLINE_BYTES
    try:
        return max(0, int(value))
    except ValueError:
        log.warning("KMIRROR_WRITER_INLINE_BYTES=%r is not a number: ignored", value)
        return INLINE_BYTES
