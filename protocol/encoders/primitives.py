"""Shared building blocks for the hand-written encoders: fixed-width structs, varints, strings.

Every function returns ``bytes`` (or appends to a list) so callers can collect small pieces and
join them once. The wire forms match kio's writer byte for byte: compact lengths are ``n + 1``
(0 means null), legacy strings use an int16 length, legacy bytes/arrays an int32 length (-1 null),
and a null UUID is written as sixteen zero bytes.
"""

import datetime
import struct
import uuid
from collections.abc import Iterable, Sequence
from typing import Final

Buffer = bytes | bytearray | memoryview

I8: Final = struct.Struct(">b")
I16: Final = struct.Struct(">h")
I32: Final = struct.Struct(">i")
I64: Final = struct.Struct(">q")
U8: Final = struct.Struct(">B")
BOOL: Final = struct.Struct(">?")
I32_I32: Final = struct.Struct(">ii")
I64_I64: Final = struct.Struct(">qq")
I64_I32: Final = struct.Struct(">qi")
I32_I64: Final = struct.Struct(">iq")

# A flexible struct with no tagged fields ends with a zero count; a null compact field is 0 too.
EMPTY_TAGS: Final = b"\x00"
NULL_COMPACT: Final = b"\x00"
NULL_LEGACY_STRING: Final = b"\xff\xff"
NULL_LEGACY_BYTES: Final = b"\xff\xff\xff\xff"
ZERO_UUID: Final = bytes(16)

# Lengths and counts are almost always small; a lookup beats building the varint each time.
_UVARINT_TABLE_SIZE: Final = 1 << 14  # every one- and two-byte varint


def _build_uvarint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_UVARINT_TABLE: Final = tuple(_build_uvarint(i) for i in range(_UVARINT_TABLE_SIZE))


def uvarint(value: int) -> bytes:
    """Unsigned LEB128 varint, as Kafka's ``writeUnsignedVarint``."""
    if value < _UVARINT_TABLE_SIZE:
        if value < 0:
            raise ValueError(f"unsigned varint cannot encode {value}")
        return _UVARINT_TABLE[value]
    if value < 1 << 21:  # record set sizes up to 2 MiB
        return bytes((value & 0x7F | 0x80, (value >> 7) & 0x7F | 0x80, value >> 14))
    if value < 1 << 28:
        return bytes(
            (
                value & 0x7F | 0x80,
                (value >> 7) & 0x7F | 0x80,
                (value >> 14) & 0x7F | 0x80,
                value >> 21,
            )
        )
    return _build_uvarint(value)


def compact_len(length: int | None) -> bytes:
    """Compact array/string length prefix: ``n + 1``, or 0 for null."""
    if length is None:
        return NULL_COMPACT
    return uvarint(length + 1)


def legacy_array_len(length: int | None) -> bytes:
    return NULL_LEGACY_BYTES if length is None else I32.pack(length)


def compact_string(value: str) -> bytes:
    raw = value.encode()
    return uvarint(len(raw) + 1) + raw


def compact_nullable_string(value: str | None) -> bytes:
    if value is None:
        return NULL_COMPACT
    raw = value.encode()
    return uvarint(len(raw) + 1) + raw


def legacy_string(value: str) -> bytes:
    raw = value.encode()
    if len(raw) > 0x7FFF:
        raise ValueError(f"string of {len(raw)} bytes is too long for an int16 length")
    return I16.pack(len(raw)) + raw


def legacy_nullable_string(value: str | None) -> bytes:
    if value is None:
        return NULL_LEGACY_STRING
    return legacy_string(value)


def compact_nullable_bytes(value: Buffer | None) -> bytes:
    if value is None:
        return NULL_COMPACT
    return uvarint(len(value) + 1) + bytes(value)


def legacy_nullable_bytes(value: Buffer | None) -> bytes:
    if value is None:
        return NULL_LEGACY_BYTES
    return I32.pack(len(value)) + bytes(value)


def uuid_bytes(value: uuid.UUID | None) -> bytes:
    return ZERO_UUID if value is None else value.bytes


def compact_int32_array(values: Sequence[int]) -> bytes:
    n = len(values)
    return uvarint(n + 1) + struct.pack(f">{n}i", *values)


def legacy_int32_array(values: Sequence[int]) -> bytes:
    n = len(values)
    return struct.pack(f">i{n}i", n, *values)


def millis(value: datetime.timedelta) -> int:
    """Duration in whole milliseconds, rounded exactly as kio does."""
    return round(value.total_seconds() * 1000)


def tagged_fields(fields: Iterable[tuple[int, bytes]]) -> bytes:
    """A whole tagged-field section: count, then per tag (ascending) tag, size and payload."""
    items = sorted(fields, key=_tag_key)
    if not items:
        return EMPTY_TAGS
    parts = [uvarint(len(items))]
    last = -1
    for tag, payload in items:
        if tag == last:
            raise ValueError(f"tag {tag} appears twice in one tagged-field section")
        last = tag
        parts.append(uvarint(tag))
        parts.append(uvarint(len(payload)))
        parts.append(payload)
    return b"".join(parts)


def _tag_key(item: tuple[int, bytes]) -> int:
    return item[0]
