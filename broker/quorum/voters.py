"""How this node finds the metadata quorum, from server.properties and its metadata log dir.

- ``controller.quorum.voters`` (id@host:port,...): a static quorum (kraft.version 0), as today.
- ``controller.quorum.bootstrap.servers`` (host:port,...) without static voters: a dynamic
  quorum (KIP-853). The voters are in the log (the bootstrap snapshot ``kafka-storage.sh
  format --standalone / --initial-controllers`` wrote, then VotersRecords); the bootstrap
  servers are whom the node asks who leads until it has read them. A controller formatted
  before KIP-853 support with one bootstrap server, itself, and no bootstrap snapshot keeps
  being that standalone quorum's only (static) voter.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config.server_config import ConfigError, ServerConfig
from .bootstrap_voters import controller_endpoints, has_bootstrap_snapshot

# bootstrap servers get these ids in the Raft core (Kafka numbers them -2, -3, ... too)
FIRST_BOOTSTRAP_ID = -2


@dataclass(frozen=True, slots=True)
class QuorumSeat:
    """Static voters (empty: voters in the log) and the bootstrap servers by pseudo id."""

    static: dict[int, tuple[str, int]]
    bootstrap: dict[int, tuple[str, int]] = field(default_factory=dict)
    listener: str | None = None  # the controller listener peers are reached on

    @property
    def dynamic(self) -> bool:
        return not self.static


def quorum_voters(config: ServerConfig) -> dict[int, tuple[str, int]]:
    """The static voters, or {} for a dynamic quorum (see ``quorum_seat``)."""
    return quorum_seat(config).static


def quorum_seat(config: ServerConfig) -> QuorumSeat:
    listener = config.controller_listener_names[0] if config.controller_listener_names else None
    if config.controller_quorum_voters:
        return QuorumSeat(
            {v.node_id: (v.host, v.port) for v in config.controller_quorum_voters},
            listener=listener,
        )
    bootstrap = config.controller_quorum_bootstrap_servers
    if not bootstrap:
        raise ConfigError(
            f"{config.source}: controller.quorum.bootstrap.servers or controller.quorum.voters "
            "must be set"
        )
    formatted_dynamic = config.is_controller and has_bootstrap_snapshot(config.metadata_log_dir)
    if config.is_controller and len(bootstrap) == 1 and not formatted_dynamic:
        return QuorumSeat(
            {config.node_id: (bootstrap[0].host or "localhost", bootstrap[0].port)},
            listener=listener,
        )
    own = (
        {(e.host, e.port) for e in controller_endpoints(config)} if config.is_controller else set()
    )
    servers = [(b.host or "localhost", b.port) for b in bootstrap]
    # a controller does not ask itself who leads
    servers = [s for s in servers if s not in own] or servers
    return QuorumSeat(
        {},
        {FIRST_BOOTSTRAP_ID - i: s for i, s in enumerate(servers)},
        listener=listener,
    )
