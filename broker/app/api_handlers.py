"""The request handlers: the API families this node serves, the dispatcher that routes each
request (forwarding what belongs to the active controller), and the per-connection handler the
network server calls with each frame.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

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
from ..api.share_fetch import ShareFetchApi
from ..api.share_group import ShareGroupApi
from ..api.share_offset_changes import ShareOffsetChangesApi
from ..api.share_offsets import ShareOffsetsApi
from ..api.share_state import ShareStateApi
from ..api.topic_partitions import TopicPartitionsApi
from ..api.topics import TopicsApi
from ..api.txn import TxnApi
from ..api.unregister_broker import UnregisterBrokerApi
from ..config.group_configs import GROUP_RESOURCE
from ..controller.client_quotas import ClientQuotaController
from ..controller.features import FeatureControl
from ..controller.scram import ScramController
from ..coordinator.share.offsets_admin import ShareOffsetsAdmin
from ..coordinator.share.partition import ShareConfig
from ..coordinator.share.persister import SharePersister
from ..coordinator.share.sessions import ShareSessions
from ..coordinator.share.state_coordinator import SHARE_STATE_TOPIC
from ..metadata.features import SHARE_VERSION
from .controller_parts import monotonic_ms

if TYPE_CHECKING:
    from .node import Node


def build_apis(node: Node) -> None:
    """The API handlers (those other parts of the node call kept by name), the dispatcher
    and the handler the network server calls for each request frame."""
    config = node.config
    node.cluster_api = ClusterApi(
        node.services,
        config.offsets_topic_num_partitions,
        config.offsets_topic_replication_factor,
    )
    node.cluster_api.share_enabled = lambda: share_groups_enabled(node)
    node.mirror_api = MirrorApi(node.services, node.mirror_controller)
    # KIP-932 share-partition state wherever its coordinator is, and share offsets admin
    # (AlterShareGroupOffsets, the mirror's share group sync)
    node.share_persister = SharePersister(
        node.share_states,
        lambda p: node.cluster_view.partition_leader(SHARE_STATE_TOPIC, p),
        config.node_id,
        node.share_state_clients,
        node.cluster_api.ensure_share_state_topic,
    )
    node.share_offsets = ShareOffsetsAdmin(node.groups, node.share_persister)
    node.groups.share_state_deleter = node.share_offsets.delete_state
    # client quotas (KIP-13/219), from the image's ClientQuotaRecords
    node.client_throttle = ClientThrottle(
        lambda: node.image,
        lambda: time.monotonic() * 1000,
        config.quota_window_num,
        config.quota_window_size_seconds,
        config.controller_quota_window_num,
        config.controller_quota_window_size_seconds,
    )
    node.sasl_api = SaslApi(node.listener_security, node._scram_credential)
    node.lifecycle_api = BrokerLifecycleApi(
        lambda: node.cluster_control if node.quorum.is_leader else None,
        lambda ctx: ctx.listener in config.controller_listener_names,
        monotonic_ms,
        authorizer=lambda: node.authorizer,
    )
    node.dispatcher = build_dispatcher(node)
    node.requests = ConnectionRequests(
        node.dispatcher,
        node.sasl_api,
        node.clock.now_ms,
        config.connection_failed_authentication_delay_ms,
    )


def build_dispatcher(node: Node) -> Dispatcher:
    """Every API this node serves, and how requests for the active controller get there."""
    cfg = node.config
    holder: dict[str, Dispatcher] = {}
    api_versions = api_versions_handler(
        lambda listener: holder["d"].supported_versions(listener),
        lambda: node.image,
        # group.share.enable turns share groups on by itself, as share.version 1 does
        {SHARE_VERSION: 1 if node.config.group_share_enable else 0},
    )
    apis = [Api(18, api_versions, max_version=4), *_apis(node)]
    is_active = lambda: node.quorum.is_leader  # noqa: E731 - False on a broker-only node
    if cfg.is_controller:
        apis += EnvelopeApi(
            lambda make_ctx, frame: holder["d"].handle_embedded(make_ctx, frame),
            cfg.controller_listener_names,
            node.authorizer,
            is_active_controller=is_active,
        ).apis()
    forwarding = (
        Forwarder(
            node.controller_channel,
            is_active,
            controller_listeners=cfg.controller_listener_names,
        )
        if "broker" in cfg.process_roles
        else None
    )
    d = Dispatcher(
        apis,
        on_request=node.metrics.on_request,
        forwarding=forwarding,
        quotas=node.client_throttle,
        # controller listeners serve the controller's APIs, the others the broker's
        controller_listeners=cfg.controller_listener_names,
    )
    holder["d"] = d
    return d


def share_groups_enabled(node: Node) -> bool:
    """KIP-932 share groups are on with group.share.enable=true or, as Kafka 4.1 turns them on
    (``kafka-features.sh upgrade --feature share.version=1``), a finalized share.version 1."""
    return bool(node.config.group_share_enable) or node.image.features.get(SHARE_VERSION, 0) >= 1


def _share_apis(node: Node) -> list[Api]:
    """KIP-932: membership on the group coordinator, fetch/acknowledge on the leaders. Served
    while ``share_groups_enabled``: otherwise neither advertised nor answered, as before."""
    c = node.config
    share = ShareConfig(
        lock_duration_ms=c.group_share_record_lock_duration_ms,
        delivery_count_limit=c.group_share_delivery_count_limit,
        max_record_locks=c.group_share_partition_max_record_locks,
    )
    sessions = ShareSessions(
        c.group_share_max_share_sessions, evict_idle_ms=c.group_share_session_timeout_ms
    )
    persister = node.share_persister
    fetch = ShareFetchApi(
        node.services,
        share,
        c.share_auto_offset_reset,
        sessions,
        persister,
        group_overrides=lambda gid: node.image.config(GROUP_RESOURCE, gid),
    )
    apis = [
        *ShareGroupApi(node.groups, node.authorizer).apis(),
        *ShareOffsetsApi(node.services, node.groups, persister).apis(),
        *ShareOffsetChangesApi(node.services, node.share_offsets).apis(),
        *fetch.apis(),
        *ShareStateApi(node.share_states, node.authorizer).apis(),
    ]
    for api in apis:
        api.enabled = lambda: share_groups_enabled(node)
    return apis


def _apis(node: Node) -> list[Api]:
    s, m = node.services, node.metrics
    quorum = _quorum_api(node)
    fetch = FetchApi(s, m.on_bytes_out, node.client_throttle)
    fetch.on_follower_read, fetch.on_preferred_replica = m.on_follower_read, m.on_preferred_replica
    fetch.metadata_fetch = quorum.fetch
    fetch.controller_listener = lambda ctx: ctx.listener in node.config.controller_listener_names
    groups = GroupApi(node.groups, lambda t: t in node.image.topics, node.authorizer)
    features = FeatureControl(node.controller, node.config.node_id)
    return [
        *MetadataApi(s).apis(),
        *ProduceApi(s, m.on_bytes_in, node.client_throttle).apis(),
        *fetch.apis(),
        *OffsetsApi(s).apis(),
        *LeaderEpochsApi(s).apis(),
        *ElectLeadersApi(s, node.elections, lambda: node.quorum.is_leader).apis(),
        *ReassignmentsApi(s, node.reassignments, lambda: node.quorum.is_leader).apis(),
        *node.cluster_api.apis(),
        *TxnApi(s, node.txn_verification, node.groups, node.txn_markers).apis(),
        *ProducersApi(s).apis(),
        *TopicsApi(s, node.client_throttle).apis(),
        *ConfigsApi(s).apis(),
        *LogAdminApi(s).apis(),
        *LogDirsApi(s).apis(),
        *TopicPartitionsApi(s).apis(),
        *ConfigResourcesApi(s).apis(),
        *groups.apis(),
        # KIP-848 groups unless group.coordinator.rebalance.protocols leaves them out
        *(
            ConsumerGroupApi(node.groups, node.authorizer).apis()
            if "consumer" in node.config.group_coordinator_rebalance_protocols
            else []
        ),
        # KIP-932 share groups: group.share.enable or share.version 1 (share_groups_enabled)
        *_share_apis(node),
        *MirrorStateApi(node.mirror_coordinator, lambda: node.image, node.authorizer).apis(),
        *node.mirror_api.apis(),
        *AclsApi(s, node.acl_controller).apis(),
        *node.sasl_api.apis(),
        *ScramCredentialsApi(s, ScramController(node.controller)).apis(),
        *ClientQuotasApi(s, ClientQuotaController(node.controller)).apis(),
        *quorum.apis(),
        *RaftVotersApi(
            lambda: node.quorum.driver, lambda: node.cluster_id, lambda: node.authorizer
        ).apis(),
        *node.lifecycle_api.apis(),
        *AlterPartitionApi(
            lambda: node.alter_partition_control if node.quorum.is_leader else None,
            lambda ctx: ctx.listener in node.config.controller_listener_names,
            lambda: node.authorizer,
        ).apis(),
        *ProducerIdBlocksApi(s, node._allocate_producer_ids).apis(),
        # controller APIs on the broker and controller listeners (forwarded by brokers)
        *FeaturesApi(
            lambda: features if node.config.is_controller else None, lambda: node.authorizer
        ).apis(),
        *UnregisterBrokerApi(
            lambda: node.cluster_control if node.quorum.is_leader else None,
            lambda: node.authorizer,
        ).apis(),
    ]


def _quorum_api(node: Node) -> QuorumApi:
    cfg = node.config

    def endpoints() -> dict[int, list[tuple[str, str, int]]]:
        if cfg.controller_quorum_voters:
            return {
                v.node_id: [(cfg.controller_listener_names[0], v.host, v.port)]
                for v in cfg.controller_quorum_voters
            }
        # KIP-853: the endpoints the Voters record holds
        return {
            v.voter_id: [(e.name, e.host, e.port) for e in v.endpoints]
            for v in node.quorum.voter_set.voters
        }

    return QuorumApi(
        lambda: node.quorum.driver,
        node.clock.now_ms,
        endpoints,
        lambda: node.authorizer,
        lambda: {v.voter_id: v.directory_id for v in node.quorum.voter_set.voters},
    )
