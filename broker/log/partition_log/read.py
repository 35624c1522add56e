"""Read paths: whole batches from an offset below a bound (Fetch), the aborted transactions
overlapping a read (READ_COMMITTED), and lookups by timestamp and by leader epoch.
"""

from __future__ import annotations

import bisect
import struct
from dataclasses import dataclass
from typing import Final

from protocol.records.batch import LOG_OVERHEAD
from protocol.txn_index import AbortedTxn

from ..errors import OffsetOutOfRange
from ..segment import LogSegment
from .state import Buffer, PartitionLogState

_I64 = struct.Struct(">q")
_LEN = struct.Struct(">i")
_LAST_DELTA_AT: Final = 23  # last offset delta's byte position in a batch header


@dataclass(frozen=True, slots=True)
class ReadResult:
    records: list[Buffer]
    high_watermark: int
    log_start_offset: int
    log_end_offset: int
    # With ``read(..., aborted=True)``: the aborted transactions overlapping the returned data.
    aborted_transactions: list[AbortedTxn] | None = None

    @property
    def size(self) -> int:
        return sum(len(b) if not isinstance(b, memoryview) else b.nbytes for b in self.records)


class ReadMixin(PartitionLogState):
    """Reads and lookups; they change nothing."""

    def read(
        self,
        fetch_offset: int,
        max_bytes: int,
        *,
        upper_bound: int | None = None,
        min_one_batch: bool = True,
        aborted: bool = False,
    ) -> ReadResult:
        """Whole batches from ``fetch_offset`` below ``upper_bound`` (default: the HW).

        A fetch inside a batch returns that whole batch. With ``min_one_batch`` the first
        batch is returned even when larger than ``max_bytes`` (KIP-74). With ``aborted``
        (READ_COMMITTED) the result lists the aborted transactions overlapping the data.
        """
        if fetch_offset < self._log_start or fetch_offset > self._leo:
            raise OffsetOutOfRange(self._log_start, self._leo, fetch_offset)
        upper = self._hw if upper_bound is None else min(upper_bound, self._leo)
        records: list[Buffer] = []
        end = fetch_offset
        if fetch_offset < upper:
            found = self._read_from(fetch_offset, max_bytes, upper, min_one_batch)
            if found is not None:
                data, end = found
                records.append(data)
                if end < 0:
                    end = upper  # unknown: a superset is harmless to consumers
        txns = None
        if aborted:
            txns = self.aborted_transactions(fetch_offset, end) if end > fetch_offset else []
        return ReadResult(records, self._hw, self._log_start, self._leo, txns)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound)`` (Kafka's
        collectAbortedTransactions): from the segment holding ``fetch_offset`` on, until an
        entry's last stable offset shows that nothing later can overlap. Segments without
        entries cost an attribute read, so logs without aborts pay nearly nothing."""
        out: list[AbortedTxn] = []
        segments = self._segments
        for i in range(max(bisect.bisect_right(self._bases, fetch_offset) - 1, 0), len(segments)):
            index = segments[i].txn_index
            if index.count == 0:
                continue
            found, complete = index.collect(fetch_offset, upper_bound)
            out.extend(found)
            if complete:
                break
        return out

    def _read_from(
        self, offset: int, max_bytes: int, upper: int, min_one_batch: bool
    ) -> tuple[Buffer, int] | None:
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        while i < len(self._segments):
            seg = self._segments[i]
            header = seg.translate_offset(offset)
            if header is None:
                i += 1  # offset falls after this segment's last batch (or in a gap)
                continue
            if header.base_offset >= upper:
                return None
            next_base = self._bases[i + 1] if i + 1 < len(self._bases) else None
            if upper >= self._leo or (next_base is not None and next_base <= upper):
                max_pos = seg.size
            else:
                limit = seg.translate_offset(upper, header.position)
                max_pos = seg.size if limit is None else limit.position
            if header.position >= max_pos:
                return None
            budget = max(max_bytes, header.size) if min_one_batch else max_bytes
            want = min(max_pos - header.position, budget)
            if want < header.size and not min_one_batch:
                return None
            data = seg.read(header.position, want)
            return _whole_batches(data, seg, header.position)
        return None

    # -- timestamps and epochs -----------------------------------------------------------
    def offset_for_timestamp(self, ts_ms: int) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader epoch) of the first record with timestamp >= ``ts_ms``."""
        for seg in self._segments:
            if seg.largest_timestamp < ts_ms:
                continue
            found = seg.find_offset_by_timestamp(ts_ms, self._log_start)
            if found is not None:
                ts, off, epoch = found
                return off, ts, epoch if epoch >= 0 else -1
        return None

    def max_timestamp_offset(self) -> tuple[int, int, int] | None:
        """(offset, timestamp, epoch) of the record with the largest timestamp (ListOffsets -3)."""
        best: LogSegment | None = None
        for seg in self._segments:
            if (
                best is None
                or seg.max_timestamp_so_far.timestamp > best.max_timestamp_so_far.timestamp
            ):
                best = seg
        if best is None:
            return None
        found = best.offset_of_max_timestamp()
        if found is None:
            return None
        ts, off, epoch = found
        return off, ts, epoch if epoch >= 0 else -1

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch: (epoch, end offset), (-1, -1) when unknown."""
        return self.epoch_cache.end_offset_for(epoch, self._leo)


def _whole_batches(data: bytes, seg: LogSegment, start: int) -> tuple[Buffer, int] | None:
    """Cut a read at the last whole batch; walks headers only from the nearest index entry.

    Also returns an exclusive upper bound of the offsets returned (the last batch's last
    offset + 1, or the next batch's base offset), -1 if unknown.
    """
    n = len(data)
    pos = 0
    floor = seg.index.floor_position(start + n)
    if floor is not None and floor > start:
        pos = floor - start
    last = -1
    while pos + LOG_OVERHEAD <= n:
        nxt = pos + LOG_OVERHEAD + _LEN.unpack_from(data, pos + 8)[0]
        if nxt > n:
            break
        last = pos
        pos = nxt
    if pos == 0:
        return None
    if last >= 0:
        end = _I64.unpack_from(data, last)[0] + _LEN.unpack_from(data, last + _LAST_DELTA_AT)[0] + 1
    else:
        # Cut at the indexed batch without walking one: that batch's base offset bounds it.
        head = data[pos : pos + 8] if pos + 8 <= n else seg.read(start + pos, 8)
        end = _I64.unpack_from(head)[0] if len(head) == 8 else -1
    return (data if pos == n else memoryview(data)[:pos]), end
