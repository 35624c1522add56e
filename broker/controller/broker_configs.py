"""The BROKER config resource: which keys IncrementalAlterConfigs may set dynamically, and the
rows DescribeConfigs shows (dynamic per-broker > dynamic cluster default > server.properties >
Kafka's default)."""

from __future__ import annotations

from typing import Any

from ..config.catalog import BROKER_KEYS
from ..config.server_config import ServerConfig
from ..metadata.image import BROKER_RESOURCE, MetadataImage
from .controller import ConfigValidationError


def validate_broker_config(key: str, value: str) -> str:
    ck = BROKER_KEYS.get(key)
    if ck is None:
        raise ConfigValidationError(f"Unknown broker config name: {key}")
    if ck.mode.name == "READ_ONLY":
        raise ConfigValidationError(f"Cannot update these configs dynamically: Set({key})")
    return value


def describe_broker_configs(config: ServerConfig, image: MetadataImage) -> list[dict[str, Any]]:
    rows = config.describe_broker_configs(
        dynamic=image.config(BROKER_RESOURCE, str(config.node_id)),
        dynamic_default=image.config(BROKER_RESOURCE, ""),
    )
    return [
        {
            "name": r.name,
            "value": r.value,
            "read_only": r.read_only,
            "source": r.source,
            "sensitive": r.sensitive,
            "synonyms": [],
            "type": r.config_type,
        }
        for r in rows
    ]
