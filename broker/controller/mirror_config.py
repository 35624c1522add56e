"""A mirror's own configuration (KIP-1279 "Mirror Configuration"): which keys exist, their
defaults, which are secret, and how a value is checked.

A mirror's configs are the client settings used to reach its source cluster plus a few
``mirror.*`` keys. They are stored as ConfigRecords of resource type 64 (MIRROR).
"""

from collections.abc import Mapping
from typing import Any, Final

from ..metadata import mirror_names
from .topics import topic_name_error

BOOTSTRAP_SERVERS: Final = "bootstrap.servers"
SECURITY_PROTOCOL: Final = "security.protocol"
TOPIC_PROPERTIES_EXCLUDE: Final = "mirror.topic.properties.exclude"
GROUPS_INCLUDE: Final = "mirror.groups.include"
ACL_INCLUDE: Final = "mirror.acl.include"

# Topic configs never copied from the source (the KIP's default for the exclude list).
DEFAULT_TOPIC_EXCLUDES: Final = (
    "follower.replication.throttled.replicas,leader.replication.throttled.replicas,"
    "message.timestamp.difference.max.ms,log.message.timestamp.before.max.ms,"
    "log.message.timestamp.after.max.ms,message.timestamp.type,unclean.leader.election.enable,"
    "min.insync.replicas,mirror.name"
)

# Keys with a default, reported by DescribeConfigs even when unset.
DEFAULTS: Final[Mapping[str, str]] = {
    TOPIC_PROPERTIES_EXCLUDE: DEFAULT_TOPIC_EXCLUDES,
    GROUPS_INCLUDE: ".*",
    ACL_INCLUDE: "*",
    mirror_names.TOPIC_PREFIX_KEY: "",
    mirror_names.GROUP_PREFIX_ENABLE_KEY: "false",
}

# Client settings a source connection may use besides the sasl.*/ssl.*/socket.* families.
CLIENT_KEYS: Final = frozenset(
    {
        BOOTSTRAP_SERVERS,
        SECURITY_PROTOCOL,
        "client.id",
        "client.dns.lookup",
        "client.rack",
        "request.timeout.ms",
        "default.api.timeout.ms",
        "connections.max.idle.ms",
        "metadata.max.age.ms",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "retry.backoff.ms",
        "retry.backoff.max.ms",
        "receive.buffer.bytes",
        "send.buffer.bytes",
        "fetch.max.bytes",
        "fetch.min.bytes",
        "fetch.max.wait.ms",
        "max.partition.fetch.bytes",
        "isolation.level",
    }
)
KNOWN_PREFIXES: Final = ("sasl.", "ssl.", "socket.")
# kmirror's own bookkeeping stored with the mirror (see mirror_patterns): never a client setting,
# never shown by DescribeConfigs, never set or deleted through AlterConfigs.
INTERNAL_PREFIX: Final = "internal."
# The source's cluster id, recorded when first resolved (KIP-1279's cluster-id guard): every
# later connection must reach the same cluster, and never this one.
SOURCE_CLUSTER_ID_KEY: Final = INTERNAL_PREFIX + "source.cluster.id"
# Topic configs that describe this (destination) cluster: never copied from the source nor
# deleted because the source lacks them.
# The mirror.sync.* keys describe a source's wait for its own mirrors (synchronous mirroring).
DESTINATION_TOPIC_KEYS: Final = frozenset(
    {
        "mirror.name",
        "mirror.replication.throttled.replicas",
        "mirror.sync.enable",
        "mirror.sync.timeout.ms",
        "mirror.sync.on.timeout",
        mirror_names.SOURCE_CLUSTER_IDS_CONFIG,
    }
)
LIST_KEYS: Final = frozenset({BOOTSTRAP_SERVERS, TOPIC_PROPERTIES_EXCLUDE, GROUPS_INCLUDE})
SECURITY_PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_INT_KEYS: Final = frozenset(
    k for k in CLIENT_KEYS if k.endswith((".ms", ".bytes")) and k != "client.dns.lookup"
)

# Config source reported for explicitly set mirror keys: Kafka's ConfigSource has no MIRROR
# entry, so UNKNOWN (0); unset keys with a default report DEFAULT_CONFIG (5).
SOURCE_UNKNOWN, SOURCE_DEFAULT = 0, 5
TYPE_STRING, TYPE_LIST, TYPE_PASSWORD = 2, 7, 9


def is_known(key: str) -> bool:
    return key in CLIENT_KEYS or key in DEFAULTS or key.startswith(KNOWN_PREFIXES)


def is_internal(key: str) -> bool:
    return key.startswith(INTERNAL_PREFIX)


def client_settings(configs: Mapping[str, str]) -> dict[str, str]:
    """A mirror's configs minus the internal keys: what a source connection is built from (so
    bookkeeping changes never count as a connection change)."""
    return {k: v for k, v in configs.items() if not is_internal(k)}


def is_sensitive(key: str) -> bool:
    """Secrets are never returned by DescribeConfigs (Kafka's PASSWORD-typed client keys)."""
    k = key.lower()
    return (
        k == "sasl.jaas.config"
        or "password" in k
        or "secret" in k
        or k
        in (
            "ssl.keystore.key",
            # PEM in config: PASSWORD-typed in Kafka, so never shown either
            "ssl.keystore.certificate.chain",
            "ssl.truststore.certificates",
            "sasl.oauthbearer.assertion.private.key.passphrase",
        )
    )


def mirror_name_error(name: str) -> str | None:
    """Why ``name`` cannot name a mirror: topic-name rules, minus the state suffixes."""
    why = topic_name_error(name)
    if why is not None:
        return why.replace("Topic name", "Mirror name")
    if name.endswith((".removed", ".paused")):
        return f"Mirror name '{name}' must not end with '.removed' or '.paused'"
    return None


def config_error(key: str, value: str | None) -> str | None:
    """Why ``key=value`` is not an acceptable mirror config, or None."""
    if not is_known(key):
        return f"Unknown mirror config name: {key}"
    if value is None:
        return f"Null value not supported for mirror config: {key}"
    if key == BOOTSTRAP_SERVERS:
        entries = [e.strip() for e in value.split(",") if e.strip()]
        if not entries:
            return "bootstrap.servers must list at least one host:port"
        for e in entries:
            host, sep, port = e.rpartition(":")
            if not host:
                return (
                    f"Invalid value {value} for configuration bootstrap.servers: '{e}' has no host"
                )
            if not sep or not port.isdigit() or not 0 < int(port) < 65536:
                return f"Invalid value {value} for configuration bootstrap.servers: '{e}' is not host:port"
    elif key == SECURITY_PROTOCOL and value.upper() not in SECURITY_PROTOCOLS:
        return f"Invalid value {value} for configuration security.protocol: expected one of {', '.join(SECURITY_PROTOCOLS)}"
    elif key in _INT_KEYS and not value.strip().lstrip("-").isdigit():
        return f"Invalid value {value} for configuration {key}: not a number"
    elif key in mirror_names.IMMUTABLE_KEYS:
        return mirror_names.config_error(key, value)
    return None


def missing_required(configs: Mapping[str, str]) -> str | None:
    if not configs.get(BOOTSTRAP_SERVERS, "").strip():
        return "Missing required configuration bootstrap.servers"
    return None


def describe_rows(explicit: Mapping[str, str]) -> list[dict[str, Any]]:
    """DescribeConfigs rows (see broker.api.configs) for a mirror: set keys, then defaults."""
    rows: list[dict[str, Any]] = []
    for name in sorted(set(client_settings(explicit)) | set(DEFAULTS)):
        if name in explicit:
            value, source = explicit[name], SOURCE_UNKNOWN
        else:
            value, source = DEFAULTS[name], SOURCE_DEFAULT
        sensitive = is_sensitive(name)
        rows.append(
            {
                "name": name,
                "value": value,
                "read_only": False,
                "source": source,
                "sensitive": sensitive,
                "synonyms": [
                    {"name": name, "value": None if sensitive else value, "source": source}
                ],
                "type": TYPE_PASSWORD
                if sensitive
                else (TYPE_LIST if name in LIST_KEYS else TYPE_STRING),
            }
        )
    return rows


def excluded_topic_keys(mirror_configs: Mapping[str, str]) -> frozenset[str]:
    """Topic config names not copied from the source; the destination's own keys always."""
    raw = mirror_configs.get(TOPIC_PROPERTIES_EXCLUDE, DEFAULT_TOPIC_EXCLUDES)
    return frozenset({x.strip() for x in raw.split(",") if x.strip()} | DESTINATION_TOPIC_KEYS)
