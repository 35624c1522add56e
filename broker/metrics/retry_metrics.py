"""``kmirror_node_request_retries``: how often this node sent a node-to-node request again
(AlterPartition, the controller channels, broker registration/heartbeats), and
``kmirror_controller_written_pending_batches`` / ``..._rollbacks``: the active controller's
batches written but not yet committed, and the leader epochs that ended with some uncommitted.
A counter that keeps rising is a loop that does not succeed."""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

RETRIES = "kmirror_node_request_retries"


@dataclass(frozen=True, slots=True)
class RetrySnapshot:
    retries: Mapping[str, int]  # request -> retries so far
    written_pending: int = 0
    written_rollbacks: int = 0


class RetryCollector(Collector):
    def __init__(self, read: Callable[[], RetrySnapshot | None]) -> None:
        self._read = read

    def collect(self) -> Iterable[Any]:
        snap = self._read()
        if snap is None:
            return []
        c = CounterMetricFamily(
            RETRIES, "Node-to-node requests sent again after a failure", labels=["request"]
        )
        for request, n in sorted(snap.retries.items()):
            c.add_metric([request], float(n))
        return [
            c,
            GaugeMetricFamily(
                "kmirror_controller_written_pending_batches",
                "Batches the active controller appended that are not committed yet",
                snap.written_pending,
            ),
            CounterMetricFamily(
                "kmirror_controller_written_rollbacks",
                "Leader epochs that ended with written batches uncommitted",
                snap.written_rollbacks,
            ),
        ]
