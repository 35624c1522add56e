"""server.properties -> `ServerConfig`: every key typed and validated, the cross-key rules
(roles, listeners, quorum, ACLs, limits, log dirs, groups) checked, and Kafka's precedence
between synonyms resolved. Returns the config with its warnings (keys we do not implement).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from broker.config.catalog import BROKER_KEYS, BrokerKey, closest_broker_key, is_known_prefixed
from broker.config.config_error import ConfigError, bad_value
from broker.config.implemented_keys import IMPLEMENTED_KEYS
from broker.config.listeners import (
    SECURITY_PROTOCOLS,
    ListenerSyntaxError,
    parse_host_port,
    parse_listeners,
    parse_protocol_map,
    parse_voters,
)
from broker.config.properties import Properties, PropertiesError, load_properties
from broker.config.replica_selector_class import check_selector_class
from broker.config.server_key_checks import (
    check_password_encoder,
    listener_limits,
    parse_ip_overrides,
)
from broker.config.server_settings import ServerConfig
from broker.config.values import ConfigValueError, Value, parse_value, render_value

# KIP-848 server assignors: Kafka's class names for the ones we implement
_ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}


# listener.name.<listener>.<mechanism>.sasl.jaas.config, Kafka's per-mechanism JAAS key
_LISTENER_KEY = re.compile(r"^listener\.name\.[^.]+\.(?:[a-z0-9-]+\.(?=sasl\.jaas\.config$))?(.+)$")

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

_ROLE_SETS = ({"broker"}, {"controller"}, {"broker", "controller"})


def _field(key: str) -> str:
    return key.replace(".", "_")


def _typed(ck: BrokerKey, raw: str, where: str) -> Value:
    try:
        v = parse_value(ck.type, raw)
    except ConfigValueError as e:
        raise bad_value(ck.name, raw, where, str(e)) from None
    if ck.validator is not None:
        why = ck.validator.check(v)
        if why:
            raise bad_value(ck.name, raw, where, why)
    return v


def parse_server_config(props: Properties) -> tuple[ServerConfig, list[str]]:
    """Validate ``props`` and build a ServerConfig; returns it with the warnings."""
    unimplemented: list[str] = []
    typed: dict[str, Value] = {}
    static: dict[str, str] = {}
    listener_values: dict[str, str] = {}
    for key, raw in props.items():
        loc = props.where(key)
        ck = BROKER_KEYS.get(key)
        if ck is None:
            if is_known_prefixed(key):
                m = _LISTENER_KEY.match(key)
                if m is not None:
                    listener_values[key] = raw
                if m is None or m.group(1) not in IMPLEMENTED_KEYS:
                    unimplemented.append(key)
                continue
            hint = closest_broker_key(key)
            suggestion = f" (did you mean {hint!r}?)" if hint else ""
            raise ConfigError(f"{loc}: unknown configuration key {key!r}{suggestion}")
        v = _typed(ck, raw, loc)
        typed[key] = v
        static[key] = render_value(ck.type, v) or ""
        if key not in IMPLEMENTED_KEYS:
            unimplemented.append(key)

    def get(key: str) -> Any:
        if key in typed:
            return typed[key]
        ck = BROKER_KEYS[key]
        return None if ck.default is None else parse_value(ck.type, ck.default)

    def where(key: str) -> str:
        return props.where(key)

    def fail(key: str, why: str) -> ConfigError:
        return bad_value(key, props.get(key, ""), where(key), why)

    # Identity and roles.
    if "node.id" not in typed:
        raise ConfigError(f"{props.source}: node.id is required (a non-negative integer)")
    roles_list: list[str] = get("process.roles") or []
    if "process.roles" not in typed:
        raise ConfigError(f"{props.source}: process.roles is required (broker, controller or both)")
    roles = set(roles_list)
    if roles not in _ROLE_SETS or len(roles) != len(roles_list):
        raise fail("process.roles", "must be 'broker', 'controller' or 'broker,controller'")

    # Listeners.
    try:
        pmap = parse_protocol_map(get("listener.security.protocol.map"))
    except ListenerSyntaxError as e:
        raise fail("listener.security.protocol.map", str(e)) from None
    cl_raw: str = get("controller.listener.names") or ""  # a STRING key in Kafka, comma-separated
    controller_names = tuple(n.strip().upper() for n in cl_raw.split(",") if n.strip())
    if "listener.security.protocol.map" not in typed:
        # Kafka maps unmapped controller listeners to PLAINTEXT when the map is left unset.
        pmap |= {n: "PLAINTEXT" for n in controller_names if n not in pmap}
    try:
        listeners = parse_listeners(get("listeners"), pmap)
    except ListenerSyntaxError as e:
        raise fail("listeners", str(e)) from None
    ports = [li.port for li in listeners if li.port != 0]
    if len(ports) != len(set(ports)):
        raise fail("listeners", "each listener must use a different port")
    if not controller_names:
        raise ConfigError(
            f"{where('controller.listener.names')}: controller.listener.names is required"
        )
    names = {li.name for li in listeners}
    for n in controller_names:
        if n not in pmap:
            raise fail("controller.listener.names", f"no security protocol defined for {n}")
    if "controller" in roles and not any(n in names for n in controller_names):
        raise fail(
            "controller.listener.names",
            "a controller must have a listener named in controller.listener.names",
        )
    if roles == {"broker"} and any(n in names for n in controller_names):
        raise fail("listeners", "a broker-only node must not listen on a controller listener")
    if "advertised.listeners" in typed:
        try:
            advertised = parse_listeners(get("advertised.listeners"), pmap)
        except ListenerSyntaxError as e:
            raise fail("advertised.listeners", str(e)) from None
        for li in advertised:
            if li.host in (None, "0.0.0.0", "::"):
                raise fail("advertised.listeners", f"{li.name} needs a concrete host to advertise")
            if li.name not in names:
                raise fail("advertised.listeners", f"{li.name} is not one of the listeners")
    else:
        advertised = [li for li in listeners if li.name not in controller_names]

    sec_proto: str = get("security.inter.broker.protocol")
    ibl: str | None = get("inter.broker.listener.name")
    if ibl is not None:
        ibl = ibl.upper()
        if "security.inter.broker.protocol" in typed:
            raise fail(
                "inter.broker.listener.name",
                "set only one of inter.broker.listener.name and security.inter.broker.protocol",
            )
    elif "broker" in roles:
        ibl = sec_proto
    if "broker" in roles and ibl is not None:
        if ibl in controller_names:
            raise fail("inter.broker.listener.name", "must not be a controller listener")
        if ibl not in names:
            raise ConfigError(
                f"{where('inter.broker.listener.name')}: inter.broker.listener.name {ibl} "
                "must be one of the listeners"
            )
    if sec_proto not in SECURITY_PROTOCOLS:  # pragma: no cover - the validator rejects it first
        raise fail("security.inter.broker.protocol", "unknown security protocol")

    # Quorum.
    try:
        voters = parse_voters(",".join(get("controller.quorum.voters") or []))
    except ListenerSyntaxError as e:
        raise fail("controller.quorum.voters", str(e)) from None
    try:
        bootstrap = [parse_host_port(s) for s in get("controller.quorum.bootstrap.servers") or []]
    except ListenerSyntaxError as e:
        raise fail("controller.quorum.bootstrap.servers", str(e)) from None
    if not voters and not bootstrap:
        raise ConfigError(
            f"{props.source}: set controller.quorum.voters (id@host:port,...) or "
            "controller.quorum.bootstrap.servers (host:port,...)"
        )
    node_id: int = get("node.id")
    if voters and "controller" in roles and node_id not in {v.node_id for v in voters}:
        raise fail(
            "controller.quorum.voters", f"this controller's node.id {node_id} is not a voter"
        )

    authorizer: str = get("authorizer.class.name") or ""
    if authorizer and authorizer != STANDARD_AUTHORIZER:
        raise fail("authorizer.class.name", f"the only authorizer is {STANDARD_AUTHORIZER}")
    for principal in (p.strip() for p in (get("super.users") or "").split(";")):
        kind, sep, who = principal.partition(":")
        if principal and not (kind and sep and who):
            raise fail(
                "super.users", f"{principal!r} is not Type:name (e.g. User:admin; ';' between)"
            )

    check_password_encoder(typed, props)

    queued_bytes: int = get("queued.max.request.bytes")
    request_max: int = get("socket.request.max.bytes")
    if 0 < queued_bytes < request_max:
        # as Kafka: the node's request memory must hold at least one request of the largest size
        raise fail(
            "queued.max.request.bytes",
            f"must be -1 (no bound) or at least socket.request.max.bytes ({request_max})",
        )

    try:
        ip_overrides = parse_ip_overrides(get("max.connections.per.ip.overrides") or "")
    except ValueError as e:
        raise fail("max.connections.per.ip.overrides", str(e)) from None
    if get("max.connections.per.ip") == 0 and not ip_overrides:
        raise fail(  # as Kafka: 0 would refuse every client
            "max.connections.per.ip",
            "0 is only allowed with max.connections.per.ip.overrides set",
        )
    per_listener = {
        key: listener_limits(key, listener_values, names, props)
        for key in ("max.connections", "max.connection.creation.rate")
    }

    # Log directories: log.dirs wins over log.dir.
    dirs_raw = get("log.dirs") if "log.dirs" in typed else get("log.dir")
    log_dirs = tuple(d for d in (x.strip() for x in dirs_raw.split(",")) if d)
    if not log_dirs:
        raise fail(
            "log.dirs" if "log.dirs" in typed else "log.dir", "at least one directory needed"
        )
    metadata_dir: str = get("metadata.log.dir") or log_dirs[0]

    def first(*keys_factors: tuple[str, int]) -> int:
        for k, f in keys_factors:
            v = get(k) if k in typed else None
            if v is not None:
                return int(v) * f
        k, f = keys_factors[-1]
        return int(get(k)) * f

    # KIP-848 server assignors by name or by Kafka's class name; at least one, known ones only
    assignors: list[str] = []
    for a in get("group.consumer.assignors") or []:
        name = _ASSIGNOR_CLASSES.get(a, a)
        if name not in _ASSIGNOR_CLASSES.values():
            raise fail("group.consumer.assignors", f"unknown assignor {a!r} (uniform, range)")
        assignors.append(name)
    if not assignors:
        raise fail("group.consumer.assignors", "at least one assignor needed")

    try:
        replica_selector = check_selector_class(get("replica.selector.class"))
    except ValueError as e:
        raise fail("replica.selector.class", str(e)) from None

    migration = str(get("group.consumer.migration.policy")).strip().lower()
    if migration not in ("bidirectional", "upgrade", "downgrade", "disabled"):
        raise fail(
            "group.consumer.migration.policy",
            f"{migration!r} is not one of bidirectional, upgrade, downgrade, disabled",
        )

    protocols = tuple(get("group.coordinator.rebalance.protocols") or [])
    if "classic" not in protocols or not set(protocols) <= {"classic", "consumer", "streams"}:
        raise fail(
            "group.coordinator.rebalance.protocols",
            "must hold classic, and only classic, consumer and streams",
        )

    fields: dict[str, Any] = {}
    for key in IMPLEMENTED_KEYS:
        name = _field(key)
        if name in ServerConfig.__struct_fields__:
            v = get(key)
            fields[name] = tuple(v) if isinstance(v, list) else v
    fields.update(
        group_consumer_assignors=tuple(assignors),
        group_consumer_migration_policy=migration,
        replica_selector_class=replica_selector,
        node_id=node_id,
        process_roles=tuple(roles_list),
        listeners=tuple(listeners),
        advertised_listeners=tuple(advertised),
        controller_listener_names=controller_names,
        listener_security_protocol_map=pmap,
        inter_broker_listener_name=ibl,
        controller_quorum_voters=tuple(voters),
        controller_quorum_bootstrap_servers=tuple(bootstrap),
        log_dirs=log_dirs,
        metadata_log_dir=metadata_dir,
        max_connections_per_ip_overrides=ip_overrides,
        listener_max_connections=per_listener["max.connections"],
        listener_max_connection_creation_rate=per_listener["max.connection.creation.rate"],
        log_roll_ms=first(("log.roll.ms", 1), ("log.roll.hours", 3_600_000)),
        log_retention_ms=first(
            ("log.retention.ms", 1),
            ("log.retention.minutes", 60_000),
            ("log.retention.hours", 3_600_000),
        ),
        log_flush_interval_ms=first(
            ("log.flush.interval.ms", 1), ("log.flush.scheduler.interval.ms", 1)
        ),
        static_values=static,
        listener_values=listener_values,
        source=props.source,
    )
    warnings: list[str] = []
    if unimplemented:
        warnings.append(
            f"{props.source}: accepted but not implemented by kmirror (ignored): "
            + ", ".join(sorted(unimplemented))
        )
    return ServerConfig(**fields), warnings


def load_server_config(path: str | Path) -> tuple[ServerConfig, list[str]]:
    try:
        props = load_properties(path)
    except PropertiesError as e:
        raise ConfigError(str(e)) from None
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from None
    return parse_server_config(props)
