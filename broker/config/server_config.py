"""Typed broker configuration loaded from ``server.properties``.

Rules: every key must be known (Kafka 4.1's, KIP-1279's or ours, see catalog.py); a
Kafka key we do not implement is accepted and reported in one warning line; a bad value
is a ``ConfigError`` naming the key, the value and ``file:line``.

The parts, each in its own module: the keys kmirror acts on (implemented_keys), the typed
settings and their DescribeConfigs rows (server_settings), parsing and the cross-key rules
(server_parsing, server_key_checks), topic config values (topic_validation) and the error
they raise (config_error). This module is the one the rest of the broker imports them from.
"""

from __future__ import annotations

from broker.config.config_error import ConfigError
from broker.config.implemented_keys import IMPLEMENTED_KEYS
from broker.config.server_key_checks import parse_ip_overrides
from broker.config.server_parsing import (
    STANDARD_AUTHORIZER,
    load_server_config,
    parse_server_config,
)
from broker.config.server_settings import ConfigSource, DescribeRow, ServerConfig
from broker.config.topic_validation import validate_topic_config

__all__ = [
    "IMPLEMENTED_KEYS",
    "STANDARD_AUTHORIZER",
    "ConfigError",
    "ConfigSource",
    "DescribeRow",
    "ServerConfig",
    "load_server_config",
    "parse_ip_overrides",
    "parse_server_config",
    "validate_topic_config",
]
