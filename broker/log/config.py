"""Topic-level log configuration: Kafka's keys, types, defaults (4.x) and validation.

``LogConfig.from_properties`` takes the string map a CreateTopics / AlterConfigs request or a
properties file carries; every problem raises ``ValueError`` naming the key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

INT_MAX: Final = 2**31 - 1
LONG_MAX: Final = 2**63 - 1
LONG_MIN: Final = -(2**63)

CREATE_TIME: Final = "CreateTime"
LOG_APPEND_TIME: Final = "LogAppendTime"
COMPRESSION_TYPES: Final = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024
    segment_ms: int = 7 * 24 * 3600 * 1000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10 * 1024 * 1024
    retention_ms: int = 7 * 24 * 3600 * 1000
    retention_bytes: int = -1
    cleanup_policy: tuple[str, ...] = ("delete",)
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    index_interval_bytes: int = 4096
    message_timestamp_type: str = CREATE_TIME
    message_timestamp_before_max_ms: int = LONG_MAX
    # Kafka 4.0 lowered this from Long.MAX_VALUE to one hour.
    message_timestamp_after_max_ms: int = 3600 * 1000
    max_message_bytes: int = 1024 * 1024 + 12
    file_delete_delay_ms: int = 60_000
    min_insync_replicas: int = 1
    compression_type: str = "producer"
    delete_retention_ms: int = 24 * 3600 * 1000
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    min_cleanable_dirty_ratio: float = 0.5
    unclean_leader_election_enable: bool = False
    preallocate: bool = False

    @property
    def delete_enabled(self) -> bool:
        return "delete" in self.cleanup_policy

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == LOG_APPEND_TIME

    @classmethod
    def from_properties(cls, props: Mapping[str, str], base: LogConfig | None = None) -> LogConfig:
        """Apply Kafka-named overrides on ``base`` (default: Kafka's defaults)."""
        changes: dict[str, Any] = {}
        for key, raw in props.items():
            spec = _SPECS.get(key)
            if spec is None:
                raise ValueError(f"unknown topic config key {key!r}")
            attr, parse = spec
            try:
                changes[attr] = parse(raw.strip())
            except ValueError as exc:
                raise ValueError(f"invalid value {raw!r} for {key}: {exc}") from None
        return dataclasses.replace(base if base is not None else cls(), **changes)

    def to_properties(self) -> dict[str, str]:
        """Every key with its current value, as Kafka would describe it."""
        out: dict[str, str] = {}
        for key, (attr, _) in _SPECS.items():
            value = getattr(self, attr)
            if isinstance(value, bool):
                out[key] = "true" if value else "false"
            elif isinstance(value, tuple):
                out[key] = ",".join(value)
            else:
                out[key] = str(value)
        return out


# -- parsers ------------------------------------------------------------------------------


def _int(lo: int, hi: int) -> Callable[[str], int]:
    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            raise ValueError("not an integer") from None
        if not lo <= value <= hi:
            raise ValueError(f"must be in [{lo}, {hi}]")
        return value

    return parse


def _ratio(raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ValueError("not a number") from None
    if not 0.0 <= value <= 1.0:
        raise ValueError("must be in [0, 1]")
    return value


def _bool(raw: str) -> bool:
    low = raw.lower()
    if low not in ("true", "false"):
        raise ValueError("must be true or false")
    return low == "true"


def _one_of(*allowed: str) -> Callable[[str], str]:
    def parse(raw: str) -> str:
        if raw not in allowed:
            raise ValueError(f"must be one of {', '.join(allowed)}")
        return raw

    return parse


def _policy(raw: str) -> tuple[str, ...]:
    items = tuple(p.strip() for p in raw.split(",") if p.strip())
    for item in items:
        if item not in ("delete", "compact"):
            raise ValueError(f"{item!r} is not one of delete, compact")
    return items


_SPECS: Final[dict[str, tuple[str, Callable[[str], Any]]]] = {
    # Kafka's lower bound for segment.bytes is the legacy record overhead (14); tests rely on
    # small segments, so we keep it.
    "segment.bytes": ("segment_bytes", _int(14, INT_MAX)),
    "segment.ms": ("segment_ms", _int(1, LONG_MAX)),
    "segment.jitter.ms": ("segment_jitter_ms", _int(0, LONG_MAX)),
    "segment.index.bytes": ("segment_index_bytes", _int(4, INT_MAX)),
    "retention.ms": ("retention_ms", _int(-1, LONG_MAX)),
    "retention.bytes": ("retention_bytes", _int(LONG_MIN, LONG_MAX)),
    "cleanup.policy": ("cleanup_policy", _policy),
    "flush.messages": ("flush_messages", _int(1, LONG_MAX)),
    "flush.ms": ("flush_ms", _int(0, LONG_MAX)),
    "index.interval.bytes": ("index_interval_bytes", _int(0, INT_MAX)),
    "message.timestamp.type": (
        "message_timestamp_type",
        _one_of(CREATE_TIME, LOG_APPEND_TIME),
    ),
    "message.timestamp.before.max.ms": ("message_timestamp_before_max_ms", _int(0, LONG_MAX)),
    "message.timestamp.after.max.ms": ("message_timestamp_after_max_ms", _int(0, LONG_MAX)),
    "max.message.bytes": ("max_message_bytes", _int(0, INT_MAX)),
    "file.delete.delay.ms": ("file_delete_delay_ms", _int(0, LONG_MAX)),
    "min.insync.replicas": ("min_insync_replicas", _int(1, INT_MAX)),
    "compression.type": ("compression_type", _one_of(*COMPRESSION_TYPES)),
    "delete.retention.ms": ("delete_retention_ms", _int(0, LONG_MAX)),
    "min.compaction.lag.ms": ("min_compaction_lag_ms", _int(0, LONG_MAX)),
    "max.compaction.lag.ms": ("max_compaction_lag_ms", _int(1, LONG_MAX)),
    "min.cleanable.dirty.ratio": ("min_cleanable_dirty_ratio", _ratio),
    "unclean.leader.election.enable": ("unclean_leader_election_enable", _bool),
    "preallocate": ("preallocate", _bool),
}

TOPIC_CONFIG_KEYS: Final = frozenset(_SPECS)
