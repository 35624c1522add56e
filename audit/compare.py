"""Compare the source and destination logs of one partition and give the verdict.

Batches pair up by base offset inside the window both logs cover, ``[max(starts), ...)``:
batches below it exist on one side only because of retention and are counted, not judged.
Equal runs are recognised with one bytes comparison of the packed records; only the rest is
walked batch by batch. A source batch the destination lacks is *missing* when the destination
log goes past it and *lag* when it lies beyond the destination's end; a destination batch the
source lacks is *extra*. The first MIRROR_PID_RESET marker the destination has and the source
does not (a failover) ends the mirrored part of the destination: later batches are the
destination's own writes and are only counted.

Verdicts: MISSING (a side has no copy of the partition), DIVERGED (missing, extra or different
batches, corrupt framing, or leader-epoch histories that differ), LAGGING (the destination is a
strict prefix of the source), IDENTICAL.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Final

from .records import (
    RECORD_SIZE,
    Batch,
    base_offset_at,
    count,
    last_offset_at,
    lower_bound,
    unpack,
)
from .side import SideLog

MAX_DIFFS: Final = 1000
FIELD_NAMES: Final = (
    "base_offset",
    "size",
    "epoch",
    "magic",
    "crc",
    "attributes",
    "last_offset_delta",
    "max_timestamp",
    "producer_id",
    "producer_epoch",
    "base_sequence",
    "record_count",
    "crc_check",  # the data no longer matches the CRC in the header
    "control_type",
)


class Verdict(StrEnum):
    IDENTICAL = "IDENTICAL"
    LAGGING = "LAGGING"
    DIVERGED = "DIVERGED"
    MISSING = "MISSING"


@dataclass
class PartitionReport:
    topic: str
    partition: int
    verdict: str = Verdict.IDENTICAL.value
    missing_side: str | None = None
    reason: str | None = None
    source_copies: list[str] = field(default_factory=list)
    destination_copies: list[str] = field(default_factory=list)
    source_log_start: int = -1
    source_log_end: int = -1
    destination_log_start: int = -1
    destination_log_end: int = -1
    source_batches: int = 0
    source_records: int = 0
    source_bytes: int = 0
    destination_batches: int = 0
    destination_records: int = 0
    destination_bytes: int = 0
    source_max_timestamp: int = -1
    destination_max_timestamp: int = -1
    lag_offsets: int = 0
    lag_batches: int = 0
    lag_records: int = 0
    lag_bytes: int = 0
    lag_ms: int | None = None
    matched_batches: int = 0
    missing_batches: int = 0
    extra_batches: int = 0
    different_batches: int = 0
    first_divergent_offset: int = -1
    source_only_head_batches: int = 0
    destination_only_head_batches: int = 0
    diverged_epoch_source: int | None = None
    diverged_epoch_destination: int | None = None
    source_epochs: list[dict[str, int]] = field(default_factory=list)
    destination_epochs: list[dict[str, int]] = field(default_factory=list)
    source_gap_count: int = 0
    source_gap_offsets: int = 0
    source_gaps: list[dict[str, int]] = field(default_factory=list)
    destination_gap_count: int = 0
    destination_gap_offsets: int = 0
    destination_gaps: list[dict[str, int]] = field(default_factory=list)
    source_open_transactions: list[dict[str, int]] = field(default_factory=list)
    destination_open_transactions: list[dict[str, int]] = field(default_factory=list)
    source_markers: list[dict[str, Any]] = field(default_factory=list)
    destination_markers: list[dict[str, Any]] = field(default_factory=list)
    failover_offset: int = -1
    post_failover_batches: int = 0
    source_crc_invalid: int = 0
    destination_crc_invalid: int = 0
    source_copy_conflicts: int = 0
    destination_copy_conflicts: int = 0
    problems: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _fill_side(report: PartitionReport, prefix: str, side: SideLog) -> None:
    s = side.summary
    values: dict[str, Any] = {
        "copies": side.copies,
        "log_start": side.start_offset,
        "log_end": side.end_offset,
        "batches": s.batches,
        "records": s.records,
        "bytes": s.bytes,
        "max_timestamp": s.max_timestamp,
        "epochs": [{"epoch": e, "start_offset": o} for e, o in s.epochs],
        "gap_count": s.gap_count,
        "gap_offsets": s.gap_offsets,
        "gaps": [{"first": a, "last": b} for a, b in s.gaps],
        "open_transactions": [
            {"producer_id": p, "producer_epoch": e, "first_offset": o}
            for p, e, o in s.open_transactions()
        ],
        "markers": [
            {"offset": o, "epoch": e, "source_cluster_id": side.cluster_ids.get(o)}
            for o, e in s.markers
        ],
        "crc_invalid": s.crc_invalid,
        "copy_conflicts": side.conflicts,
    }
    for key, value in values.items():
        setattr(report, f"{prefix}_{key}", value)
    report.problems.extend(f"{prefix}: {p}" for p in side.problems)


def _diff_fields(a: Batch, b: Batch) -> list[str]:
    return [name for name, x, y in zip(FIELD_NAMES, a, b, strict=True) if x != y]


def _rec(blob: bytes, i: int) -> bytes:
    return blob[i * RECORD_SIZE : (i + 1) * RECORD_SIZE]


def _epoch_window(epochs: list[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    """The epoch history restricted to offsets [lo, hi)."""
    out: list[tuple[int, int]] = []
    for epoch, start in epochs:
        if start >= hi:
            break
        if start <= lo:
            out = [(epoch, lo)]
        else:
            out.append((epoch, start))
    return out


class _Walk:
    """Accumulates the batch-by-batch comparison of one partition."""

    def __init__(self, report: PartitionReport) -> None:
        self.report = report
        self.diffs: list[dict[str, Any]] = []

    def diverge(self, offset: int, reason: str) -> None:
        r = self.report
        if r.first_divergent_offset < 0 or offset < r.first_divergent_offset:
            r.first_divergent_offset = offset
            r.reason = reason

    def diff(self, kind: str, src: Batch | None, dst: Batch | None, fields: list[str]) -> None:
        b = src if src is not None else dst
        assert b is not None
        self.diverge(b.base_offset, f"{kind} batch at offset {b.base_offset}")
        if len(self.diffs) >= MAX_DIFFS:
            return
        self.diffs.append(
            {
                "topic": self.report.topic,
                "partition": self.report.partition,
                "kind": kind,
                "base_offset": b.base_offset,
                "last_offset": b.last_offset,
                "fields": fields,
                "source_crc": None if src is None else src.crc,
                "destination_crc": None if dst is None else dst.crc,
                "source_epoch": None if src is None else src.epoch,
                "destination_epoch": None if dst is None else dst.epoch,
                "source_size": None if src is None else src.size,
                "destination_size": None if dst is None else dst.size,
            }
        )


def _failover_offset(src: SideLog, dst: SideLog) -> int:
    """Offset of the first destination marker the source does not hold too, or -1."""
    for offset, _epoch in dst.summary.markers:
        i = lower_bound(src.blob, offset)
        j = lower_bound(dst.blob, offset)
        same = i < count(src.blob) and _rec(src.blob, i) == _rec(dst.blob, j)
        if not same:
            return offset
    return -1


def compare_partition(
    topic: str, partition: int, src: SideLog | None, dst: SideLog | None
) -> tuple[PartitionReport, list[dict[str, Any]]]:
    report = PartitionReport(topic, partition)
    if src is not None:
        _fill_side(report, "source", src)
    if dst is not None:
        _fill_side(report, "destination", dst)
    if src is None or dst is None:
        report.verdict = Verdict.MISSING.value
        report.missing_side = "source" if src is None else "destination"
        report.reason = f"no copy of the partition on the {report.missing_side} side"
        return report, []
    walk = _Walk(report)
    sb, db = src.blob, dst.blob
    ns = count(sb)
    failover = _failover_offset(src, dst)
    nd = lower_bound(db, failover) if failover >= 0 else count(db)
    if failover >= 0:
        report.failover_offset = failover
        report.post_failover_batches = count(db) - nd
    s_start, d_start = src.start_offset, dst.start_offset
    s_end = src.end_offset
    d_end = max(last_offset_at(db, nd - 1) + 1, d_start) if nd else d_start
    lo = max(s_start, d_start)
    i = lower_bound(sb, lo)
    j = min(lower_bound(db, lo), nd)
    report.source_only_head_batches = i
    report.destination_only_head_batches = j
    hi = min(s_end, d_end)
    i1 = lower_bound(sb, hi)
    j1 = min(lower_bound(db, hi), nd)
    if sb[i * RECORD_SIZE : i1 * RECORD_SIZE] == db[j * RECORD_SIZE : j1 * RECORD_SIZE]:
        report.matched_batches = i1 - i
        i, j = i1, j1
    while i < ns or j < nd:
        s_base = base_offset_at(sb, i) if i < ns else None
        d_base = base_offset_at(db, j) if j < nd else None
        if s_base is not None and (d_base is None or s_base < d_base):
            b = unpack(sb, i)
            if s_base < d_end:
                report.missing_batches += 1
                walk.diff("missing", b, None, [])
            else:
                report.lag_batches += 1
                report.lag_records += b.record_count
                report.lag_bytes += b.size
            i += 1
        elif s_base is None or (d_base is not None and d_base < s_base):
            report.extra_batches += 1
            walk.diff("extra", None, unpack(db, j), [])
            j += 1
        else:
            if _rec(sb, i) == _rec(db, j):
                report.matched_batches += 1
            else:
                a, b = unpack(sb, i), unpack(db, j)
                report.different_batches += 1
                walk.diff("different", a, b, _diff_fields(a, b))
            i += 1
            j += 1
    s_hist = _epoch_window(src.summary.epochs, lo, hi)
    d_hist = _epoch_window(_cut_epochs(dst, failover), lo, hi)
    for k in range(max(len(s_hist), len(d_hist))):
        se = s_hist[k] if k < len(s_hist) else None
        de = d_hist[k] if k < len(d_hist) else None
        if se != de:
            report.diverged_epoch_source = None if se is None else se[0]
            report.diverged_epoch_destination = None if de is None else de[0]
            at = min(e[1] for e in (se, de) if e is not None)
            walk.diverge(
                at,
                f"leader epoch histories differ at offset {at}: source epoch "
                f"{report.diverged_epoch_source}, destination epoch "
                f"{report.diverged_epoch_destination}",
            )
            break
    for name, side in (("source", src), ("destination", dst)):
        if side.corrupt_after >= 0:
            walk.diverge(side.corrupt_after, f"{name} bytes stop parsing as batches")
    d_max_ts = _max_timestamp(db, nd) if failover >= 0 else dst.summary.max_timestamp
    report.lag_offsets = s_end - d_end
    if nd and src.summary.batches:
        report.lag_ms = src.summary.max_timestamp - d_max_ts
    if report.first_divergent_offset >= 0:
        report.verdict = Verdict.DIVERGED.value
    elif s_end > d_end or report.lag_batches:
        report.verdict = Verdict.LAGGING.value
        report.reason = f"destination ends at {d_end}, source at {s_end}"
    return report, walk.diffs


def _cut_epochs(dst: SideLog, failover: int) -> list[tuple[int, int]]:
    if failover < 0:
        return dst.summary.epochs
    return [(e, o) for e, o in dst.summary.epochs if o < failover]


def _max_timestamp(blob: bytes, n: int) -> int:
    return max((unpack(blob, k).max_timestamp for k in range(n)), default=-1)
