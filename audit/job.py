"""The Spark pipeline: discover, scan ranges in parallel, group by partition, compare, write.

Stage 1 runs one task per byte range of each segment (and per dump file); each returns the
packed records and summary of the batches it owns, keyed by (topic, partition). Stage 2 groups
them by partition and compares the two sides there; only the per-partition reports and a
bounded list of differing batches come back to the driver.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .compare import PartitionReport, Verdict
from .discover import InputError, discover
from .tasks import ScanTask, Side
from .worker import audit_partition, partition_of, run_task

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_SPLIT_BYTES = 64 << 20
TASKS_PER_CORE = 3


def _interleave(tasks: list[ScanTask], slices: int) -> list[ScanTask]:
    """Order tasks so that parallelize's contiguous slices get similar byte totals."""
    by_size = sorted(tasks, key=lambda t: t.end - t.start, reverse=True)
    return [t for k in range(slices) for t in by_size[k::slices]]


@dataclass(frozen=True)
class AuditConfig:
    source: str
    destination: str
    output: str
    master: str | None = None
    topics: str | None = None
    split_bytes: int = DEFAULT_SPLIT_BYTES
    verify_crc: bool = True


@dataclass
class AuditResult:
    reports: list[PartitionReport]
    differences: list[dict[str, Any]]
    tasks: int = 0
    bytes_scanned: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        bad = {Verdict.DIVERGED.value, Verdict.MISSING.value}
        return 2 if any(r.verdict in bad for r in self.reports) else 0

    def counts(self) -> dict[str, int]:
        out = {v.value: 0 for v in Verdict}
        for r in self.reports:
            out[r.verdict] += 1
        return out


def plan(cfg: AuditConfig) -> list[ScanTask]:
    topics = None
    if cfg.topics is not None:
        try:
            topics = re.compile(cfg.topics)
        except re.error as exc:
            raise InputError(
                f"--topics {cfg.topics!r}: not a valid regular expression: {exc}"
            ) from exc
    return discover(cfg.source, Side.SOURCE, topics, cfg.split_bytes) + discover(
        cfg.destination, Side.DESTINATION, topics, cfg.split_bytes
    )


def run_audit(
    spark: SparkSession, cfg: AuditConfig, tasks: list[ScanTask] | None = None
) -> AuditResult:
    if tasks is None:
        tasks = plan(cfg)
    sc = spark.sparkContext
    verify = cfg.verify_crc
    partitions = len({(t.topic, t.partition) for t in tasks}) or 1
    # A PySpark task costs tens of ms of its own: give each a few ranges, not one, while
    # keeping enough tasks per core to even out unequal ones.
    slices = max(1, min(len(tasks), TASKS_PER_CORE * sc.defaultParallelism))
    reducers = max(1, min(partitions, TASKS_PER_CORE * sc.defaultParallelism))
    outcomes = (
        sc.parallelize(_interleave(tasks, slices), slices)
        .flatMap(lambda task: run_task(task, verify))
        .groupByKey(reducers, partition_of)
        .map(lambda kv: audit_partition(kv[0], kv[1]))
        .collect()
    )
    errors = sorted({e for _, _, errs in outcomes for e in errs})
    if errors:
        raise InputError("; ".join(errors))
    reports = sorted(
        (r for r, _, _ in outcomes if r is not None), key=lambda r: (r.topic, r.partition)
    )
    diffs = [d for r, ds, _ in outcomes if r is not None for d in ds]
    diffs.sort(key=lambda d: (d["topic"], d["partition"], d["base_offset"]))
    scanned = sum(t.end - t.start for t in tasks)
    return AuditResult(reports, diffs, tasks=len(tasks), bytes_scanned=scanned)
