"""Decode the records inside one batch (for tools such as dump-log, and for tests).

This is a per-record Python loop: keep it off the hot paths. Every malformation surfaces as
``CorruptRecordError`` carrying the batch position.
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec

from protocol.errors import CorruptRecordError

from .batch import BatchView, Buffer
from .codecs import DEFAULT_MAX_DECOMPRESSED, decompress
from .varint import decode_varint, decode_varlong


class DecodedRecord(msgspec.Struct, frozen=True):
    offset: int
    # With LogAppendTime this is the batch's max_timestamp, as Kafka's readers report it.
    timestamp: int
    key: bytes | None
    value: bytes | None
    # Header keys stay bytes: librdkafka allows any bytes there, and tools must not choke.
    headers: tuple[tuple[bytes, bytes | None], ...]
    attributes: int
    offset_delta: int
    timestamp_delta: int


def _read_bytes(data: Buffer, pos: int, end: int) -> tuple[bytes | None, int]:
    n, pos = decode_varint(data, pos, end)
    if n < 0:  # Kafka reads any negative length as null
        return None, pos
    if pos + n > end:
        raise CorruptRecordError(f"field of {n} bytes overruns its record at byte {pos}")
    return bytes(data[pos : pos + n]), pos + n


def iter_records(
    batch: BatchView, *, max_decompressed: int = DEFAULT_MAX_DECOMPRESSED
) -> Iterator[DecodedRecord]:
    """Yield each record of ``batch``, decompressing the payload first if needed."""
    where = batch.position
    try:
        yield from _decode(batch, max_decompressed)
    except CorruptRecordError as exc:
        if exc.position is None:
            raise CorruptRecordError(f"batch at byte {where}: {exc}", where) from exc
        raise


def _decode(batch: BatchView, max_decompressed: int) -> Iterator[DecodedRecord]:
    codec = batch.compression
    payload = batch.records_payload
    data: Buffer = decompress(codec, payload, max_size=max_decompressed) if codec else payload
    count = batch.record_count
    if count < 0:
        raise CorruptRecordError(f"negative record count {count}")
    base_offset = batch.base_offset
    base_timestamp = batch.base_timestamp
    append_time = batch.max_timestamp if batch.timestamp_type == 1 else None
    end = len(data)
    pos = 0
    for index in range(count):
        if pos >= end:
            raise CorruptRecordError(f"declares {count} records but the data ends after {index}")
        length, pos = decode_varint(data, pos, end)
        body_end = pos + length
        if length < 1 or body_end > end:
            raise CorruptRecordError(f"record {index} has a bad length {length}")
        attributes = data[pos]
        pos += 1
        timestamp_delta, pos = decode_varlong(data, pos, body_end)
        offset_delta, pos = decode_varint(data, pos, body_end)
        key, pos = _read_bytes(data, pos, body_end)
        value, pos = _read_bytes(data, pos, body_end)
        n_headers, pos = decode_varint(data, pos, body_end)
        if n_headers < 0:
            raise CorruptRecordError(f"record {index} has a negative header count")
        headers: list[tuple[bytes, bytes | None]] = []
        for _ in range(n_headers):
            hkey, pos = _read_bytes(data, pos, body_end)
            if hkey is None:
                raise CorruptRecordError(f"record {index} has a null header key")
            hvalue, pos = _read_bytes(data, pos, body_end)
            headers.append((hkey, hvalue))
        if pos != body_end:
            raise CorruptRecordError(
                f"record {index} declares {length} bytes but its fields use "
                f"{length - (body_end - pos)}"
            )
        yield DecodedRecord(
            offset=base_offset + offset_delta,
            timestamp=append_time if append_time is not None else base_timestamp + timestamp_delta,
            key=key,
            value=value,
            headers=tuple(headers),
            attributes=attributes - 256 if attributes > 127 else attributes,
            offset_delta=offset_delta,
            timestamp_delta=timestamp_delta,
        )
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes follow the {count} declared records")
