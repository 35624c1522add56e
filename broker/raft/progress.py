"""What a leader knows of each replica's replication, for DescribeQuorum (Kafka's
``LeaderState.ReplicaState``) and the answer it gives.

Per replica: its log end offset (the offset of its last valid Fetch), the last time it fetched
and the last time it was caught up. Kafka's caught-up rule, applied at every valid Fetch with
the leader's end offset ``L`` at that moment:

- fetch offset >= ``L``: caught up now;
- else, fetch offset >= the leader end offset of its *previous* fetch: it was caught up at that
  previous fetch (it has since read everything the leader had then).

Timestamps are the leader's clock (the ``now_ms`` the core is given: wall clock in a node), -1
while unknown. A voter that never fetched in this epoch is described with end offset -1. The
leader describes itself with its own end offset and ``now`` for both timestamps.

Observers (replica id >= 0, not a voter) are remembered while they fetch: one that has not
fetched for ``OBSERVER_SESSION_TIMEOUT_MS`` is dropped when the quorum is described (Kafka's
rule), and at most ``MAX_OBSERVERS`` are kept (the least recently fetching one goes first), so
a stream of made-up replica ids cannot grow the leader's memory.
"""

from dataclasses import dataclass

OBSERVER_SESSION_TIMEOUT_MS = 300_000
MAX_OBSERVERS = 1000


class ReplicaProgress:
    __slots__ = ("end_offset", "last_caught_up_ms", "last_fetch_leader_end", "last_fetch_ms")

    def __init__(self) -> None:
        self.end_offset = -1
        self.last_fetch_ms = -1
        self.last_caught_up_ms = -1
        self.last_fetch_leader_end = -1  # the leader's end offset at the previous fetch

    def on_fetch(self, now_ms: int | None, fetch_offset: int, leader_end: int) -> None:
        """A valid Fetch at ``fetch_offset``, answered at ``now_ms`` (None: time unknown, only
        the end offset moves) while the leader's end offset was ``leader_end``."""
        self.end_offset = fetch_offset
        if now_ms is None:
            return
        if leader_end >= 0:
            if fetch_offset >= leader_end:
                self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
            elif self.last_fetch_leader_end > 0 and fetch_offset >= self.last_fetch_leader_end:
                self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
            self.last_fetch_leader_end = leader_end
        self.last_fetch_ms = max(self.last_fetch_ms, now_ms)


class ObserverTable:
    """Observers' progress, least recently fetching first, bounded by ``limit``."""

    __slots__ = ("_by_id", "limit")

    def __init__(self, limit: int = MAX_OBSERVERS) -> None:
        self._by_id: dict[int, ReplicaProgress] = {}
        self.limit = limit

    def touch(self, replica_id: int) -> ReplicaProgress:
        """The observer's progress, moved to the most recent end (created if new)."""
        p = self._by_id.pop(replica_id, None)
        if p is None:
            p = ReplicaProgress()
            while len(self._by_id) >= self.limit:
                del self._by_id[next(iter(self._by_id))]
        self._by_id[replica_id] = p
        return p

    def get(self, replica_id: int) -> ReplicaProgress | None:
        return self._by_id.get(replica_id)

    def pop(self, replica_id: int) -> ReplicaProgress | None:
        """An observer that became a voter: its progress moves to the voters'."""
        return self._by_id.pop(replica_id, None)

    def put(self, replica_id: int, progress: ReplicaProgress) -> None:
        """A voter that was removed and still fetches: an observer again."""
        self.touch(replica_id)
        self._by_id[replica_id] = progress

    def expire(self, now_ms: int) -> None:
        stale = [
            r
            for r, p in self._by_id.items()
            if now_ms - p.last_fetch_ms >= OBSERVER_SESSION_TIMEOUT_MS
        ]
        for r in stale:
            del self._by_id[r]

    def items(self) -> list[tuple[int, ReplicaProgress]]:
        return sorted(self._by_id.items())

    def __len__(self) -> int:
        return len(self._by_id)


@dataclass(frozen=True, slots=True)
class ReplicaDescription:
    """DescribeQuorum's ReplicaState (-1: unknown)."""

    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int


@dataclass(frozen=True, slots=True)
class QuorumDescription:
    """DescribeQuorum's PartitionData as the leader sees it: voters by id, then observers."""

    leader_id: int
    leader_epoch: int
    high_watermark: int  # -1 until this leader's first entry is committed
    voters: tuple[ReplicaDescription, ...]
    observers: tuple[ReplicaDescription, ...]
