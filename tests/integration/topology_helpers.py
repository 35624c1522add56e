"""Checks shared by the mirror topology tests (chain, fan-in, fan-out): every replica of a
partition byte-identical to the source's log, by the audit's own scanning and comparison run in
this process (the Spark job costs a JVM start per run, so the suite runs it once), and by a
batch-by-batch digest of the segment files; the MIRROR_PID_RESET markers a log holds; topic ids
as a stock admin client reads them.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import TopicCollection
from confluent_kafka.admin import AdminClient

from audit.compare import PartitionReport
from audit.discover import discover
from audit.tasks import Chunk, Side
from audit.worker import PartitionKey, audit_partition, run_task
from broker.log.segment import LOG_SUFFIX, iter_headers
from protocol.records import BatchView, ControlType, iter_records, parse_control_record
from tests.faults.replicas import Batch, partition_batches

from .node import Node

Reports = dict[PartitionKey, PartitionReport]


def audit_dirs(source: Path, destination: Path, topics: str) -> Reports:
    """The audit job's per-partition verdicts for two log dirs (or dirs of log dirs), computed
    with its executor functions in this process: discover, scan every range, compare."""
    pattern = re.compile(topics)
    tasks = discover(str(source), Side.SOURCE, pattern, 1 << 20)
    tasks += discover(str(destination), Side.DESTINATION, pattern, 1 << 20)
    groups: dict[PartitionKey, list[Chunk]] = defaultdict(list)
    for task in tasks:
        for key, chunk in run_task(task):
            groups[key].append(chunk)
    out: Reports = {}
    for key, chunks in groups.items():
        report, _diffs, errors = audit_partition(key, chunks)
        assert not errors, errors
        assert report is not None
        out[key] = report
    return out


def assert_identical(reports: Reports, expect: set[PartitionKey], what: str) -> None:
    """Every expected partition is there and IDENTICAL (nothing missing, extra or lagging)."""
    assert set(reports) == expect, (what, sorted(reports), sorted(expect))
    bad = {
        k: (r.verdict, r.reason, r.problems)
        for k, r in reports.items()
        if r.verdict != "IDENTICAL" or r.problems or r.matched_batches == 0
    }
    assert not bad, (what, bad)


def batches(log_dir: Path, topic: str, partition: int) -> list[Batch]:
    """(base offset, last offset, digest of the bytes) of every batch of one replica."""
    d = log_dir / f"{topic}-{partition}"
    assert d.is_dir(), f"no replica directory {d}"
    return partition_batches(d)


def markers(log_dir: Path, topic: str, partition: int) -> list[tuple[int, str | None]]:
    """(offset, source cluster id) of each MIRROR_PID_RESET control batch of one replica."""
    out: list[tuple[int, str | None]] = []
    for seg in sorted((log_dir / f"{topic}-{partition}").glob(f"*{LOG_SUFFIX}")):
        fd = os.open(seg, os.O_RDONLY)
        try:
            for h in iter_headers(fd, 0, os.fstat(fd).st_size):
                b = BatchView(os.pread(fd, h.size, h.position))
                if not b.is_control:
                    continue
                rec = next(iter(iter_records(b)))
                control = parse_control_record(rec.key, rec.value)
                if control.type == ControlType.MIRROR_PID_RESET:
                    out.append((b.base_offset, control.source_cluster_id))
        finally:
            os.close(fd)
    return out


def producer_ids(log_dir: Path, topic: str, partition: int) -> list[int]:
    """The producer id of each data batch of one replica, in offset order."""
    out: list[int] = []
    for seg in sorted((log_dir / f"{topic}-{partition}").glob(f"*{LOG_SUFFIX}")):
        fd = os.open(seg, os.O_RDONLY)
        try:
            for h in iter_headers(fd, 0, os.fstat(fd).st_size):
                b = BatchView(os.pread(fd, h.size, h.position))
                if not b.is_control:
                    out.append(b.producer_id)
        finally:
            os.close(fd)
    return out


def topic_id(bootstrap: str, topic: str) -> str:
    """The topic's id as confluent-kafka's AdminClient describes it."""
    a = AdminClient({"bootstrap.servers": bootstrap})
    desc = a.describe_topics(TopicCollection([topic]))[topic].result(15)
    return str(desc.topic_id)


@contextmanager
def running_together(*nodes: Node, clean_stop: bool = False) -> Iterator[None]:
    """Launch every node at once and wait for each (a loaded machine starts them in the time of
    one); on leaving, kill them, or with ``clean_stop`` SIGTERM them all at once (a cluster's
    last node would wait for a quorum already gone) and wait, killing a node that does not exit
    in time. Only these processes, by their handles."""
    try:
        for n in nodes:
            n.launch()
        deadline = time.monotonic() + 90
        for n in nodes:
            n.wait_started(max(1.0, deadline - time.monotonic()))
        yield
    finally:
        live = [n for n in nodes if n.proc is not None and n.proc.poll() is None]
        if clean_stop:
            for n in live:
                assert n.proc is not None
                n.proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 30
            for n in live:
                assert n.proc is not None
                try:
                    n.proc.wait(max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    n.kill()
        for n in nodes:
            n.kill()
