"""Log file descriptors: the cache of sealed segments' files and running out of descriptors.

``kafka_log_open_file_failures_total{operation}`` counts requests and tasks that failed for
want of a file descriptor (EMFILE/ENFILE): the partition got KAFKA_STORAGE_ERROR (produce,
fetch) or stayed unhosted (opening the log), and the node went on. Alert on any increase.
"""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

# Always exported, at 0 until it happens, so an alert has a series to watch.
OPERATIONS = ("produce", "fetch", "follower append", "opening the log")


@dataclass(frozen=True, slots=True)
class LogFileStats:
    cached: int  # sealed segments' log files held open by the cache
    max_cached: int  # its bound (log.max.open.files, shrunk to a small open-file limit)
    opens: int  # cache misses: files opened on demand
    evictions: int
    failures: Mapping[str, int]  # operation -> failures for want of a descriptor


class LogFileCollector(Collector):
    def __init__(self, read: Callable[[], LogFileStats]) -> None:
        self._read = read

    def collect(self) -> Iterable[Any]:
        s = self._read()
        failures = CounterMetricFamily(
            "kafka_log_open_file_failures",
            "Requests or tasks that failed because the node was out of file descriptors "
            "(EMFILE/ENFILE), per operation",
            labels=["operation"],
        )
        for op in sorted(set(OPERATIONS) | set(s.failures)):
            failures.add_metric([op], s.failures.get(op, 0))
        cached = GaugeMetricFamily(
            "kafka_log_cached_open_files", "Sealed segments' log files held open by the cache"
        )
        cached.add_metric([], s.cached)
        bound = GaugeMetricFamily(
            "kafka_log_cached_open_files_max", "The bound on cached open log files"
        )
        bound.add_metric([], s.max_cached)
        opens = CounterMetricFamily(
            "kafka_log_cached_file_opens", "Sealed segments' log files opened on demand"
        )
        opens.add_metric([], s.opens)
        evictions = CounterMetricFamily(
            "kafka_log_cached_file_evictions", "Cached log files closed to stay within the bound"
        )
        evictions.add_metric([], s.evictions)
        return [failures, cached, bound, opens, evictions]
