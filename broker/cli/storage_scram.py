"""``kafka-storage.sh format --add-scram``: SCRAM credentials written at format time (KIP-900),
in Kafka's syntax::

    --add-scram 'SCRAM-SHA-256=[name=alice,password=alice-secret]'
    --add-scram 'SCRAM-SHA-512=[name=alice,iterations=8192,salt="MWx2NHBkbnc0ZndxN25vdGN4bTB5eTFrN3E=",saltedpassword="mT0yyUUxnlJaC99HXgRTSYlbuqa4FSGtJCJfTMvjYCE="]'

``name`` is required; ``password``, or ``saltedpassword`` with ``salt`` (both base64); ``salt``
(base64) is random when absent, ``iterations`` 4096 when absent (4096..16384). A value may be
double-quoted. Each argument becomes one UserScramCredentialRecord.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from typing import Any, Final

from broker.security import scram
from protocol.metadata_records import latest_type

UserScramCredentialRecord = latest_type("UserScramCredentialRecord")
DEFAULT_ITERATIONS: Final = 4096
_SALT_BYTES: Final = 32  # Kafka's ScramFormatter draws this many


class ScramArgumentError(ValueError):
    pass


def _components(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.split(","):
        key, eq, value = part.partition("=")
        if not eq:
            raise ScramArgumentError(f"No equals sign found in SCRAM component: {part}")
        if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
            value = value[1:-1]
        out[key] = value
    return out


def _b64(what: str, value: str) -> bytes:
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ScramArgumentError(f"Failed to decode given {what}: {value}") from None


def scram_record(argument: str) -> Any:
    """One ``--add-scram`` argument -> its UserScramCredentialRecord."""
    text = argument.strip()
    mech_name, eq, config = text.partition("=")
    if not eq:
        raise ScramArgumentError(f"Failed to find equals sign in SCRAM argument '{text}'")
    mechanism = scram.MECHANISMS.get(mech_name)
    if mechanism is None:
        raise ScramArgumentError(f"The add-scram mechanism {mech_name} is not supported.")
    if not config.startswith("["):
        raise ScramArgumentError("Expected configuration string to start with [")
    if not config.endswith("]"):
        raise ScramArgumentError("Expected configuration string to end with ]")
    parts = _components(config[1:-1])
    name = parts.pop("name", None)
    if name is None:
        raise ScramArgumentError("You must supply 'name' to add-scram")
    salt_text = parts.pop("salt", None)
    salt = _b64("salt", salt_text) if salt_text is not None else None
    iterations_text = parts.pop("iterations", None)
    try:
        iterations = DEFAULT_ITERATIONS if iterations_text is None else int(iterations_text)
    except ValueError:
        raise ScramArgumentError(f"Failed to parse iterations count: {iterations_text}") from None
    password = parts.pop("password", None)
    salted_text = parts.pop("saltedpassword", None)
    if password is None:
        if salted_text is None:
            raise ScramArgumentError(
                "You must supply one of 'password' or 'saltedpassword' to add-scram"
            )
        if salt is None:
            raise ScramArgumentError("You must supply 'salt' with 'saltedpassword' to add-scram")
    if parts:
        raise ScramArgumentError(f"Unknown SCRAM configurations: {', '.join(sorted(parts))}")
    if iterations < scram.MIN_ITERATIONS:
        raise ScramArgumentError(
            f"The 'iterations' value must be >= {scram.MIN_ITERATIONS} for add-scram using "
            f"{mechanism.name}"
        )
    if iterations > scram.MAX_ITERATIONS:
        raise ScramArgumentError(
            f"The 'iterations' value must be <= {scram.MAX_ITERATIONS} for add-scram using "
            f"{mechanism.name}"
        )
    if salt is None:
        salt = secrets.token_bytes(_SALT_BYTES)
    if password is not None:
        salted = scram.salted_password(mechanism, password, salt, iterations)
    else:
        assert salted_text is not None
        salted = _b64("saltedPassword", salted_text)
    cred = scram.credential_from_salted(mechanism, salted, salt, iterations)
    return UserScramCredentialRecord(
        name=name,
        mechanism=mechanism.type,
        salt=cred.salt,
        stored_key=cred.stored_key,
        server_key=cred.server_key,
        iterations=iterations,
    )
