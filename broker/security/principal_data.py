"""The principal of a forwarded request, as bytes: Kafka's ``DefaultPrincipalData`` serde.

A broker that forwards an admin request to the active controller (Envelope, api key 58) sends the
client's principal along, in the format of Kafka's ``DefaultKafkaPrincipalBuilder``: an int16
version (0) followed by the ``DefaultPrincipalData`` message at that version, which is flexible:

    version int16 | Type compact string | Name compact string | TokenAuthenticated bool | tags

A compact string is its UTF-8 length + 1 as an unsigned varint, then the bytes. Our principals
are ``"<type>:<name>"`` strings (``User:alice``); Kafka's ``KafkaPrincipal.toString`` is the
same, so the type is what precedes the first colon. No delegation tokens exist here, so
``TokenAuthenticated`` is written false and not kept when read.
"""

import struct
from typing import Final

from protocol.encoders.primitives import uvarint
from protocol.errors import ProtocolError
from protocol.readers import read_compact_string, read_fixed, read_int16, skip_tagged_fields

VERSION: Final = 0  # DefaultPrincipalData's only version
_BOOL: Final = struct.Struct(">b")


class PrincipalDataError(ValueError):
    """Bytes that are not a DefaultPrincipalData Kafka would read."""


def _compact_string(value: str) -> bytes:
    raw = value.encode()
    return uvarint(len(raw) + 1) + raw


def serialize_principal(principal: str) -> bytes:
    """``User:alice`` -> the version-prefixed DefaultPrincipalData bytes."""
    kind, sep, name = principal.partition(":")
    if not sep:  # not "<type>:<name>": Kafka could not have built it; keep it readable
        kind, name = "User", principal
    return (
        struct.pack(">h", VERSION)
        + _compact_string(kind)
        + _compact_string(name)
        + b"\x00"  # TokenAuthenticated = false
        + b"\x00"  # no tagged fields
    )


def deserialize_principal(data: bytes | bytearray | memoryview) -> str:
    """The version-prefixed DefaultPrincipalData bytes -> ``User:alice``."""
    try:
        version, pos = read_int16(data, 0, "principal data version")
        if version != VERSION:
            raise PrincipalDataError(f"invalid principal data version {version}")
        kind, pos = read_compact_string(data, pos, "principal type")
        name, pos = read_compact_string(data, pos, "principal name")
        _token, pos = read_fixed(_BOOL, data, pos, "token authenticated flag")
        skip_tagged_fields(data, pos, "principal data tagged fields")
    except ProtocolError as e:
        raise PrincipalDataError(f"cannot read the principal: {e}") from None
    if kind is None or name is None:
        raise PrincipalDataError("the principal's type or name is null")
    return f"{kind}:{name}"
