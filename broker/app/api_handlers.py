"""The request handlers: the API families this node serves, the dispatcher that routes each
request (forwarding what belongs to the active controller), and the per-connection handler the
network server calls with each frame.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..api.acls import AclsApi
from ..api.alter_partition import AlterPartitionApi
from ..api.api_versions import make_handler as api_versions_handler
from ..api.broker_lifecycle import BrokerLifecycleApi
from ..api.client_quotas import ClientQuotasApi
from ..api.client_throttle import ClientThrottle
from ..api.cluster import ClusterApi
from ..api.config_resources import ConfigResourcesApi
from ..api.configs import ConfigsApi
from ..api.connection_requests import ConnectionRequests
from ..api.consumer_group import ConsumerGroupApi
from ..api.dispatcher import Api, Dispatcher
from ..api.elect_leaders import ElectLeadersApi
from ..api.envelope import EnvelopeApi
from ..api.features import FeaturesApi
from ..api.fetch import FetchApi
from ..api.forwarding import Forwarder
from ..api.group import GroupApi
from ..api.leader_epochs import LeaderEpochsApi
from ..api.log_admin import LogAdminApi
from ..api.log_dirs import LogDirsApi
from ..api.metadata import MetadataApi
from ..api.mirror import MirrorApi
from ..api.mirror_freshness import FreshnessFn
from ..api.mirror_state import MirrorStateApi
from ..api.offsets import OffsetsApi
from ..api.produce import ProduceApi
from ..api.producer_id_blocks import ProducerIdBlocksApi
from ..api.producers import ProducersApi
from ..api.quorum import QuorumApi
from ..api.raft_voters import RaftVotersApi
from ..api.reassignments import ReassignmentsApi
from ..api.sasl import SaslApi
from ..api.scram_credentials import ScramCredentialsApi
from ..api.services import Services
from ..api.share_fetch import ShareFetchApi
from ..api.share_group import ShareGroupApi
from ..api.share_offset_changes import ShareOffsetChangesApi
from ..api.share_offsets import ShareOffsetsApi
from ..api.share_state import ShareStateApi
from ..api.topic_partitions import TopicPartitionsApi
from ..api.topics import TopicsApi
from ..api.txn import TxnApi
from ..api.unregister_broker import UnregisterBrokerApi
from ..cluster_view import ClusterView
from ..config.group_configs import GROUP_RESOURCE
from ..config.server_config import ServerConfig
from ..controller.client_quotas import ClientQuotaController
from ..controller.features import FeatureControl
from ..controller.scram import ScramController
from ..coordinator.share.offsets_admin import ShareOffsetsAdmin
from ..coordinator.share.partition import ShareConfig
from ..coordinator.share.persister import SharePersister
from ..coordinator.share.sessions import ShareSessions
from ..coordinator.share.state_coordinator import SHARE_STATE_TOPIC
from ..log.clock import Clock
from ..metadata.features import SHARE_VERSION
from ..metadata.image import MetadataImage
from ..metrics.broker_metrics import BrokerMetrics
from ..mirror.node_view import MirrorStatusView
from ..quorum.node_quorum import MetadataQuorum
from ..security.authorizer import Authorizer
from ..security.listeners import ListenerSecurity
from ..security.scram import Credential, Mechanism
from .controller_parts import ControllerParts, monotonic_ms
from .coordinators import Coordinators
from .metadata_quorum import QuorumParts
from .request_services import RequestServices


@dataclass(frozen=True, slots=True)
class Apis:
    """What `build_apis` made: the handlers other parts of the node call, kept by name, the
    dispatcher, and the handler the network server calls for each request frame."""

    cluster_api: ClusterApi
    mirror_api: MirrorApi
    share_persister: SharePersister
    share_offsets: ShareOffsetsAdmin
    client_throttle: ClientThrottle
    sasl_api: SaslApi
    lifecycle_api: BrokerLifecycleApi
    dispatcher: Dispatcher
    requests: ConnectionRequests


@dataclass(frozen=True, slots=True)
class _Parts:
    """What the handler table is built from (one argument for the helpers below)."""

    config: ServerConfig
    cluster_id: str
    clock: Clock
    metrics: BrokerMetrics
    image: Callable[[], MetadataImage]
    services: Services
    authorizer: Authorizer | None
    quorum: MetadataQuorum
    controller: ControllerParts
    coordinators: Coordinators


def build_apis(
    config: ServerConfig,
    cluster_id: str,
    clock: Clock,
    metrics: BrokerMetrics,
    image: Callable[[], MetadataImage],
    listener_security: Mapping[str, ListenerSecurity],
    bootstrap_records: list[Any],
    request_services: RequestServices,
    quorum: QuorumParts,
    controller: ControllerParts,
    coordinators: Coordinators,
    cluster_view: ClusterView,
    mirror_status: Callable[[], MirrorStatusView],
    mirror_freshness: FreshnessFn,
) -> Apis:
    """The API handlers, the dispatcher and the handler the network server calls for each
    request frame. ``mirror_status`` and ``mirror_freshness``: what the mirror manager and its
    fetchers say of this node's mirror partitions (for --describe)."""
    parts = _Parts(
        config,
        cluster_id,
        clock,
        metrics,
        image,
        request_services.services,
        request_services.authorizer,
        quorum.quorum,
        controller,
        coordinators,
    )
    services = parts.services
    cluster_api = ClusterApi(
        services,
        config.offsets_topic_num_partitions,
        config.offsets_topic_replication_factor,
        share_enabled=lambda: share_groups_enabled(config, image()),
    )
    # The mirror manager, built after the handlers (it checks sources through this API),
    # tells --describe of its partitions: read through the callables, once it exists.
    mirror_api = MirrorApi(
        services,
        controller.mirror_controller,
        states=lambda mirror: mirror_status().states(mirror),
        progress=lambda mirror, topic, p: mirror_status().progress(mirror, topic, p),
        reason=lambda topic, p: mirror_status().reason(topic, p),
        freshness=mirror_freshness,
    )
    # KIP-932 share-partition state wherever its coordinator is, and share offsets admin
    # (AlterShareGroupOffsets, the mirror's share group sync)
    share_persister = SharePersister(
        coordinators.share_states,
        lambda p: cluster_view.partition_leader(SHARE_STATE_TOPIC, p),
        config.node_id,
        coordinators.share_state_clients,
        cluster_api.ensure_share_state_topic,
    )
    share_offsets = ShareOffsetsAdmin(coordinators.groups, share_persister)
    # client quotas (KIP-13/219), from the image's ClientQuotaRecords
    client_throttle = ClientThrottle(
        image,
        lambda: time.monotonic() * 1000,
        config.quota_window_num,
        config.quota_window_size_seconds,
        config.controller_quota_window_num,
        config.controller_quota_window_size_seconds,
    )
    sasl_api = SaslApi(
        listener_security,
        lambda user, mechanism: scram_credential(image(), bootstrap_records, user, mechanism),
    )
    lifecycle_api = BrokerLifecycleApi(
        lambda: controller.cluster_control if quorum.quorum.is_leader else None,
        lambda ctx: ctx.listener in config.controller_listener_names,
        monotonic_ms,
        authorizer=lambda: parts.authorizer,
    )
    dispatcher = build_dispatcher(
        parts,
        quorum,
        client_throttle,
        _apis(
            parts,
            cluster_api,
            mirror_api,
            client_throttle,
            sasl_api,
            lifecycle_api,
            _share_apis(parts, share_persister, share_offsets),
        ),
    )
    return Apis(
        cluster_api=cluster_api,
        mirror_api=mirror_api,
        share_persister=share_persister,
        share_offsets=share_offsets,
        client_throttle=client_throttle,
        sasl_api=sasl_api,
        lifecycle_api=lifecycle_api,
        dispatcher=dispatcher,
        requests=ConnectionRequests(
            dispatcher, sasl_api, clock.now_ms, config.connection_failed_authentication_delay_ms
        ),
    )


def scram_credential(
    image: MetadataImage, bootstrap_records: list[Any], user: str, mechanism: Mechanism
) -> Credential | None:
    """The user's SCRAM credential in the image, else in the format's bootstrap records."""
    found = image.scram.get((user, mechanism.type))
    if found is None and "metadata.version" not in image.features:
        # a fresh cluster, its bootstrap not committed yet: the nodes authenticate each
        # other with the credentials of their format (--add-scram)
        for r in bootstrap_records:
            if getattr(r, "name", None) == user and r.mechanism == mechanism.type:
                return Credential(
                    bytes(r.salt), bytes(r.stored_key), bytes(r.server_key), r.iterations
                )
    return found


def build_dispatcher(
    parts: _Parts, quorum: QuorumParts, quotas: ClientThrottle, apis: list[Api]
) -> Dispatcher:
    """Every API this node serves, and how requests for the active controller get there."""
    cfg = parts.config
    holder: dict[str, Dispatcher] = {}  # ApiVersions and Envelope ask the dispatcher made below
    api_versions = api_versions_handler(
        lambda listener: holder["d"].supported_versions(listener),
        parts.image,
        # group.share.enable turns share groups on by itself, as share.version 1 does
        {SHARE_VERSION: 1 if cfg.group_share_enable else 0},
    )
    apis = [Api(18, api_versions, max_version=4), *apis]
    is_active = lambda: quorum.quorum.is_leader  # noqa: E731 - False on a broker-only node
    if cfg.is_controller:
        apis += EnvelopeApi(
            lambda make_ctx, frame: holder["d"].handle_embedded(make_ctx, frame),
            cfg.controller_listener_names,
            parts.authorizer,
            is_active_controller=is_active,
        ).apis()
    forwarding = (
        Forwarder(
            quorum.controller_channel,
            is_active,
            controller_listeners=cfg.controller_listener_names,
        )
        if "broker" in cfg.process_roles
        else None
    )
    d = Dispatcher(
        apis,
        on_request=parts.metrics.on_request,
        forwarding=forwarding,
        quotas=quotas,
        # controller listeners serve the controller's APIs, the others the broker's
        controller_listeners=cfg.controller_listener_names,
    )
    holder["d"] = d
    return d


def share_groups_enabled(config: ServerConfig, image: MetadataImage) -> bool:
    """KIP-932 share groups are on with group.share.enable=true or, as Kafka 4.1 turns them on
    (``kafka-features.sh upgrade --feature share.version=1``), a finalized share.version 1."""
    return bool(config.group_share_enable) or image.features.get(SHARE_VERSION, 0) >= 1


def _share_apis(
    parts: _Parts, persister: SharePersister, share_offsets: ShareOffsetsAdmin
) -> list[Api]:
    """KIP-932: membership on the group coordinator, fetch/acknowledge on the leaders. Served
    while ``share_groups_enabled``: otherwise neither advertised nor answered, as before."""
    c, image = parts.config, parts.image
    groups = parts.coordinators.groups
    share = ShareConfig(
        lock_duration_ms=c.group_share_record_lock_duration_ms,
        delivery_count_limit=c.group_share_delivery_count_limit,
        max_record_locks=c.group_share_partition_max_record_locks,
    )
    sessions = ShareSessions(
        c.group_share_max_share_sessions, evict_idle_ms=c.group_share_session_timeout_ms
    )
    fetch = ShareFetchApi(
        parts.services,
        share,
        c.share_auto_offset_reset,
        sessions,
        persister,
        group_overrides=lambda gid: image().config(GROUP_RESOURCE, gid),
    )
    apis = [
        *ShareGroupApi(groups, parts.authorizer).apis(),
        *ShareOffsetsApi(parts.services, groups, persister).apis(),
        *ShareOffsetChangesApi(parts.services, share_offsets).apis(),
        *fetch.apis(),
        *ShareStateApi(parts.coordinators.share_states, parts.authorizer).apis(),
    ]
    for api in apis:
        api.enabled = lambda: share_groups_enabled(c, image())
    return apis


def _apis(
    parts: _Parts,
    cluster_api: ClusterApi,
    mirror_api: MirrorApi,
    client_throttle: ClientThrottle,
    sasl_api: SaslApi,
    lifecycle_api: BrokerLifecycleApi,
    share_apis: list[Api],
) -> list[Api]:
    s, m, cfg = parts.services, parts.metrics, parts.config
    ctl, co, quorum = parts.controller, parts.coordinators, parts.quorum
    authorizer = parts.authorizer
    is_leader = lambda: quorum.is_leader  # noqa: E731 - False on a broker-only node
    on_controller_listener = lambda ctx: ctx.listener in cfg.controller_listener_names  # noqa: E731
    quorum_api = _quorum_api(parts)
    fetch = FetchApi(
        s,
        m.on_bytes_out,
        client_throttle,
        metadata_fetch=quorum_api.fetch,
        controller_listener=on_controller_listener,
        on_follower_read=m.on_follower_read,
        on_preferred_replica=m.on_preferred_replica,
    )
    groups = GroupApi(co.groups, lambda t: t in parts.image().topics, authorizer)
    features = FeatureControl(ctl.controller, cfg.node_id)

    def allocate_producer_ids(
        broker_id: int, broker_epoch: int
    ) -> Awaitable[tuple[int, int]] | None:
        if not quorum.is_leader:
            return None
        return ctl.controller.allocate_producer_ids(broker_epoch, broker_id)

    return [
        *MetadataApi(s).apis(),
        *ProduceApi(s, m.on_bytes_in, client_throttle).apis(),
        *fetch.apis(),
        *OffsetsApi(s).apis(),
        *LeaderEpochsApi(s).apis(),
        *ElectLeadersApi(s, ctl.elections, is_leader).apis(),
        *ReassignmentsApi(s, ctl.reassignments, is_leader).apis(),
        *cluster_api.apis(),
        *TxnApi(s, co.txn_verification, co.groups, co.txn_markers).apis(),
        *ProducersApi(s).apis(),
        *TopicsApi(s, client_throttle).apis(),
        *ConfigsApi(s).apis(),
        *LogAdminApi(s).apis(),
        *LogDirsApi(s).apis(),
        *TopicPartitionsApi(s).apis(),
        *ConfigResourcesApi(s).apis(),
        *groups.apis(),
        # KIP-848 groups unless group.coordinator.rebalance.protocols leaves them out
        *(
            ConsumerGroupApi(co.groups, authorizer).apis()
            if "consumer" in cfg.group_coordinator_rebalance_protocols
            else []
        ),
        # KIP-932 share groups: group.share.enable or share.version 1 (share_groups_enabled)
        *share_apis,
        *MirrorStateApi(co.mirror_coordinator, parts.image, authorizer).apis(),
        *mirror_api.apis(),
        *AclsApi(s, ctl.acl_controller).apis(),
        *sasl_api.apis(),
        *ScramCredentialsApi(s, ScramController(ctl.controller)).apis(),
        *ClientQuotasApi(s, ClientQuotaController(ctl.controller)).apis(),
        *quorum_api.apis(),
        *RaftVotersApi(lambda: quorum.driver, lambda: parts.cluster_id, lambda: authorizer).apis(),
        *lifecycle_api.apis(),
        *AlterPartitionApi(
            lambda: ctl.alter_partition_control if quorum.is_leader else None,
            on_controller_listener,
            lambda: authorizer,
        ).apis(),
        *ProducerIdBlocksApi(s, allocate_producer_ids).apis(),
        # controller APIs on the broker and controller listeners (forwarded by brokers)
        *FeaturesApi(lambda: features if cfg.is_controller else None, lambda: authorizer).apis(),
        *UnregisterBrokerApi(
            lambda: ctl.cluster_control if quorum.is_leader else None,
            lambda: authorizer,
        ).apis(),
    ]


def _quorum_api(parts: _Parts) -> QuorumApi:
    cfg, quorum = parts.config, parts.quorum

    def endpoints() -> dict[int, list[tuple[str, str, int]]]:
        if cfg.controller_quorum_voters:
            return {
                v.node_id: [(cfg.controller_listener_names[0], v.host, v.port)]
                for v in cfg.controller_quorum_voters
            }
        # KIP-853: the endpoints the Voters record holds
        return {
            v.voter_id: [(e.name, e.host, e.port) for e in v.endpoints]
            for v in quorum.voter_set.voters
        }

    return QuorumApi(
        lambda: quorum.driver,
        parts.clock.now_ms,
        endpoints,
        lambda: parts.authorizer,
        lambda: {v.voter_id: v.directory_id for v in quorum.voter_set.voters},
    )
