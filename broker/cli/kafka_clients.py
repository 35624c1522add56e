"""Kafka client properties (``--producer.config``, ``--producer-property``, ``--consumer.config``,
``--consumer-property``, ``--command-config``) as aiokafka's producer and consumer take them:
bootstrap, client id, TLS and SASL (``security.protocol``, ``ssl.*``, ``sasl.mechanism``,
``sasl.jaas.config``, read as the admin tools read them), and the producer and consumer settings
the console tools use. Keys aiokafka has no equivalent for are left out, as Kafka's clients
ignore keys they do not use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from broker.security.client import client_security
from broker.security.errors import SecurityConfigError


class ClientConfigError(Exception):
    """A client property with a value the client refuses (Kafka's ConfigException text)."""


def _int(key: str) -> Callable[[str], int]:
    def parse(value: str) -> int:
        try:
            return int(value.strip())
        except ValueError:
            raise ClientConfigError(
                f"Invalid value {value} for configuration {key}: Not a number of type INT"
            ) from None

    return parse


def _acks(value: str) -> Any:
    v = value.strip().lower()
    if v in ("all", "-1"):
        return "all"
    if v in ("0", "1"):
        return int(v)
    raise ClientConfigError(f"Invalid value {value} for configuration acks: String must be one of: all, -1, 0, 1")  # fmt: skip


def _bool(key: str) -> Callable[[str], bool]:
    def parse(value: str) -> bool:
        v = value.strip().lower()
        if v not in ("true", "false"):
            raise ClientConfigError(
                f"Invalid value {value} for configuration {key}: Expected value to be either "
                "true or false"
            )
        return v == "true"

    return parse


def _compression(value: str) -> str | None:
    v = value.strip().lower()
    if v in ("none", ""):
        return None
    if v not in ("gzip", "snappy", "lz4", "zstd"):
        raise ClientConfigError(
            f"Invalid value {value} for configuration compression.type: String must be one of: "
            "none, gzip, snappy, lz4, zstd"
        )
    return v


def _choice(key: str, *choices: str) -> Callable[[str], str]:
    def parse(value: str) -> str:
        v = value.strip().lower()
        if v not in choices:
            raise ClientConfigError(
                f"Invalid value {value} for configuration {key}: String must be one of: "
                + ", ".join(choices)
            )
        return v

    return parse


COMMON: Final[dict[str, tuple[str, Callable[[str], Any]]]] = {
    "client.id": ("client_id", str),
    "request.timeout.ms": ("request_timeout_ms", _int("request.timeout.ms")),
    "retry.backoff.ms": ("retry_backoff_ms", _int("retry.backoff.ms")),
    "metadata.max.age.ms": ("metadata_max_age_ms", _int("metadata.max.age.ms")),
    "connections.max.idle.ms": ("connections_max_idle_ms", _int("connections.max.idle.ms")),
}
PRODUCER: Final[dict[str, tuple[str, Callable[[str], Any]]]] = {
    "acks": ("acks", _acks),
    "compression.type": ("compression_type", _compression),
    "linger.ms": ("linger_ms", _int("linger.ms")),
    "batch.size": ("max_batch_size", _int("batch.size")),
    "max.request.size": ("max_request_size", _int("max.request.size")),
    "enable.idempotence": ("enable_idempotence", _bool("enable.idempotence")),
    "transactional.id": ("transactional_id", str),
}
CONSUMER: Final[dict[str, tuple[str, Callable[[str], Any]]]] = {
    "group.id": ("group_id", str),
    "group.instance.id": ("group_instance_id", str),
    "auto.offset.reset": (
        "auto_offset_reset",
        _choice("auto.offset.reset", "latest", "earliest", "none"),
    ),
    "enable.auto.commit": ("enable_auto_commit", _bool("enable.auto.commit")),
    "auto.commit.interval.ms": ("auto_commit_interval_ms", _int("auto.commit.interval.ms")),
    "isolation.level": (
        "isolation_level",
        _choice("isolation.level", "read_uncommitted", "read_committed"),
    ),
    "session.timeout.ms": ("session_timeout_ms", _int("session.timeout.ms")),
    "heartbeat.interval.ms": ("heartbeat_interval_ms", _int("heartbeat.interval.ms")),
    "max.poll.interval.ms": ("max_poll_interval_ms", _int("max.poll.interval.ms")),
    "max.poll.records": ("max_poll_records", _int("max.poll.records")),
    "fetch.max.wait.ms": ("fetch_max_wait_ms", _int("fetch.max.wait.ms")),
    "fetch.min.bytes": ("fetch_min_bytes", _int("fetch.min.bytes")),
    "fetch.max.bytes": ("fetch_max_bytes", _int("fetch.max.bytes")),
    "max.partition.fetch.bytes": (
        "max_partition_fetch_bytes",
        _int("max.partition.fetch.bytes"),
    ),
    "client.rack": ("client_rack", str),
}


def client_kwargs(props: Mapping[str, str], consumer: bool) -> dict[str, Any]:
    """aiokafka keyword arguments for these Kafka client properties."""
    table = {**COMMON, **(CONSUMER if consumer else PRODUCER)}
    out: dict[str, Any] = {"bootstrap_servers": props["bootstrap.servers"].split(",")}
    for key, value in props.items():
        if key in table:
            name, parse = table[key]
            out[name] = parse(value)
    try:
        security = client_security(props, "")
    except SecurityConfigError as e:
        raise ClientConfigError(str(e)) from None
    out["security_protocol"] = security.protocol
    if security.ssl_context is not None:
        out["ssl_context"] = security.ssl_context
    if security.mechanism is not None:
        out["sasl_mechanism"] = security.mechanism
        out["sasl_plain_username"] = security.username
        out["sasl_plain_password"] = security.password
    return out


def parse_key_values(values: list[str]) -> dict[str, str]:
    """CommandLineUtils.parseKeyValueArgs: ``key=value`` (a value may hold '='), ``key`` alone
    is an empty value."""
    out: dict[str, str] = {}
    for v in values:
        key, _, value = v.partition("=")
        out[key] = value
    return out
