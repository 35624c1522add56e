"""The canonical batch record every input format is reduced to, and its fixed binary layout.

A batch is described by the header fields that must match between a source and its mirror,
packed big-endian into ``RECORD_SIZE`` bytes. Segments yield them by slicing the 61-byte header
(dropping base_timestamp, which Kafka's dump text does not print; the CRC covers it anyway),
dump text by packing the printed fields. Equal batches give equal bytes, so whole runs of
batches compare with one ``==``.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from protocol.records import ControlType
from protocol.records.batch import LOG_OVERHEAD

# base_offset, batch_length, partition_leader_epoch, magic, crc, attributes, last_offset_delta,
# max_timestamp, producer_id, producer_epoch, base_sequence, record_count, crc_ok, control_type
RECORD: Final = struct.Struct(">qiibIhiqqhiibb")
RECORD_SIZE: Final = RECORD.size
# Header byte ranges copied verbatim: [0, 27) and [35, 61) (base_timestamp is skipped).
HEAD_PART_END: Final = 27
TAIL_PART_START: Final = 35
TAIL_PART_END: Final = 61

# control_type values besides ControlType members.
NOT_CONTROL: Final = -1
UNKNOWN_CONTROL: Final = -2
MIRROR_PID_RESET: Final = int(ControlType.MIRROR_PID_RESET)

TRANSACTIONAL_MASK: Final = 0x10
CONTROL_MASK: Final = 0x20

# Offsets of fields inside a packed record, for single-field reads.
_BASE = struct.Struct(">q")
_LAST_DELTA_AT: Final = 8 + 4 + 4 + 1 + 4 + 2


class Batch(NamedTuple):
    """A packed record unpacked, with the derived fields the audit uses."""

    base_offset: int
    batch_length: int
    epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int
    crc_ok: int
    control_type: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)


def unpack(blob: bytes | bytearray | memoryview, index: int) -> Batch:
    return Batch(*RECORD.unpack_from(blob, index * RECORD_SIZE))


def iter_batches(blob: bytes | bytearray | memoryview) -> list[Batch]:
    return [Batch(*t) for t in RECORD.iter_unpack(blob)]


def count(blob: bytes | bytearray | memoryview) -> int:
    return len(blob) // RECORD_SIZE


def base_offset_at(blob: bytes | bytearray | memoryview, index: int) -> int:
    return int(_BASE.unpack_from(blob, index * RECORD_SIZE)[0])


def last_offset_at(blob: bytes | bytearray | memoryview, index: int) -> int:
    pos = index * RECORD_SIZE
    base = int(_BASE.unpack_from(blob, pos)[0])
    (delta,) = struct.unpack_from(">i", blob, pos + _LAST_DELTA_AT)
    return base + int(delta)


def lower_bound(blob: bytes | bytearray | memoryview, offset: int) -> int:
    """Index of the first record whose base offset is >= ``offset`` (records sorted)."""
    lo, hi = 0, count(blob)
    while lo < hi:
        mid = (lo + hi) // 2
        if base_offset_at(blob, mid) < offset:
            lo = mid + 1
        else:
            hi = mid
    return lo
