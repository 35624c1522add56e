"""Kafka's coordinator record framing, shared by every coordinator's internal topic.

A key is an int16 record type then the key struct; a value is an int16 version then the value
struct; a tombstone has no value. Decoding goes through the bounds-checked lenient reader: these
bytes come from disk, and a damaged record must fail its load, not the process.
"""

import io
import struct
from typing import Any, Final

from kio.serial import entity_writer

from protocol import lenient
from protocol.errors import ProtocolError

I16: Final = struct.Struct(">h")


class RecordFormatError(ValueError):
    pass


def encode_prefixed(prefix: int, entity: Any) -> bytes:
    out = io.BytesIO()
    out.write(I16.pack(prefix))
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


def decode_prefixed(entity_type: type, buf: bytes) -> Any:
    """The struct after the 2-byte prefix; it must fill the rest of ``buf``."""
    try:
        value, end = lenient.decode(entity_type, buf, 2)
    except ProtocolError as e:
        raise RecordFormatError(f"{entity_type.__name__}: {e}") from None
    if end != len(buf):
        raise RecordFormatError(f"{entity_type.__name__}: {len(buf) - end} trailing bytes")
    return value
