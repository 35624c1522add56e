"""SASL/PLAIN (RFC 4616): ``[authzid] NUL authcid NUL passwd``, checked against the JAAS users.

Messages as Kafka's PlainSaslServer gives them; the password compare is constant-time.
"""

import hmac
from collections.abc import Mapping

from .errors import AuthenticationFailed


def authenticate(message: bytes, users: Mapping[str, str]) -> str:
    """The authenticated user name, or AuthenticationFailed."""
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError:
        raise AuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
    parts = text.split("\0")
    if len(parts) != 3:
        raise AuthenticationFailed(
            f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}"
        )
    authz, username, password = parts
    if not username:
        raise AuthenticationFailed("Authentication failed: username not specified")
    if not password:
        raise AuthenticationFailed("Authentication failed: password not specified")
    expected = users.get(username)
    # Compare even for unknown users so timing does not tell which names exist.
    ok = hmac.compare_digest((expected or "\0").encode(), password.encode())
    if expected is None or not ok:
        raise AuthenticationFailed("Authentication failed: Invalid username or password")
    if authz and authz != username:
        raise AuthenticationFailed(
            "Authentication failed: Client requested an authorization id that is different from "
            "username"
        )
    return username


def client_message(username: str, password: str) -> bytes:
    return f"\0{username}\0{password}".encode()
