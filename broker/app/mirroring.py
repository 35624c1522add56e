"""KIP-1279 mirroring on this node: the mirror fetchers, the mirror manager (the state driver),
the metadata sync, the throttle, and the views the services and the mirror API read of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..api.routed_controller import RoutedMirrorController
from ..metadata.mirror_states import MIRROR_STATE_TOPIC
from ..mirror.fetcher import MirrorFetcherManager
from ..mirror.manager import MirrorManager
from ..mirror.metadata_sync import MirrorMetadataSync
from ..mirror.node_view import MirrorReactions, MirrorSources, MirrorStatusView, MirrorThrottle
from ..mirror.remote_states import RoutedMirrorStates

if TYPE_CHECKING:
    from .node import Node


def build_mirroring(node: Node) -> None:
    """Fetchers, the state driver, the metadata sync and the throttle of KIP-1279 mirrors."""
    config = node.config
    node.fetchers = MirrorFetcherManager(
        config.node_id,
        node.replicas.get,
        node.clock,
        # the manager exists before any fetcher runs
        on_failed=lambda m, topic, p, why: node.mirrors.on_fetch_failed(m, topic, p, why),
        num_fetchers=max(1, config.mirror_num_replica_fetchers),
    )
    sources = MirrorSources(
        lambda: node.image,
        config.node_id,
        node.mirror_api.cluster_id_of,
        node.mirror_api.identity_problem,
    )
    routed_mirrors = RoutedMirrorController(
        node.mirror_controller,
        lambda: node.quorum.is_leader,
        lambda: node.controller_channel,
        lambda topic: getattr(node.image.topics.get(topic), "topic_id", None),
    )
    node.mirrors = MirrorManager(
        lambda: node.image,
        node.replicas,
        # states kept by the __mirror_state coordinator of this node or another
        RoutedMirrorStates(
            node.mirror_coordinator,
            lambda p: node.cluster_view.partition_leader(MIRROR_STATE_TOPIC, p),
            lambda topic_id: getattr(node.image.topic_by_id(topic_id), "name", None),
            config.node_id,
            node.mirror_state_clients,
        ),
        node.fetchers,
        bump_leader_epoch=routed_mirrors.bump_leader_epoch,
        clear_mirror_name=routed_mirrors.clear_mirror_name,
        source_cluster_id=sources.cluster_id,
        align_with_source=sources.align,
        verify_source=node.mirror_api.check_source,
        truncation_timeout_ms=config.mirror_truncation_timeout_ms,
        now_ms=node.clock.now_ms,
    )
    node.metadata_sync = MirrorMetadataSync(
        lambda: node.image,
        node.controller,
        node.mirror_controller,
        node.groups,
        default_interval_ms=lambda: config.mirror_metadata_refresh_interval_ms,
        known_cluster_id=node.mirror_api.cluster_id_of,
        ensure_offsets_topic=node.cluster_api.ensure_offsets_topic,
        client_id=f"kmirror-{config.node_id}-metadata-sync",
        acls=node.acl_controller,
        now_ms=node.clock.now_ms,
        share_offsets=node.share_offsets if config.group_share_enable else None,
        own_cluster_id=node.cluster_id,
    )
    node.mirror_throttle = MirrorThrottle(
        lambda: node.image,
        config.node_id,
        config.mirror_replication_throttled_rate,
        node.fetchers,
    )
    node.mirror_reactions = MirrorReactions(node.mirrors, node.mirror_throttle, node.metadata_sync)


def wire_mirror_views(node: Node) -> None:
    """What the services and the mirror API (built before the mirror manager) read of it."""
    node.services.mirror_writable = node.mirrors.writable
    status = MirrorStatusView(
        lambda: node.image,
        node.clock.now_ms,
        node.mirror_coordinator,
        node.mirrors,
        node.fetchers,
        node.replicas,
    )
    node.mirror_api.states = status.states
    node.mirror_api.progress = status.progress
    node.mirror_api.reason = status.reason
    node.mirror_api.freshness = node.fetchers.freshness
