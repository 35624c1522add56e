"""Walk the record batches in a byte range, validating framing, magic and CRC32C.

Only headers are touched (plus one CRC pass over each batch when asked), so this is what the
hot paths use to check produce payloads, fetched data and log segments.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Final, NamedTuple

from protocol.errors import CorruptRecordError, ProtocolError, TruncatedError

from .batch import (
    HEAD,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
    PARTITION_LEADER_EPOCH_OFFSET,
    BatchView,
    Buffer,
)


class TruncatedBatchError(TruncatedError):
    """A batch runs past the end of the scanned range."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(message)
        self.position = position


def _resolve_end(buf: Buffer, start: int, end: int | None) -> int:
    size = len(buf) if not isinstance(buf, memoryview) else buf.nbytes
    if end is None:
        end = size
    if not 0 <= start <= end <= size:
        raise ValueError(f"bad range [{start}, {end}) for a buffer of {size} bytes")
    return end


def _check_batch(buf: Buffer, pos: int, end: int, verify_crc: bool) -> BatchView | None:
    """Validate the batch at ``pos``; None means it is cut short by ``end``."""
    remaining = end - pos
    if remaining < LOG_OVERHEAD:
        return None
    if remaining > MAGIC_OFFSET:
        magic = buf[pos + MAGIC_OFFSET]
        if magic != MAGIC_V2:
            if magic in (0, 1):
                raise CorruptRecordError(
                    f"batch at byte {pos}: magic {magic} not supported "
                    "(legacy message sets are not accepted; only magic 2)",
                    pos,
                )
            raise CorruptRecordError(f"batch at byte {pos}: invalid magic {magic}", pos)
    _, batch_length = HEAD.unpack_from(buf, pos)
    if batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"batch at byte {pos}: batch_length {batch_length} is "
            f"{'negative' if batch_length < 0 else 'too small'} "
            f"(minimum {MIN_BATCH_LENGTH})",
            pos,
        )
    if LOG_OVERHEAD + batch_length > remaining:
        return None
    view = BatchView(buf, pos)
    if verify_crc:
        actual = view.compute_crc()
        expected = view.crc
        if actual != expected:
            raise CorruptRecordError(
                f"batch at byte {pos}: CRC32C mismatch, header says {expected:#010x} "
                f"but the data computes to {actual:#010x}",
                pos,
            )
    return view


def scan_batches(
    buf: Buffer,
    start: int = 0,
    end: int | None = None,
    *,
    verify_crc: bool = True,
    allow_partial_tail: bool = False,
) -> Iterator[BatchView]:
    """Yield a view of each batch in ``buf[start:end]``.

    Raises ``CorruptRecordError`` (with ``.position``) for a bad batch and
    ``TruncatedBatchError`` for a batch cut short, unless ``allow_partial_tail``, in which
    case the scan just stops there (fetch responses may end in a partial batch).
    """
    end = _resolve_end(buf, start, end)
    pos = start
    while pos < end:
        view = _check_batch(buf, pos, end, verify_crc)
        if view is None:
            if allow_partial_tail:
                return
            raise TruncatedBatchError(
                f"batch at byte {pos} is cut short: only {end - pos} bytes remain", pos
            )
        yield view
        pos += view.size


def valid_prefix(
    buf: Buffer, start: int = 0, end: int | None = None
) -> tuple[int, int, ProtocolError | None]:
    """Measure the longest run of whole, CRC-valid batches from ``start``.

    Returns ``(n_valid_bytes, n_batches, error)`` where ``error`` says why the run stopped
    (None when it reached ``end``); truncating to ``start + n_valid_bytes`` drops a torn tail.
    """
    end = _resolve_end(buf, start, end)
    pos = start
    count = 0
    try:
        while pos < end:
            view = _check_batch(buf, pos, end, True)
            if view is None:
                raise TruncatedBatchError(
                    f"batch at byte {pos} is cut short: only {end - pos} bytes remain", pos
                )
            pos += view.size
            count += 1
    except ProtocolError as exc:
        return pos - start, count, exc
    return pos - start, count, None


class Summary(NamedTuple):
    first_offset: int  # -1 when there are no batches
    last_offset: int  # -1 when there are no batches
    batches: int  # number of batches
    size: int  # bytes covered by those batches


def summarize(
    buf: Buffer,
    start: int = 0,
    end: int | None = None,
    *,
    verify_crc: bool = True,
    allow_partial_tail: bool = False,
) -> Summary:
    """Offsets, batch count and size of the batches in a range, from their headers only."""
    first = -1
    last = -1
    count = 0
    size = 0
    for view in scan_batches(
        buf, start, end, verify_crc=verify_crc, allow_partial_tail=allow_partial_tail
    ):
        if count == 0:
            first = view.base_offset
        last = view.last_offset
        count += 1
        size += view.size
    return Summary(first, last, count, size)


_EPOCH: Final = struct.Struct(">i")


def epoch_prefix(buf: Buffer, max_epoch: int) -> int:
    """Bytes of the leading batches whose partition leader epoch is at most ``max_epoch``: the
    part of a follower's fetched data that the epoch it fetched for vouches for (KAFKA-18723).
    Headers only; anything malformed is left in the prefix for the append to refuse by name."""
    mv = memoryview(buf)
    end = mv.nbytes
    pos = 0
    while pos + LOG_OVERHEAD + 4 <= end:
        length = HEAD.unpack_from(mv, pos)[1]
        if _EPOCH.unpack_from(mv, pos + PARTITION_LEADER_EPOCH_OFFSET)[0] > max_epoch:
            return pos
        if length < MIN_BATCH_LENGTH:
            return end
        pos += LOG_OVERHEAD + length
    return end
