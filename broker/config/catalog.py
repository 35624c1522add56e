"""Every broker and topic config key we know: Apache Kafka 4.1's, KIP-1279's and our own.

A key's default is the string Kafka reports for it in DescribeConfigs (None when Kafka
has no default).  Topic keys name the broker keys that supply their default, in Kafka's
precedence order (``retention.ms`` <- ``log.retention.ms`` > ``log.retention.minutes`` >
``log.retention.hours``), with the factor that turns the broker unit into the topic's.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from enum import Enum

from broker.config.kafka_broker_keys import KAFKA_BROKER_KEYS
from broker.config.values import AnyOf, ConfigType, Range, Validator, ValueList

__all__ = [
    "BROKER_KEYS",
    "COMPRESSION_TYPES",
    "TOPIC_KEYS",
    "BrokerKey",
    "Origin",
    "Synonym",
    "TopicKey",
    "UpdateMode",
    "broker_key",
    "closest_broker_key",
    "closest_topic_key",
]

LONG_MAX = str(2**63 - 1)
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
_TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")


class UpdateMode(Enum):
    READ_ONLY = "read-only"
    PER_BROKER = "per-broker"
    CLUSTER_WIDE = "cluster-wide"


class Origin(Enum):
    KAFKA = "kafka"
    KIP_1279 = "kip-1279"
    KMIRROR = "kmirror"  # ours, no Kafka equivalent


@dataclass(frozen=True, slots=True)
class BrokerKey:
    name: str
    type: ConfigType
    default: str | None
    mode: UpdateMode
    origin: Origin = Origin.KAFKA
    required: bool = False
    internal: bool = False
    validator: Validator | None = None

    @property
    def sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD

    @property
    def read_only(self) -> bool:
        return self.mode is UpdateMode.READ_ONLY


@dataclass(frozen=True, slots=True)
class Synonym:
    """A broker key that supplies a topic default; topic value = broker value * factor."""

    broker_key: str
    factor: int = 1


@dataclass(frozen=True, slots=True)
class TopicKey:
    name: str
    type: ConfigType
    default: str | None
    synonyms: tuple[Synonym, ...] = ()
    validator: Validator | None = None
    origin: Origin = Origin.KAFKA
    hidden: bool = False  # kept out of DescribeConfigs (KIP-1279's mirror.name)

    @property
    def sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD


# Validators for the broker keys we parse strictly (Kafka's ranges and choices).
_BROKER_VALIDATORS: dict[str, Validator] = {
    "node.id": Range(0),
    "process.roles": ValueList(("broker", "controller"), allow_empty=False),
    "num.partitions": Range(1),
    "min.insync.replicas": Range(1),
    "message.max.bytes": Range(0),
    "socket.request.max.bytes": Range(1),
    "queued.max.requests": Range(1),
    "sasl.server.max.receive.size": Range(1),
    "max.connections": Range(0),
    "max.connections.per.ip": Range(0),
    "max.connection.creation.rate": Range(0),
    "quota.window.num": Range(1),
    "quota.window.size.seconds": Range(1),
    "controller.quota.window.num": Range(1),
    "controller.quota.window.size.seconds": Range(1),
    "connections.max.reauth.ms": Range(0),
    "num.network.threads": Range(1),
    "num.io.threads": Range(1),
    "log.segment.bytes": Range(1024 * 1024),
    "log.roll.ms": Range(1),
    "log.roll.hours": Range(1),
    "log.roll.jitter.hours": Range(0),
    "log.index.size.max.bytes": Range(4),
    "log.index.interval.bytes": Range(0),
    "log.flush.interval.messages": Range(1),
    "log.retention.check.interval.ms": Range(1),
    "log.flush.offset.checkpoint.interval.ms": Range(0),
    "log.flush.start.offset.checkpoint.interval.ms": Range(0),
    "replica.high.watermark.checkpoint.interval.ms": Range(0),
    "log.segment.delete.delay.ms": Range(0),
    "log.cleanup.policy": ValueList(("compact", "delete")),
    "log.cleaner.threads": Range(0),
    "log.message.timestamp.type": AnyOf(_TIMESTAMP_TYPES),
    "log.message.timestamp.before.max.ms": Range(0),
    "log.message.timestamp.after.max.ms": Range(0),
    "compression.type": AnyOf(COMPRESSION_TYPES),
    "offsets.topic.num.partitions": Range(1),
    "offsets.topic.replication.factor": Range(1),
    "offsets.topic.segment.bytes": Range(1),
    "offsets.retention.minutes": Range(1),
    "offsets.retention.check.interval.ms": Range(1),
    "offsets.commit.timeout.ms": Range(1),
    "group.max.size": Range(1),
    "transaction.state.log.num.partitions": Range(1),
    "transaction.state.log.replication.factor": Range(1),
    "transaction.state.log.min.isr": Range(1),
    "transaction.state.log.segment.bytes": Range(1),
    "transaction.max.timeout.ms": Range(1),
    "transactional.id.expiration.ms": Range(1),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": Range(1),
    "transaction.remove.expired.transaction.cleanup.interval.ms": Range(1),
    "producer.id.expiration.ms": Range(1),
    "producer.id.expiration.check.interval.ms": Range(1),
    # ours (Kafka sets no range): 0 would heartbeat in a busy loop, or fence every broker at once
    "broker.heartbeat.interval.ms": Range(1),
    "metadata.log.max.record.bytes.between.snapshots": Range(1),
    "metadata.log.max.snapshot.interval.ms": Range(0),
    "broker.session.timeout.ms": Range(1),
    "fetch.max.bytes": Range(1024),
    "replica.fetch.max.bytes": Range(0),
    "num.replica.fetchers": Range(1),
    "security.inter.broker.protocol": AnyOf(("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
    "metrics.port": Range(0, 65535),
    "share.auto.offset.reset": AnyOf(("latest", "earliest")),
    # Kafka's ranges; Kafka also bounds the lock duration and session timeout by the
    # group.share.min/max.* keys, which are not checked here (tests use short values)
    "group.share.record.lock.duration.ms": Range(1000, 3_600_000),
    "group.share.delivery.count.limit": Range(2, 10),
    "group.share.session.timeout.ms": Range(1),
    "group.share.heartbeat.interval.ms": Range(1),
    "group.share.max.size": Range(1, 1000),
    "group.share.partition.max.record.locks": Range(100, 10_000),
    "group.share.max.share.sessions": Range(1),
    "share.coordinator.state.topic.num.partitions": Range(1),
    "share.coordinator.state.topic.replication.factor": Range(1),
    "share.coordinator.state.topic.min.isr": Range(1),
    "mirror.topic.num.partitions": Range(1),
    "mirror.topic.replication.factor": Range(1),
    "mirror.num.replica.fetchers": Range(1),
    "mirror.metadata.refresh.interval.ms": Range(1),
    "mirror.replication.throttled.rate": Range(0),
    "mirror.truncation.timeout.ms": Range(1),
    "log.max.open.files": Range(1),
    "password.encoder.keyfactory.algorithm": AnyOf(
        ("PBKDF2WithHmacSHA1", "PBKDF2WithHmacSHA256", "PBKDF2WithHmacSHA512")
    ),
    "password.encoder.cipher.algorithm": AnyOf(("AES/CBC/PKCS5Padding", "AES/GCM/NoPadding")),
    "password.encoder.key.length": Range(128, 256),  # and an AES length: server_config checks
    "password.encoder.iterations": Range(1024),
}

_TYPES = {t.name: t for t in ConfigType}
_MODES = {m.value: m for m in UpdateMode}


def _kafka_keys() -> dict[str, BrokerKey]:
    out: dict[str, BrokerKey] = {}
    for row in KAFKA_BROKER_KEYS:
        name, tname, default, mode = row[0], row[1], row[2], row[3]
        flag = row[4] if len(row) > 4 else ""
        out[name] = BrokerKey(
            name,
            _TYPES[tname],
            default,
            _MODES[mode],
            required=flag == "required",
            internal=flag == "internal",
            validator=_BROKER_VALIDATORS.get(name),
        )
    return out


def _extra(
    name: str, t: ConfigType, default: str | None, mode: UpdateMode, origin: Origin
) -> BrokerKey:
    return BrokerKey(name, t, default, mode, origin, validator=_BROKER_VALIDATORS.get(name))


_K, _O = UpdateMode, Origin
BROKER_KEYS: dict[str, BrokerKey] = _kafka_keys() | {
    k.name: k
    for k in (
        # KIP-1279 broker keys (names and defaults from the KIP's tables).
        _extra("mirror.topic.num.partitions", ConfigType.INT, "50", _K.READ_ONLY, _O.KIP_1279),
        _extra("mirror.topic.replication.factor", ConfigType.SHORT, "3", _K.READ_ONLY, _O.KIP_1279),
        _extra("mirror.num.replica.fetchers", ConfigType.INT, "1", _K.CLUSTER_WIDE, _O.KIP_1279),
        _extra(
            "mirror.metadata.refresh.interval.ms",
            ConfigType.LONG,
            "30000",
            _K.CLUSTER_WIDE,
            _O.KIP_1279,
        ),
        _extra(
            "mirror.replication.throttled.rate",
            ConfigType.LONG,
            LONG_MAX,
            _K.PER_BROKER,
            _O.KIP_1279,
        ),
        # Ours: how long PREPARING waits for the replicas' LME truncation before FAILED
        # (broker/mirror/truncation_wait.py; the KIP says FAILED but names no bound).
        _extra("mirror.truncation.timeout.ms", ConfigType.LONG, "60000", _K.READ_ONLY, _O.KMIRROR),
        # Ours: how many sealed segments' log files stay open at once (broker/log/file_cache).
        _extra("log.max.open.files", ConfigType.INT, "1000", _K.READ_ONLY, _O.KMIRROR),
        # Ours: Kafka's share group config `share.auto.offset.reset` as one broker-wide default
        # (no per-group configs here): where a share partition starts without state.
        _extra("share.auto.offset.reset", ConfigType.STRING, "latest", _K.READ_ONLY, _O.KMIRROR),
        # Ours: the Prometheus exporter's port (0 disables it) and the address it binds.
        _extra("metrics.port", ConfigType.INT, "0", _K.READ_ONLY, _O.KMIRROR),
        _extra("metrics.host", ConfigType.STRING, "0.0.0.0", _K.READ_ONLY, _O.KMIRROR),
        # Secrets at rest (broker.security.password_encoder). Kafka's ZooKeeper-era names, gone
        # from Kafka 4 (KRaft stores secrets in plain text); read-only so a secret never lands
        # in the metadata log it protects.
        _extra("password.encoder.secret", ConfigType.PASSWORD, None, _K.READ_ONLY, _O.KMIRROR),
        _extra("password.encoder.old.secret", ConfigType.PASSWORD, None, _K.READ_ONLY, _O.KMIRROR),
        _extra(
            "password.encoder.keyfactory.algorithm",
            ConfigType.STRING,
            "PBKDF2WithHmacSHA512",
            _K.READ_ONLY,
            _O.KMIRROR,
        ),
        _extra(
            "password.encoder.cipher.algorithm",
            ConfigType.STRING,
            "AES/CBC/PKCS5Padding",
            _K.READ_ONLY,
            _O.KMIRROR,
        ),
        _extra("password.encoder.key.length", ConfigType.INT, "128", _K.READ_ONLY, _O.KMIRROR),
        _extra("password.encoder.iterations", ConfigType.INT, "4096", _K.READ_ONLY, _O.KMIRROR),
        # StandardAuthorizer's own keys (read by the authorizer, so not in KafkaConfig's list).
        _extra("super.users", ConfigType.STRING, None, _K.READ_ONLY, _O.KAFKA),
        _extra(
            "allow.everyone.if.no.acl.found", ConfigType.BOOLEAN, "false", _K.READ_ONLY, _O.KAFKA
        ),
    )
}

# Families of keys Kafka accepts under a free-form prefix (listener overrides, plugin configs).
KAFKA_KEY_PREFIXES = ("listener.name.", "rsm.config.", "rlmm.config.")


def broker_key(name: str) -> BrokerKey | None:
    return BROKER_KEYS.get(name)


def is_known_prefixed(name: str) -> bool:
    return name.startswith(KAFKA_KEY_PREFIXES)


def closest_broker_key(name: str) -> str | None:
    m = difflib.get_close_matches(name, BROKER_KEYS.keys(), n=1, cutoff=0.6)
    return m[0] if m else None


def _t(
    name: str,
    t: ConfigType,
    default: str | None,
    syn: tuple[Synonym, ...] = (),
    v: Validator | None = None,
    origin: Origin = Origin.KAFKA,
    hidden: bool = False,
) -> TopicKey:
    return TopicKey(name, t, default, syn, v, origin, hidden)


def _s(*keys: str | tuple[str, int]) -> tuple[Synonym, ...]:
    return tuple(Synonym(k) if isinstance(k, str) else Synonym(*k) for k in keys)


_HOUR, _MIN = 3_600_000, 60_000
_CT = ConfigType
TOPIC_KEYS: dict[str, TopicKey] = {
    k.name: k
    for k in (
        _t("segment.bytes", _CT.INT, "1073741824", _s("log.segment.bytes"), Range(1024 * 1024)),
        _t(
            "segment.ms",
            _CT.LONG,
            "604800000",
            _s("log.roll.ms", ("log.roll.hours", _HOUR)),
            Range(1),
        ),
        _t(
            "segment.jitter.ms",
            _CT.LONG,
            "0",
            _s("log.roll.jitter.ms", ("log.roll.jitter.hours", _HOUR)),
            Range(0),
        ),
        _t("segment.index.bytes", _CT.INT, "10485760", _s("log.index.size.max.bytes"), Range(4)),
        _t("flush.messages", _CT.LONG, LONG_MAX, _s("log.flush.interval.messages"), Range(1)),
        _t(
            "flush.ms",
            _CT.LONG,
            LONG_MAX,
            _s("log.flush.interval.ms", "log.flush.scheduler.interval.ms"),
            Range(0),
        ),
        _t("retention.bytes", _CT.LONG, "-1", _s("log.retention.bytes")),
        _t(
            "retention.ms",
            _CT.LONG,
            "604800000",
            _s("log.retention.ms", ("log.retention.minutes", _MIN), ("log.retention.hours", _HOUR)),
            Range(-1),
        ),
        _t("max.message.bytes", _CT.INT, "1048588", _s("message.max.bytes"), Range(0)),
        _t("index.interval.bytes", _CT.INT, "4096", _s("log.index.interval.bytes"), Range(0)),
        _t(
            "delete.retention.ms",
            _CT.LONG,
            "86400000",
            _s("log.cleaner.delete.retention.ms"),
            Range(0),
        ),
        _t(
            "min.compaction.lag.ms",
            _CT.LONG,
            "0",
            _s("log.cleaner.min.compaction.lag.ms"),
            Range(0),
        ),
        _t(
            "max.compaction.lag.ms",
            _CT.LONG,
            LONG_MAX,
            _s("log.cleaner.max.compaction.lag.ms"),
            Range(1),
        ),
        _t("file.delete.delay.ms", _CT.LONG, "60000", _s("log.segment.delete.delay.ms"), Range(0)),
        _t(
            "min.cleanable.dirty.ratio",
            _CT.DOUBLE,
            "0.5",
            _s("log.cleaner.min.cleanable.ratio"),
            Range(0, 1),
        ),
        _t(
            "cleanup.policy",
            _CT.LIST,
            "delete",
            _s("log.cleanup.policy"),
            ValueList(("compact", "delete")),
        ),
        _t(
            "unclean.leader.election.enable",
            _CT.BOOLEAN,
            "false",
            _s("unclean.leader.election.enable"),
        ),
        _t("min.insync.replicas", _CT.INT, "1", _s("min.insync.replicas"), Range(1)),
        _t(
            "compression.type",
            _CT.STRING,
            "producer",
            _s("compression.type"),
            AnyOf(COMPRESSION_TYPES),
        ),
        _t("compression.gzip.level", _CT.INT, "-1", _s("compression.gzip.level")),
        _t("compression.lz4.level", _CT.INT, "9", _s("compression.lz4.level"), Range(1, 17)),
        _t(
            "compression.zstd.level", _CT.INT, "3", _s("compression.zstd.level"), Range(-131072, 22)
        ),
        _t("preallocate", _CT.BOOLEAN, "false", _s("log.preallocate")),
        _t(
            "message.timestamp.type",
            _CT.STRING,
            "CreateTime",
            _s("log.message.timestamp.type"),
            AnyOf(_TIMESTAMP_TYPES),
        ),
        _t(
            "message.timestamp.before.max.ms",
            _CT.LONG,
            LONG_MAX,
            _s("log.message.timestamp.before.max.ms"),
            Range(0),
        ),
        _t(
            "message.timestamp.after.max.ms",
            _CT.LONG,
            "3600000",
            _s("log.message.timestamp.after.max.ms"),
            Range(0),
        ),
        _t("leader.replication.throttled.replicas", _CT.LIST, ""),
        _t("follower.replication.throttled.replicas", _CT.LIST, ""),
        _t("remote.storage.enable", _CT.BOOLEAN, "false"),
        _t("local.retention.ms", _CT.LONG, "-2", _s("log.local.retention.ms"), Range(-2)),
        _t("local.retention.bytes", _CT.LONG, "-2", _s("log.local.retention.bytes"), Range(-2)),
        _t("remote.log.copy.disable", _CT.BOOLEAN, "false"),
        _t("remote.log.delete.on.disable", _CT.BOOLEAN, "false"),
        # KIP-1279 topic keys.
        _t("mirror.name", _CT.STRING, None, origin=Origin.KIP_1279, hidden=True),
        # kmirror: the cluster ids a mirror topic's records came through (loop prevention)
        _t("mirror.source.cluster.ids", _CT.LIST, None, origin=Origin.KIP_1279),
        _t("mirror.replication.throttled.replicas", _CT.LIST, "", origin=Origin.KIP_1279),
        _t("mirror.support.unclean.leader.election", _CT.BOOLEAN, "false", origin=Origin.KIP_1279),
        # Synchronous mirroring on the source (ours, docs/mirroring.md).
        _t("mirror.sync.enable", _CT.BOOLEAN, "false", origin=Origin.KMIRROR),
        _t("mirror.sync.timeout.ms", _CT.LONG, "30000", v=Range(1), origin=Origin.KMIRROR),
        _t(
            "mirror.sync.on.timeout",
            _CT.STRING,
            "refuse",
            v=AnyOf(("refuse", "async")),
            origin=Origin.KMIRROR,
        ),
    )
}

# Topic keys whose values are lists of ``partition:broker`` pairs or ``*``.
THROTTLED_REPLICA_KEYS = frozenset(
    {
        "leader.replication.throttled.replicas",
        "follower.replication.throttled.replicas",
        "mirror.replication.throttled.replicas",
    }
)


def closest_topic_key(name: str) -> str | None:
    m = difflib.get_close_matches(name, TOPIC_KEYS.keys(), n=1, cutoff=0.6)
    return m[0] if m else None
