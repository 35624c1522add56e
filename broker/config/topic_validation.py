"""Topic config values as CreateTopics, CreatePartitions and AlterConfigs get them: known
key, typed and valid value, normalized for the metadata log."""

from __future__ import annotations

import re

from broker.config.catalog import THROTTLED_REPLICA_KEYS, TOPIC_KEYS, closest_topic_key
from broker.config.config_error import ConfigError
from broker.config.throttled_replicas import ThrottledReplicasError, parse_throttled_replicas
from broker.config.values import ConfigValueError, parse_value, render_value

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
