"""Bounds-checked readers for the hand-written request parsers (Produce, Fetch).

Lengths, counts and tag sections are nearly always one-byte varints, so the common case is read
inline and the general reader is the fallback. Errors name the field; callers prefix the request.
Array counts are checked against the bytes left, so a forged count never allocates.
"""

import struct
import uuid
from typing import Final

from ..errors import DecodeError, TruncatedError
from ..readers import read_fixed, read_uvarint

I32: Final = struct.Struct(">i")


# Building a UUID costs about as much as the rest of a parse, and producers send to few topics.
_UUID_CACHE_LIMIT: Final = 4096
_uuid_cache: dict[bytes, uuid.UUID] = {}


def topic_id_of(raw: bytes) -> uuid.UUID:
    value = _uuid_cache.get(raw)
    if value is None:
        if len(_uuid_cache) >= _UUID_CACHE_LIMIT:
            _uuid_cache.clear()
        value = _uuid_cache[raw] = uuid.UUID(bytes=raw)
    return value


def read_count(mv: memoryview, pos: int, n: int, flexible: bool, what: str) -> tuple[int, int]:
    if flexible:
        if pos < n and (b := mv[pos]) < 0x80:
            count = b - 1
            pos += 1
        else:
            count, pos = read_uvarint(mv, pos, f"{what} count")
            count -= 1
    else:
        count, pos = read_fixed(I32, mv, pos, f"{what} count")
    if count < 0:
        raise DecodeError(f"{what} array is null or negative ({count})")
    if count > n - pos:
        raise TruncatedError(f"{what}: {count} elements declared but only {n - pos} bytes remain")
    return count, pos


def read_text(mv: memoryview, pos: int, n: int, length: int, what: str) -> tuple[str, int]:
    end = pos + length
    if end > n:
        raise TruncatedError(f"{what} declares {length} bytes but only {n - pos} remain")
    try:
        return str(mv[pos:end], "utf-8"), end
    except UnicodeDecodeError as e:
        raise DecodeError(f"{what} is not valid UTF-8 ({e.reason})") from None
