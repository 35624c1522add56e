"""The node's `KafkaServer` as server.properties configures it: one `Listener` per
``listeners`` entry (its TLS context; on SASL listeners ``sasl.server.max.receive.size`` until
the connection authenticates), the ``socket.request.max.bytes``, ``queued.max.request*``,
``connections.max.idle.ms`` and ``max.connection*`` limits. Controller listeners are exempt from
the connection limits, as in Kafka. And what the broker registers of them: its advertised
client listeners."""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Mapping

from ..config.server_config import ServerConfig
from ..security.listeners import ListenerSecurity
from .server import Handler, KafkaServer, Listener

log = logging.getLogger(__name__)

SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}
MAX_INFLIGHT_CAP = 1000  # requests read ahead per connection, whatever queued.max.requests says


def node_server(
    cfg: ServerConfig, security: Mapping[str, ListenerSecurity], handler: Handler
) -> KafkaServer:
    listeners = [
        Listener(
            name=lst.name,
            host=lst.host or "0.0.0.0",
            port=lst.port,
            security_protocol=lst.security_protocol,
            ssl_context=security[lst.name].ssl_context,
            pre_auth_max_bytes=(
                cfg.sasl_server_max_receive_size
                if lst.security_protocol.startswith("SASL_")
                else None
            ),
        )
        for lst in cfg.listeners
    ]
    return KafkaServer(
        listeners,
        handler,
        max_request_bytes=cfg.socket_request_max_bytes,
        max_inflight=max(1, min(cfg.queued_max_requests, MAX_INFLIGHT_CAP)),
        idle_ms=cfg.connections_max_idle_ms,
        queued_max_request_bytes=cfg.queued_max_request_bytes,
        max_connections=cfg.max_connections,
        max_connections_per_ip=cfg.max_connections_per_ip,
        max_connections_per_ip_overrides=resolve_ip_overrides(cfg.max_connections_per_ip_overrides),
        max_connection_creation_rate=cfg.max_connection_creation_rate,
        listener_max_connections=cfg.listener_max_connections,
        listener_max_connection_creation_rate=cfg.listener_max_connection_creation_rate,
        inter_broker_listener=cfg.inter_broker_listener_name if cfg.is_broker else None,
        unlimited_listeners=frozenset(cfg.controller_listener_names),
    )


def resolve_ip_overrides(overrides: Mapping[str, int]) -> dict[str, int]:
    """``max.connections.per.ip.overrides`` by address: a host name counts for each address it
    resolves to at start-up, as Kafka resolves it once (one that does not resolve is left out,
    with a warning)."""
    out: dict[str, int] = {}
    for host, count in overrides.items():
        try:
            out[str(ipaddress.ip_address(host))] = count
            continue
        except ValueError:
            pass
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except OSError as e:
            log.warning("max.connections.per.ip.overrides: %s does not resolve (%s)", host, e)
            continue
        for *_, sockaddr in infos:
            out.setdefault(str(sockaddr[0]), count)
    return out


def advertised_endpoints(
    cfg: ServerConfig, bound_ports: Mapping[str, int]
) -> list[tuple[str, str, int, int]]:
    """(listener, host, port, security protocol id) of each advertised client listener; port 0
    advertises the port it was bound to."""
    return [
        (
            adv.name,
            adv.host or "localhost",
            adv.port or bound_ports[adv.name],
            SECURITY_PROTOCOL_IDS.get(adv.security_protocol, 0),
        )
        for adv in cfg.advertised_listeners
        if adv.name not in cfg.controller_listener_names
    ]
