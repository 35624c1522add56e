"""The metadata quorum's voters, from server.properties."""

from __future__ import annotations

from ..config.server_config import ConfigError, ServerConfig


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
