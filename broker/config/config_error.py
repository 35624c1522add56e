"""The error every unusable broker or topic config raises: one line naming the key, the value
and, for server.properties, ``file:line``."""

from __future__ import annotations


class ConfigError(ValueError):
    """An unusable configuration; the message names the key, value and location."""


def bad_value(key: str, raw: str, where: str, why: str) -> ConfigError:
    return ConfigError(f"{where}: invalid value {raw!r} for {key}: {why}")
