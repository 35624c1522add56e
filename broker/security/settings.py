"""Where security keys come from: a listener's overrides over the broker's keys, or a client map.

Kafka resolves ``listener.name.<listener>.<key>`` before ``<key>`` for a listener (the listener
part lower-cased); JAAS configs may also be per mechanism
(``listener.name.<listener>.<mechanism>.sasl.jaas.config``). Each lookup also says which key
supplied the value, so errors name the key the operator must fix.
"""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

# Kafka's defaults for the keys we read (kafka_broker_keys / client configs).
DEFAULTS: Mapping[str, str] = {
    "ssl.keystore.type": "JKS",
    "ssl.truststore.type": "JKS",
    "ssl.client.auth": "none",
    "ssl.enabled.protocols": "TLSv1.2,TLSv1.3",
    "ssl.protocol": "TLSv1.3",
    "ssl.cipher.suites": "",
    "ssl.endpoint.identification.algorithm": "https",
    "sasl.enabled.mechanisms": "GSSAPI",
}


class Settings(Protocol):
    def get(self, key: str) -> str | None:
        """The value in force for ``key`` (its default when unset), or None."""
        ...

    def is_set(self, key: str) -> bool:
        """Was ``key`` given explicitly (not just defaulted)?"""
        ...

    def name(self, key: str) -> str:
        """The config key an operator would set to change ``key`` here."""
        ...


@dataclass(frozen=True, slots=True)
class MapSettings:
    """Client-style settings: one flat map (a mirror's configs, a --command-config file)."""

    values: Mapping[str, str]
    label: str = ""  # e.g. "mirror m1: " for messages

    def get(self, key: str) -> str | None:
        value = self.values.get(key)
        return value if value is not None else DEFAULTS.get(key)

    def is_set(self, key: str) -> bool:
        return key in self.values

    def name(self, key: str) -> str:
        return f"{self.label}{key}"


@dataclass(frozen=True, slots=True)
class ListenerSettings:
    """A broker listener's view: ``listener.name.<l>.<key>`` over ``<key>``.

    ``broker`` holds the broker-level values (explicitly set ones), ``overrides`` the
    ``listener.name.*`` keys as written.
    """

    listener: str
    broker: Mapping[str, str]
    overrides: Mapping[str, str]

    @property
    def prefix(self) -> str:
        return f"listener.name.{self.listener.lower()}."

    def _override(self, key: str) -> tuple[str, str] | None:
        want = self.prefix + key
        for k, v in self.overrides.items():
            if k.lower() == want:
                return k, v
        return None

    def get(self, key: str) -> str | None:
        found = self._override(key)
        if found is not None:
            return found[1]
        value = self.broker.get(key)
        return value if value is not None else DEFAULTS.get(key)

    def is_set(self, key: str) -> bool:
        return self._override(key) is not None or key in self.broker

    def name(self, key: str) -> str:
        found = self._override(key)
        if found is not None:
            return found[0]
        return key if key in self.broker else self.prefix + key

    def jaas(self, mechanism: str) -> tuple[str, str] | None:
        """(key, JAAS text) for ``mechanism``: the per-mechanism listener key first, then
        ``listener.name.<l>.sasl.jaas.config``, then ``sasl.jaas.config``."""
        for key in (f"{mechanism.lower()}.sasl.jaas.config", "sasl.jaas.config"):
            found = self._override(key)
            if found is not None:
                return found
        value = self.broker.get("sasl.jaas.config")
        return None if value is None else ("sasl.jaas.config", value)
