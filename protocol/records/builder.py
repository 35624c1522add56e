"""Build v2 record batches byte-for-byte as Kafka writes them.

For tests, control records and internal topics (offsets, transactions, mirror state); client
data on the hot paths is never rebuilt, it stays the producer's bytes.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence

import msgspec
from crc32c import crc32c

from .batch import (
    CONTROL_MASK,
    CRC_OFFSET,
    CRC_START,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC_V2,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
)
from .codecs import Compression, compress
from .varint import encode_varint, encode_varlong

_U32 = struct.Struct(">I")

HeaderKey = str | bytes


class Record(msgspec.Struct, frozen=True):
    """One record to put in a batch.

    ``offset_delta`` defaults to the record's index in the batch; set it to leave gaps (as
    compaction does). Header keys are strings on the wire; ``str`` keys are UTF-8 encoded.
    """

    key: bytes | None = None
    value: bytes | None = None
    headers: tuple[tuple[HeaderKey, bytes | None], ...] = ()
    timestamp_delta: int = 0
    offset_delta: int | None = None


def now_ms() -> int:
    return int(time.time() * 1000)


def _put_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        encode_varint(-1, out)
    else:
        encode_varint(len(data), out)
        out += data


def encode_records(records: Sequence[Record]) -> bytes:
    """The uncompressed record section of a batch (what follows the 61-byte header)."""
    out = bytearray()
    body = bytearray()
    for index, rec in enumerate(records):
        body.clear()
        body.append(0)  # record attributes: unused, always 0
        encode_varlong(rec.timestamp_delta, body)
        encode_varint(index if rec.offset_delta is None else rec.offset_delta, body)
        _put_bytes(body, rec.key)
        _put_bytes(body, rec.value)
        encode_varint(len(rec.headers), body)
        for hkey, hvalue in rec.headers:
            hk = hkey.encode() if isinstance(hkey, str) else hkey
            _put_bytes(body, hk)
            _put_bytes(body, hvalue)
        encode_varint(len(body), out)
        out += body
    return bytes(out)


def build_batch(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    compression: Compression = Compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    log_append_time: bool = False,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    xerial_snappy: bool = False,
) -> bytes:
    """Encode one magic-2 batch with its CRC32C filled in.

    ``base_timestamp`` defaults to now. ``max_timestamp`` defaults to the largest record
    timestamp, or, with ``log_append_time``, to now (Kafka stores the append time there and
    readers report it as every record's timestamp). No semantic checks beyond the wire
    ranges: tests may build odd batches on purpose.
    """
    if not records:
        raise ValueError("a record batch needs at least one record")
    if base_timestamp is None:
        base_timestamp = now_ms()
    if max_timestamp is None:
        if log_append_time:
            max_timestamp = now_ms()
        else:
            max_timestamp = base_timestamp + max(r.timestamp_delta for r in records)
    if last_offset_delta is None:
        last_offset_delta = max(
            i if r.offset_delta is None else r.offset_delta for i, r in enumerate(records)
        )
    attributes = int(compression) & 0x07
    if log_append_time:
        attributes |= TIMESTAMP_TYPE_MASK
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK

    payload = encode_records(records)
    if compression != Compression.NONE:
        payload = compress(compression, payload, xerial=xerial_snappy)

    buf = bytearray(HEADER_SIZE + len(payload))
    try:
        HEADER_STRUCT.pack_into(
            buf,
            0,
            base_offset,
            len(buf) - LOG_OVERHEAD,
            partition_leader_epoch,
            MAGIC_V2,
            0,  # CRC, filled in below once the covered bytes are final
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
    except struct.error as exc:
        raise ValueError(f"batch header field out of range: {exc}") from exc
    buf[HEADER_SIZE:] = payload
    _U32.pack_into(buf, CRC_OFFSET, crc32c(memoryview(buf)[CRC_START:]))
    return bytes(buf)
