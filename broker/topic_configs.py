"""Topic-level configuration as Kafka reports and applies it.

Effective value of a topic key: the topic's own ConfigRecord (source TOPIC_CONFIG), else the broker
key that supplies its default when the server.properties file sets it (STATIC_BROKER_CONFIG), else
Kafka's default (DEFAULT_CONFIG).
"""

from collections.abc import Mapping
from typing import Any

from .config.catalog import TOPIC_KEYS
from .config.server_config import ConfigError, ServerConfig, validate_topic_config
from .controller.controller import ConfigValidationError
from .log.config import TOPIC_CONFIG_KEYS, LogConfig

TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5


def validate(key: str, value: str) -> str:
    try:
        out = validate_topic_config(key, value)
    except ConfigError as e:
        raise ConfigValidationError(str(e)) from None
    return value if out is None else out


def describe(config: ServerConfig, explicit: Mapping[str, str]) -> list[dict[str, Any]]:
    rows = []
    for name in sorted(TOPIC_KEYS):
        tk = TOPIC_KEYS[name]
        if tk.hidden:
            continue
        synonyms = []
        value, source = tk.default, DEFAULT_CONFIG
        for syn in tk.synonyms:
            raw = config.static_values.get(syn.broker_key)
            if raw is not None:
                synonyms.append(
                    {"name": syn.broker_key, "value": raw, "source": STATIC_BROKER_CONFIG}
                )
                if source == DEFAULT_CONFIG:
                    value = str(int(raw) * syn.factor) if syn.factor != 1 else raw
                    source = STATIC_BROKER_CONFIG
        if name in explicit:
            synonyms.insert(0, {"name": name, "value": explicit[name], "source": TOPIC_CONFIG})
            value, source = explicit[name], TOPIC_CONFIG
        synonyms.append({"name": name, "value": tk.default, "source": DEFAULT_CONFIG})
        rows.append(
            {
                "name": name,
                "value": value,
                "read_only": False,
                "source": source,
                "sensitive": tk.sensitive,
                "synonyms": synonyms,
                "type": tk.type.wire,
            }
        )
    return rows


def log_config(config: ServerConfig, explicit: Mapping[str, str]) -> LogConfig:
    """The LogConfig a partition of a topic with these explicit configs runs with."""
    values = dict(config.topic_defaults())
    values.update(explicit)
    return LogConfig.from_properties({k: v for k, v in values.items() if k in TOPIC_CONFIG_KEYS})
