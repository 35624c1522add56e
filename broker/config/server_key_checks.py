"""Checks of single server.properties keys that the catalog's validators cannot express:
the password encoder's keys and the connection limits (per IP, per listener)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from broker.config.config_error import ConfigError, bad_value
from broker.config.properties import Properties
from broker.config.values import Value


def check_password_encoder(typed: Mapping[str, Value], props: Properties) -> None:
    """What the catalog's validators cannot say about the ``password.encoder.*`` keys (the
    secrets' values are never repeated in an error)."""
    secret, old = typed.get("password.encoder.secret"), typed.get("password.encoder.old.secret")
    if secret == "":
        raise ConfigError(
            f"{props.where('password.encoder.secret')}: password.encoder.secret must not be "
            "empty (leave it unset to store secrets unencrypted)"
        )
    if old and not secret:
        raise ConfigError(
            f"{props.where('password.encoder.old.secret')}: password.encoder.old.secret needs "
            "password.encoder.secret (the secret values are encoded with from now on)"
        )
    key_length = typed.get("password.encoder.key.length")
    if key_length is not None and key_length not in (128, 192, 256):
        raise bad_value(
            "password.encoder.key.length",
            str(key_length),
            props.where("password.encoder.key.length"),
            "must be an AES key length: 128, 192 or 256",
        )


def listener_limits(
    key: str, listener_values: Mapping[str, str], names: Collection[str], props: Properties
) -> dict[str, int]:
    """``listener.name.<listener>.<key>`` values (a connection limit: an int >= 0), by listener."""
    out: dict[str, int] = {}
    by_lower = {n.lower(): n for n in names}
    for full, raw in listener_values.items():
        prefix, _, rest = full[len("listener.name.") :].partition(".")
        if rest != key:
            continue
        if prefix.lower() not in by_lower:
            raise bad_value(full, raw, props.where(full), f"there is no listener {prefix!r}")
        try:
            value = int(raw.strip())
        except ValueError:
            raise bad_value(full, raw, props.where(full), "not an integer") from None
        if value < 0:
            raise bad_value(full, raw, props.where(full), "must be at least 0")
        out[by_lower[prefix.lower()]] = value
    return out


def parse_ip_overrides(raw: str) -> dict[str, int]:
    """``max.connections.per.ip.overrides``: ``host:count`` pairs, comma-separated."""
    out: dict[str, int] = {}
    for entry in (e.strip() for e in raw.split(",")):
        if not entry:
            continue
        host, sep, count = entry.rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise ValueError(f"{entry!r} is not host:count (e.g. 127.0.0.1:200)")
        out[host.strip()] = int(count)
    return out
