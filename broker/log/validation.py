"""Header-level checks a leader applies to produced batches before assigning offsets.

Kafka's LogValidator also walks records (per-record timestamps, keys on compacted topics);
we stay at the batch header on purpose: timestamps are checked against the batch's base and
max timestamps, which bound every record a well-formed producer writes. The one exception is a
compacted topic: a record without a key could never be compacted away, so (as Kafka) its batches
are walked, decompressed if need be, and a keyless record is INVALID_RECORD.
"""

from __future__ import annotations

from enum import Enum
from typing import NamedTuple

from protocol.errors import ProtocolError
from protocol.records import BatchView, iter_records, scan_batches

from .config import LogConfig
from .errors import (
    CORRUPT_MESSAGE,
    INVALID_RECORD,
    INVALID_TIMESTAMP,
    MESSAGE_TOO_LARGE,
    RECORD_LIST_TOO_LARGE,
    LogAppendError,
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
    max_timestamp: int


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
            if origin is AppendOrigin.CLIENT:
                _check_client_batch(view, len(out))
                _check_timestamps(view, config, now_ms)
                if config.compact:
                    _check_keys(view)
            out.append(
                CheckedBatch(
                    view.position,
                    view.size,
                    view.last_offset_delta + 1,
                    view.record_count,
                    view.max_timestamp,
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


def _check_keys(view: BatchView) -> None:
    for i, record in enumerate(iter_records(view)):
        if record.key is None:
            raise LogAppendError(
                INVALID_RECORD,
                f"Compacted topic cannot accept message without key (record {i} of the batch)",
            )


def _check_timestamps(view: BatchView, config: LogConfig, now_ms: int) -> None:
    if view.timestamp_type == 1:
        raise LogAppendError(
            INVALID_TIMESTAMP, "producers may not set the timestamp type to LogAppendTime"
        )
    if config.log_append_time:
        return
    lo = now_ms - config.message_timestamp_before_max_ms
    hi = now_ms + config.message_timestamp_after_max_ms
    max_ts = view.max_timestamp
    # With the delete-horizon bit the base timestamp is the horizon, not a record's time.
    first_ts = max_ts if view.has_delete_horizon else view.base_timestamp
    for ts in (first_ts, max_ts):
        if ts != -1 and not lo <= ts <= hi:
            raise LogAppendError(
                INVALID_TIMESTAMP,
                f"timestamp {ts} is out of range: it should be within [{lo}, {hi}]",
            )
