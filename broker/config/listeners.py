"""Listener, quorum-voter and bootstrap-server syntax (``NAME://host:port``, ``id@host:port``)."""

from __future__ import annotations

import re

import msgspec

__all__ = [
    "SECURITY_PROTOCOLS",
    "HostPort",
    "Listener",
    "ListenerSyntaxError",
    "Voter",
    "parse_host_port",
    "parse_listeners",
    "parse_protocol_map",
    "parse_voters",
]

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
# Kafka's endpoint syntax: NAME://host:port, host may be empty (all interfaces) or [ipv6].
_ENDPOINT = re.compile(r"^([A-Za-z0-9_\-.]+)://\[?([0-9a-zA-Z\-%._:]*?)\]?:(-?[0-9]+)$")
_HOST_PORT = re.compile(r"^\[?([0-9a-zA-Z\-%._:]+?)\]?:([0-9]+)$")
_VOTER = re.compile(r"^(-?[0-9]+)@(.+)$")


class ListenerSyntaxError(ValueError):
    pass


class Listener(msgspec.Struct, frozen=True):
    name: str  # upper-cased, as Kafka's ListenerName.normalised
    host: str | None  # None: bind every interface
    port: int
    security_protocol: str


class HostPort(msgspec.Struct, frozen=True):
    host: str
    port: int


class Voter(msgspec.Struct, frozen=True):
    node_id: int
    host: str
    port: int


def _port(text: str, what: str) -> int:
    port = int(text)
    if not 0 <= port <= 65535:
        raise ListenerSyntaxError(f"port {port} out of range in {what!r}")
    return port


def _items(value: str) -> list[str]:
    return [s for s in (x.strip() for x in value.split(",")) if s]


def parse_protocol_map(value: str) -> dict[str, str]:
    """``NAME:PROTOCOL,...`` -> {NAME: PROTOCOL}."""
    out: dict[str, str] = {}
    for item in _items(value):
        name, sep, proto = item.partition(":")
        proto = proto.strip().upper()
        if not sep or not name.strip() or proto not in SECURITY_PROTOCOLS:
            raise ListenerSyntaxError(
                f"invalid entry {item!r}: expected NAME:PROTOCOL with PROTOCOL one of "
                + ", ".join(SECURITY_PROTOCOLS)
            )
        out[name.strip().upper()] = proto
    return out


_DEFAULT_MAP = {p: p for p in SECURITY_PROTOCOLS}


def parse_listeners(value: str, protocol_map: dict[str, str] | None = None) -> list[Listener]:
    """``PLAINTEXT://:9092,CONTROLLER://localhost:9093`` -> Listeners (names must be mapped)."""
    out: list[Listener] = []
    for item in _items(value):
        m = _ENDPOINT.match(item)
        if not m:
            raise ListenerSyntaxError(f"unable to parse {item!r} as NAME://host:port")
        name = m.group(1).upper()
        # Without a map, names that are not protocols are PLAINTEXT (Kafka's rule for
        # controller listeners when listener.security.protocol.map is left unset).
        if protocol_map is None:
            proto: str | None = _DEFAULT_MAP.get(name, "PLAINTEXT")
        else:
            proto = protocol_map.get(name)
        if proto is None:
            raise ListenerSyntaxError(
                f"no security protocol defined for listener {name} "
                "(add it to listener.security.protocol.map)"
            )
        if any(li.name == name for li in out):
            raise ListenerSyntaxError(f"each listener must have a different name: {name} repeats")
        out.append(Listener(name, m.group(2) or None, _port(m.group(3), item), proto))
    return out


def parse_host_port(item: str) -> HostPort:
    m = _HOST_PORT.match(item.strip())
    if not m:
        raise ListenerSyntaxError(f"unable to parse {item!r} as host:port")
    return HostPort(m.group(1), _port(m.group(2), item))


def parse_voters(value: str) -> list[Voter]:
    """``1@localhost:9093,2@[::1]:9093`` -> Voters (distinct non-negative ids)."""
    out: list[Voter] = []
    for item in _items(value):
        m = _VOTER.match(item)
        if not m:
            raise ListenerSyntaxError(f"unable to parse {item!r} as id@host:port")
        node_id = int(m.group(1))
        if node_id < 0:
            raise ListenerSyntaxError(f"voter id must be non-negative in {item!r}")
        hp = parse_host_port(m.group(2))
        if any(v.node_id == node_id for v in out):
            raise ListenerSyntaxError(f"voter id {node_id} appears more than once")
        out.append(Voter(node_id, hp.host, hp.port))
    return out
