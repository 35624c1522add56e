"""The metadata quorum over ``__cluster_metadata-0`` and this node's channels to its leader (the
active controller): one for forwarded requests, one for the broker lifecycle RPCs.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from ..cluster_view import PeerClients
from ..config.meta_properties import MetaPropertiesError, parse_uuid, read_meta_properties
from ..config.server_config import ServerConfig
from ..log.clock import Clock
from ..log.config import LogConfig
from ..log.manager import LogManager
from ..metadata.image import METADATA_TOPIC, METADATA_TOPIC_ID
from ..network.node_server import SECURITY_PROTOCOL_IDS
from ..quorum.bootstrap_voters import controller_endpoints
from ..quorum.broker_lifecycle import heartbeat_attempt_ms
from ..quorum.controller_channel import ControllerChannel
from ..quorum.controller_registration import ControllerRegistrar
from ..quorum.node_quorum import (
    ApplyRecords,
    LoadSnapshot,
    MetadataQuorum,
    OnLeaderChange,
    SnapshotSource,
)
from ..quorum.voters import quorum_seat
from ..raft.outputs import RaftConfig
from ..raft.voter_set import ZERO_UUID

CONTROLLER_CHANNEL_TIMEOUT_MS = 60_000  # Kafka's forwarding channel retries as long


def metadata_directory_id(metadata_log_dir: str) -> uuid.UUID:
    """The metadata log directory's ``directory.id`` (meta.properties): this node's replica key
    in a dynamic quorum. A directory formatted without one has the zero id."""
    try:
        text = read_meta_properties(metadata_log_dir).directory_id
    except (MetaPropertiesError, OSError):
        return ZERO_UUID
    return ZERO_UUID if text is None else uuid.UUID(bytes=parse_uuid(text))


def _controller_listeners(config: ServerConfig) -> list[tuple[str, str, int, int]]:
    return [
        (e.name, e.host, e.port, SECURITY_PROTOCOL_IDS.get(_protocol(config, e.name), 0))
        for e in controller_endpoints(config)
    ]


def _voter_update(
    quorum: MetadataQuorum, config: ServerConfig, cluster_id: str
) -> dict[str, Any] | None:
    """UpdateRaftVoter's body when the Voters record has other endpoints for this voter than
    the ones it listens on; None when they agree (or it is no voter)."""
    core = quorum.driver.core
    me = core.voter_set.get(config.node_id)
    mine = controller_endpoints(config)
    if not core.dynamic or not core.is_voter or me is None or set(me.endpoints) == set(mine):
        return None
    return {
        "cluster_id": cluster_id,
        "current_leader_epoch": core.epoch,
        "voter_id": config.node_id,
        "voter_directory_id": core.directory_id,
        "listeners": [{"name": e.name, "host": e.host, "port": e.port} for e in mine],
        "k_raft_version_feature": {"min_supported_version": 0, "max_supported_version": 1},
    }


def _protocol(config: ServerConfig, listener: str) -> str:
    for x in config.listeners:
        if x.name == listener:
            return x.security_protocol
    return "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class QuorumParts:
    """What `build_quorum` made."""

    quorum: MetadataQuorum
    controller_channel: ControllerChannel  # forwarded requests, to the active controller
    lifecycle_channel: ControllerChannel  # broker registration and heartbeats
    controller_registrar: ControllerRegistrar | None  # a controller of a dynamic quorum


def build_quorum(
    config: ServerConfig,
    cluster_id: str,
    clock: Clock,
    peers: PeerClients,
    meta_logs: LogManager,
    *,
    apply: ApplyRecords,
    load_snapshot: LoadSnapshot,
    snapshot_source: SnapshotSource,
    on_leader_change: OnLeaderChange,
) -> QuorumParts:
    """The metadata quorum over ``__cluster_metadata-0``, and the channels to its leader.

    ``apply`` and ``load_snapshot`` take what the quorum commits into the node's image,
    ``snapshot_source`` gives the image to snapshot, ``on_leader_change`` tells the active
    controller's duties: the quorum calls them once started, after every part is built."""
    metadata_log = meta_logs.get_or_create(
        METADATA_TOPIC,
        0,
        METADATA_TOPIC_ID,
        LogConfig(segment_bytes=64 * 1024 * 1024, retention_ms=-1, retention_bytes=-1),
    )
    seat = quorum_seat(config)
    registrar: ControllerRegistrar | None = None

    def leader_changed(leader: int, epoch: int) -> None:
        on_leader_change(leader, epoch)
        if registrar is not None:
            registrar.on_leader_change(leader, epoch)

    quorum = MetadataQuorum(
        config.node_id,
        seat.static,
        metadata_log,
        cluster_id,
        now_ms=clock.now_ms,
        client_factory=peers.quorum,
        apply=apply,
        # the registrar is made below, from a channel to this quorum's leader
        on_leader_change=leader_changed,
        config=RaftConfig(
            cluster_id=cluster_id,
            election_timeout_ms=config.controller_quorum_election_timeout_ms,
            fetch_timeout_ms=config.controller_quorum_fetch_timeout_ms,
            max_bytes_between_snapshots=config.metadata_log_max_record_bytes_between_snapshots,
            max_snapshot_interval_ms=config.metadata_log_max_snapshot_interval_ms,
        ),
        snapshot_source=snapshot_source,
        load_snapshot=load_snapshot,
        directory_id=metadata_directory_id(config.metadata_log_dir),
        bootstrap=seat.bootstrap,
        listener=seat.listener,
    )
    # to whichever node leads the quorum: forwarded requests, broker registration/heartbeats
    controller_channel = ControllerChannel(
        quorum.leader_endpoint,
        peers.controller,
        timeout_ms=CONTROLLER_CHANNEL_TIMEOUT_MS,
    )
    # controllers of a dynamic quorum tell each new leader where they listen (KIP-853)
    if config.is_controller and seat.dynamic:
        registrar = ControllerRegistrar(
            config.node_id,
            _controller_listeners(config),
            controller_channel.request,
            lambda: _voter_update(quorum, config, cluster_id),
        )
    return QuorumParts(
        quorum=quorum,
        controller_channel=controller_channel,
        # Kafka gives the lifecycle RPCs their own channel, bounded by half a session
        # (KAFKA-14392); each attempt by less, on a new connection after one timed out
        lifecycle_channel=ControllerChannel(
            quorum.leader_endpoint,
            peers.controller,
            timeout_ms=config.broker_session_timeout_ms // 2,
            attempt_timeout_ms=heartbeat_attempt_ms(
                config.broker_heartbeat_interval_ms, config.broker_session_timeout_ms
            ),
        ),
        controller_registrar=registrar,
    )
