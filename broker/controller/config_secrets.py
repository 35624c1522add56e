"""Sensitive config values at rest: encoded when the controller writes a ConfigRecord, decoded
when the metadata image applies one, so ``__cluster_metadata`` holds ciphertext while the image
(what every reader sees) holds the value.

Sensitive: a mirror's secrets (``mirror_config.is_sensitive``) and PASSWORD-typed broker keys
stored as dynamic broker configs. Without ``password.encoder.secret`` values are stored as Kafka's
KRaft mode stores them, in plain text, with one warning. A value a node cannot decode (no secret,
or not the one it was encoded with) is logged as an ERROR and left out of the image; the record
stays in the log, untouched, for a node that has the secret.
"""

import logging
from typing import Final

from ..config.catalog import BROKER_KEYS, TOPIC_KEYS
from ..metadata.image import BROKER_RESOURCE, MIRROR_RESOURCE, TOPIC_RESOURCE
from ..security.password_encoder import (
    ENCODED_PREFIX,
    PasswordDecodeError,
    PasswordEncoder,
    is_encoded,
)
from . import mirror_config
from .controller import ConfigValidationError

log = logging.getLogger(__name__)

_LISTENER_PREFIX: Final = "listener.name."
_SENSITIVE_BROKER_KEYS: Final = frozenset(k for k, ck in BROKER_KEYS.items() if ck.sensitive)


def is_sensitive(resource_type: int, key: str) -> bool:
    if resource_type == MIRROR_RESOURCE:
        return mirror_config.is_sensitive(key)
    if resource_type == BROKER_RESOURCE:
        if key.startswith(_LISTENER_PREFIX):  # listener.name.<l>[.<mechanism>].<key>
            return any(key.endswith("." + k) for k in _SENSITIVE_BROKER_KEYS)
        return key in _SENSITIVE_BROKER_KEYS
    if resource_type == TOPIC_RESOURCE:
        tk = TOPIC_KEYS.get(key)
        return tk is not None and tk.sensitive
    return False


def describe_resource(resource_type: int, name: str) -> str:
    """How log lines name a config resource: "mirror dr", "broker 1"."""
    if resource_type == MIRROR_RESOURCE:
        return f"mirror {name}"
    if resource_type == BROKER_RESOURCE:
        return f"broker {name}" if name else "the cluster-wide broker defaults"
    if resource_type == TOPIC_RESOURCE:
        return f"topic {name}"
    return f"resource {resource_type}/{name}"


class ConfigSecrets:
    """The node's view of secrets at rest: ``seal`` for the controller, ``open`` for the image."""

    def __init__(self, encoder: PasswordEncoder | None) -> None:
        self._encoder = encoder
        self._warned_plain = False  # "no secret: stored unencrypted" is said once per process
        self._warned: set[tuple[int, str, str]] = set()  # per-key warnings already given
        # keys whose stored value is plain text or uses the old secret although a secret is set
        self._stale: set[tuple[int, str, str]] = set()

    def seal(self, resource_type: int, name: str, key: str, value: str) -> str:
        """The value to store in a ConfigRecord for ``key=value``."""
        if not is_sensitive(resource_type, key):
            return value
        if self._encoder is not None:
            return self._encoder.encode(value)
        if is_encoded(value):
            # stored as is, it would read back as an encoded value this node cannot decode
            raise ConfigValidationError(
                f"A value of {key} must not start with {ENCODED_PREFIX} "
                "unless password.encoder.secret is set"
            )
        self._warn_plain(resource_type, name, key)
        return value

    def is_stale(self, resource_type: int, name: str, key: str) -> bool:
        return (resource_type, name, key) in self._stale

    def open(self, resource_type: int, name: str, key: str, stored: str) -> str | None:
        """The value ``stored`` stands for, or None (logged) when this node cannot decode it."""
        where = (resource_type, name, key)
        self._stale.discard(where)
        if not is_encoded(stored):
            if is_sensitive(resource_type, key):
                self._warn_legacy(resource_type, name, key)
                if self._encoder is not None:
                    self._stale.add(where)
            return stored
        what = f"{describe_resource(resource_type, name)}'s {key}"
        if self._encoder is None:
            log.error(
                "cannot decode %s: password.encoder.secret is not set (the value stays in "
                "__cluster_metadata; the config is treated as absent)",
                what,
            )
            return None
        try:
            decoded = self._encoder.decode(stored)
        except PasswordDecodeError as e:
            log.error(
                "cannot decode %s: %s (the value stays in __cluster_metadata; the config is "
                "treated as absent)",
                what,
                e,
            )
            return None
        if decoded.with_old_secret:
            self._stale.add(where)
            if self._first(resource_type, name, key):
                log.warning(
                    "%s is encoded with password.encoder.old.secret: set it again (any alter of "
                    "its configs re-encodes it) before removing the old secret",
                    what,
                )
        return decoded.value

    def _first(self, resource_type: int, name: str, key: str) -> bool:
        if (resource_type, name, key) in self._warned:
            return False
        self._warned.add((resource_type, name, key))
        return True

    def _warn_plain(self, resource_type: int, name: str, key: str) -> None:
        if not self._warned_plain:
            self._warned_plain = True
            log.warning(
                "password.encoder.secret is not set: sensitive configs (such as %s's %s) are "
                "stored unencrypted in __cluster_metadata",
                describe_resource(resource_type, name),
                key,
            )

    def _warn_legacy(self, resource_type: int, name: str, key: str) -> None:
        if self._encoder is None:
            self._warn_plain(resource_type, name, key)
        elif self._first(resource_type, name, key):
            log.warning(
                "%s's %s is stored unencrypted (written before password.encoder.secret was "
                "set): set it again to encrypt it (any alter of its configs does)",
                describe_resource(resource_type, name),
                key,
            )
