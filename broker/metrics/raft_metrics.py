"""The metadata quorum's metrics, named after Kafka's the way the Prometheus JMX exporter names
them: ``kafka.server:type=raft-metrics`` (KafkaRaftMetrics) as ``kafka_server_raft_metrics_<name>``
and ``kafka.controller:type=KafkaController`` as ``kafka_controller_kafkacontroller_<name>``,
dashes as underscores.

Kafka's ``*-rate`` sensors are counters here (``append_records_total``, ``fetch_records_total``:
take ``rate()`` in Prometheus), and ``elections_total`` counts the elections this node saw end
(it won one or learned the new leader). Latency averages and maxima are in milliseconds over
the last minute, NaN when nothing happened in it, as Kafka's windowed Avg/Max.
The snapshot is taken on the event loop (see ``on_loop.read_on_loop``).
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

RAFT = "kafka_server_raft_metrics_"
CONTROLLER = "kafka_controller_kafkacontroller_"
NAN = float("nan")

# Kafka's current-state values (a resigned leader is "unattached" there too)
STATES = ("leader", "candidate", "prospective", "voted", "follower", "observer", "unattached")


@dataclass(frozen=True, slots=True)
class QuorumSnapshot:
    """The quorum's figures for one scrape (-1: unknown, None: not measured)."""

    current_state: str  # one of STATES
    current_leader: int
    current_epoch: int
    current_vote: int
    high_watermark: int
    log_end_offset: int
    log_end_epoch: int
    is_voter: bool
    commit_latency_avg_ms: float | None = None
    commit_latency_max_ms: float | None = None
    election_latency_avg_ms: float | None = None
    election_latency_max_ms: float | None = None
    elections: int = 0
    append_records: int = 0
    fetch_records: int = 0
    fenced_brokers: int | None = None  # from the metadata image; None: not known here


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    g = GaugeMetricFamily(name, doc)
    g.add_metric([], value)
    return g


def _ms(value: float | None) -> float:
    return NAN if value is None else value


class QuorumCollector(Collector):
    def __init__(self, read: Callable[[], QuorumSnapshot | None]) -> None:
        self._read = read

    def collect(self) -> Iterable[Any]:
        s = self._read()
        if s is None:
            return []
        state = GaugeMetricFamily(
            RAFT + "current_state",
            "1 for this node's current Raft state (Kafka's current-state)",
            labels=["state"],
        )
        state.add_metric([s.current_state], 1)
        out: list[Any] = [
            state,
            _gauge(
                RAFT + "current_leader", "The quorum leader's id; -1: unknown", s.current_leader
            ),
            _gauge(RAFT + "current_epoch", "The current quorum epoch", s.current_epoch),
            _gauge(
                RAFT + "current_vote", "The id voted for in this epoch; -1: none", s.current_vote
            ),
            _gauge(
                RAFT + "high_watermark",
                "The high watermark this node knows; -1: unknown",
                s.high_watermark,
            ),
            _gauge(RAFT + "log_end_offset", "The metadata log's end offset", s.log_end_offset),
            _gauge(RAFT + "log_end_epoch", "The epoch of the log's last entry", s.log_end_epoch),
            _gauge(
                RAFT + "commit_latency_avg",
                "Average ms from a leader's append to its commit, last minute",
                _ms(s.commit_latency_avg_ms),
            ),
            _gauge(
                RAFT + "commit_latency_max",
                "Longest ms from a leader's append to its commit, last minute",
                _ms(s.commit_latency_max_ms),
            ),
            _gauge(
                RAFT + "election_latency_avg",
                "Average ms from the start of an election to a known leader, last minute",
                _ms(s.election_latency_avg_ms),
            ),
            _gauge(
                RAFT + "election_latency_max",
                "Longest ms from the start of an election to a known leader, last minute",
                _ms(s.election_latency_max_ms),
            ),
        ]
        for name, doc, value in (
            ("elections", "Elections this node saw end (won, or learned the leader)", s.elections),
            ("append_records", "Entries appended as leader", s.append_records),
            ("fetch_records", "Entries fetched from the leader", s.fetch_records),
        ):
            c = CounterMetricFamily(RAFT + name, doc)
            c.add_metric([], value)
            out.append(c)
        if s.is_voter:
            out.append(
                _gauge(
                    CONTROLLER + "activecontrollercount",
                    "1 on the active controller (the quorum leader), 0 on other controllers",
                    1 if s.current_state == "leader" else 0,
                )
            )
        if s.fenced_brokers is not None:
            out.append(
                _gauge(
                    CONTROLLER + "fencedbrokercount",
                    "Registered brokers that are fenced, in this node's metadata image",
                    s.fenced_brokers,
                )
            )
        return out
