"""What one Spark task reads, and what it hands back: plain, picklable values."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from .summary import LogSummary


class Side(StrEnum):
    SOURCE = "source"
    DESTINATION = "destination"


class Kind(StrEnum):
    SEGMENT = "segment"  # a byte range of a .log file
    DUMP = "dump"  # a whole kafka-dump-log text file
    EMPTY = "empty"  # a partition directory holding no .log file


@dataclass(frozen=True)
class ScanTask:
    side: Side
    kind: Kind
    path: str
    # The partition's copy: its log dir relative to the input root ("." for the root itself).
    copy: str
    # Segment and empty tasks know their partition from the directory name; dump tasks learn it
    # from the "Dumping <path>" lines, so these stay empty and ``topics`` filters on the executor.
    topic: str = ""
    partition: int = -1
    segment_base: int = 0
    start: int = 0  # byte range [start, end) of the batches this task owns
    end: int = 0
    topics: str | None = None  # topic filter (regex, full match) for dump tasks


@dataclass
class Chunk:
    """The batches one task found for one partition copy, as packed canonical records."""

    side: Side
    topic: str
    partition: int
    copy: str
    segment_base: int
    start: int  # orders chunks of one copy: byte position, or section number in a dump
    blob: bytes
    summary: LogSummary
    cluster_ids: dict[int, str] = field(default_factory=dict)  # marker offset -> cluster id
    problems: list[str] = field(default_factory=list)
    # The bytes stopped parsing as batches before the end of the range (not a torn tail).
    corrupt: bool = False
    # A task that could not read its input at all says why (the driver exits 1 with it).
    error: str | None = None
