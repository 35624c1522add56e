"""Byte compare of a partition's replicas, straight from each node's segment files.

A partition lives in ``<log dir>/<topic>-<partition>/`` as ``<base offset>.log`` segments
(broker/log/segment.py). Replicas may roll segments at different points, so the unit compared
is the batch, not the file: every batch of every segment in offset order, as (base offset,
last offset, digest of its bytes). Replicas agree when those lists are equal: the same batches,
byte for byte, at the same offsets.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import NamedTuple

from broker.log.segment import LOG_SUFFIX, iter_headers
from protocol.records.batch import BatchView
from protocol.records.iterate import iter_records


class Batch(NamedTuple):
    base_offset: int
    last_offset: int
    digest: str


def partition_batches(partition_dir: Path) -> list[Batch]:
    """Every whole batch of the partition's segments, in offset order (a torn tail is left out)."""
    out: list[Batch] = []
    for seg in sorted(partition_dir.glob(f"*{LOG_SUFFIX}")):
        fd = os.open(seg, os.O_RDONLY)
        try:
            size = os.fstat(fd).st_size
            for h in iter_headers(fd, 0, size):
                data = os.pread(fd, h.size, h.position)
                out.append(Batch(h.base_offset, h.last_offset, hashlib.sha1(data).hexdigest()))
        finally:
            os.close(fd)
    return out


def compare_replicas(
    log_dirs: dict[int, Path], assignment: dict[tuple[str, int], list[int]]
) -> list[str]:
    """What differs between the replicas of each partition (``assignment``: (topic, partition)
    -> replica node ids; ``log_dirs``: node id -> its log dir). Empty when all agree."""
    problems: list[str] = []
    for (topic, p), replicas in sorted(assignment.items()):
        copies: dict[int, list[Batch]] = {}
        for node_id in replicas:
            d = log_dirs[node_id] / f"{topic}-{p}"
            if not d.is_dir():
                problems.append(f"{topic}-{p}: no replica directory on node {node_id}")
                continue
            copies[node_id] = partition_batches(d)
        if len(copies) < 2:
            continue
        (first_id, first), *rest = sorted(copies.items())
        for node_id, other in rest:
            if other == first:
                continue
            i = next(
                (i for i, (x, y) in enumerate(zip(first, other, strict=False)) if x != y),
                min(len(first), len(other)),
            )

            def at(batches: list[Batch], i: int = i) -> str:
                return f"batch {batches[i][:2]}" if i < len(batches) else "the end"

            problems.append(
                f"{topic}-{p}: node {first_id} has {len(first)} batches, node {node_id} "
                f"{len(other)}; first difference at #{i}: {at(first)} vs {at(other)}"
            )
    return problems


def holds_at(partition_dir: Path, offset: int) -> str:
    """What one replica holds at ``offset``, for a failure message: the batch (offsets, leader
    epoch, producer id/epoch/sequence) and the record's value, or where its log ends."""
    last = -1
    for seg in sorted(partition_dir.glob(f"*{LOG_SUFFIX}")):
        fd = os.open(seg, os.O_RDONLY)
        try:
            for h in iter_headers(fd, 0, os.fstat(fd).st_size):
                last = h.last_offset
                if h.base_offset <= offset <= h.last_offset:
                    b = BatchView(os.pread(fd, h.size, h.position))
                    values = {r.offset: r.value for r in iter_records(b)}
                    kind = "control " if b.is_control else "txn " if b.is_transactional else ""
                    return (
                        f"{kind}batch {b.base_offset}..{b.last_offset} epoch "
                        f"{b.partition_leader_epoch} pid {b.producer_id}/{b.producer_epoch} "
                        f"seq {b.base_sequence}: value {values.get(offset)!r}"
                    )
        finally:
            os.close(fd)
    return f"nothing (log ends at {last})" if partition_dir.is_dir() else "no replica directory"


def evidence(log_dirs: dict[int, Path], topic: str, p: int, offset: int) -> str:
    """What every node's copy of ``topic-p`` holds at ``offset``."""
    return "; ".join(
        f"node {n}: {holds_at(d / f'{topic}-{p}', offset)}" for n, d in sorted(log_dirs.items())
    )
