"""The cyclic garbage collector's pauses (`broker.gc_policy`): how long the node's loop stood
still in collections, per generation, and how much of the heap is frozen out of them.

``kmirror_gc_pause_seconds_total{generation="2"}`` rising fast means full collections walk a
large heap: the policy freezes survivors after a slow one, so a steady rise points at a heap
that keeps growing (a leak) rather than at the collector.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector


@dataclass(frozen=True, slots=True)
class GcStats:
    collections: tuple[int, int, int]  # per generation
    pause_s: tuple[float, float, float]
    freezes: int  # times the survivors of a slow full collection were frozen
    frozen_objects: int


class GcCollector(Collector):
    def __init__(self, read: Callable[[], GcStats | None]) -> None:
        self._read = read

    def collect(self) -> Iterable[Any]:
        s = self._read()
        if s is None:  # no policy installed (a node inside a test's process)
            return []
        collections = CounterMetricFamily(
            "kmirror_gc_collections",
            "Cyclic garbage collections, per generation",
            labels=["generation"],
        )
        pauses = CounterMetricFamily(
            "kmirror_gc_pause_seconds",
            "Time the node's threads spent in cyclic garbage collections, per generation",
            labels=["generation"],
        )
        for g in range(3):
            collections.add_metric([str(g)], s.collections[g])
            pauses.add_metric([str(g)], s.pause_s[g])
        freezes = CounterMetricFamily(
            "kmirror_gc_freezes", "Times the survivors of a slow full collection were frozen"
        )
        freezes.add_metric([], s.freezes)
        frozen = GaugeMetricFamily(
            "kmirror_gc_frozen_objects", "Objects frozen out of the collector's sight"
        )
        frozen.add_metric([], s.frozen_objects)
        return [collections, pauses, freezes, frozen]
