"""Synchronous mirroring on the source (``kmirror_mirror_sync_*``): per partition of a
``mirror.sync.enable`` topic led here, whether acks=all currently answers without the mirrors
(the ``async`` policy's degraded mode), for how long it has in total, how many mirrors are in
sync; and how long acks=all produces waited for the mirrors (a histogram, p50/p99 by PromQL's
``histogram_quantile``). Plain data in, metric families out: no broker layer here."""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
)
from prometheus_client.registry import Collector

# Upper bounds (seconds) of the sync wait histogram: loopback round trips to the 30 s default.
WAIT_BUCKETS: Final = (
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0,
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class SyncPartitionRow:
    topic: str
    partition: int
    degraded: bool
    degraded_seconds: float
    in_sync_mirrors: int


@dataclass(frozen=True, slots=True)
class SyncSnapshot:
    partitions: tuple[SyncPartitionRow, ...]
    wait_buckets: tuple[int, ...]  # counts per WAIT_BUCKETS bound, then +Inf (not cumulative)
    wait_sum: float
    foreign_mirrors: int  # (mirror, topic) pairs seen fetching a sync topic without the signal


class MirrorSyncCollector(Collector):
    def __init__(self, read: Callable[[], SyncSnapshot | None]) -> None:
        self._read = read

    def collect(self) -> Iterable[Any]:
        snap = self._read()
        if snap is None:
            return []
        labels = ["topic", "partition"]
        degraded = GaugeMetricFamily(
            "kmirror_mirror_sync_degraded",
            "1 while acks=all on this sync partition answers without its mirrors "
            "(mirror.sync.on.timeout=async after a timeout)",
            labels=labels,
        )
        seconds = CounterMetricFamily(
            "kmirror_mirror_sync_degraded_seconds",
            "Time this sync partition spent degraded to asynchronous mirroring",
            labels=labels,
        )
        members = GaugeMetricFamily(
            "kmirror_mirror_sync_in_sync_mirrors",
            "Destination mirrors in sync for this partition (acks=all waits for each)",
            labels=labels,
        )
        for row in snap.partitions:
            key = [row.topic, str(row.partition)]
            degraded.add_metric(key, 1.0 if row.degraded else 0.0)
            seconds.add_metric(key, row.degraded_seconds)
            members.add_metric(key, float(row.in_sync_mirrors))
        cumulative, running = [], 0
        for bound, n in zip((*map(str, WAIT_BUCKETS), "+Inf"), snap.wait_buckets, strict=True):
            running += n
            cumulative.append((bound, float(running)))
        wait = HistogramMetricFamily(
            "kmirror_mirror_sync_wait_seconds",
            "Time acks=all produces of sync topics waited for the destination mirrors to commit, "
            "after their own ISR",
            buckets=cumulative,
            sum_value=snap.wait_sum,
        )
        foreign = GaugeMetricFamily(
            "kmirror_mirror_sync_foreign_mirrors",
            "Mirrors fetching a sync topic that do not send the sync signal (not kmirror)",
            snap.foreign_mirrors,
        )
        return [degraded, seconds, members, wait, foreign]
