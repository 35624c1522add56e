"""Fetch response body encoder (v4-v19), from the broker's rows, that never copies record data.

A partition's ``records`` may be None, one buffer (bytes, bytearray or a 1-D byte memoryview)
or a list/tuple of such buffers (several segment slices sent as one record set). The result is
a short list: the small header pieces between two record blobs are joined into one ``bytes`` and
every non-empty record buffer is passed through as its own item, the very object the caller
supplied, so a transport can hand the list to ``writelines``/``sendmsg`` as is. The response
header and the frame size prefix are the caller's job.

Version differences (from Kafka's FetchResponse.json, as kio 0.6.5 generates them):
v5 adds log_start_offset, v7 the top-level error_code and session_id, v11
preferred_read_replica, v12 goes flexible (compact lengths, tagged fields: diverging_epoch,
current_leader, snapshot_id on partitions), v13 replaces topic names with topic ids, v16 adds
the top-level node_endpoints tag and v19 (KIP-1279) the partition tag 3 ``mirror_leader_epoch``.
A tagged field is left out when it holds its default, as kio does.
"""

import struct
from collections.abc import Sequence
from typing import Any, Final

from .primitives import (
    EMPTY_TAGS,
    I32,
    I32_I32,
    I32_I64,
    I64_I32,
    I64_I64,
    NULL_COMPACT,
    NULL_LEGACY_BYTES,
    Buffer,
    compact_string,
    legacy_string,
    uuid_bytes,
    uvarint,
)

FETCH_API_KEY: Final = 1
MIN_VERSION: Final = 4
MAX_VERSION: Final = 19

_TOP_V7: Final = struct.Struct(">ihi")  # throttle_time, error_code, session_id
_PART_V4: Final = struct.Struct(">ihqq")  # index, error_code, high_watermark, last_stable
_PART_V5: Final = struct.Struct(">ihqqq")  # ... + log_start_offset
# A partition with no aborted transactions, in the flexible versions: the fixed fields, a null
# compact array and preferred_read_replica packed in one call (the common case by far).
_PART_FLEX_NO_ABORTED: Final = struct.Struct(">ihqqqBi")

_RECORDS_TYPES: Final = (bytes, bytearray, memoryview)

# Payload sizes of the fixed-size tagged partition fields (nested structs end with EMPTY_TAGS).
_TAG0_HEAD: Final = b"\x00\x0d"  # diverging_epoch: int32 epoch, int64 end_offset, tags
_TAG1_HEAD: Final = b"\x01\x09"  # current_leader: int32 leader_id, int32 leader_epoch, tags
_TAG2_HEAD: Final = b"\x02\x0d"  # snapshot_id: int64 end_offset, int32 epoch, tags
_TAG3_HEAD: Final = b"\x03\x04"  # mirror_leader_epoch: int32


def encode_fetch_rows(
    throttle_ms: int,
    error_code: int,
    session_id: int,
    responses: Sequence[dict[str, Any]],
    version: int,
) -> list[Buffer]:
    """The same body straight from the broker's rows, with no kio objects in between (for a
    follower's fetch of hundreds of partitions, building them cost a tenth of the request).

    A topic row: ``topic_id`` (v13+) or ``topic``, and ``partitions``. A partition row:
    ``partition_index``, ``error_code``, ``high_watermark``, ``last_stable_offset``,
    ``log_start_offset``, ``aborted_transactions`` (None, or dicts of ``producer_id`` and
    ``first_offset``), ``preferred_read_replica``, ``records`` (None, a buffer or
    a list of buffers) and, when set, the tagged ``diverging_epoch`` (``epoch``,
    ``end_offset``), ``current_leader`` (``leader_id``, ``leader_epoch``), ``snapshot_id``
    (``end_offset``, ``epoch``) and ``mirror_leader_epoch``. No ``node_endpoints``."""
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"Fetch response: version {version} outside {MIN_VERSION}-{MAX_VERSION}")
    flexible = version >= 12
    with_log_start = version >= 5
    with_preferred = version >= 11
    with_mirror_epoch = version >= 19
    topic_key = "topic_id" if version >= 13 else "topic"
    out: list[Buffer] = []
    pending: list[bytes] = []  # small pieces written since the last record blob
    put = pending.append
    put(
        _TOP_V7.pack(throttle_ms, error_code, session_id) if version >= 7 else I32.pack(throttle_ms)
    )
    put(uvarint(len(responses) + 1) if flexible else I32.pack(len(responses)))
    for topic in responses:
        key = topic[topic_key]
        if version >= 13:
            put(uuid_bytes(key))
        elif flexible:
            put(compact_string(key))
        else:
            put(legacy_string(key))
        partitions = topic["partitions"]
        put(uvarint(len(partitions) + 1) if flexible else I32.pack(len(partitions)))
        for p in partitions:
            aborted = p["aborted_transactions"]
            if flexible and aborted is None:
                put(
                    _PART_FLEX_NO_ABORTED.pack(
                        p["partition_index"],
                        p["error_code"],
                        p["high_watermark"],
                        p["last_stable_offset"],
                        p["log_start_offset"],
                        0,
                        p["preferred_read_replica"],
                    )
                )
            else:
                if with_log_start:
                    put(
                        _PART_V5.pack(
                            p["partition_index"],
                            p["error_code"],
                            p["high_watermark"],
                            p["last_stable_offset"],
                            p["log_start_offset"],
                        )
                    )
                else:
                    put(
                        _PART_V4.pack(
                            p["partition_index"],
                            p["error_code"],
                            p["high_watermark"],
                            p["last_stable_offset"],
                        )
                    )
                if aborted is None:
                    put(NULL_LEGACY_BYTES)
                elif flexible:
                    put(uvarint(len(aborted) + 1))
                    for txn in aborted:
                        put(I64_I64.pack(txn["producer_id"], txn["first_offset"]))
                        put(EMPTY_TAGS)
                else:
                    put(I32.pack(len(aborted)))
                    for txn in aborted:
                        put(I64_I64.pack(txn["producer_id"], txn["first_offset"]))
                if with_preferred:
                    put(I32.pack(p["preferred_read_replica"]))
            records = p["records"]
            if records is None:
                put(NULL_COMPACT if flexible else NULL_LEGACY_BYTES)
            else:
                if isinstance(records, _RECORDS_TYPES):
                    size = len(records)
                    blobs: Sequence[Buffer] = (records,)
                else:
                    blobs = records
                    size = sum(map(len, blobs))
                put(uvarint(size + 1) if flexible else I32.pack(size))
                if size:
                    out.append(b"".join(pending))
                    pending.clear()
                    if len(blobs) == 1:
                        out.append(blobs[0])
                    else:
                        out.extend(blob for blob in blobs if len(blob))
            if flexible:
                put(_row_tags(p, with_mirror_epoch))
        if flexible:
            put(EMPTY_TAGS)
    if flexible:
        put(EMPTY_TAGS)
    out.append(b"".join(pending))
    return out


def _row_tags(p: dict[str, Any], with_mirror_epoch: bool) -> bytes:
    """A partition row's tagged fields; each left out when absent or at its default (-1s)."""
    pieces: list[bytes] = []
    count = 0
    de = p.get("diverging_epoch")
    if de is not None and (de["epoch"] != -1 or de["end_offset"] != -1):
        pieces += (_TAG0_HEAD, I32_I64.pack(de["epoch"], de["end_offset"]), EMPTY_TAGS)
        count += 1
    cl = p.get("current_leader")
    if cl is not None and (cl["leader_id"] != -1 or cl["leader_epoch"] != -1):
        pieces += (_TAG1_HEAD, I32_I32.pack(cl["leader_id"], cl["leader_epoch"]), EMPTY_TAGS)
        count += 1
    sn = p.get("snapshot_id")
    if sn is not None and (sn["end_offset"] != -1 or sn["epoch"] != -1):
        pieces += (_TAG2_HEAD, I64_I32.pack(sn["end_offset"], sn["epoch"]), EMPTY_TAGS)
        count += 1
    if with_mirror_epoch:
        mirror_epoch = p.get("mirror_leader_epoch", -1)
        if mirror_epoch != -1:
            pieces += (_TAG3_HEAD, I32.pack(mirror_epoch))
            count += 1
    if not count:
        return EMPTY_TAGS
    return uvarint(count) + b"".join(pieces)


_NO_DEFAULT: Final = object()
