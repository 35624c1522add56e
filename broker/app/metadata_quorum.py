"""The metadata quorum over ``__cluster_metadata-0`` and this node's channels to its leader (the
active controller): one for forwarded requests, one for the broker lifecycle RPCs.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from ..config.meta_properties import MetaPropertiesError, parse_uuid, read_meta_properties
from ..config.server_config import ServerConfig
from ..log.config import LogConfig
from ..metadata.image import METADATA_TOPIC, METADATA_TOPIC_ID
from ..metadata.snapshot import image_records
from ..network.node_server import SECURITY_PROTOCOL_IDS
from ..quorum.bootstrap_voters import controller_endpoints
from ..quorum.controller_channel import ControllerChannel
from ..quorum.controller_registration import ControllerRegistrar
from ..quorum.node_quorum import MetadataQuorum
from ..quorum.voters import quorum_seat
from ..raft.outputs import RaftConfig
from ..raft.voter_set import ZERO_UUID

if TYPE_CHECKING:
    from .node import Node


CONTROLLER_CHANNEL_TIMEOUT_MS = 60_000  # Kafka's forwarding channel retries as long


def metadata_directory_id(metadata_log_dir: str) -> uuid.UUID:
    """The metadata log directory's ``directory.id`` (meta.properties): this node's replica key
    in a dynamic quorum. A directory formatted without one has the zero id."""
    try:
        text = read_meta_properties(metadata_log_dir).directory_id
    except (MetaPropertiesError, OSError):
        return ZERO_UUID
    return ZERO_UUID if text is None else uuid.UUID(bytes=parse_uuid(text))


def _leader_changed(node: Node, leader: int, epoch: int) -> None:
    node.controller_duties.on_leader_change(leader, epoch)
    if node.controller_registrar is not None:
        node.controller_registrar.on_leader_change(leader, epoch)


def _controller_listeners(config: ServerConfig) -> list[tuple[str, str, int, int]]:
    return [
        (e.name, e.host, e.port, SECURITY_PROTOCOL_IDS.get(_protocol(config, e.name), 0))
        for e in controller_endpoints(config)
    ]


def _voter_update(node: Node) -> dict[str, Any] | None:
    """UpdateRaftVoter's body when the Voters record has other endpoints for this voter than
    the ones it listens on; None when they agree (or it is no voter)."""
    core = node.quorum.driver.core
    me = core.voter_set.get(node.config.node_id)
    mine = controller_endpoints(node.config)
    if not core.dynamic or not core.is_voter or me is None or set(me.endpoints) == set(mine):
        return None
    return {
        "cluster_id": node.cluster_id,
        "current_leader_epoch": core.epoch,
        "voter_id": node.config.node_id,
        "voter_directory_id": core.directory_id,
        "listeners": [{"name": e.name, "host": e.host, "port": e.port} for e in mine],
        "k_raft_version_feature": {"min_supported_version": 0, "max_supported_version": 1},
    }


def _protocol(config: ServerConfig, listener: str) -> str:
    for x in config.listeners:
        if x.name == listener:
            return x.security_protocol
    return "PLAINTEXT"


def build_quorum(node: Node) -> None:
    """The metadata quorum over ``__cluster_metadata-0``, and the channels to its leader."""
    config = node.config
    metadata_log = node.meta_logs.get_or_create(
        METADATA_TOPIC,
        0,
        METADATA_TOPIC_ID,
        LogConfig(segment_bytes=64 * 1024 * 1024, retention_ms=-1, retention_bytes=-1),
    )
    seat = quorum_seat(config)
    node.quorum = MetadataQuorum(
        config.node_id,
        seat.static,
        metadata_log,
        node.cluster_id,
        now_ms=node.clock.now_ms,
        client_factory=node.peers.quorum,
        apply=node._apply_committed,
        # the active controller's duties are built with the controller, after the quorum
        on_leader_change=lambda leader, epoch: _leader_changed(node, leader, epoch),
        config=RaftConfig(
            cluster_id=node.cluster_id,
            election_timeout_ms=config.controller_quorum_election_timeout_ms,
            fetch_timeout_ms=config.controller_quorum_fetch_timeout_ms,
            max_bytes_between_snapshots=config.metadata_log_max_record_bytes_between_snapshots,
            max_snapshot_interval_ms=config.metadata_log_max_snapshot_interval_ms,
        ),
        snapshot_source=lambda: (node.image.offset, image_records(node.image)),
        load_snapshot=node._load_snapshot,
        directory_id=metadata_directory_id(config.metadata_log_dir),
        bootstrap=seat.bootstrap,
        listener=seat.listener,
    )
    # to whichever node leads the quorum: forwarded requests, broker registration/heartbeats
    node.controller_channel = ControllerChannel(
        node.quorum.leader_endpoint,
        node.peers.controller,
        timeout_ms=CONTROLLER_CHANNEL_TIMEOUT_MS,
    )
    # controllers of a dynamic quorum tell each new leader where they listen (KIP-853)
    node.controller_registrar = (
        ControllerRegistrar(
            config.node_id,
            _controller_listeners(config),
            node.controller_channel.request,
            lambda: _voter_update(node),
        )
        if config.is_controller and seat.dynamic
        else None
    )
    # Kafka gives the lifecycle RPCs their own channel, bounded by half a session (KAFKA-14392)
    node.lifecycle_channel = ControllerChannel(
        node.quorum.leader_endpoint,
        node.peers.controller,
        timeout_ms=config.broker_session_timeout_ms // 2,
    )
