"""Per-log facts gathered from a run of canonical records, and how adjacent runs combine.

A range task summarises the batches it owns; the partition step folds the summaries of one
log in offset order with ``combine`` (associative), so per-batch Python work happens once, on
the executors that scanned the bytes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import reduce
from typing import Final

from .records import MIRROR_PID_RESET, NOT_CONTROL, RECORD, TRANSACTIONAL_MASK

# Lists that can grow with the data (gaps after compaction, say) keep their first entries.
MAX_LISTED: Final = 100
MAX_EPOCHS: Final = 10_000


@dataclass
class TxnState:
    """One producer's transactional state across a run of batches."""

    producer_epoch: int
    closed: bool  # a COMMIT/ABORT marker for this producer occurs in the run
    open_from: int | None  # first data offset after the run's last marker, if any


@dataclass
class LogSummary:
    batches: int = 0
    records: int = 0
    bytes: int = 0
    first_offset: int = -1
    last_offset: int = -1
    max_timestamp: int = -1
    # (epoch, start offset) each time the partition leader epoch changes.
    epochs: list[tuple[int, int]] = field(default_factory=list)
    # Offset gaps as (first missing, last missing); counts cover all, the list the first ones.
    gaps: list[tuple[int, int]] = field(default_factory=list)
    gap_count: int = 0
    gap_offsets: int = 0
    txns: dict[int, TxnState] = field(default_factory=dict)
    # MIRROR_PID_RESET control batches as (offset, epoch).
    markers: list[tuple[int, int]] = field(default_factory=list)
    crc_invalid: int = 0
    first_crc_invalid: int = -1
    # Batches whose base offset is not past the previous batch's last offset.
    out_of_order: int = 0

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1 if self.batches else -1

    def open_transactions(self) -> list[tuple[int, int, int]]:
        """(producer id, producer epoch, first offset) of transactions open at the tail."""
        return sorted(
            (pid, t.producer_epoch, t.open_from)
            for pid, t in self.txns.items()
            if t.open_from is not None
        )


def _add_gap(s: LogSummary, first: int, last: int) -> None:
    s.gap_count += 1
    s.gap_offsets += last - first + 1
    if len(s.gaps) < MAX_LISTED:
        s.gaps.append((first, last))


def summarize_blob(blob: bytes | bytearray | memoryview) -> LogSummary:
    """Summarise packed records that follow each other in one log."""
    s = LogSummary()
    epochs = s.epochs
    txns = s.txns
    prev_last = -1
    prev_epoch: int | None = None
    for (
        base,
        length,
        epoch,
        _magic,
        _crc,
        attrs,
        delta,
        max_ts,
        pid,
        pepoch,
        _seq,
        n,
        crc_ok,
        ctype,
    ) in RECORD.iter_unpack(blob):
        if s.batches == 0:
            s.first_offset = base
        elif base <= prev_last:
            s.out_of_order += 1
        elif base > prev_last + 1:
            _add_gap(s, prev_last + 1, base - 1)
        s.batches += 1
        s.records += n
        s.bytes += length + 12
        last = base + delta
        prev_last = max(prev_last, last)
        if max_ts > s.max_timestamp:
            s.max_timestamp = max_ts
        if epoch != prev_epoch:
            if len(epochs) < MAX_EPOCHS:
                epochs.append((epoch, base))
            prev_epoch = epoch
        if not crc_ok:
            s.crc_invalid += 1
            if s.first_crc_invalid < 0:
                s.first_crc_invalid = base
        if ctype != NOT_CONTROL:
            if attrs & TRANSACTIONAL_MASK:
                txns[pid] = TxnState(pepoch, True, None)
            elif ctype == MIRROR_PID_RESET and len(s.markers) < MAX_LISTED:
                s.markers.append((base, epoch))
        elif attrs & TRANSACTIONAL_MASK:
            state = txns.get(pid)
            if state is None:
                txns[pid] = TxnState(pepoch, False, base)
            elif state.open_from is None:
                state.open_from = base
                state.producer_epoch = pepoch
    s.last_offset = prev_last if s.batches else -1
    return s


def combine(a: LogSummary, b: LogSummary) -> LogSummary:
    """The summary of ``a``'s batches followed by ``b``'s."""
    if not b.batches:
        return a
    if not a.batches:
        return b
    out = LogSummary(
        batches=a.batches + b.batches,
        records=a.records + b.records,
        bytes=a.bytes + b.bytes,
        first_offset=a.first_offset,
        last_offset=max(a.last_offset, b.last_offset),
        max_timestamp=max(a.max_timestamp, b.max_timestamp),
        epochs=list(a.epochs),
        gaps=list(a.gaps),
        gap_count=a.gap_count,
        gap_offsets=a.gap_offsets,
        txns=dict(a.txns),
        markers=(a.markers + b.markers)[:MAX_LISTED],
        crc_invalid=a.crc_invalid + b.crc_invalid,
        first_crc_invalid=a.first_crc_invalid if a.first_crc_invalid >= 0 else b.first_crc_invalid,
        out_of_order=a.out_of_order + b.out_of_order,
    )
    if b.first_offset <= a.last_offset:
        out.out_of_order += 1
    elif b.first_offset > a.last_offset + 1:
        _add_gap(out, a.last_offset + 1, b.first_offset - 1)
    for gap in b.gaps:
        if len(out.gaps) >= MAX_LISTED:
            break
        out.gaps.append(gap)
    out.gap_count += b.gap_count
    out.gap_offsets += b.gap_offsets
    start = 1 if out.epochs and b.epochs and out.epochs[-1][0] == b.epochs[0][0] else 0
    out.epochs.extend(b.epochs[start : start + MAX_EPOCHS - len(out.epochs)])
    for pid, t in b.txns.items():
        before = out.txns.get(pid)
        if t.closed or before is None:
            out.txns[pid] = TxnState(t.producer_epoch, t.closed, t.open_from)
        elif before.open_from is None:
            out.txns[pid] = TxnState(t.producer_epoch, before.closed, t.open_from)
    return out


def combine_all(parts: Iterable[LogSummary]) -> LogSummary:
    return reduce(combine, parts, LogSummary())
