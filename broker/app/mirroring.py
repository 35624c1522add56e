"""KIP-1279 mirroring on this node: the mirror fetchers, the mirror manager (the state driver),
the metadata sync, the throttle, and the view of them the mirror API's --describe reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..api.routed_controller import RoutedMirrorController
from ..cluster_view import ClusterView
from ..config.server_config import ServerConfig
from ..log.clock import Clock
from ..metadata.image import MetadataImage
from ..metadata.mirror_states import MIRROR_STATE_TOPIC
from ..mirror.fetcher import MirrorFetcherManager
from ..mirror.manager import MirrorManager
from ..mirror.metadata_sync import MirrorMetadataSync
from ..mirror.node_view import MirrorReactions, MirrorSources, MirrorStatusView, MirrorThrottle
from ..mirror.remote_states import RoutedMirrorStates
from ..quorum.controller_channel import ControllerChannel
from ..quorum.node_quorum import MetadataQuorum
from ..replication.replica_manager import ReplicaManager
from .api_handlers import Apis
from .controller_parts import ControllerParts
from .coordinators import Coordinators


@dataclass(frozen=True, slots=True)
class Mirroring:
    """What `build_mirroring` made."""

    fetchers: MirrorFetcherManager
    mirrors: MirrorManager  # the state driver
    metadata_sync: MirrorMetadataSync
    throttle: MirrorThrottle
    reactions: MirrorReactions  # the mirror parts' share of the node's metadata listener
    status: MirrorStatusView  # what --describe reads


def build_mirroring(
    config: ServerConfig,
    cluster_id: str,
    clock: Clock,
    image: Callable[[], MetadataImage],
    replicas: ReplicaManager,
    quorum: MetadataQuorum,
    controller_channel: ControllerChannel,
    controller: ControllerParts,
    coordinators: Coordinators,
    cluster_view: ClusterView,
    apis: Apis,
) -> Mirroring:
    """Fetchers, the state driver, the metadata sync and the throttle of KIP-1279 mirrors."""
    mirrors: MirrorManager | None = None

    def on_failed(mirror: str, topic: str, partition: int, why: str) -> None:
        assert mirrors is not None  # made below, before any fetcher runs
        mirrors.on_fetch_failed(mirror, topic, partition, why)

    fetchers = MirrorFetcherManager(
        config.node_id,
        replicas.get,
        clock,
        on_failed=on_failed,
        num_fetchers=max(1, config.mirror_num_replica_fetchers),
        cluster_id=cluster_id,
    )
    mirror_api = apis.mirror_api
    sources = MirrorSources(
        image, config.node_id, mirror_api.cluster_id_of, mirror_api.identity_problem
    )
    routed_mirrors = RoutedMirrorController(
        controller.mirror_controller,
        lambda: quorum.is_leader,
        lambda: controller_channel,
        lambda topic: getattr(image().topics.get(topic), "topic_id", None),
    )
    mirrors = MirrorManager(
        image,
        replicas,
        # states kept by the __mirror_state coordinator of this node or another
        RoutedMirrorStates(
            coordinators.mirror_coordinator,
            lambda p: cluster_view.partition_leader(MIRROR_STATE_TOPIC, p),
            lambda topic_id: getattr(image().topic_by_id(topic_id), "name", None),
            config.node_id,
            coordinators.mirror_state_clients,
        ),
        fetchers,
        bump_leader_epoch=routed_mirrors.bump_leader_epoch,
        clear_mirror_name=routed_mirrors.clear_mirror_name,
        source_cluster_id=sources.cluster_id,
        align_with_source=sources.align,
        verify_source=mirror_api.check_source,
        truncation_timeout_ms=config.mirror_truncation_timeout_ms,
        now_ms=clock.now_ms,
    )
    metadata_sync = MirrorMetadataSync(
        image,
        controller.controller,
        controller.mirror_controller,
        coordinators.groups,
        default_interval_ms=lambda: config.mirror_metadata_refresh_interval_ms,
        known_cluster_id=mirror_api.cluster_id_of,
        ensure_offsets_topic=apis.cluster_api.ensure_offsets_topic,
        client_id=f"kmirror-{config.node_id}-metadata-sync",
        acls=controller.acl_controller,
        now_ms=clock.now_ms,
        share_offsets=apis.share_offsets if config.group_share_enable else None,
        own_cluster_id=cluster_id,
    )
    throttle = MirrorThrottle(
        image, config.node_id, config.mirror_replication_throttled_rate, fetchers
    )
    return Mirroring(
        fetchers=fetchers,
        mirrors=mirrors,
        metadata_sync=metadata_sync,
        throttle=throttle,
        reactions=MirrorReactions(mirrors, throttle, metadata_sync),
        status=MirrorStatusView(
            image, clock.now_ms, coordinators.mirror_coordinator, mirrors, fetchers, replicas
        ),
    )
