from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from audit.compare import PartitionReport
from audit.discover import discover
from audit.tasks import Side
from audit.worker import audit_partition, run_task


def audit_locally(
    src: Path, dst: Path, split_bytes: int = 1 << 20, topics: str | None = None
) -> dict[tuple[str, int], tuple[PartitionReport, list[dict[str, object]]]]:
    """The job's executor functions run in this process (no Spark): fast logic tests."""
    import re

    pattern = re.compile(topics) if topics else None
    tasks = discover(str(src), Side.SOURCE, pattern, split_bytes) + discover(
        str(dst), Side.DESTINATION, pattern, split_bytes
    )
    groups = defaultdict(list)
    for task in tasks:
        for key, chunk in run_task(task):
            groups[key].append(chunk)
    out = {}
    for key, chunks in groups.items():
        report, diffs, errors = audit_partition(key, chunks)
        assert not errors, errors
        assert report is not None
        out[key] = (report, diffs)
    return out
