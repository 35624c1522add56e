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


def check_node_links(config: ServerConfig, voters: dict[int, tuple[str, int]]) -> None:
    """Refuse, naming the key, a cluster of several nodes whose node-to-node listeners are not
    PLAINTEXT: this node's own connections to the others (quorum, controller channel,
    inter-broker requests) do not speak TLS or SASL yet, and would fail in silence."""
    alone = set(voters) == {config.node_id}
    if alone:
        return  # a cluster of one talks to itself in process
    pmap = config.listener_security_protocol_map
    for name in config.controller_listener_names[:1]:
        if pmap.get(name, "PLAINTEXT") != "PLAINTEXT":
            raise ConfigError(
                f"{config.source}: listener.security.protocol.map: controller listener {name} is "
                f"{pmap[name]}, but nodes reach each other's controller listeners over PLAINTEXT "
                "only for now: map it to PLAINTEXT (and keep it on a private network)"
            )
    ibl = config.inter_broker_listener_name
    if ibl and pmap.get(ibl, "PLAINTEXT") != "PLAINTEXT":
        raise ConfigError(
            f"{config.source}: inter.broker.listener.name: {ibl} is {pmap[ibl]}, but brokers "
            "reach each other over PLAINTEXT only for now: name a PLAINTEXT listener"
        )
