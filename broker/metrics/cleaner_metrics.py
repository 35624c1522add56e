"""The log cleaner's gauges, named after Kafka's (``kafka.log:type=LogCleaner`` and
``type=LogCleanerManager``) the way the Prometheus JMX exporter names them:
``kafka_log_logcleaner_<name>`` and ``kafka_log_logcleanermanager_<name>``, dashes as
underscores. Integers, as Kafka's gauges are. The snapshot is taken on the event loop."""

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

CLEANER = "kafka_log_logcleaner_"
MANAGER = "kafka_log_logcleanermanager_"


@dataclass(frozen=True, slots=True)
class CleanerSnapshot:
    """The cleaner's figures for one scrape (Kafka's gauges of the same names)."""

    max_buffer_utilization_percent: int = 0
    cleaner_recopy_percent: int = 0
    max_clean_time_secs: int = 0
    max_compaction_delay_secs: int = 0
    dead_thread_count: int = 0
    max_dirty_percent: int = 0
    time_since_last_run_ms: int = 0
    # per log directory (every log dir of the node, 0 when none)
    uncleanable_partitions_count: dict[str, int] = field(default_factory=dict)
    uncleanable_bytes: dict[str, int] = field(default_factory=dict)


_CLEANER_GAUGES = (
    (
        "max_buffer_utilization_percent",
        "Largest offset map use of a worker's last clean, % of its slots "
        "(log.cleaner.dedupe.buffer.size / threads / 24 bytes)",
    ),
    (
        "cleaner_recopy_percent",
        "Bytes written / bytes read over every worker's last clean, %",
    ),
    ("max_clean_time_secs", "Longest last clean of any worker, seconds"),
    (
        "max_compaction_delay_secs",
        "Longest time a partition's dirty data waited past max.compaction.lag.ms, at the "
        "workers' last picks, seconds",
    ),
)
_MANAGER_GAUGES = (
    ("max_dirty_percent", "Dirty bytes / total bytes of the dirtiest compacted partition, %"),
    ("time_since_last_run_ms", "Milliseconds since a worker last looked for a partition"),
)


class CleanerCollector(Collector):
    def __init__(self, read: Callable[[], CleanerSnapshot | None]) -> None:
        self._read = read

    def collect(self) -> Iterable[Any]:
        snap = self._read()
        if snap is None:
            return []
        out = []
        for name, doc in _CLEANER_GAUGES:
            g = GaugeMetricFamily(CLEANER + name, doc)
            g.add_metric([], getattr(snap, name))
            out.append(g)
        dead = GaugeMetricFamily(
            CLEANER + "deadthreadcount", "Cleaner workers that died (Kafka's DeadThreadCount)"
        )
        dead.add_metric([], snap.dead_thread_count)
        out.append(dead)
        for name, doc in _MANAGER_GAUGES:
            g = GaugeMetricFamily(MANAGER + name, doc)
            g.add_metric([], getattr(snap, name))
            out.append(g)
        count = GaugeMetricFamily(
            MANAGER + "uncleanable_partitions_count",
            "Partitions the cleaner gave up on (a corrupt batch, an unexpected error), per log dir",
            labels=["log_directory"],
        )
        size = GaugeMetricFamily(
            MANAGER + "uncleanable_bytes",
            "Cleanable bytes of the partitions the cleaner gave up on, per log dir",
            labels=["log_directory"],
        )
        for d, n in sorted(snap.uncleanable_partitions_count.items()):
            count.add_metric([d], n)
        for d, n in sorted(snap.uncleanable_bytes.items()):
            size.add_metric([d], n)
        out.extend((count, size))
        return out
