"""Client quota entities and keys (KIP-13, KIP-55, KIP-124, KIP-257, KIP-612), as Kafka's
controller validates them; pure data, shared by the image, the controller, the API and the CLI.

An entity is a set of (type, name) parts: ``user``, ``client-id``, the pair of both, or ``ip``
alone; a null name is that type's default entity. We keep it as a tuple of parts sorted by type,
so it can key a mapping. User and client-id entities take the byte rates (``producer_byte_rate``,
``consumer_byte_rate``: whole numbers), ``request_percentage`` and ``controller_mutation_rate``
(any positive number); IP entities take ``connection_creation_rate`` (a whole number).
Every value must be greater than 0.
"""

import ipaddress
import socket
from collections.abc import Iterable
from typing import Final

USER: Final = "user"
CLIENT_ID: Final = "client-id"
IP: Final = "ip"
ENTITY_TYPES: Final = (USER, CLIENT_ID, IP)

PRODUCER_BYTE_RATE: Final = "producer_byte_rate"
CONSUMER_BYTE_RATE: Final = "consumer_byte_rate"
REQUEST_PERCENTAGE: Final = "request_percentage"
CONTROLLER_MUTATION_RATE: Final = "controller_mutation_rate"
IP_CONNECTION_RATE: Final = "connection_creation_rate"

LONG, INT, DOUBLE = "LONG", "INT", "DOUBLE"
# key -> Kafka's config type (QuotaConfig)
CLIENT_KEYS: Final = {
    PRODUCER_BYTE_RATE: LONG,
    CONSUMER_BYTE_RATE: LONG,
    REQUEST_PERCENTAGE: DOUBLE,
    CONTROLLER_MUTATION_RATE: DOUBLE,
}
IP_KEYS: Final = {IP_CONNECTION_RATE: INT}
_MAX: Final = {LONG: float(2**63 - 1), INT: float(2**31 - 1)}
_TOO_LARGE: Final = {LONG: "a LONG", INT: "an INT"}

# (("client-id", "c1"), ("user", "alice")): the parts, sorted by entity type
Entity = tuple[tuple[str, str | None], ...]


def entity_key(parts: Iterable[tuple[str, str | None]]) -> Entity:
    return tuple(sorted(parts, key=lambda p: p[0]))


def entity_name(entity: Entity, entity_type: str) -> tuple[bool, str | None]:
    """(has the type, its name) for one part of ``entity``."""
    for t, n in entity:
        if t == entity_type:
            return True, n
    return False, None


def check_entity(parts: Iterable[tuple[str, str | None]]) -> str | None:
    """Kafka's message (INVALID_REQUEST) for an entity that cannot hold quotas, else None."""
    seen: dict[str, str | None] = {}
    for entity_type, name in parts:
        if entity_type in seen:
            return f"Invalid client quota entity, duplicate entity entry {entity_type}"
        if entity_type not in ENTITY_TYPES:
            return f"Unhandled client quota entity type: {entity_type}"
        if name is not None and not name:
            return f"Empty {entity_type} not supported"
        seen[entity_type] = name
    if not seen:
        return "Invalid empty client quota entity"
    if IP in seen:
        if len(seen) > 1:
            return (
                "Invalid quota entity combination, IP entity should"
                "not be combined with User or ClientId"
            )
        ip = seen[IP]
        if ip is not None and not valid_ip(ip):
            return f"{ip} is not a valid IP or resolvable host."
    return None


def valid_ip(host: str) -> bool:
    """An IP address, or a name that resolves (Java's ``InetAddress.getByName``)."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    try:
        socket.getaddrinfo(host, None)
        return True
    except (OSError, UnicodeError):
        return False


def keys_for(entity: Entity) -> dict[str, str]:
    return IP_KEYS if any(t == IP for t, _ in entity) else CLIENT_KEYS


def check_value(entity: Entity, key: str, value: float) -> str | None:
    """Kafka's message (INVALID_REQUEST) for a quota value the entity cannot take, else None."""
    kind = keys_for(entity).get(key)
    if kind is None:
        return f"Invalid configuration key {key}"
    if not value > 0.0:
        return f"Quota {key} must be greater than 0"
    if kind == DOUBLE:
        return None
    if value > _MAX[kind]:
        return f"Proposed value for {key} is too large for {_TOO_LARGE[kind]}."
    if abs(value % 1.0) > 1e-6:
        return f"{key} cannot be a fractional value."
    return None
