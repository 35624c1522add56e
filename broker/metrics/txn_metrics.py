"""The transaction coordinator's series, over the ``__transaction_state`` partitions this node
coordinates:

- ``kmirror_txn_coordinator_transactions{state}``: transactional ids per state (Ongoing,
  PrepareCommit, ...); PrepareCommit/PrepareAbort are decided transactions whose markers are
  still being written, so a count that stays up means markers that cannot be written;
- ``kmirror_txn_coordinator_completions_running``: completions (markers, then Complete*) now
  running;
- counters ``kmirror_txn_coordinator_marker_retries_total`` (marker writes answered with an
  error and tried again), ``..._completions_restarted_total`` (decided transactions the periodic
  sweep found with no completion running) and ``..._completions_stopped_total`` (completions
  stopped because the shard moved; its next coordinator completes them).
"""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Final

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

PREFIX: Final = "kmirror_txn_coordinator"
STATES: Final = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "PrepareEpochFence",
)


@dataclass(frozen=True, slots=True)
class TxnSnapshot:
    states: tuple[tuple[str, int], ...]  # (state label, transactional ids in it)
    running: int
    marker_retries: int
    restarted: int
    stopped: int


class TxnCollector(Collector):
    def __init__(self, read: Callable[[], TxnSnapshot | None]) -> None:
        self._read = read

    def collect(self) -> Iterable[Any]:
        snap = self._read()
        if snap is None:
            return []
        states = GaugeMetricFamily(
            f"{PREFIX}_transactions",
            "Transactional ids this node coordinates, per state",
            labels=["state"],
        )
        counts = dict(snap.states)
        for state in (*STATES, *sorted(set(counts) - set(STATES))):
            states.add_metric([state], counts.get(state, 0))
        running = GaugeMetricFamily(
            f"{PREFIX}_completions_running", "Transaction completions (markers) now running"
        )
        running.add_metric([], snap.running)
        out: list[Any] = [states, running]
        for name, doc, value in (
            ("marker_retries", "Marker writes answered with an error and retried", snap.marker_retries),
            ("completions_restarted", "Decided transactions found with no completion running", snap.restarted),
            ("completions_stopped", "Completions stopped because the shard moved", snap.stopped),
        ):  # fmt: skip
            c = CounterMetricFamily(f"{PREFIX}_{name}", doc)
            c.add_metric([], value)
            out.append(c)
        return out
