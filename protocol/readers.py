"""Bounds-checked primitive readers over buffers, shared by the header parser and lenient decoder.

Every reader takes ``(buf, pos)`` and returns ``(value, new_pos)``; running off the end raises
`TruncatedError` naming what was being read, never IndexError or struct.error.
"""

import struct
import uuid
from typing import Final

from .errors import DecodeError, TruncatedError

Buffer = bytes | bytearray | memoryview

_I8: Final = struct.Struct(">b")
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")
_U8: Final = struct.Struct(">B")
_U16: Final = struct.Struct(">H")
_U32: Final = struct.Struct(">I")
_U64: Final = struct.Struct(">Q")
_F64: Final = struct.Struct(">d")

FIXED: Final = {
    "int8": _I8,
    "int16": _I16,
    "int32": _I32,
    "int64": _I64,
    "uint8": _U8,
    "uint16": _U16,
    "uint32": _U32,
    "uint64": _U64,
    "float64": _F64,
}


def read_fixed(s: struct.Struct, buf: Buffer, pos: int, what: str = "field") -> tuple[int, int]:
    end = pos + s.size
    if end > len(buf):
        raise TruncatedError(f"buffer ends inside {what} at byte {pos}")
    return s.unpack_from(buf, pos)[0], end


def read_int16(buf: Buffer, pos: int, what: str = "int16") -> tuple[int, int]:
    return read_fixed(_I16, buf, pos, what)


def read_int32(buf: Buffer, pos: int, what: str = "int32") -> tuple[int, int]:
    return read_fixed(_I32, buf, pos, what)


def read_uvarint(buf: Buffer, pos: int, what: str = "varint") -> tuple[int, int]:
    result = 0
    shift = 0
    n = len(buf)
    while True:
        if pos >= n:
            raise TruncatedError(f"buffer ends inside {what} at byte {pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise DecodeError(f"{what}: unsigned varint longer than 10 bytes")


def _take(buf: Buffer, pos: int, length: int, what: str) -> tuple[bytes, int]:
    end = pos + length
    if end > len(buf):
        raise TruncatedError(f"{what}: {length} bytes declared but only {len(buf) - pos} remain")
    return bytes(buf[pos:end]), end


def _decode_str(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise DecodeError(f"{what}: invalid UTF-8 ({e.reason})") from None


def read_legacy_bytes(buf: Buffer, pos: int, what: str = "bytes") -> tuple[bytes | None, int]:
    length, pos = read_int32(buf, pos, what)
    if length == -1:
        return None, pos
    if length < 0:
        raise DecodeError(f"{what}: negative length {length}")
    return _take(buf, pos, length, what)


def read_compact_bytes(buf: Buffer, pos: int, what: str = "bytes") -> tuple[bytes | None, int]:
    length, pos = read_uvarint(buf, pos, what)
    if length == 0:
        return None, pos
    return _take(buf, pos, length - 1, what)


def read_legacy_string(buf: Buffer, pos: int, what: str = "string") -> tuple[str | None, int]:
    length, pos = read_int16(buf, pos, what)
    if length == -1:
        return None, pos
    if length < 0:
        raise DecodeError(f"{what}: negative length {length}")
    raw, pos = _take(buf, pos, length, what)
    return _decode_str(raw, what), pos


def read_compact_string(buf: Buffer, pos: int, what: str = "string") -> tuple[str | None, int]:
    raw, pos = read_compact_bytes(buf, pos, what)
    if raw is None:
        return None, pos
    return _decode_str(raw, what), pos


def read_uuid(buf: Buffer, pos: int, what: str = "uuid") -> tuple[uuid.UUID | None, int]:
    raw, pos = _take(buf, pos, 16, what)
    if raw == bytes(16):
        return None, pos  # kio models the zero UUID as None
    return uuid.UUID(bytes=raw), pos


def skip_tagged_fields(buf: Buffer, pos: int, what: str = "tagged fields") -> int:
    """Skip a whole tagged-field section; unknown tags are ignored as the protocol requires."""
    count, pos = read_uvarint(buf, pos, what)
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos, what)
        size, pos = read_uvarint(buf, pos, what)
        if pos + size > len(buf):
            raise TruncatedError(f"{what}: tagged field of {size} bytes runs past the end")
        pos += size
    return pos
