"""The cluster as this node's metadata image has it, named after Kafka's KafkaController gauges
(``kafka.controller:type=KafkaController`` as ``kafka_controller_kafkacontroller_<name>``):
``offlinepartitionscount`` (partitions without a leader: every replica in their ISR is
fenced or gone, so nobody can produce to them or read them), ``globalpartitioncount``,
``globaltopiccount`` and ``activebrokercount`` (registered and not fenced).

Kafka reports these on its controllers; every kmirror node reports them from its own image, so
a dashboard takes ``max()`` over the nodes (a node that lags shows the older figures).
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

PREFIX = "kafka_controller_kafkacontroller_"


@dataclass(frozen=True, slots=True)
class ClusterCounts:
    topics: int
    partitions: int
    offline_partitions: int  # no leader
    active_brokers: int  # registered, not fenced


class ClusterCollector(Collector):
    def __init__(self, read: Callable[[], ClusterCounts | None]) -> None:
        self._read = read

    def collect(self) -> Iterable[Any]:
        c = self._read()
        if c is None:
            return []
        return [
            GaugeMetricFamily(
                PREFIX + "offlinepartitionscount",
                "Partitions without a leader in this node's metadata image",
                c.offline_partitions,
            ),
            GaugeMetricFamily(
                PREFIX + "globalpartitioncount",
                "Partitions in this node's metadata image",
                c.partitions,
            ),
            GaugeMetricFamily(
                PREFIX + "globaltopiccount", "Topics in this node's metadata image", c.topics
            ),
            GaugeMetricFamily(
                PREFIX + "activebrokercount",
                "Registered brokers that are not fenced, in this node's metadata image",
                c.active_brokers,
            ),
        ]
