"""Varint codecs used inside record bodies (protobuf-style base-128, zigzag for signed).

Decoders bound the varint length (5 bytes for 32-bit, 10 for 64-bit) and raise
``CorruptRecordError`` instead of running off the buffer, so callers never see IndexError.
"""

from __future__ import annotations

from protocol.errors import CorruptRecordError

from .batch import Buffer


def encode_uvarint(value: int, out: bytearray) -> None:
    if value < 0:
        raise ValueError(f"unsigned varint cannot hold {value}")
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def encode_varint(value: int, out: bytearray) -> None:
    """Zigzag int32 varint (Kafka's ``writeVarint``)."""
    if not -(1 << 31) <= value < (1 << 31):
        raise ValueError(f"varint out of int32 range: {value}")
    encode_uvarint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF, out)


def encode_varlong(value: int, out: bytearray) -> None:
    """Zigzag int64 varint (Kafka's ``writeVarlong``)."""
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError(f"varlong out of int64 range: {value}")
    encode_uvarint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF, out)


def decode_uvarint(buf: Buffer, pos: int, end: int, max_bytes: int = 5) -> tuple[int, int]:
    """Return ``(value, new_pos)``; reads at most ``max_bytes`` bytes before ``end``."""
    result = 0
    shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise CorruptRecordError(f"varint runs past the end of its data at byte {pos}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
    raise CorruptRecordError(f"varint longer than {max_bytes} bytes ending at byte {pos}")


def decode_varint(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    raw, pos = decode_uvarint(buf, pos, end, 5)
    if raw > 0xFFFFFFFF:
        raise CorruptRecordError(f"varint overflows int32 before byte {pos}")
    return (raw >> 1) ^ -(raw & 1), pos


def decode_varlong(buf: Buffer, pos: int, end: int) -> tuple[int, int]:
    raw, pos = decode_uvarint(buf, pos, end, 10)
    if raw > 0xFFFFFFFFFFFFFFFF:
        raise CorruptRecordError(f"varlong overflows int64 before byte {pos}")
    return (raw >> 1) ^ -(raw & 1), pos
