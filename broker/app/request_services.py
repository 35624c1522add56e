"""The authorizer and `Services`, what every request handler shares: the image, the replicas,
the controller wherever it is, and the describe functions of the configs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .. import topic_configs
from ..api.routed_controller import RoutedController
from ..api.services import Services
from ..config import group_configs
from ..config.group_configs import GROUP_RESOURCE
from ..controller.broker_configs import describe_broker_configs
from ..metadata.image import TOPIC_RESOURCE
from ..security.authorizer import build_authorizer

if TYPE_CHECKING:
    from .node import Node


def build_services(node: Node) -> None:
    """The authorizer and what every request handler shares (`Services`)."""
    config = node.config
    node.authorizer = build_authorizer(
        config.authorizer_class_name,
        config.super_users or "",
        config.allow_everyone_if_no_acl_found,
        lambda: node.image.acls,
    )
    node.services = Services(
        node_id=config.node_id,
        cluster_id=node.cluster_id,
        image=lambda: node.image,
        # internal topics and producer id blocks reach the active controller from any node
        controller=RoutedController(
            node.controller,
            config.node_id,
            lambda: node.quorum.is_leader,
            lambda: node.controller_channel,
            lambda: node.broker_epoch,
        ),
        replicas=node.replicas,
        log_manager=node.logs,
        config=config,
        now_ms=node.clock.now_ms,
        auto_create_topics=config.auto_create_topics_enable,
        describe_topic_configs=lambda name: topic_configs.describe(
            config, node.image.config(TOPIC_RESOURCE, name)
        ),
        describe_broker_configs=lambda: describe_broker_configs(config, node.image),
        describe_group_configs=lambda name: group_configs.describe_rows(
            node.image.config(GROUP_RESOURCE, name), node.group_defaults
        ),
        authorizer=node.authorizer,
        controller_endpoints=lambda: _controller_endpoints(node),
        active_controller=lambda: node.quorum.leader_id,
        controller_listeners=frozenset(config.controller_listener_names),
        verify_txn=(
            node.txn_verification.verify_partitions
            if config.transaction_partition_verification_enable
            else None
        ),
    )


def _controller_endpoints(node: Node) -> list[tuple[int, str, int]]:
    """The voters' controller endpoints (DescribeCluster for --bootstrap-controller): static,
    or from the Voters record of a dynamic quorum (KIP-853)."""
    config = node.config
    if config.controller_quorum_voters:
        return [(v.node_id, v.host, v.port) for v in config.controller_quorum_voters]
    listener = config.controller_listener_names[0] if config.controller_listener_names else None
    out = []
    for v in node.quorum.voter_set.voters:
        address = node.quorum.voter_set.endpoint(v.voter_id, listener)
        if address is not None:
            out.append((v.voter_id, address[0], address[1]))
    return out
