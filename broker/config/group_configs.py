"""Per-group dynamic configs (KIP-848 / KIP-932): config resource type GROUP (32), Kafka 4.1's
names, checks and defaults.

A group's overrides are ConfigRecords of resource type 32 in the metadata log (as Kafka's);
what is not set falls back to the broker's value (`group.consumer.session.timeout.ms`...).
Checks, as Kafka's: a known name; an integer of at least 1 (1000 for the lock duration) or one
of the allowed strings; then, over the group's overrides after the change with Kafka's static
defaults for the rest, each value within the broker's `group.*.min/max.*` bounds and a session
timeout above the heartbeat interval. Errors are messages (INVALID_CONFIG for the caller).
Kafka 4.1's `streams.*` group configs are left out: there are no streams groups here.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .catalog import BROKER_KEYS

GROUP_RESOURCE: Final = 32

CONSUMER_SESSION: Final = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT: Final = "consumer.heartbeat.interval.ms"
SHARE_SESSION: Final = "share.session.timeout.ms"
SHARE_HEARTBEAT: Final = "share.heartbeat.interval.ms"
SHARE_LOCK: Final = "share.record.lock.duration.ms"
SHARE_RESET: Final = "share.auto.offset.reset"
SHARE_ISOLATION: Final = "share.isolation.level"

# name -> (least value, broker key of the default, broker keys of the min and max bound)
_INTS: Final[Mapping[str, tuple[int, str, str, str]]] = {
    CONSUMER_SESSION: (
        1,
        "group.consumer.session.timeout.ms",
        "group.consumer.min.session.timeout.ms",
        "group.consumer.max.session.timeout.ms",
    ),
    CONSUMER_HEARTBEAT: (
        1,
        "group.consumer.heartbeat.interval.ms",
        "group.consumer.min.heartbeat.interval.ms",
        "group.consumer.max.heartbeat.interval.ms",
    ),
    SHARE_SESSION: (
        1,
        "group.share.session.timeout.ms",
        "group.share.min.session.timeout.ms",
        "group.share.max.session.timeout.ms",
    ),
    SHARE_HEARTBEAT: (
        1,
        "group.share.heartbeat.interval.ms",
        "group.share.min.heartbeat.interval.ms",
        "group.share.max.heartbeat.interval.ms",
    ),
    SHARE_LOCK: (
        1000,
        "group.share.record.lock.duration.ms",
        "group.share.min.record.lock.duration.ms",
        "group.share.max.record.lock.duration.ms",
    ),
}
# name -> (allowed values, broker key of the default or None: Kafka's default)
_STRINGS: Final[Mapping[str, tuple[tuple[str, ...], str | None]]] = {
    SHARE_RESET: (("latest", "earliest"), "share.auto.offset.reset"),
    SHARE_ISOLATION: (("read_committed", "read_uncommitted"), None),
}
NAMES: Final = (*_INTS, *_STRINGS)

# Kafka's static GroupConfig defaults: what unset names count as while checking bounds
_KAFKA_DEFAULTS: Final[Mapping[str, str]] = {
    CONSUMER_SESSION: "45000",
    CONSUMER_HEARTBEAT: "5000",
    SHARE_SESSION: "45000",
    SHARE_HEARTBEAT: "5000",
    SHARE_LOCK: "30000",
    SHARE_RESET: "latest",
    SHARE_ISOLATION: "read_uncommitted",
}
_PAIRS: Final = ((CONSUMER_SESSION, CONSUMER_HEARTBEAT), (SHARE_SESSION, SHARE_HEARTBEAT))

# DescribeConfigs codes: ConfigSource GROUP_CONFIG / DEFAULT_CONFIG, ConfigType STRING / INT
SOURCE_GROUP, SOURCE_DEFAULT = 8, 5
TYPE_STRING, TYPE_INT = 2, 3


class GroupConfigError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class GroupConfigDefaults:
    """The broker's values behind the group configs: `value` holds each name's default, `bounds`
    each integer name's (min, max)."""

    value: Mapping[str, str]
    bounds: Mapping[str, tuple[int, int]]

    @classmethod
    def from_broker(cls, get: Callable[[str], Any]) -> "GroupConfigDefaults":
        """From the broker's config: `get(key)` its value (static or Kafka's default)."""
        values: dict[str, str] = {}
        bounds: dict[str, tuple[int, int]] = {}
        for name, (_least, default, lo, hi) in _INTS.items():
            values[name] = str(get(default))
            bounds[name] = (int(get(lo)), int(get(hi)))
        for name, (_allowed, broker_key) in _STRINGS.items():
            values[name] = str(get(broker_key)) if broker_key else _KAFKA_DEFAULTS[name]
        return cls(values, bounds)

    @classmethod
    def kafka(cls) -> "GroupConfigDefaults":
        """Kafka 4.1's broker defaults (no broker config at hand)."""
        return cls.from_static({})

    @classmethod
    def from_static(cls, static: Mapping[str, str]) -> "GroupConfigDefaults":
        """From the broker's static config (ServerConfig.static_values), Kafka's defaults
        for what it does not set."""
        return cls.from_broker(lambda key: static.get(key, BROKER_KEYS[key].default))


def check_value(name: str, value: str) -> str:
    """The value as stored; `GroupConfigError` for an unknown name or a bad value."""
    if name in _INTS:
        least = _INTS[name][0]
        try:
            n = int(value.strip())
        except ValueError:
            raise GroupConfigError(
                f"Invalid value {value} for configuration {name}: Not a number of type INT"
            ) from None
        if n < least:
            raise GroupConfigError(
                f"Invalid value {n} for configuration {name}: Value must be at least {least}"
            )
        return str(n)
    if name in _STRINGS:
        allowed = _STRINGS[name][0]
        v = value.strip().lower()
        if v not in allowed:
            raise GroupConfigError(
                f"Invalid value {value} for configuration {name}: String must be one of: "
                + ", ".join(allowed)
            )
        return v
    raise GroupConfigError(f"Unknown group config name: {name}")


def check_group(overrides: Mapping[str, str], d: GroupConfigDefaults) -> None:
    """A group's overrides as a whole (after a change): within the broker's bounds, each
    session timeout above its heartbeat interval. Raises `GroupConfigError`."""
    merged = {**_KAFKA_DEFAULTS, **overrides}
    for name, (_least, _default, lo, hi) in _INTS.items():
        n = int(merged[name])
        low, high = d.bounds[name]
        if n < low:
            raise GroupConfigError(f"{name} must be greater than or equal to {lo}")
        if n > high:
            raise GroupConfigError(f"{name} must be less than or equal to {hi}")
    for session, heartbeat in _PAIRS:
        if int(merged[session]) <= int(merged[heartbeat]):
            raise GroupConfigError(f"{session} must be greater than {heartbeat}")


def effective(overrides: Mapping[str, str], d: GroupConfigDefaults) -> dict[str, str]:
    """Every group config's value for a group: its override, else the broker's default."""
    return {name: overrides.get(name, d.value[name]) for name in NAMES}


def describe_rows(overrides: Mapping[str, str], d: GroupConfigDefaults) -> list[dict[str, Any]]:
    """DescribeConfigs rows (see broker/api/configs.py) for a group: each name, from the group
    (GROUP_CONFIG) or the broker default (DEFAULT_CONFIG)."""
    rows = []
    for name in sorted(NAMES):
        own = name in overrides
        value = overrides[name] if own else d.value[name]
        source = SOURCE_GROUP if own else SOURCE_DEFAULT
        rows.append(
            {
                "name": name,
                "value": value,
                "read_only": False,
                "source": source,
                "sensitive": False,
                "synonyms": [{"name": name, "value": value, "source": source}],
                "type": TYPE_INT if name in _INTS else TYPE_STRING,
            }
        )
    return rows
