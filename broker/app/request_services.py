"""The authorizer and `Services`, what every request handler shares: the image, the replicas,
the controller wherever it is, and the describe functions of the configs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .. import topic_configs
from ..api.routed_controller import RoutedController
from ..api.services import Services
from ..config import group_configs
from ..config.group_configs import GROUP_RESOURCE, GroupConfigDefaults
from ..config.server_config import ServerConfig
from ..controller.broker_configs import describe_broker_configs
from ..coordinator.txn.remote import TxnVerification
from ..log.clock import Clock
from ..log.manager import LogManager
from ..metadata.image import TOPIC_RESOURCE, MetadataImage
from ..mirror.core.sync_acks_state import policy_of
from ..mirror.sync_acks import SyncAcks
from ..quorum.node_quorum import MetadataQuorum
from ..replication.replica_manager import ReplicaManager
from ..security.authorizer import Authorizer, build_authorizer


@dataclass(frozen=True, slots=True)
class RequestServices:
    """What `build_services` made."""

    authorizer: Authorizer | None  # None: authorizer.class.name unset, every request allowed
    services: Services


def build_services(
    config: ServerConfig,
    cluster_id: str,
    clock: Clock,
    image: Callable[[], MetadataImage],
    controller: RoutedController,
    replicas: ReplicaManager,
    logs: LogManager,
    quorum: MetadataQuorum,
    group_defaults: GroupConfigDefaults,
    txn_verification: TxnVerification,
    mirror_writable: Callable[[str, int], bool],
) -> RequestServices:
    """The authorizer and what every request handler shares (`Services`).
    ``mirror_writable``: the mirror manager's check of a partition (KIP-1279)."""
    authorizer = build_authorizer(
        config.authorizer_class_name,
        config.super_users or "",
        config.allow_everyone_if_no_acl_found,
        lambda: image().acls,
    )
    services = Services(
        node_id=config.node_id,
        cluster_id=cluster_id,
        image=image,
        # internal topics and producer id blocks reach the active controller from any node
        controller=controller,
        replicas=replicas,
        log_manager=logs,
        config=config,
        now_ms=clock.now_ms,
        auto_create_topics=config.auto_create_topics_enable,
        describe_topic_configs=lambda name: topic_configs.describe(
            config, image().config(TOPIC_RESOURCE, name)
        ),
        describe_broker_configs=lambda: describe_broker_configs(config, image()),
        describe_group_configs=lambda name: group_configs.describe_rows(
            image().config(GROUP_RESOURCE, name), group_defaults
        ),
        mirror_writable=mirror_writable,
        mirror_sync=SyncAcks(active=lambda topic, p: _leads_sync(image(), replicas, topic, p)),
        authorizer=authorizer,
        controller_endpoints=lambda: _controller_endpoints(config, quorum),
        active_controller=lambda: quorum.leader_id,
        controller_listeners=frozenset(config.controller_listener_names),
        verify_txn=(
            txn_verification.verify_partitions
            if config.transaction_partition_verification_enable
            else None
        ),
    )
    return RequestServices(authorizer, services)


def _leads_sync(img: MetadataImage, replicas: ReplicaManager, topic: str, partition: int) -> bool:
    """This node leads ``topic``-``partition`` and the topic has ``mirror.sync.enable``."""
    hosted = replicas.get(topic, partition)
    return (
        hosted is not None
        and hosted.is_leader
        and policy_of(img.config(TOPIC_RESOURCE, topic)) is not None
    )


def _controller_endpoints(
    config: ServerConfig, quorum: MetadataQuorum
) -> list[tuple[int, str, int]]:
    """The voters' controller endpoints (DescribeCluster for --bootstrap-controller): static,
    or from the Voters record of a dynamic quorum (KIP-853)."""
    if config.controller_quorum_voters:
        return [(v.node_id, v.host, v.port) for v in config.controller_quorum_voters]
    listener = config.controller_listener_names[0] if config.controller_listener_names else None
    out = []
    for v in quorum.voter_set.voters:
        address = quorum.voter_set.endpoint(v.voter_id, listener)
        if address is not None:
            out.append((v.voter_id, address[0], address[1]))
    return out
