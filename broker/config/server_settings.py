"""`ServerConfig`: the typed settings one server.properties resolves to, the topic defaults
they imply, and the rows DescribeConfigs(BROKER) shows of them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum

import msgspec

from broker.config.catalog import BROKER_KEYS, TOPIC_KEYS
from broker.config.listeners import HostPort, Listener, Voter


class ConfigSource(IntEnum):
    """DescribeConfigs' ConfigSource codes."""

    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2  # Kafka's codes: kafka-configs.sh --describe filters on them
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


# Keys that only exist as dynamic broker configs in Kafka: listed by DescribeConfigs only when set.
_DYNAMIC_ONLY = frozenset(
    {
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
    }
)


@dataclass(frozen=True, slots=True)
class DescribeRow:
    """One DescribeConfigs entry for a broker resource."""

    name: str
    value: str | None
    source: int
    read_only: bool
    sensitive: bool
    config_type: int  # DescribeConfigs ConfigType code


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
    # KIP-392: the leader's choice of replica for a v11+ consumer; None: always the leader
    replica_selector_class: str | None = None
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
