"""The functions Spark runs on executors: scan one task, audit one partition.

Kept free of pyspark imports so they are plain functions, testable without a cluster.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable
from typing import Any

from .compare import PartitionReport, compare_partition
from .scan_segments import scan_range
from .scan_text import DumpFormatError, parse_dump
from .side import build_side
from .summary import LogSummary, summarize_blob
from .tasks import Chunk, Kind, ScanTask, Side

PartitionKey = tuple[str, int]
# Chunks of tasks that failed are grouped under this key; the driver turns them into exit 1.
ERROR_KEY: PartitionKey = ("", -1)


def _error_chunk(task: ScanTask, message: str) -> Chunk:
    return Chunk(task.side, "", -1, task.copy, -1, 0, b"", LogSummary(), error=message)


def _scan_dump(task: ScanTask) -> list[tuple[PartitionKey, Chunk]]:
    pattern = re.compile(task.topics or ".*")
    out: list[tuple[PartitionKey, Chunk]] = []
    with open(task.path, encoding="utf-8", errors="replace") as fh:
        for section in parse_dump(fh, where=task.path):
            if not pattern.fullmatch(section.topic):
                continue
            blob = bytes(section.records)
            chunk = Chunk(
                side=task.side,
                topic=section.topic,
                partition=section.partition,
                copy=f"{task.copy}:{section.log_dir}",
                segment_base=section.segment_base,
                start=section.index,
                blob=blob,
                summary=summarize_blob(blob),
                cluster_ids=section.cluster_ids,
                problems=section.problems,
            )
            out.append(((section.topic, section.partition), chunk))
    return out


def run_task(task: ScanTask, verify_crc: bool = True) -> list[tuple[PartitionKey, Chunk]]:
    key = (task.topic, task.partition)
    try:
        if task.kind == Kind.SEGMENT:
            return [(key, scan_range(task, verify_crc))]
        if task.kind == Kind.DUMP:
            return _scan_dump(task)
        empty = Chunk(task.side, task.topic, task.partition, task.copy, -1, 0, b"", LogSummary())
        return [(key, empty)]
    except (OSError, DumpFormatError) as exc:
        return [(ERROR_KEY, _error_chunk(task, f"--{task.side.value} {task.path}: {exc}"))]


def partition_of(key: PartitionKey) -> int:
    """A hash of (topic, partition) that is the same in every Python process."""
    return zlib.crc32(f"{key[0]}\0{key[1]}".encode())


def audit_partition(
    key: PartitionKey, chunks: Iterable[Chunk]
) -> tuple[PartitionReport | None, list[dict[str, Any]], list[str]]:
    """(report, batch differences, input errors) for one partition."""
    items = list(chunks)
    if key == ERROR_KEY:
        return None, [], sorted({c.error for c in items if c.error})
    src = [c for c in items if c.side == Side.SOURCE]
    dst = [c for c in items if c.side == Side.DESTINATION]
    report, diffs = compare_partition(
        key[0],
        key[1],
        build_side(src) if src else None,
        build_side(dst) if dst else None,
    )
    return report, diffs, []
