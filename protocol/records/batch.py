"""Record batch (magic 2) layout and a zero-copy view over one batch in a buffer.

The view reads header fields on demand with ``struct.unpack_from``; nothing is copied or
validated on construction, so it is cheap enough for hot paths. ``scan_batches`` is what
validates framing, magic and CRC before handing views out.
"""

from __future__ import annotations

import struct
from typing import Final

from crc32c import crc32c

# Anything exposing the buffer protocol with byte items; bytes/bytearray/memoryview in practice.
Buffer = bytes | bytearray | memoryview

# -- Layout of the v2 batch header (big-endian) ---------------------------------------------
BASE_OFFSET_OFFSET: Final = 0  # int64
BATCH_LENGTH_OFFSET: Final = 8  # int32, counts bytes after this field
PARTITION_LEADER_EPOCH_OFFSET: Final = 12  # int32
MAGIC_OFFSET: Final = 16  # int8
CRC_OFFSET: Final = 17  # uint32, CRC32C of ATTRIBUTES_OFFSET..end of batch
ATTRIBUTES_OFFSET: Final = 21  # int16
LAST_OFFSET_DELTA_OFFSET: Final = 23  # int32
BASE_TIMESTAMP_OFFSET: Final = 27  # int64
MAX_TIMESTAMP_OFFSET: Final = 35  # int64
PRODUCER_ID_OFFSET: Final = 43  # int64
PRODUCER_EPOCH_OFFSET: Final = 51  # int16
BASE_SEQUENCE_OFFSET: Final = 53  # int32
RECORD_COUNT_OFFSET: Final = 57  # int32
RECORDS_OFFSET: Final = 61

HEADER_SIZE: Final = RECORDS_OFFSET
# base_offset + batch_length: the part of a batch that batch_length does not count.
LOG_OVERHEAD: Final = 12
# Smallest legal batch_length (a header with no records).
MIN_BATCH_LENGTH: Final = HEADER_SIZE - LOG_OVERHEAD
CRC_START: Final = ATTRIBUTES_OFFSET
MAGIC_V2: Final = 2

# -- Attribute bits --------------------------------------------------------------------------
COMPRESSION_MASK: Final = 0x07
TIMESTAMP_TYPE_MASK: Final = 0x08  # 0 = CreateTime, 1 = LogAppendTime
TRANSACTIONAL_MASK: Final = 0x10
CONTROL_MASK: Final = 0x20
DELETE_HORIZON_MASK: Final = 0x40

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1

_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
# Offset + length in one call: the two fields every scan reads.
HEAD = struct.Struct(">qi")

# Header from the CRC onwards; handy for builders that fill it in one pack_into call.
HEADER_STRUCT: Final = struct.Struct(">qiibIhiqqqhii")


class BatchView:
    """Read-only view of the v2 batch starting at ``pos`` in ``buf``.

    Properties read straight from the buffer, so a view over a bytearray sees in-place patches.
    """

    __slots__ = ("_buf", "_pos")

    def __init__(self, buf: Buffer, pos: int = 0) -> None:
        self._buf = buf
        self._pos = pos

    def __repr__(self) -> str:
        return (
            f"BatchView(pos={self._pos}, base_offset={self.base_offset}, "
            f"last_offset={self.last_offset}, records={self.record_count}, size={self.size}, "
            f"compression={self.compression}, control={self.is_control})"
        )

    @property
    def buffer(self) -> Buffer:
        return self._buf

    @property
    def position(self) -> int:
        return self._pos

    # -- fields outside the CRC ------------------------------------------------------------
    @property
    def base_offset(self) -> int:
        return int(_I64.unpack_from(self._buf, self._pos)[0])

    @property
    def batch_length(self) -> int:
        return int(_I32.unpack_from(self._buf, self._pos + BATCH_LENGTH_OFFSET)[0])

    @property
    def partition_leader_epoch(self) -> int:
        return int(_I32.unpack_from(self._buf, self._pos + PARTITION_LEADER_EPOCH_OFFSET)[0])

    @property
    def magic(self) -> int:
        return int(_I8.unpack_from(self._buf, self._pos + MAGIC_OFFSET)[0])

    @property
    def crc(self) -> int:
        return int(_U32.unpack_from(self._buf, self._pos + CRC_OFFSET)[0])

    # -- fields covered by the CRC ---------------------------------------------------------
    @property
    def attributes(self) -> int:
        return int(_I16.unpack_from(self._buf, self._pos + ATTRIBUTES_OFFSET)[0])

    @property
    def compression(self) -> int:
        """Codec id (0-7); ids above 4 are invalid and rejected when decompressing."""
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """0 = CreateTime, 1 = LogAppendTime."""
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def last_offset_delta(self) -> int:
        return int(_I32.unpack_from(self._buf, self._pos + LAST_OFFSET_DELTA_OFFSET)[0])

    @property
    def base_timestamp(self) -> int:
        return int(_I64.unpack_from(self._buf, self._pos + BASE_TIMESTAMP_OFFSET)[0])

    @property
    def max_timestamp(self) -> int:
        return int(_I64.unpack_from(self._buf, self._pos + MAX_TIMESTAMP_OFFSET)[0])

    @property
    def producer_id(self) -> int:
        return int(_I64.unpack_from(self._buf, self._pos + PRODUCER_ID_OFFSET)[0])

    @property
    def producer_epoch(self) -> int:
        return int(_I16.unpack_from(self._buf, self._pos + PRODUCER_EPOCH_OFFSET)[0])

    @property
    def base_sequence(self) -> int:
        return int(_I32.unpack_from(self._buf, self._pos + BASE_SEQUENCE_OFFSET)[0])

    @property
    def record_count(self) -> int:
        return int(_I32.unpack_from(self._buf, self._pos + RECORD_COUNT_OFFSET)[0])

    # -- derived ---------------------------------------------------------------------------
    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def raw(self) -> memoryview:
        return memoryview(self._buf)[self._pos : self._pos + self.size]

    @property
    def records_payload(self) -> memoryview:
        """The (possibly compressed) record bytes after the 61-byte header."""
        return memoryview(self._buf)[self._pos + RECORDS_OFFSET : self._pos + self.size]

    def compute_crc(self) -> int:
        start = self._pos + CRC_START
        return int(crc32c(memoryview(self._buf)[start : self._pos + self.size]))

    def crc_ok(self) -> bool:
        return self.compute_crc() == self.crc


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Rewrite the base offset of the batch at ``pos``; the CRC does not cover it."""
    _I64.pack_into(buf, pos + BASE_OFFSET_OFFSET, base_offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Rewrite the partition leader epoch of the batch at ``pos``; the CRC does not cover it."""
    _I32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, epoch)


def set_max_timestamp(
    buf: bytearray | memoryview, pos: int, max_timestamp: int, *, log_append_time: bool = False
) -> None:
    """Rewrite the max timestamp of the batch at ``pos`` (and, with ``log_append_time``, set the
    LogAppendTime bit), then its CRC: both fields are CRC-covered, so this costs a CRC pass."""
    if log_append_time:
        attrs = int(_I16.unpack_from(buf, pos + ATTRIBUTES_OFFSET)[0])
        _I16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attrs | TIMESTAMP_TYPE_MASK)
    _I64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
    end = pos + LOG_OVERHEAD + int(_I32.unpack_from(buf, pos + BATCH_LENGTH_OFFSET)[0])
    _U32.pack_into(buf, pos + CRC_OFFSET, crc32c(memoryview(buf)[pos + CRC_START : end]))
