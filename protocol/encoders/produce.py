"""Produce: the response body encoder from the broker's rows (v3-v13) and a zero-copy request
body parser.

Response versions (Kafka's ProduceResponse.json as kio 0.6.5 generates it): v5 adds
log_start_offset, v8 record_errors and error_message, v9 goes flexible, v10 adds the partition
tag 0 current_leader and the top-level tag 0 node_endpoints, v13 replaces topic names by ids.

The request parser returns views: each partition's records are a memoryview into the caller's
frame, never copied, so a 1 MiB batch costs the same as an empty one. Unknown tagged fields are
skipped as the protocol requires (no Produce request version defines any). Malformed input
raises `DecodeError` or `TruncatedError` naming the field being read.
"""

import struct
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..errors import DecodeError, TruncatedError
from ..readers import read_fixed, read_uvarint, skip_tagged_fields
from .primitives import (
    EMPTY_TAGS,
    I32,
    Buffer,
    compact_nullable_string,
    compact_string,
    legacy_nullable_string,
    legacy_string,
    uuid_bytes,
    uvarint,
)
from .request_readers import read_count, read_text, topic_id_of

PRODUCE_API_KEY: Final = 0
MIN_VERSION: Final = 3
MAX_VERSION: Final = 13

_PART_V3: Final = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time
_PART_V5: Final = struct.Struct(">ihqqq")  # ... + log_start_offset


def encode_produce_rows(topics: Sequence[dict[str, Any]], throttle_ms: int, version: int) -> bytes:
    """The same body straight from the broker's rows, with no kio objects in between (building
    them cost as much as appending for a request to many partitions). A topic row: ``name``,
    ``topic_id``, ``partitions``; a partition row: ``index``, ``base_offset``,
    ``log_append_time`` (epoch ms, -1: none), ``log_start_offset`` and, when set,
    ``error_code``, ``error_message`` and ``record_errors`` ((batch index, message) pairs). No
    ``current_leader`` or ``node_endpoints``: the broker sends neither."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"Produce: version {version} outside {MIN_VERSION}-{MAX_VERSION}")
    flexible = version >= 9
    out: list[bytes] = []
    put = out.append
    put(uvarint(len(topics) + 1) if flexible else I32.pack(len(topics)))
    for t in topics:
        if version >= 13:
            put(uuid_bytes(t["topic_id"]))
        elif flexible:
            put(compact_string(t["name"] or ""))
        else:
            put(legacy_string(t["name"] or ""))
        partitions = t["partitions"]
        put(uvarint(len(partitions) + 1) if flexible else I32.pack(len(partitions)))
        for p in partitions:
            code = int(p.get("error_code", 0))
            if version >= 5:
                put(
                    _PART_V5.pack(
                        p["index"],
                        code,
                        p["base_offset"],
                        p["log_append_time"],
                        p["log_start_offset"],
                    )
                )
            else:
                put(_PART_V3.pack(p["index"], code, p["base_offset"], p["log_append_time"]))
            if version >= 8:
                errors = p.get("record_errors", ())
                message = p.get("error_message")
                if flexible:
                    put(uvarint(len(errors) + 1))
                    for index, text in errors:
                        put(I32.pack(index))
                        put(compact_nullable_string(text))
                        put(EMPTY_TAGS)
                    put(compact_nullable_string(message))
                else:
                    put(I32.pack(len(errors)))
                    for index, text in errors:
                        put(I32.pack(index))
                        put(legacy_nullable_string(text))
                    put(legacy_nullable_string(message))
            if flexible:
                put(EMPTY_TAGS)
        if flexible:
            put(EMPTY_TAGS)
    put(I32.pack(throttle_ms))
    if flexible:
        put(EMPTY_TAGS)
    return b"".join(out)


# --------------------------------------------------------------------------- request parser


# Plain slotted classes (not frozen, not NamedTuple): the cheapest to build, and a request
# yields one per partition. Treat them as read-only.
@dataclass(slots=True)
class ProducePartitionView:
    index: int
    records: memoryview | None  # a slice of the request frame; None when sent as null


@dataclass(slots=True)
class ProduceTopicView:
    name: str | None  # v3-v12
    topic_id: uuid.UUID | None  # v13+ (None also for the all-zero id, as kio reads it)
    partitions: list[ProducePartitionView]


@dataclass(slots=True)
class ProduceRequestView:
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topics: list[ProduceTopicView]
    end: int  # offset just past the request body


_ACKS_TIMEOUT: Final = struct.Struct(">hi")
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_ZERO_UUID: Final = bytes(16)


def parse_produce_request(buf: Buffer, offset: int, version: int) -> ProduceRequestView:
    """Parse a Produce request body starting at ``offset`` (just after the request header).

    Records stay memoryviews into ``buf``. Unknown tagged fields are skipped; malformed input
    raises `DecodeError`/`TruncatedError` with a message naming the field.
    """
    try:
        return _parse(buf, offset, version)
    except (DecodeError, TruncatedError) as e:
        raise type(e)(f"produce request: {e}") from None


def _parse(buf: Buffer, offset: int, version: int) -> ProduceRequestView:
    """Parse a Produce request body starting at ``offset`` (just after the request header).

    Lengths, counts and tag sections are nearly always one-byte varints, so each is read
    inline with a fallback to the general reader; this keeps a parse to a few microseconds.
    """
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"Produce: version {version} outside {MIN_VERSION}-{MAX_VERSION}")
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    if mv.ndim != 1 or mv.itemsize != 1:
        mv = mv.cast("B")
    n = len(mv)
    flexible = version >= 9
    by_id = version >= 13
    pos = offset
    if pos < 0 or pos > n:
        raise TruncatedError(f"offset {pos} outside a buffer of {n} bytes")

    # transactional_id: nullable string
    if not flexible:
        length, pos = read_fixed(_I16, mv, pos, "transactional_id length")
    elif pos < n and (b := mv[pos]) < 0x80:
        length = b - 1
        pos += 1
    else:
        length, pos = read_uvarint(mv, pos, "transactional_id length")
        length -= 1
    transactional_id: str | None = None
    if length >= 0:
        transactional_id, pos = read_text(mv, pos, n, length, "transactional_id")
    elif length != -1:
        raise DecodeError(f"transactional_id has negative length {length}")

    if pos + 6 > n:
        raise TruncatedError(f"buffer ends inside acks/timeout at byte {pos}")
    acks, timeout_ms = _ACKS_TIMEOUT.unpack_from(mv, pos)
    pos += 6

    topic_count, pos = read_count(mv, pos, n, flexible, "topic_data")
    topics: list[ProduceTopicView] = []
    for _ in range(topic_count):
        name: str | None = None
        topic_id: uuid.UUID | None = None
        if by_id:
            if pos + 16 > n:
                raise TruncatedError(f"buffer ends inside topic_id at byte {pos}")
            raw = mv[pos : pos + 16].tobytes()
            pos += 16
            if raw != _ZERO_UUID:
                topic_id = topic_id_of(raw)
        else:
            if not flexible:
                length, pos = read_fixed(_I16, mv, pos, "topic name length")
            elif pos < n and (b := mv[pos]) < 0x80:
                length = b - 1
                pos += 1
            else:
                length, pos = read_uvarint(mv, pos, "topic name length")
                length -= 1
            if length < 0:
                raise DecodeError(f"topic name has length {length} (null)")
            name, pos = read_text(mv, pos, n, length, "topic name")

        part_count, pos = read_count(mv, pos, n, flexible, "partition_data")
        partitions: list[ProducePartitionView] = []
        for _ in range(part_count):
            if pos + 4 > n:
                raise TruncatedError(f"buffer ends inside partition index at byte {pos}")
            index = _I32.unpack_from(mv, pos)[0]
            pos += 4
            if not flexible:
                size, pos = read_fixed(_I32, mv, pos, "records length")
            elif pos < n and (b := mv[pos]) < 0x80:
                size = b - 1
                pos += 1
            else:
                size, pos = read_uvarint(mv, pos, "records length")
                size -= 1
            records: memoryview | None = None
            if size >= 0:
                end = pos + size
                if end > n:
                    raise TruncatedError(
                        f"records of partition {index} declare {size} bytes "
                        f"but only {n - pos} remain"
                    )
                records = mv[pos:end]
                pos = end
            elif size != -1:
                raise DecodeError(f"records have negative length {size}")
            if flexible:
                if pos < n and mv[pos] == 0:
                    pos += 1
                else:
                    pos = skip_tagged_fields(mv, pos, "partition_data tagged fields")
            partitions.append(ProducePartitionView(index, records))
        if flexible:
            if pos < n and mv[pos] == 0:
                pos += 1
            else:
                pos = skip_tagged_fields(mv, pos, "topic_data tagged fields")
        topics.append(ProduceTopicView(name, topic_id, partitions))
    if flexible:
        pos = skip_tagged_fields(mv, pos, "request tagged fields")
    return ProduceRequestView(transactional_id, acks, timeout_ms, topics, pos)
