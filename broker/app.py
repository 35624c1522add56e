"""Composition root: builds one node from its server.properties and runs it until SIGTERM/SIGINT.

Start-up order: config -> meta.properties check -> logs (crash recovery) -> metadata log replay
into the image -> controller/replica manager/coordinators -> network listeners -> broker
registration -> background maintenance. Shutdown reverses it and leaves a clean-shutdown marker so
the next start skips CRC recovery.
"""

import asyncio
import contextlib
import logging
import signal
import sys
import time
import uuid
from collections.abc import Awaitable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from protocol.errors import ProtocolError

from . import topic_configs
from .api.acls import AclsApi
from .api.api_versions import FEATURES
from .api.api_versions import make_handler as api_versions_handler
from .api.authz import allowed_on_cluster
from .api.broker_lifecycle import BrokerLifecycleApi
from .api.cluster import OFFSETS_TOPIC, ClusterApi
from .api.config_resources import ConfigResourcesApi
from .api.configs import ConfigsApi
from .api.context import RequestContext
from .api.dispatcher import Api, Dispatcher
from .api.envelope import EnvelopeApi
from .api.fetch import FetchApi
from .api.forwarding import Forwarder
from .api.group import GroupApi
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
from .api.routed_controller import RoutedController
from .api.sasl import SaslApi
from .api.scram_credentials import ScramCredentialsApi
from .api.services import Services
from .api.topic_partitions import TopicPartitionsApi
from .api.topics import TopicsApi
from .api.txn import TxnApi
from .config.meta_properties import MetaPropertiesError, read_meta_properties
from .config.server_config import ConfigError, ServerConfig, load_server_config
from .config.throttled_replicas import ThrottledReplicasError, parse_throttled_replicas
from .controller.acls import AclController
from .controller.cluster_control import ClusterControl
from .controller.config_secrets import ConfigSecrets
from .controller.controller import Controller, Validators
from .controller.mirrors import MirrorController
from .controller.scram import ScramController
from .coordinator.group.config import GroupConfig
from .coordinator.group.coordinator import GroupCoordinator
from .coordinator.mirror import MirrorCoordinator
from .coordinator.partition_record_log import PartitionRecordLog
from .coordinator.timer import LoopScheduler
from .coordinator.txn import (
    TRANSACTION_STATE_TOPIC,
    LocalMarkerWriter,
    ProducerIdManager,
    TransactionCoordinator,
    TxnConfig,
)
from .coordinator.txn.remote import ClusterMarkerWriter, TxnVerification
from .log.cleaner import CleanerConfig, LogCleaner
from .log.clock import SystemClock
from .log.config import LogConfig
from .log.manager import LogManager
from .metadata.image import (
    BROKER_RESOURCE,
    METADATA_TOPIC,
    METADATA_TOPIC_ID,
    MIRROR_RESOURCE,
    TOPIC_RESOURCE,
    Delta,
    MetadataImage,
    apply_records,
)
from .metadata.mirror_states import MIRROR_STATE_TOPIC, MirrorState
from .metadata.snapshot import image_info, image_records, snapshot_delta
from .metrics.broker_metrics import BrokerMetrics, StateSnapshot
from .metrics.on_loop import read_on_loop
from .mirror.fetcher import MirrorFetcherManager
from .mirror.manager import MirrorManager, SourceRefused
from .mirror.metadata_sync import MirrorMetadataSync
from .mirror.metrics_snapshot import build_snapshot
from .mirror.source import SourceClient
from .network.broker_clients import BrokerClients
from .network.client import ReconnectingClient
from .network.server import KafkaServer, Listener
from .quorum.broker_lifecycle import BrokerLifecycleManager, BrokerState
from .quorum.controller_channel import ControllerChannel
from .quorum.driver import NotLeaderError
from .quorum.node_quorum import MetadataQuorum
from .quorum.quorum_metrics import quorum_snapshot
from .raft.outputs import RaftConfig
from .replication.replica_manager import ReplicaManager
from .security import password_encoder
from .security.acls import AclOperation
from .security.authorizer import build_authorizer
from .security.errors import SecurityConfigError
from .security.listeners import ListenerSecurity, build_listener_security
from .security.scram import Credential, Mechanism
from .startup_errors import describe as describe_startup_error
from .startup_progress import StartupProgress
from .stop_signals import StartupInterrupted, StopSignals

log = logging.getLogger("kmirror")

SASL_AUTHENTICATE_KEY = 36

SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
MAINTENANCE_INTERVAL_S = 1.0
THROTTLE_KEY = "mirror.replication.throttled.rate"
THROTTLED_REPLICAS_KEY = "mirror.replication.throttled.replicas"


QUORUM_REQUEST_TIMEOUT_MS = 2000  # controller.quorum.request.timeout.ms (Kafka's default)
CONTROLLER_CHANNEL_TIMEOUT_MS = 60_000  # Kafka's forwarding channel retries as long
SESSION_CHECK_INTERVAL_S = 1.0
CONTROLLED_SHUTDOWN_TIMEOUT_S = 5.0


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
        # secrets at rest: encoded in ConfigRecords, decoded into the image
        self.config_secrets = ConfigSecrets(password_encoder.from_config(config))
        self.default_log_config = topic_configs.log_config(config, {})
        log_dirs = [Path(d) for d in config.log_dirs]
        self.logs = LogManager(log_dirs, self.default_log_config, self.clock)
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
            else LogManager([meta_dir], self.default_log_config, self.clock)
        )
        metadata_log = self.meta_logs.get_or_create(
            METADATA_TOPIC,
            0,
            METADATA_TOPIC_ID,
            LogConfig(segment_bytes=64 * 1024 * 1024, retention_ms=-1, retention_bytes=-1),
        )
        self._loaded = False  # the first committed records load the image (load_metadata)
        self.quorum = MetadataQuorum(
            config.node_id,
            quorum_voters(config),
            metadata_log,
            cluster_id,
            now_ms=self.clock.now_ms,
            client_factory=self._quorum_client,
            apply=self._apply_committed,
            on_leader_change=self._on_quorum_leader,
            config=RaftConfig(
                cluster_id=cluster_id,
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
            self._controller_client,
            timeout_ms=CONTROLLER_CHANNEL_TIMEOUT_MS,
        )
        self.broker_epoch = -1
        self.lifecycle: BrokerLifecycleManager | None = None
        self._duties: asyncio.Future[None] | None = None
        # Kafka gives the lifecycle RPCs their own channel, bounded by half a session (KAFKA-14392)
        self.lifecycle_channel = ControllerChannel(
            self.quorum.leader_endpoint,
            self._controller_client,
            timeout_ms=config.broker_session_timeout_ms // 2,
        )
        self.replicas = ReplicaManager(config.node_id, self.logs, self._log_config_for, self.clock)
        self.controller = Controller(
            PublishingQuorum(self),
            lambda: self.image,
            Validators(
                topic_config=topic_configs.validate,
                broker_config=self._validate_broker_config,
                list_keys=frozenset(
                    {
                        "cleanup.policy",
                        "leader.replication.throttled.replicas",
                        "follower.replication.throttled.replicas",
                        THROTTLED_REPLICAS_KEY,
                    }
                ),
                default_partitions=config.num_partitions,
                default_replication_factor=config.default_replication_factor,
                secrets=self.config_secrets,
            ),
            config.node_id,
            ready=self.quorum.wait_writable,
        )
        self.groups = GroupCoordinator(
            GroupConfig(
                num_partitions=config.offsets_topic_num_partitions,
                min_session_timeout_ms=config.group_min_session_timeout_ms,
                max_session_timeout_ms=config.group_max_session_timeout_ms,
                initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
                max_group_size=config.group_max_size,
                offsets_retention_ms=config.offsets_retention_minutes * 60_000,
                offsets_retention_check_interval_ms=config.offsets_retention_check_interval_ms,
            ),
            LoopScheduler(),
        )
        self._loaded_group_partitions: set[int] = set()
        self.mirror_coordinator = MirrorCoordinator(
            config.mirror_topic_num_partitions, LoopScheduler()
        )
        self._loaded_mirror_partitions: set[int] = set()
        # from the active controller wherever it is (services.controller routes the request)
        self.producer_ids = ProducerIdManager(
            lambda: self.services.controller.allocate_producer_ids(0)
        )
        # to the other brokers (inter-broker listener): markers, transaction verification
        self.broker_clients = BrokerClients(self._broker_endpoint, self._broker_client)
        self.txn_markers = LocalMarkerWriter(
            self.replicas,
            self.clock.now_ms,
            OFFSETS_TOPIC,
            self.groups.complete_transaction,
            writable=lambda topic, partition: self.services.writable(topic, partition),
        )
        self.txn_coordinator = TransactionCoordinator(
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
                self.txn_markers, self._partition_leader, config.node_id, self.broker_clients
            ),
            lambda group_id: (OFFSETS_TOPIC, self.groups.partition_for(group_id)),
            LoopScheduler(),
        )
        self._loaded_txn_partitions: set[int] = set()
        # KIP-890 checks with the transaction coordinator, on this node or another
        self.txn_verification = TxnVerification(
            self.txn_coordinator,
            self._txn_coordinator_node,
            config.node_id,
            self.broker_clients,
        )
        self._group_tasks: set[asyncio.Task[None]] = set()
        self.server: KafkaServer | None = None
        self.acl_controller = AclController(self.controller)
        self.cluster_control = ClusterControl(
            self.controller,
            cluster_id,
            config.broker_session_timeout_ms,
            next_offset=lambda: self.quorum.end_offset,
        )
        self.authorizer = build_authorizer(
            config.authorizer_class_name,
            config.super_users or "",
            config.allow_everyone_if_no_acl_found,
            lambda: self.image.acls,
        )
        self.services = Services(
            node_id=config.node_id,
            cluster_id=cluster_id,
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
            describe_broker_configs=self._describe_broker_configs,
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
        self.dispatcher = self._build_dispatcher()
        self.fetchers = MirrorFetcherManager(
            config.node_id,
            self.logs.get,
            self.clock,
            on_failed=self._on_mirror_fetch_failed,
            on_appended=lambda _t, _p: self.replicas.notify_append(),
            num_fetchers=max(1, config.mirror_num_replica_fetchers),
        )
        self.mirrors = MirrorManager(
            lambda: self.image,
            self.replicas,
            self.mirror_coordinator,
            self.fetchers,
            bump_leader_epoch=self.mirror_controller.bump_leader_epoch,
            clear_mirror_name=self.mirror_controller.clear_mirror_name,
            source_cluster_id=self._source_cluster_id,
            align_with_source=self._align_with_source,
            verify_source=self.mirror_api.check_source,
            now_ms=self.clock.now_ms,
        )
        self.services.mirror_writable = self.mirrors.writable
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
        )
        self.mirror_api.states = self._mirror_states
        self.mirror_api.progress = self._mirror_progress
        self.mirror_api.reason = self._mirror_reason
        self.mirror_api.freshness = self.fetchers.freshness

    # -- metadata --------------------------------------------------------------------------

    def _log_config_for(self, topic: str) -> LogConfig:
        return topic_configs.log_config(self.config, self.image.config(TOPIC_RESOURCE, topic))

    def _validate_broker_config(self, key: str, value: str) -> str:
        from .config.catalog import BROKER_KEYS
        from .controller.controller import ConfigValidationError

        ck = BROKER_KEYS.get(key)
        if ck is None:
            raise ConfigValidationError(f"Unknown broker config name: {key}")
        if ck.mode.name == "READ_ONLY":
            raise ConfigValidationError(f"Cannot update these configs dynamically: Set({key})")
        return value

    def _describe_broker_configs(self) -> list[dict[str, Any]]:
        rows = self.config.describe_broker_configs(
            dynamic=self.image.config(BROKER_RESOURCE, str(self.config.node_id)),
            dynamic_default=self.image.config(BROKER_RESOURCE, ""),
        )
        return [
            {
                "name": r.name,
                "value": r.value,
                "read_only": r.read_only,
                "source": r.source,
                "sensitive": r.sensitive,
                "synonyms": [],
                "type": r.config_type,
            }
            for r in rows
        ]

    def _quorum_client(self, dest: int, host: str, port: int) -> ReconnectingClient:
        timeout = QUORUM_REQUEST_TIMEOUT_MS
        return ReconnectingClient(
            host,
            port,
            f"raft-{self.config.node_id}",
            request_timeout_ms=timeout,
            connect_timeout_ms=min(timeout, 1000),
        )

    def _controller_client(self, dest: int, host: str, port: int) -> ReconnectingClient:
        # long enough for any controller operation, or a retry could repeat a done request
        return ReconnectingClient(
            host, port, f"broker-{self.config.node_id}", request_timeout_ms=30_000
        )

    def _broker_client(self, host: str, port: int) -> ReconnectingClient:
        return ReconnectingClient(
            host, port, f"broker-{self.config.node_id}", request_timeout_ms=30_000
        )

    def _broker_endpoint(self, broker_id: int) -> tuple[str, int] | None:
        """A live broker's endpoint on the inter-broker listener."""
        b = self.image.brokers.get(broker_id)
        ep = b.endpoint(self._inter_broker_listener) if b is not None and not b.fenced else None
        return None if ep is None else (ep.host, ep.port)

    @property
    def _inter_broker_listener(self) -> str:
        cfg = self.config
        if cfg.inter_broker_listener_name:
            return cfg.inter_broker_listener_name
        names = [
            a.name for a in cfg.advertised_listeners if a.name not in cfg.controller_listener_names
        ]
        return names[0] if names else ""

    def _partition_leader(self, topic: str, partition: int) -> int | None:
        t = self.image.topics.get(topic)
        part = t.partitions.get(partition) if t is not None else None
        return None if part is None else part.leader

    def _txn_coordinator_node(self, transactional_id: str) -> int | None:
        """The node leading the transactional id's ``__transaction_state`` partition."""
        return self._partition_leader(
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

    def _on_quorum_leader(self, leader_id: int, epoch: int) -> None:
        if leader_id == self.config.node_id:
            # every broker gets a fresh session from a new controller, not a mass fencing
            self.cluster_control.became_active(_monotonic_ms())
            self._spawn(self._on_became_active())

    async def _on_became_active(self) -> None:
        levels = {n: lvl for n, (_lo, _hi, lvl) in FEATURES.items() if n == "metadata.version"}
        with contextlib.suppress(NotLeaderError):  # lost it meanwhile: the next leader does it
            await self.controller.finalize_features(levels)

    async def controller_duties(self) -> None:
        """The active controller fences brokers whose sessions expired."""
        while True:
            await asyncio.sleep(SESSION_CHECK_INTERVAL_S)
            if not self.quorum.is_leader:
                continue
            try:
                await self.cluster_control.expire_sessions(_monotonic_ms())
            except NotLeaderError:
                pass
            except Exception:
                log.exception("controller: expiring broker sessions failed")

    def publish(self, records: list[tuple[int, Any]]) -> None:
        self.image, delta = apply_records(self.image, records, self.config_secrets.open)
        self._react(delta)

    def _react(self, delta: Delta) -> None:
        self.replicas.apply_delta(self.image, delta)
        self._sync_coordinator_partitions(OFFSETS_TOPIC, self._loaded_group_partitions, self.groups)
        self._sync_coordinator_partitions(
            MIRROR_STATE_TOPIC, self._loaded_mirror_partitions, self.mirror_coordinator
        )
        self._sync_coordinator_partitions(
            TRANSACTION_STATE_TOPIC, self._loaded_txn_partitions, self.txn_coordinator
        )
        mirrors = getattr(self, "mirrors", None)
        if mirrors is not None:  # not during start-up replay: reconciled once serving
            mirrors.on_metadata(self.image, delta)
            if any(
                rtype in (BROKER_RESOURCE, TOPIC_RESOURCE) for rtype, _ in delta.changed_configs
            ):
                self._apply_mirror_throttle()
            if self.server is not None and any(
                rtype == MIRROR_RESOURCE for rtype, _ in delta.changed_configs
            ):
                self.metadata_sync.on_metadata(self.image)

    # -- mirroring --------------------------------------------------------------------------

    def _on_mirror_fetch_failed(self, mirror: str, topic: str, partition: int, reason: str) -> None:
        self.mirrors.on_fetch_failed(mirror, topic, partition, reason)

    def _mirror_states(self, mirror: str) -> dict[tuple[str, int], tuple[str, int]]:
        """Stored states (including failed-over topics that left the mirror) overlaid with the
        driver's live view."""
        out: dict[tuple[str, int], tuple[str, int]] = {}
        for (_m, topic_id, p), state, lme in self.mirror_coordinator.states(mirror):
            t = self.image.topic_by_id(topic_id)
            if t is not None:
                out[(t.name, p)] = (state.name, -1 if lme is None else lme)
        for key, info in self.mirrors.partitions(mirror).items():
            out[key] = (
                info.state.name,
                -1 if info.last_mirror_epoch is None else info.last_mirror_epoch,
            )
        return out

    def _mirror_progress(
        self, mirror: str, topic: str, partition: int
    ) -> tuple[int, int, int] | None:
        st = self.fetchers.status(mirror, topic, partition)
        if st is not None:
            return st.source_high_watermark, st.local_log_end_offset, st.lag
        known = self.fetchers.last_known(mirror, topic, partition)
        hosted = self.replicas.get(topic, partition)
        if known is None or hosted is None:
            return None
        leo = int(hosted.log.log_end_offset)
        return known[0], leo, max(0, known[0] - leo)  # paused: the last answer's numbers

    def _mirror_reason(self, topic: str, partition: int) -> str | None:
        """--describe's note: why FAILED, what a truncation removed, or how old the source
        offset of a partition no longer fetched is."""
        why = self.mirrors.reason(topic, partition)
        info = self.mirrors.partitions().get((topic, partition))
        if why or info is None:
            return why
        known = self.fetchers.last_known(info.mirror, topic, partition)
        if known is None or info.state != MirrorState.PAUSED:
            return None
        age = max(0, self.clock.now_ms() - known[1]) / 1000
        return f"not fetched while paused: source offset {known[0]} as of {age:.0f}s ago"

    async def _source_cluster_id(self, mirror: str) -> str | None:
        cid = self.mirror_api.cluster_id_of(mirror)
        if cid:
            return cid
        config = dict(self.image.config(MIRROR_RESOURCE, mirror))
        try:
            client = SourceClient(config, f"kmirror-{self.config.node_id}-mirror-{mirror}")
        except ValueError:
            return None
        try:
            return await asyncio.wait_for(client.cluster_id(), 5)
        except Exception:
            log.warning("mirror %s: source cluster id unknown (source unreachable)", mirror)
            return None
        finally:
            await client.close()

    async def _align_with_source(
        self, mirror: str, topic: str, partition: int, plog: Any
    ) -> str | None:
        """PREPARING: drop local epochs the source never mirrored from us (failback). Returns
        what was truncated and why (shown by --describe), or None when nothing was."""
        if plog.log_end_offset <= plog.log_start_offset:
            return None  # nothing local: a first start copies everything anyway
        config = dict(self.image.config(MIRROR_RESOURCE, mirror))
        client = SourceClient(config, f"kmirror-{self.config.node_id}-mirror-{mirror}")
        try:
            # the cluster-id guard on this very connection: the config may have changed since
            # the manager checked, and truncating by a wrong source's epochs loses data
            cid = await asyncio.wait_for(client.cluster_id(), 30)
            problem = self.mirror_api.identity_problem(mirror, cid)
            if problem:
                raise SourceRefused(problem)
            epochs = await asyncio.wait_for(client.last_mirrored_epochs(mirror), 30)
        finally:
            await client.close()
        confirmed = None if epochs is None else epochs.get((topic, partition))
        entries = plog.leader_epoch_cache.entries()
        cut = MirrorManager.truncation_point(entries, plog.log_start_offset, confirmed)
        if not 0 <= cut < plog.log_end_offset:
            return None
        end = plog.log_end_offset
        why = (
            f"the source's last mirrored epoch of it is {confirmed}"
            if confirmed is not None
            else "the source has no record of mirroring it from this cluster, so KIP-1279 "
            "mirrors it from scratch"
        )
        note = (
            f"truncated offsets {cut}..{end - 1} ({end - cut} offsets of local data) "
            f"before mirroring: {why}"
        )
        log.warning("mirror %s: %s-%d %s", mirror, topic, partition, note)
        if cut <= plog.log_start_offset:
            plog.truncate_fully_and_start_at(cut)
        else:
            plog.truncate_to(cut)
        return note

    def _apply_mirror_throttle(self) -> None:
        node, img = str(self.config.node_id), self.image
        raw = img.config(BROKER_RESOURCE, node).get(THROTTLE_KEY) or img.config(
            BROKER_RESOURCE, ""
        ).get(THROTTLE_KEY)
        rate = int(raw) if raw is not None else self.config.mirror_replication_throttled_rate
        # <= 0 or the default Long.MAX_VALUE: no limit at all (not a 9.2e18 bytes/s bucket)
        self.fetchers.set_throttle(rate if 0 < rate < (1 << 63) - 1 else None)
        self.fetchers.set_throttled_replicas(self._mirror_throttled)

    def _mirror_throttled(self, topic: str, partition: int) -> bool:
        """mirror.replication.throttled.replicas of ``topic`` lists ``partition`` for this node."""
        raw = self.image.config(TOPIC_RESOURCE, topic).get(THROTTLED_REPLICAS_KEY, "")
        try:
            return parse_throttled_replicas(raw).throttles(partition, self.config.node_id)
        except ThrottledReplicasError:  # validated when set; an old bad value throttles nothing
            return False

    def _sync_coordinator_partitions(
        self, topic_name: str, loaded: set[int], coordinator: Any
    ) -> None:
        """Load the coordinator shards of the internal-topic partitions this node leads."""
        topic = self.image.topics.get(topic_name)
        wanted = set()
        if topic is not None:
            wanted = {
                p for p, part in topic.partitions.items() if part.leader == self.config.node_id
            }
        for p in sorted(wanted - loaded):
            hosted = self.replicas.get(topic_name, p)
            if hosted is None:
                continue
            loaded.add(p)
            rlog = PartitionRecordLog(hosted.log, _epoch_of(hosted), self.clock.now_ms)
            self._spawn(coordinator.load(p, rlog))
        for p in sorted(loaded - wanted):
            loaded.discard(p)
            self._spawn(coordinator.unload(p))

    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_event_loop().create_task(coro)
        self._group_tasks.add(task)
        task.add_done_callback(self._group_tasks.discard)

    def load_metadata(self, records: list[tuple[int, Any]]) -> None:
        """The first committed records after start: build the image from nothing and clear what
        the log dirs hold that it no longer knows."""
        self._loaded = True
        self.image, delta = apply_records(MetadataImage(), records, self.config_secrets.open)
        # Partitions on disk that the metadata no longer knows (deleted while down): remove.
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
        self._react(delta)
        log.info("metadata loaded: %d records, %d topics", len(records), len(self.image.topics))

    # -- requests --------------------------------------------------------------------------

    def _build_dispatcher(self) -> Dispatcher:
        s = self.services
        m = self.metrics
        meta = MetadataApi(s)
        produce = ProduceApi(s, m.on_bytes_in)
        fetch = FetchApi(s, m.on_bytes_out)
        cfg = self.config
        quorum = QuorumApi(
            lambda: self.quorum.driver,
            self.clock.now_ms,
            lambda: {
                v.node_id: [(cfg.controller_listener_names[0], v.host, v.port)]
                for v in cfg.controller_quorum_voters
            },
            lambda: self.authorizer,
        )
        fetch.metadata_fetch = quorum.fetch
        fetch.quorum_peer = lambda ctx: (
            ctx.listener in cfg.controller_listener_names
            and allowed_on_cluster(self.authorizer, ctx, AclOperation.CLUSTER_ACTION)
        )
        offsets = OffsetsApi(s)
        topics = TopicsApi(s)
        configs = ConfigsApi(s)
        cluster = ClusterApi(
            s,
            self.config.offsets_topic_num_partitions,
            self.config.offsets_topic_replication_factor,
        )
        admin = LogAdminApi(s)
        producers = ProducersApi(s)
        self.cluster_api = cluster
        groups = GroupApi(self.groups, lambda t: t in self.image.topics, self.authorizer)
        txn = TxnApi(s, self.txn_verification, self.groups, self.txn_markers)
        mirror_states = MirrorStateApi(self.mirror_coordinator, lambda: self.image, self.authorizer)
        self.mirror_controller = MirrorController(
            self.controller,
            state_topic_partitions=self.config.mirror_topic_num_partitions,
            state_topic_replication_factor=self.config.mirror_topic_replication_factor,
        )
        self.mirror_api = mirrors = MirrorApi(s, self.mirror_controller)
        acls = AclsApi(s, self.acl_controller)
        log_dirs = LogDirsApi(s)
        self.sasl_api = sasl = SaslApi(self.listener_security, self._scram_credential)
        scram = ScramCredentialsApi(s, ScramController(self.controller))
        holder: dict[str, Dispatcher] = {}
        self.lifecycle_api = BrokerLifecycleApi(
            lambda: self.cluster_control if self.quorum.is_leader else None,
            lambda ctx: ctx.listener in cfg.controller_listener_names,
            _monotonic_ms,
            authorizer=lambda: self.authorizer,
        )
        apis = [
            Api(
                18,
                api_versions_handler(
                    lambda: holder["d"].supported_versions(), lambda: self.image.offset
                ),
                max_version=4,
            ),
            *meta.apis(),
            *produce.apis(),
            *fetch.apis(),
            *offsets.apis(),
            *cluster.apis(),
            *txn.apis(),
            *producers.apis(),
            *topics.apis(),
            *configs.apis(),
            *admin.apis(),
            *log_dirs.apis(),
            *TopicPartitionsApi(s).apis(),
            *ConfigResourcesApi(s).apis(),
            *groups.apis(),
            *mirror_states.apis(),
            *mirrors.apis(),
            *acls.apis(),
            *sasl.apis(),
            *scram.apis(),
            *quorum.apis(),
            *self.lifecycle_api.apis(),
            *ProducerIdBlocksApi(s, self._allocate_producer_ids).apis(),
        ]
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
        d = Dispatcher(apis, on_request=m.on_request, forwarding=forwarding)
        holder["d"] = d
        return d

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

    async def handle(self, conn: Any, frame: memoryview) -> Any:
        def make_ctx(header: Any) -> RequestContext:
            return RequestContext(
                header=header,
                connection_id=conn.connection_id,
                listener=conn.listener,
                peer_host=conn.peer_host,
                principal=conn.state["principal"],
                now_ms=self.clock.now_ms(),
                session=conn.state,
            )

        api_key = int.from_bytes(frame[:2], "big", signed=True) if len(frame) >= 2 else -1
        if not self.sasl_api.admit(conn.state, conn.listener, api_key, conn.peer_certificate):
            # Kafka closes a connection that sends anything but ApiVersions and SASL before
            # authenticating (no response: the client sees the connection drop).
            log.info(
                "closing connection %s: api key %d before SASL authentication",
                conn.connection_id,
                api_key,
            )
            conn.close(fatal=True)
            return None
        try:
            response = await self.dispatcher.handle(make_ctx, frame)
            if api_key == SASL_AUTHENTICATE_KEY and self.sasl_api.authenticated(conn.state):
                conn.authenticated()  # sasl.server.max.receive.size no longer applies
            if self.sasl_api.should_close(conn.state):
                # A failed SASL exchange ends the connection, a little after its error response
                # (connection.failed.authentication.delay.ms) so the client reads the error
                # before it sees the connection drop; requests meanwhile close it at once.
                delay = self.config.connection_failed_authentication_delay_ms / 1000
                asyncio.get_running_loop().call_later(delay, conn.close)
            return response
        except ProtocolError as e:
            # Kafka closes the connection on a request it cannot even answer (unreadable header,
            # unknown api key, unsupported version); other connections are unaffected.
            log.info("closing connection %s: %s", conn.connection_id, e)
            conn.close(fatal=True)  # requests pipelined after it are not answered
            return None

    # -- lifecycle -------------------------------------------------------------------------

    async def start(self) -> None:
        cfg = self.config
        listeners = [
            Listener(
                name=lst.name,
                host=lst.host or "0.0.0.0",
                port=lst.port,
                security_protocol=lst.security_protocol,
                ssl_context=self.listener_security[lst.name].ssl_context,
                pre_auth_max_bytes=(
                    cfg.sasl_server_max_receive_size
                    if lst.security_protocol.startswith("SASL_")
                    else None
                ),
            )
            for lst in cfg.listeners
        ]
        self.server = KafkaServer(
            listeners,
            self.handle,
            max_request_bytes=cfg.socket_request_max_bytes,
            max_inflight=max(1, min(cfg.queued_max_requests, 1000)),
            idle_ms=cfg.connections_max_idle_ms,
            queued_max_request_bytes=cfg.queued_max_request_bytes,
            max_connections=cfg.max_connections,
            max_connections_per_ip=cfg.max_connections_per_ip,
            max_connections_per_ip_overrides=cfg.max_connections_per_ip_overrides,
            max_connection_creation_rate=cfg.max_connection_creation_rate,
            unlimited_listeners=frozenset(cfg.controller_listener_names),
        )
        # The controller listener first: the other voters reach this node's quorum there, and
        # the image comes from what the quorum has committed before clients are let in.
        await self.server.start(only=cfg.controller_listener_names)
        self.quorum.start()
        self._duties = asyncio.ensure_future(self.controller_duties())
        await self.quorum.wait_caught_up()
        if not self._loaded:
            self.load_metadata([])
        self._apply_mirror_throttle()
        await self.server.start()
        endpoints = []
        for adv in cfg.advertised_listeners:
            if adv.name in cfg.controller_listener_names:
                continue
            port = adv.port or self.server.bound_ports[adv.name]
            endpoints.append(
                (
                    adv.name,
                    adv.host or "localhost",
                    port,
                    SECURITY_PROTOCOL_IDS.get(adv.security_protocol, 0),
                )
            )
        if "broker" in cfg.process_roles:  # a controller-only node hosts no partitions
            # Registered through the active controller like any broker (in process when this
            # node is that controller), serving once unfenced: caught up with the metadata log.
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
        self.metadata_sync.on_metadata(self.image)
        if cfg.metrics_port:
            self.metrics.watch_state(
                read_on_loop(
                    asyncio.get_running_loop(),
                    lambda: StateSnapshot(
                        self._partition_stats(),
                        len(self.server.connections) if self.server else 0,
                        dict(self.server.rejected) if self.server else {},
                        (
                            (self.server.accept_throttled, self.server.accept_throttle_seconds)
                            if self.server
                            else (0, 0.0)
                        ),
                    ),
                    "partition metrics",
                )
            )
            self.metrics.watch_mirrors(
                read_on_loop(
                    asyncio.get_running_loop(),
                    lambda: build_snapshot(
                        self.image, self.mirrors, self.fetchers, self.metadata_sync
                    ),
                    "mirror metrics",
                )
            )
            self.metrics.watch_quorum(
                read_on_loop(
                    asyncio.get_running_loop(),
                    lambda: quorum_snapshot(
                        self.quorum.driver.core,
                        self.clock.now_ms(),
                        lambda: sum(1 for b in self.image.brokers.values() if b.fenced),
                    ),
                    "quorum metrics",
                )
            )
            self.metrics.watch_image(lambda: image_info(self.image))  # immutable: any thread
            self.metrics.watch_cleaner(
                read_on_loop(
                    asyncio.get_running_loop(), self.cleaner.metrics_snapshot, "cleaner metrics"
                )
            )
            self.metrics.serve(cfg.metrics_host, cfg.metrics_port)
        log.info(
            "kmirror node %d started: cluster %s, listeners %s",
            cfg.node_id,
            self.cluster_id,
            ", ".join(f"{n}:{p}" for n, p in self.server.bound_ports.items()),
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
            # Kafka's controlled shutdown: the controller moves this node's partition leadership
            # away while it still serves, then approves the exit
            running = self.lifecycle.state is BrokerState.RUNNING
            if running and not await self.lifecycle.controlled_shutdown(
                CONTROLLED_SHUTDOWN_TIMEOUT_S
            ):
                log.warning(
                    "controlled shutdown not approved within %.0fs: stopping anyway",
                    CONTROLLED_SHUTDOWN_TIMEOUT_S,
                )
            await self.lifecycle.close()
        if self.server is not None:
            await self.server.close()
        await self.metadata_sync.close()
        await self.mirrors.close()
        await self.fetchers.close()
        await self.txn_coordinator.close()  # before the groups: completions write to them
        await self.groups.close()
        await self.mirror_coordinator.close()
        self.replicas.snapshot_all()
        await self.cleaner.close()
        await self.controller_channel.close()
        await self.broker_clients.close()
        await self.lifecycle_channel.close()
        await self.quorum.close()
        self.logs.close()
        if self.meta_logs is not self.logs:
            self.meta_logs.close()
        log.info("kmirror node %d stopped", self.config.node_id)


def quorum_voters(config: ServerConfig) -> dict[int, tuple[str, int]]:
    """The static voters (``controller.quorum.voters``). Kafka 4's stock server.properties names
    only ``controller.quorum.bootstrap.servers`` (a dynamic quorum formatted ``--standalone``):
    a controller whose one bootstrap server is itself is that standalone quorum's only voter.
    Dynamic quorums of several controllers (KIP-853) are not served."""
    if config.controller_quorum_voters:
        return {v.node_id: (v.host, v.port) for v in config.controller_quorum_voters}
    bootstrap = config.controller_quorum_bootstrap_servers
    if config.is_controller and len(bootstrap) == 1:
        return {config.node_id: (bootstrap[0].host or "localhost", bootstrap[0].port)}
    raise ConfigError(
        f"{config.source}: controller.quorum.bootstrap.servers: a dynamic quorum (KIP-853) is "
        "not supported: list the controllers in controller.quorum.voters (id@host:port,...)"
    )


def _epoch_of(hosted: Any) -> Any:
    return lambda: hosted.leader_epoch


def check_storage(config: ServerConfig) -> str:
    """The cluster id shared by every formatted log dir; refuses unformatted or mismatched dirs."""
    cluster_ids = set()
    dirs = list(dict.fromkeys([*config.log_dirs, config.metadata_log_dir]))
    for d in dirs:
        try:
            meta = read_meta_properties(d)
        except (MetaPropertiesError, OSError) as e:
            raise StartupError(
                f"Log directory {d} is not formatted ({e}). Run: bin/kafka-storage.sh format -t <cluster-id> -c <server.properties>"
            ) from None
        if meta.node_id != config.node_id:
            raise StartupError(
                f"Log directory {d} belongs to node {meta.node_id}, but node.id is {config.node_id}"
            )
        cluster_ids.add(meta.cluster_id)
    if len(cluster_ids) != 1:
        raise StartupError(f"Log directories belong to different clusters: {sorted(cluster_ids)}")
    return cluster_ids.pop()


STOP_DURING_STARTUP_TIMEOUT_S = 10.0  # bound on cancelling start-up and closing what it opened
USAGE = "USAGE: kafka-server-start.sh server.properties"
HELP = f"""{USAGE}
Runs one kmirror node in the foreground. Format its log dirs first:
  kafka-storage.sh format -t <cluster-id> -c server.properties
SIGTERM or SIGINT stop it cleanly at any time, start-up included: exit 0.
A node that cannot start prints one line on stderr (the config key and why) and exits 1.
Options:
  --help      this text
  --version   the kmirror version
"""


def _start_step(node: Node) -> str:
    """What `Node.start` is doing, for the start-up progress log (read from another thread)."""
    if node.server is None:
        return "replaying the metadata log"
    return "starting the listeners and registering the broker"


async def _close_unstarted(node: Node) -> None:
    """Close what a failed or cancelled start-up opened (listeners, logs), within a bound."""
    try:
        await asyncio.wait_for(node.stop(), STOP_DURING_STARTUP_TIMEOUT_S)
    except Exception as e:  # the start-up's own failure is what the operator needs to see
        log.warning("closing the node after start-up ended early: %s", str(e) or type(e).__name__)


def _failure(e: BaseException, config: ServerConfig, node: Node | None) -> StartupError:
    why = describe_startup_error(e, config, node.server if node is not None else None)
    if why is None:  # not a failure start-up expects: keep the traceback, in the log
        log.error("start-up failed", exc_info=e)
        why = f"start-up failed: {type(e).__name__}: {e}"
    return StartupError(why)


async def run(
    config: ServerConfig,
    cluster_id: str,
    listener_security: Mapping[str, ListenerSecurity] | None = None,
    signals: StopSignals | None = None,
) -> None:
    """Run the node until ``signals`` report SIGTERM/SIGINT (installed here if not given).

    A signal during start-up cancels it, closes what it opened and returns normally, as a stop
    after start-up does (the process exits 0 either way). A start-up failure closes what was
    opened and raises `StartupError` with one line naming the config key and the reason.
    """
    if signals is None:
        signals = StopSignals()
        signals.install()
    progress = StartupProgress()
    node: Node | None = None
    try:
        dirs = ", ".join(dict.fromkeys([*config.log_dirs, config.metadata_log_dir]))
        with progress.step(f"recovering the logs in {dirs}"):
            node = Node(config, cluster_id, listener_security)
        stop = asyncio.Event()
        signals.attach(asyncio.get_running_loop(), stop.set)
        start = asyncio.ensure_future(node.start())
        stopped = asyncio.ensure_future(stop.wait())
        with progress.step(lambda: _start_step(node)):
            await asyncio.wait({start, stopped}, return_when=asyncio.FIRST_COMPLETED)
    except Exception as e:
        raise _failure(e, config, node) from e
    finally:
        progress.close()
    if not start.done():
        sig = signals.received.name if signals.received is not None else "stop signal"
        log.info("%s during start-up: cancelling it", sig)
        start.cancel()
        await asyncio.wait({start}, timeout=STOP_DURING_STARTUP_TIMEOUT_S)
        await _close_unstarted(node)
        return
    stopped.cancel()
    failure = asyncio.CancelledError() if start.cancelled() else start.exception()
    if failure is not None:
        await _close_unstarted(node)
        raise _failure(failure, config, node) from failure
    maintenance = asyncio.create_task(node.maintenance())
    await stop.wait()
    log.info("shutting down")
    maintenance.cancel()
    await node.stop()


def _version() -> str:
    try:
        return metadata.version("kmirror")
    except metadata.PackageNotFoundError:
        return "0.0.0"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        print(HELP, end="")
        return 0
    if args and args[0] == "--version":
        print(_version())
        return 0
    if len(args) != 1 or args[0].startswith("-"):
        print(USAGE, file=sys.stderr)
        return 1
    logging.basicConfig(
        level=logging.INFO,
        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)",
        stream=sys.stdout,
    )
    # From here SIGTERM/SIGINT stop the node at any point (broker/stop_signals.py).
    signals = StopSignals()
    signals.install()
    try:
        return _start_and_run(args[0], signals)
    except StartupInterrupted as e:
        log.info("%s during start-up: stopped", signal.Signals(e.signum).name)
        return 0
    finally:
        signals.restore()


def _start_and_run(config_path: str, signals: StopSignals) -> int:
    """0 after a stop signal; 1, after one line on stderr, when the node cannot start."""
    try:
        config, warnings = load_server_config(config_path)
    except ConfigError as e:
        print(f"kmirror: {e}", file=sys.stderr)
        return 1
    for w in warnings:
        log.warning(w)
    try:
        listener_security = build_listener_security(config)
    except SecurityConfigError as e:
        print(f"kmirror: {config.source}: {e}", file=sys.stderr)
        return 1
    try:
        cluster_id = check_storage(config)
        import uvloop

        started = time.monotonic()
        uvloop.run(run(config, cluster_id, listener_security, signals))
    except StartupError as e:
        print(f"kmirror: {e}", file=sys.stderr)
        return 1
    log.debug("ran for %.1fs", time.monotonic() - started)
    return 0
