"""Checks a leader applies to produced batches before assigning offsets (Kafka's LogValidator).

Batch-level rules (framing, CRC, sizes, offsets, control bits, sequences) look at headers only.
Per-record rules follow Kafka: every record's timestamp must lie within
message.timestamp.before/after.max.ms, and a compacted topic refuses a record without a key
(it could never be compacted away). A broken record refuses the whole batch and is named in
``RecordValidationError.record_errors`` (KIP-467), which Produce returns as ``record_errors``.

The header's max timestamp is the producer's claim, not a fact: librdkafka writes 0 when every
record says -1, which would make the segment look like 1970 to retention and rolling. Like
Kafka, the leader computes the records' real maximum for CreateTime batches (the one per-record
loop on the hot path: see ``protocol.records.timestamps``) and the header is rewritten when it
differs. Records are decoded in full only for compacted topics and to name offenders.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

from protocol.errors import ProtocolError
from protocol.records import (
    NO_TIMESTAMP,
    BatchView,
    iter_records,
    max_timestamp_delta,
    record_data,
    scan_batches,
    timestamp_delta_range,
)

from .config import LONG_MAX, LogConfig
from .errors import (
    CORRUPT_MESSAGE,
    INVALID_RECORD,
    INVALID_TIMESTAMP,
    MESSAGE_TOO_LARGE,
    RECORD_LIST_TOO_LARGE,
    LogAppendError,
    RecordValidationError,
)

Buffer = bytes | bytearray | memoryview


class AppendOrigin(Enum):
    CLIENT = "client"  # Produce requests: Kafka's strict client checks apply
    COORDINATOR = "coordinator"  # group/txn/mirror coordinators, txn markers


class CheckedBatch(NamedTuple):
    position: int
    size: int
    offset_count: int  # last_offset_delta + 1: how many offsets the batch takes
    record_count: int
    # The batch's max timestamp: the records' real one for a client's CreateTime batch.
    max_timestamp: int
    # The header says otherwise: the leader must rewrite it (and the CRC).
    header_stale: bool


def check_leader_batches(
    buf: Buffer, config: LogConfig, now_ms: int, origin: AppendOrigin
) -> list[CheckedBatch]:
    """Validate framing, CRC, sizes, client rules and timestamps; raise ``LogAppendError``."""
    total = len(buf) if not isinstance(buf, memoryview) else buf.nbytes
    if total > config.segment_bytes:
        raise LogAppendError(
            RECORD_LIST_TOO_LARGE,
            f"append of {total} bytes exceeds segment.bytes {config.segment_bytes}",
        )
    out: list[CheckedBatch] = []
    try:
        for view in scan_batches(buf, verify_crc=False):
            if view.size > config.max_message_bytes:
                raise LogAppendError(
                    MESSAGE_TOO_LARGE,
                    f"record batch of {view.size} bytes exceeds max.message.bytes "
                    f"{config.max_message_bytes}",
                )
            if not view.crc_ok():
                raise LogAppendError(
                    CORRUPT_MESSAGE,
                    f"record batch at byte {view.position} is corrupt (stored crc {view.crc})",
                )
            header_max = view.max_timestamp
            max_ts = header_max
            if origin is AppendOrigin.CLIENT:
                _check_client_batch(view, len(out))
                max_ts = _check_records(view, config, now_ms)
            out.append(
                CheckedBatch(
                    view.position,
                    view.size,
                    view.last_offset_delta + 1,
                    view.record_count,
                    max_ts,
                    max_ts != header_max,
                )
            )
    except ProtocolError as exc:
        raise LogAppendError(CORRUPT_MESSAGE, f"malformed record batch: {exc}") from None
    return out


def _check_client_batch(view: BatchView, index: int) -> None:
    if index > 0:
        raise LogAppendError(INVALID_RECORD, "a produce request may carry one batch per partition")
    if view.base_offset != 0:
        raise LogAppendError(
            INVALID_RECORD, f"the base offset of a produced batch must be 0, not {view.base_offset}"
        )
    count = view.record_count
    if view.last_offset_delta < 0 or count <= 0 or count != view.last_offset_delta + 1:
        raise LogAppendError(
            INVALID_RECORD,
            f"inconsistent batch: last offset delta {view.last_offset_delta}, {count} records",
        )
    if view.is_control:
        raise LogAppendError(INVALID_RECORD, "clients may not write control records")
    if view.producer_id >= 0 and view.base_sequence < 0:
        raise LogAppendError(
            INVALID_RECORD,
            f"invalid sequence {view.base_sequence} for producer id {view.producer_id}",
        )


def _check_records(view: BatchView, config: LogConfig, now_ms: int) -> int:
    """Per-record checks; returns the records' max timestamp (the header's with LogAppendTime,
    which the leader then overwrites). Raises ``RecordValidationError``."""
    if config.compact or view.timestamp_type == 1:
        return _decode_and_check(view, config, now_ms)
    if config.log_append_time:
        return view.max_timestamp  # Kafka ignores record timestamps then
    count = view.record_count
    data = record_data(view)
    base = view.base_timestamp
    if config.message_timestamp_before_max_ms < LONG_MAX:
        low, high = timestamp_delta_range(data, count)
        if base + low < now_ms - config.message_timestamp_before_max_ms:
            return _decode_and_check(view, config, now_ms)  # names them (a -1 is no offender)
    else:
        # With the default (Long.MAX_VALUE) no timestamp is too old: the cheaper max-only walk.
        high = max_timestamp_delta(data, count, view.max_timestamp - base)
    max_ts = base + high
    if max_ts > now_ms + config.message_timestamp_after_max_ms:
        return _decode_and_check(view, config, now_ms)
    return max(NO_TIMESTAMP, max_ts)


def _decode_and_check(view: BatchView, config: LogConfig, now_ms: int) -> int:
    """Decode every record, collect each one's first broken rule (the key before the timestamp,
    as Kafka), raise if any; else return the records' max timestamp."""
    check_keys = config.compact
    check_time = not config.log_append_time
    producer_append_time = view.timestamp_type == 1
    lo = now_ms - config.message_timestamp_before_max_ms
    hi = now_ms + config.message_timestamp_after_max_ms
    base = view.base_timestamp
    errors: list[tuple[int, str]] = []
    bad_time = False
    max_ts = NO_TIMESTAMP
    for index, record in enumerate(iter_records(view)):
        ts = base + record.timestamp_delta
        if ts > max_ts:
            max_ts = ts
        if check_keys and record.key is None:
            errors.append((index, "a compacted topic cannot accept a record without a key"))
        elif producer_append_time:
            bad_time = True
            errors.append((index, "producers may not set the timestamp type to LogAppendTime"))
        elif check_time and ts != NO_TIMESTAMP and not lo <= ts <= hi:
            bad_time = True
            errors.append(
                (index, f"timestamp {ts} is out of range: it should be within [{lo}, {hi}]")
            )
    if errors:
        raise _rejected(errors, bad_time)
    return max_ts


def _rejected(errors: list[tuple[int, str]], bad_time: bool) -> RecordValidationError:
    # As Kafka: one bad timestamp makes the batch's error INVALID_TIMESTAMP.
    code = INVALID_TIMESTAMP if bad_time else INVALID_RECORD
    shown = "; ".join(f"record {i}: {m}" for i, m in errors[:3])
    more = f" (first 3 of {len(errors)})" if len(errors) > 3 else ""
    message = f"{len(errors)} record(s) of the batch were rejected{more}: {shown}"
    return RecordValidationError(code, message, tuple(errors))
