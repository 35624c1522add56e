"""One side's log of a partition, merged from the chunks of all its copies (executor side)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from .records import RECORD, RECORD_SIZE
from .summary import LogSummary, combine_all, summarize_blob
from .tasks import Chunk


@dataclass
class SideLog:
    blob: bytes  # packed canonical records, in offset order
    summary: LogSummary
    copies: list[str]
    cluster_ids: dict[int, str] = field(default_factory=dict)
    # Batches at which copies disagree (the one with the higher leader epoch is kept).
    conflicts: int = 0
    problems: list[str] = field(default_factory=list)
    # Lowest segment base offset: the log start (and end) of a log without batches.
    min_segment_base: int = -1
    corrupt_after: int = -1

    @property
    def start_offset(self) -> int:
        return self.summary.first_offset if self.summary.batches else self.min_segment_base

    @property
    def end_offset(self) -> int:
        """Kafka's log end offset: the offset after the last batch."""
        return self.summary.next_offset if self.summary.batches else self.min_segment_base


def _merge_copies(blobs: list[bytes]) -> tuple[bytes, int]:
    """Union of several copies' batches by offset; on overlap the higher leader epoch wins."""
    entries: list[tuple[int, int, int, int, bytes]] = []
    for rank, blob in enumerate(blobs):
        for i, fields in enumerate(RECORD.iter_unpack(blob)):
            rec = blob[i * RECORD_SIZE : (i + 1) * RECORD_SIZE]
            base, epoch, delta = fields[0], fields[2], fields[6]
            entries.append((base, -epoch, rank, base + delta, rec))
    entries.sort(key=lambda e: (e[0], e[1], e[2]))
    out = bytearray()
    kept_base = kept_last = -1
    kept = b""
    conflicts = 0
    for base, _neg_epoch, _rank, last, rec in entries:
        if out and base <= kept_last:
            if not (base == kept_base and rec == kept):
                conflicts += 1
            continue
        out += rec
        kept_base, kept_last, kept = base, last, rec
    return bytes(out), conflicts


def build_side(chunks: Iterable[Chunk]) -> SideLog:
    by_copy: dict[str, list[Chunk]] = defaultdict(list)
    for chunk in chunks:
        by_copy[chunk.copy].append(chunk)
    copies = sorted(by_copy)
    blobs: list[bytes] = []
    summaries: list[LogSummary] = []
    cluster_ids: dict[int, str] = {}
    problems: list[str] = []
    corrupt: list[int] = []
    for copy in copies:
        ordered = sorted(by_copy[copy], key=lambda c: (c.segment_base, c.start))
        blobs.append(b"".join(c.blob for c in ordered))
        summaries.append(combine_all(c.summary for c in ordered))
        next_offset = -1
        for c in ordered:
            cluster_ids.update(c.cluster_ids)
            problems.extend(f"{copy}: {p}" for p in c.problems)
            if c.summary.batches:
                next_offset = c.summary.next_offset
            if c.corrupt:
                corrupt.append(max(next_offset, c.segment_base))
    every = [c for group in by_copy.values() for c in group]
    min_base = min((c.segment_base for c in every if c.segment_base >= 0), default=-1)
    corrupt_after = min(corrupt) if corrupt else -1
    if len(blobs) == 1:
        blob, summary, conflicts = blobs[0], summaries[0], 0
    else:
        blob, conflicts = _merge_copies(blobs)
        summary = summarize_blob(blob)
    return SideLog(blob, summary, copies, cluster_ids, conflicts, problems, min_base, corrupt_after)
