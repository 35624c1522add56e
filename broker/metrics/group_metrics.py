"""The group coordinator's series, named after Kafka's ``group-coordinator-metrics`` (JMX
``kafka.server:type=group-coordinator-metrics``), over the ``__consumer_offsets`` partitions
this node coordinates:

- ``kafka_server_group_coordinator_metrics_group_count{protocol}``: groups per protocol
  (classic, consumer, share), Kafka's ``group-count``;
- ``..._classic_group_count{state}``, ``..._consumer_group_count{state}``,
  ``..._share_group_count{state}``: groups per state, every state of the type listed (Kafka's
  ``classic-group-count``, ``consumer-group-count``, ``share-group-count``);
- counters ``..._consumer_group_rebalance_total``, ``..._share_group_rebalance_total`` (new
  group epochs) and ``..._offset_commit_total`` (offsets committed): Kafka's ``*-count``, and
  its ``*-rate`` is ``rate()`` over them.
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

PREFIX: Final = "kafka_server_group_coordinator_metrics"
PROTOCOLS: Final = ("classic", "consumer", "share")
# each group type's states, as Kafka names them
STATES: Final = {
    "classic": ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty"),
    "consumer": ("Empty", "Assigning", "Reconciling", "Stable", "Dead"),
    "share": ("Empty", "Stable", "Dead"),
}


@dataclass(slots=True)
class GroupCounters:
    """Events counted as their records are written (not when a log is replayed on load)."""

    consumer_rebalances: int = 0
    share_rebalances: int = 0
    offset_commits: int = 0


@dataclass(frozen=True, slots=True)
class GroupSnapshot:
    # (group type, state) of each group this node coordinates
    groups: tuple[tuple[str, str], ...] = ()
    counters: GroupCounters = field(default_factory=GroupCounters)


class GroupCollector(Collector):
    def __init__(self, read: Callable[[], GroupSnapshot | None]) -> None:
        self._read = read

    def collect(self) -> Iterable[Any]:
        snap = self._read()
        if snap is None:
            return []
        total = GaugeMetricFamily(
            f"{PREFIX}_group_count",
            "Groups this node coordinates, per protocol",
            labels=["protocol"],
        )
        for protocol in PROTOCOLS:
            total.add_metric([protocol], sum(1 for t, _ in snap.groups if t == protocol))
        out: list[Any] = [total]
        for kind, states in STATES.items():
            family = GaugeMetricFamily(
                f"{PREFIX}_{kind}_group_count",
                f"{kind.capitalize()} groups this node coordinates, per state",
                labels=["state"],
            )
            for state in states:
                n = sum(1 for t, s in snap.groups if t == kind and s == state)
                family.add_metric([state], n)
            out.append(family)
        c = snap.counters
        for name, doc, value in (
            (
                "consumer_group_rebalance",
                "Consumer group epochs started (rebalances)",
                c.consumer_rebalances,
            ),
            (
                "share_group_rebalance",
                "Share group epochs started (rebalances)",
                c.share_rebalances,
            ),
            ("offset_commit", "Offsets committed (one per partition)", c.offset_commits),
        ):
            counter = CounterMetricFamily(f"{PREFIX}_{name}", doc)
            counter.add_metric([], value)
            out.append(counter)
        return out
