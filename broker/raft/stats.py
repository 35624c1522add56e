"""Counters and latencies of one Raft replica, for its metrics (Kafka's ``KafkaRaftMetrics``).

The core feeds them with the times it is given (no clock of its own):

- commit latency: from a leader's append to the moment the high watermark passes its last
  entry, one sample per ``append`` call (Kafka records per batch). Appends still pending when
  the node stops leading are dropped, as Kafka fails their futures.
- election latency: from the moment a voter starts an election (it becomes Prospective or
  Candidate with none running) to the moment it knows a leader (it leads or follows). Each
  such end counts one election.
- records appended as leader and fetched as follower (Kafka's append-records / fetch-records).

Averages and maxima cover a sliding window of ``WINDOW_MS`` (Kafka's two 30 s samples), None
when the window is empty (Kafka reports NaN).
"""

from collections import deque

WINDOW_MS = 60_000
WINDOW_CAP = 4096  # samples kept per window at most (the oldest go first)


class Window:
    """Samples of the last ``span_ms``: their average and maximum."""

    __slots__ = ("_samples", "cap", "span_ms")

    def __init__(self, span_ms: int = WINDOW_MS, cap: int = WINDOW_CAP) -> None:
        self.span_ms = span_ms
        self.cap = cap
        self._samples: deque[tuple[int, float]] = deque()

    def record(self, now_ms: int, value: float) -> None:
        self._samples.append((now_ms, value))
        if len(self._samples) > self.cap:
            self._samples.popleft()

    def _trim(self, now_ms: int) -> None:
        s = self._samples
        while s and s[0][0] <= now_ms - self.span_ms:
            s.popleft()

    def avg(self, now_ms: int) -> float | None:
        self._trim(now_ms)
        if not self._samples:
            return None
        return sum(v for _, v in self._samples) / len(self._samples)

    def max(self, now_ms: int) -> float | None:
        self._trim(now_ms)
        if not self._samples:
            return None
        return max(v for _, v in self._samples)


class RaftStats:
    __slots__ = (
        "_pending",
        "appended_records",
        "commit_latency",
        "election_latency",
        "election_started_ms",
        "elections",
        "fetched_records",
    )

    def __init__(self) -> None:
        self.appended_records = 0
        self.fetched_records = 0
        self.elections = 0
        self.commit_latency = Window()
        self.election_latency = Window()
        self.election_started_ms = -1
        self._pending: deque[tuple[int, int]] = deque()  # (last offset, append time)

    def leader_appended(self, now_ms: int, last_offset: int, records: int) -> None:
        self.appended_records += records
        self._pending.append((last_offset, now_ms))

    def follower_fetched(self, records: int) -> None:
        self.fetched_records += records

    def settle(self, now_ms: int, high_watermark: int, leading: bool) -> None:
        """Record the commit latency of appends now below the high watermark."""
        pending = self._pending
        if not pending:
            return
        if not leading:
            pending.clear()
            return
        while pending and pending[0][0] < high_watermark:
            _, appended = pending.popleft()
            self.commit_latency.record(now_ms, max(0, now_ms - appended))

    def election_started(self, now_ms: int) -> None:
        if self.election_started_ms < 0:
            self.election_started_ms = now_ms

    def leader_known(self, now_ms: int) -> None:
        if self.election_started_ms >= 0:
            self.election_latency.record(now_ms, max(0, now_ms - self.election_started_ms))
            self.elections += 1
            self.election_started_ms = -1
