"""What the mirror does with one partition of a source Fetch answer, decided from the answer and
the local log's offsets (the shell, `broker.mirror.fetch_append`, carries it out):

1. `verdict`: an error, a diverging epoch, or a log that moved under the request stop here
   (reconcile with the source, park, or fetch again); else the records are looked at.
2. `plan_append`: which whole batches extend our log (those at or past our end), whether the
   first of them straddles our end (its start lies below it: the source's log start or a
   truncation point fell inside the batch) so our log is first cut back to the batch, how the
   bytes split into appends no bigger than a segment, and the control batch after them the
   mirror cannot read (the partition stops there).
3. `follow_log_start`: the source's log start (retention, DeleteRecords) followed as far as our
   copy reaches (never past our high watermark).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Final, Protocol, TypeVar

NONE: Final = 0
OFFSET_OUT_OF_RANGE: Final = 1


class Batch(Protocol):
    """The header fields of a fetched batch the decisions read (a `protocol.records.BatchView`)."""

    @property
    def base_offset(self) -> int: ...
    @property
    def last_offset(self) -> int: ...
    @property
    def is_control(self) -> bool: ...
    @property
    def position(self) -> int: ...
    @property
    def size(self) -> int: ...


B = TypeVar("B", bound=Batch)


class Verdict(enum.Enum):
    RECONCILE = "reconcile"  # OFFSET_OUT_OF_RANGE or a diverging epoch: realign with the source
    PARK = "park"  # another error from the source: back off, fetch again
    REFETCH = "refetch"  # our log moved under the request (it was cut): ask again
    RECORDS = "records"  # look at the records (plan_append)


def verdict(error_code: int, diverging_epoch: int, local_end: int, fetch_offset: int) -> Verdict:
    if error_code == OFFSET_OUT_OF_RANGE:
        return Verdict.RECONCILE
    if error_code != NONE:
        return Verdict.PARK
    if local_end != fetch_offset:
        return Verdict.REFETCH
    if diverging_epoch >= 0:
        return Verdict.RECONCILE  # never append past a diverging epoch
    return Verdict.RECORDS


@dataclass(frozen=True, slots=True)
class AppendPlan:
    # byte ranges of the answer to append, in order, each within segment.bytes (unless one
    # batch alone is bigger)
    chunks: tuple[tuple[int, int], ...] = ()
    # cut our log back to this offset first (-1: no cut); ``restart``: restart it empty there
    cut_to: int = -1
    restart: bool = False
    first_offset: int = -1  # of the first batch appended
    refused: str | None = None  # why the batch after the appended ones cannot be stored
    size: int = field(default=0)  # bytes appended


def plan_append(
    batches: Iterable[B],
    local_end: int,
    local_start: int,
    segment_bytes: int,
    control_problem: Callable[[B], str | None],
) -> AppendPlan:
    """The appends for the fetched ``batches`` on a log ending at ``local_end``."""
    start = end = -1
    first: B | None = None
    refused: str | None = None
    sizes: list[tuple[int, int]] = []
    for view in batches:
        if view.last_offset < local_end:
            continue
        if view.is_control:
            refused = control_problem(view)
            if refused is not None:
                break
        if start < 0:
            start, first = view.position, view
        end = view.position + view.size
        sizes.append((view.position, view.size))
    if first is None:
        return AppendPlan(refused=refused)
    cut_to, restart = -1, False
    if first.base_offset < local_end:
        # restart at the batch, as a Kafka follower does; the log start moves back up later
        cut_to = first.base_offset
        restart = local_end == local_start or first.base_offset < local_start
    limit = max(segment_bytes, 1)
    chunks: list[tuple[int, int]] = []
    chunk_start = start
    for pos, size in sizes:
        if pos + size - chunk_start > limit and pos > chunk_start:
            chunks.append((chunk_start, pos))
            chunk_start = pos
    chunks.append((chunk_start, end))
    return AppendPlan(
        chunks=tuple(chunks),
        cut_to=cut_to,
        restart=restart,
        first_offset=first.base_offset,
        refused=refused,
        size=end - start,
    )


def follow_log_start(local_start: int, local_hw: int, source_start: int) -> int | None:
    """The log start to move ours up to, or None."""
    if local_start < source_start <= local_hw:
        return source_start
    return None
