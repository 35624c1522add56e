"""Typed broker configuration loaded from ``server.properties``.

Rules: every key must be known (Kafka 4.1's, KIP-1279's or ours, see catalog.py); a
Kafka key we do not implement is accepted and reported in one warning line; a bad value
is a ``ConfigError`` naming the key, the value and ``file:line``.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any

import msgspec

from broker.config.catalog import (
    BROKER_KEYS,
    THROTTLED_REPLICA_KEYS,
    TOPIC_KEYS,
    BrokerKey,
    closest_broker_key,
    closest_topic_key,
    is_known_prefixed,
)
from broker.config.listeners import (
    SECURITY_PROTOCOLS,
    HostPort,
    Listener,
    ListenerSyntaxError,
    Voter,
    parse_host_port,
    parse_listeners,
    parse_protocol_map,
    parse_voters,
)
from broker.config.properties import Properties, PropertiesError, load_properties
from broker.config.throttled_replicas import ThrottledReplicasError, parse_throttled_replicas
from broker.config.values import ConfigValueError, Value, parse_value, render_value

__all__ = [
    "IMPLEMENTED_KEYS",
    "ConfigError",
    "ConfigSource",
    "DescribeRow",
    "ServerConfig",
    "load_server_config",
    "parse_server_config",
    "validate_topic_config",
]


class ConfigError(ValueError):
    """An unusable configuration; the message names the key, value and location."""


class ConfigSource(IntEnum):
    """DescribeConfigs' ConfigSource codes."""

    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2  # Kafka's codes: kafka-configs.sh --describe filters on them
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


# Keys the broker acts on.  Everything else in the catalog is accepted with a warning.
_ASSIGNOR_CLASSES = {
    "org.apache.kafka.coordinator.group.assignor.UniformAssignor": "uniform",
    "org.apache.kafka.coordinator.group.assignor.RangeAssignor": "range",
}

IMPLEMENTED_KEYS: frozenset[str] = frozenset(
    {
        "node.id", "process.roles", "listeners", "advertised.listeners",
        "controller.listener.names", "listener.security.protocol.map",
        "inter.broker.listener.name", "security.inter.broker.protocol",
        "controller.quorum.voters", "controller.quorum.bootstrap.servers",
        "controller.quorum.election.timeout.ms", "controller.quorum.fetch.timeout.ms",
        "log.dirs", "log.dir", "metadata.log.dir",
        "metadata.log.max.record.bytes.between.snapshots", "metadata.log.max.snapshot.interval.ms",
        "num.partitions", "default.replication.factor", "min.insync.replicas",
        "auto.create.topics.enable", "delete.topic.enable", "message.max.bytes",
        "socket.request.max.bytes", "socket.send.buffer.bytes", "socket.receive.buffer.bytes",
        "queued.max.requests", "connections.max.idle.ms", "connections.max.reauth.ms", "num.network.threads", "num.io.threads",
        "queued.max.request.bytes", "sasl.server.max.receive.size",
        "max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides",
        "max.connection.creation.rate", "quota.window.num", "quota.window.size.seconds",
        "controller.quota.window.num", "controller.quota.window.size.seconds",
        "request.timeout.ms", "fetch.max.bytes",
        "log.segment.bytes", "log.roll.ms", "log.roll.hours",
        "log.retention.ms", "log.retention.minutes", "log.retention.hours",
        "log.retention.bytes", "log.retention.check.interval.ms", "log.cleanup.policy",
        "log.flush.interval.messages", "log.flush.interval.ms", "log.flush.scheduler.interval.ms",
        "log.flush.offset.checkpoint.interval.ms", "log.flush.start.offset.checkpoint.interval.ms",
        "replica.high.watermark.checkpoint.interval.ms",
        "log.index.size.max.bytes", "log.index.interval.bytes", "log.segment.delete.delay.ms",
        "log.cleaner.enable", "log.cleaner.backoff.ms", "log.cleaner.threads",
        "log.cleaner.io.max.bytes.per.second", "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "log.message.timestamp.type", "log.message.timestamp.before.max.ms",
        "log.message.timestamp.after.max.ms", "compression.type", "unclean.leader.election.enable",
        "num.recovery.threads.per.data.dir",
        "offsets.topic.num.partitions", "offsets.topic.replication.factor",
        "offsets.topic.segment.bytes", "offsets.retention.minutes",
        "offsets.retention.check.interval.ms", "offsets.commit.timeout.ms",
        "group.initial.rebalance.delay.ms", "group.min.session.timeout.ms",
        "group.max.session.timeout.ms", "group.max.size",
        "group.consumer.session.timeout.ms", "group.consumer.heartbeat.interval.ms",
        "group.consumer.assignors", "group.consumer.max.size", "group.consumer.migration.policy",
        "group.share.enable", "group.share.session.timeout.ms",
        "group.share.heartbeat.interval.ms", "group.share.max.size",
        "group.share.record.lock.duration.ms", "group.share.delivery.count.limit",
        "group.share.partition.max.record.locks", "share.auto.offset.reset",
        "group.share.max.share.sessions",
        # the bounds of per-group configs (group_configs)
        "group.consumer.min.session.timeout.ms", "group.consumer.max.session.timeout.ms",
        "group.consumer.min.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms",
        "group.share.min.session.timeout.ms", "group.share.max.session.timeout.ms",
        "group.share.min.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms",
        "group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms",
        "share.coordinator.state.topic.num.partitions",
        "share.coordinator.state.topic.replication.factor",
        "share.coordinator.state.topic.min.isr",
        "group.coordinator.rebalance.protocols",
        "transaction.state.log.num.partitions", "transaction.state.log.replication.factor",
        "transaction.state.log.min.isr", "transaction.state.log.segment.bytes",
        "transaction.max.timeout.ms", "transactional.id.expiration.ms",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        "transaction.partition.verification.enable",
        "producer.id.expiration.ms", "producer.id.expiration.check.interval.ms",
        "replica.lag.time.max.ms", "replica.fetch.max.bytes", "replica.fetch.wait.max.ms",
        "replica.fetch.min.bytes", "replica.fetch.response.max.bytes", "num.replica.fetchers",
        "replica.fetch.backoff.ms",
        "broker.heartbeat.interval.ms", "broker.session.timeout.ms", "broker.rack",
        "unstable.api.versions.enable", "unstable.feature.versions.enable",
        "metrics.port", "metrics.host",
        "mirror.topic.num.partitions", "mirror.topic.replication.factor",
        "mirror.num.replica.fetchers", "mirror.metadata.refresh.interval.ms",
        "mirror.replication.throttled.rate", "mirror.truncation.timeout.ms",
        "authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found",
        "auto.leader.rebalance.enable", "leader.imbalance.check.interval.seconds",
        "log.max.open.files",
    }
    | {
        # TLS and SASL listeners (broker.security), also as listener.name.<listener>.<key>
        "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password",
        "ssl.key.password", "ssl.keystore.certificate.chain", "ssl.keystore.key",
        "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
        "ssl.truststore.certificates", "ssl.client.auth", "ssl.enabled.protocols",
        "ssl.protocol", "ssl.cipher.suites", "sasl.enabled.mechanisms", "sasl.jaas.config",
        "connection.failed.authentication.delay.ms",
    }
    | {
        # secrets at rest (broker.security.password_encoder)
        "password.encoder.secret", "password.encoder.old.secret",
        "password.encoder.keyfactory.algorithm", "password.encoder.cipher.algorithm",
        "password.encoder.key.length", "password.encoder.iterations",
    }
)  # fmt: skip
# listener.name.<listener>.<mechanism>.sasl.jaas.config, Kafka's per-mechanism JAAS key
_LISTENER_KEY = re.compile(r"^listener\.name\.[^.]+\.(?:[a-z0-9-]+\.(?=sasl\.jaas\.config$))?(.+)$")

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"

# Keys that only exist as dynamic broker configs in Kafka: listed by DescribeConfigs only when set.
_DYNAMIC_ONLY = frozenset(
    {
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
    }
)
_ROLE_SETS = ({"broker"}, {"controller"}, {"broker", "controller"})


@dataclass(frozen=True, slots=True)
class DescribeRow:
    """One DescribeConfigs entry for a broker resource."""

    name: str
    value: str | None
    source: int
    read_only: bool
    sensitive: bool
    config_type: int  # DescribeConfigs ConfigType code


def _field(key: str) -> str:
    return key.replace(".", "_")


class ServerConfig(msgspec.Struct, frozen=True, kw_only=True):
    node_id: int
    process_roles: tuple[str, ...]
    listeners: tuple[Listener, ...]
    advertised_listeners: tuple[Listener, ...]
    controller_listener_names: tuple[str, ...]
    listener_security_protocol_map: dict[str, str]
    inter_broker_listener_name: str | None
    security_inter_broker_protocol: str
    controller_quorum_voters: tuple[Voter, ...]
    controller_quorum_bootstrap_servers: tuple[HostPort, ...]
    controller_quorum_election_timeout_ms: int
    controller_quorum_fetch_timeout_ms: int
    log_dirs: tuple[str, ...]
    metadata_log_dir: str  # defaults to the first log dir, as in Kafka
    # metadata snapshots (KIP-630, KIP-876): after this many bytes of records, or once a record
    # no snapshot holds is this old (0: never by time)
    metadata_log_max_record_bytes_between_snapshots: int = 20 * 1024 * 1024
    metadata_log_max_snapshot_interval_ms: int = 3_600_000
    num_partitions: int
    default_replication_factor: int
    min_insync_replicas: int
    auto_create_topics_enable: bool
    delete_topic_enable: bool
    message_max_bytes: int
    socket_request_max_bytes: int
    socket_send_buffer_bytes: int
    socket_receive_buffer_bytes: int
    queued_max_requests: int
    queued_max_request_bytes: int = -1  # request bytes held by all connections; <= 0: no bound
    max_connections: int = 2**31 - 1
    max_connections_per_ip: int = 2**31 - 1
    max_connections_per_ip_overrides: dict[str, int] = msgspec.field(default_factory=dict)
    max_connection_creation_rate: int = 2**31 - 1  # new connections per second (KIP-612)
    # listener.name.<listener>.max.connections / .max.connection.creation.rate, by listener name
    listener_max_connections: dict[str, int] = msgspec.field(default_factory=dict)
    listener_max_connection_creation_rate: dict[str, int] = msgspec.field(default_factory=dict)
    sasl_server_max_receive_size: int = 524288  # largest frame before SASL authentication
    quota_window_num: int = 11  # client quotas: samples in a rate (KIP-13)
    quota_window_size_seconds: int = 1  # client quotas: the time span of each sample
    controller_quota_window_num: int = 11  # controller_mutation_rate (KIP-599): samples
    controller_quota_window_size_seconds: int = 1
    connections_max_idle_ms: int
    num_network_threads: int
    num_io_threads: int
    request_timeout_ms: int
    fetch_max_bytes: int
    log_segment_bytes: int
    log_roll_ms: int  # resolved: log.roll.ms > log.roll.hours
    log_retention_ms: int  # resolved: log.retention.ms > .minutes > .hours
    log_retention_bytes: int
    log_retention_check_interval_ms: int
    log_cleanup_policy: tuple[str, ...]
    log_flush_interval_messages: int
    log_flush_interval_ms: int  # resolved: log.flush.interval.ms > log.flush.scheduler.interval.ms
    log_flush_scheduler_interval_ms: int
    log_flush_offset_checkpoint_interval_ms: int
    log_flush_start_offset_checkpoint_interval_ms: int
    replica_high_watermark_checkpoint_interval_ms: int
    log_index_size_max_bytes: int
    log_index_interval_bytes: int
    log_segment_delete_delay_ms: int
    log_cleaner_enable: bool = True
    log_cleaner_backoff_ms: int = 15000
    log_cleaner_threads: int = 1
    log_cleaner_io_max_bytes_per_second: float = 1.7976931348623157e308  # Double.MAX_VALUE
    log_cleaner_dedupe_buffer_size: int = 134217728
    log_cleaner_io_buffer_load_factor: float = 0.9  # the dedupe buffer's load factor
    log_message_timestamp_type: str
    log_message_timestamp_before_max_ms: int
    log_message_timestamp_after_max_ms: int
    compression_type: str
    unclean_leader_election_enable: bool
    num_recovery_threads_per_data_dir: int
    offsets_topic_num_partitions: int
    offsets_topic_replication_factor: int
    offsets_topic_segment_bytes: int
    offsets_retention_minutes: int
    offsets_retention_check_interval_ms: int
    offsets_commit_timeout_ms: int
    group_initial_rebalance_delay_ms: int
    group_min_session_timeout_ms: int
    group_max_session_timeout_ms: int
    group_max_size: int
    group_consumer_session_timeout_ms: int
    group_consumer_heartbeat_interval_ms: int
    group_consumer_assignors: tuple[str, ...]
    group_consumer_max_size: int
    # bidirectional, upgrade, downgrade or disabled (lower case): online conversions between
    # classic and consumer groups with members (KIP-848 mixed groups)
    group_consumer_migration_policy: str
    # KIP-932 share groups (served when group.share.enable, Kafka 4.1's preview switch)
    group_share_enable: bool
    group_share_session_timeout_ms: int
    group_share_heartbeat_interval_ms: int
    group_share_max_size: int
    group_share_record_lock_duration_ms: int
    group_share_delivery_count_limit: int
    group_share_partition_max_record_locks: int
    group_share_max_share_sessions: int
    share_auto_offset_reset: str  # ours: Kafka's group config, one broker-wide value here
    share_coordinator_state_topic_num_partitions: int
    share_coordinator_state_topic_replication_factor: int
    share_coordinator_state_topic_min_isr: int
    group_coordinator_rebalance_protocols: tuple[str, ...]
    transaction_state_log_num_partitions: int
    transaction_state_log_replication_factor: int
    transaction_state_log_min_isr: int
    transaction_state_log_segment_bytes: int
    transaction_max_timeout_ms: int
    transactional_id_expiration_ms: int
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int
    transaction_remove_expired_transaction_cleanup_interval_ms: int
    transaction_partition_verification_enable: bool
    producer_id_expiration_ms: int
    producer_id_expiration_check_interval_ms: int
    replica_lag_time_max_ms: int
    replica_fetch_max_bytes: int
    replica_fetch_wait_max_ms: int
    replica_fetch_min_bytes: int
    replica_fetch_response_max_bytes: int
    num_replica_fetchers: int
    replica_fetch_backoff_ms: int = 1000
    broker_heartbeat_interval_ms: int
    broker_rack: str | None
    broker_session_timeout_ms: int
    unstable_api_versions_enable: bool
    unstable_feature_versions_enable: bool
    metrics_port: int  # 0: no Prometheus endpoint
    metrics_host: str  # the address the Prometheus endpoint binds
    mirror_topic_num_partitions: int
    mirror_topic_replication_factor: int
    mirror_num_replica_fetchers: int
    mirror_metadata_refresh_interval_ms: int
    mirror_replication_throttled_rate: int
    mirror_truncation_timeout_ms: int = 60_000  # PREPARING's wait for the replicas, then FAILED
    log_max_open_files: int = 1000  # sealed segments' log files held open at once (file_cache)
    # ACLs (broker.security.authorizer): "" = no authorizer
    authorizer_class_name: str = ""
    super_users: str | None = None
    allow_everyone_if_no_acl_found: bool = False
    # the active controller's periodic preferred leader elections (controller.elections)
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    # SASL: a failed authentication's connection is closed this long after the error response
    connection_failed_authentication_delay_ms: int = 100
    # Secrets at rest: sensitive configs in __cluster_metadata are encrypted with this secret
    # (None: stored in plain text, as Kafka's KRaft mode does); the old one is for a rotation.
    password_encoder_secret: str | None = None
    password_encoder_old_secret: str | None = None
    password_encoder_keyfactory_algorithm: str = "PBKDF2WithHmacSHA512"
    password_encoder_cipher_algorithm: str = "AES/CBC/PKCS5Padding"
    password_encoder_key_length: int = 128
    password_encoder_iterations: int = 4096
    # The explicitly set values (normalized strings) and where they came from.
    static_values: dict[str, str] = msgspec.field(default_factory=dict)
    # listener.name.<listener>.* overrides as written (broker.security reads the ssl/sasl ones)
    listener_values: dict[str, str] = msgspec.field(default_factory=dict)
    source: str = "<string>"

    @property
    def is_broker(self) -> bool:
        return "broker" in self.process_roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.process_roles

    def listener(self, name: str) -> Listener | None:
        return next((li for li in self.listeners if li.name == name.upper()), None)

    def topic_defaults(self) -> dict[str, str]:
        """Topic-level defaults implied by this broker's keys (Kafka's synonym precedence)."""
        out: dict[str, str] = {}
        for tk in TOPIC_KEYS.values():
            value = tk.default
            for syn in tk.synonyms:
                raw = self.static_values.get(syn.broker_key)
                if raw is not None:
                    value = str(int(raw) * syn.factor) if syn.factor != 1 else raw
                    break
            if value is not None:
                out[tk.name] = value
        return out

    def describe_broker_configs(
        self,
        dynamic: Mapping[str, str] | None = None,
        dynamic_default: Mapping[str, str] | None = None,
        include_internal: bool = False,
    ) -> list[DescribeRow]:
        """Rows for DescribeConfigs(BROKER): dynamic per-broker > dynamic default > file > default."""
        dyn, dyn_default = dynamic or {}, dynamic_default or {}
        rows: list[DescribeRow] = []
        for key in sorted(BROKER_KEYS):
            ck = BROKER_KEYS[key]
            if ck.internal and not include_internal:
                continue
            if key in dyn:
                value, source = dyn[key], ConfigSource.DYNAMIC_BROKER_CONFIG
            elif key in dyn_default:
                value, source = dyn_default[key], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            elif key in self.static_values:
                value, source = self.static_values[key], ConfigSource.STATIC_BROKER_CONFIG
            elif key in _DYNAMIC_ONLY:
                continue
            else:
                value, source = ck.default, ConfigSource.DEFAULT_CONFIG  # type: ignore[assignment]
            rows.append(
                DescribeRow(
                    name=key,
                    value=None if ck.sensitive else value,
                    source=int(source),
                    read_only=ck.read_only,
                    sensitive=ck.sensitive,
                    config_type=ck.type.wire,
                )
            )
        return rows


def _bad(key: str, raw: str, where: str, why: str) -> ConfigError:
    return ConfigError(f"{where}: invalid value {raw!r} for {key}: {why}")


def _typed(ck: BrokerKey, raw: str, where: str) -> Value:
    try:
        v = parse_value(ck.type, raw)
    except ConfigValueError as e:
        raise _bad(ck.name, raw, where, str(e)) from None
    if ck.validator is not None:
        why = ck.validator.check(v)
        if why:
            raise _bad(ck.name, raw, where, why)
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
        return _bad(key, props.get(key, ""), where(key), why)

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

    _check_password_encoder(typed, props)

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
        key: _listener_limits(key, listener_values, names, props)
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


def _check_password_encoder(typed: Mapping[str, Value], props: Properties) -> None:
    """What the catalog's validators cannot say about the ``password.encoder.*`` keys (the
    secrets' values are never repeated in an error)."""
    secret, old = typed.get("password.encoder.secret"), typed.get("password.encoder.old.secret")
    if secret == "":
        raise ConfigError(
            f"{props.where('password.encoder.secret')}: password.encoder.secret must not be "
            "empty (leave it unset to store secrets unencrypted)"
        )
    if old and not secret:
        raise ConfigError(
            f"{props.where('password.encoder.old.secret')}: password.encoder.old.secret needs "
            "password.encoder.secret (the secret values are encoded with from now on)"
        )
    key_length = typed.get("password.encoder.key.length")
    if key_length is not None and key_length not in (128, 192, 256):
        raise _bad(
            "password.encoder.key.length",
            str(key_length),
            props.where("password.encoder.key.length"),
            "must be an AES key length: 128, 192 or 256",
        )


def _listener_limits(
    key: str, listener_values: Mapping[str, str], names: Collection[str], props: Properties
) -> dict[str, int]:
    """``listener.name.<listener>.<key>`` values (a connection limit: an int >= 0), by listener."""
    out: dict[str, int] = {}
    by_lower = {n.lower(): n for n in names}
    for full, raw in listener_values.items():
        prefix, _, rest = full[len("listener.name.") :].partition(".")
        if rest != key:
            continue
        if prefix.lower() not in by_lower:
            raise _bad(full, raw, props.where(full), f"there is no listener {prefix!r}")
        try:
            value = int(raw.strip())
        except ValueError:
            raise _bad(full, raw, props.where(full), "not an integer") from None
        if value < 0:
            raise _bad(full, raw, props.where(full), "must be at least 0")
        out[by_lower[prefix.lower()]] = value
    return out


def parse_ip_overrides(raw: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count`` pairs, comma-separated."""
    out: dict[str, int] = {}
    for entry in (e.strip() for e in raw.split(",")):
        if not entry:
            continue
        host, sep, count = entry.rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise ValueError(f"{entry!r} is not host:count (e.g. 127.0.0.1:200)")
        out[host.strip()] = int(count)
    return out


def load_server_config(path: str | Path) -> tuple[ServerConfig, list[str]]:
    try:
        props = load_properties(path)
    except PropertiesError as e:
        raise ConfigError(str(e)) from None
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from None
    return parse_server_config(props)


_TOPIC_NAME_CHARS = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


def validate_topic_config(key: str, value: str | None) -> str | None:
    """Check a topic config (CreateTopics/AlterConfigs); returns the normalized value."""
    tk = TOPIC_KEYS.get(key)
    if tk is None:
        hint = closest_topic_key(key)
        suggestion = f" (did you mean {hint!r}?)" if hint else ""
        raise ConfigError(f"Unknown topic config name: {key}{suggestion}")
    if value is None:
        return None  # a delete/reset to default
    try:
        v = parse_value(tk.type, value)
    except ConfigValueError as e:
        raise ConfigError(f"Invalid value {value} for configuration {key}: {e}") from None
    if tk.validator is not None:
        why = tk.validator.check(v)
        if why:
            raise ConfigError(f"Invalid value {value} for configuration {key}: {why}")
    if key in THROTTLED_REPLICA_KEYS:
        try:
            parse_throttled_replicas(value)
        except ThrottledReplicasError as e:
            raise ConfigError(f"Invalid value {value} for configuration {key}: {e}") from None
    if key == "compression.gzip.level" and isinstance(v, int) and v != -1 and not 1 <= v <= 9:
        raise ConfigError(f"Invalid value {value} for configuration {key}: must be -1 or 1..9")
    if key == "mirror.name" and isinstance(v, str) and not _TOPIC_NAME_CHARS.match(v):
        raise ConfigError(f"Invalid value {value} for configuration {key}: not a legal mirror name")
    return render_value(tk.type, v)
