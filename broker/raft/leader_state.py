"""What a leader tracks in its epoch (Kafka's LeaderState): replica progress, the high
watermark, check-quorum and the fetches it holds back (long polling).

High watermark: sort the voters' end offsets (the leader's own counts only once flushed; a
follower's is the offset of its last valid Fetch, which it flushed before sending) in
descending order and take the element at index n // 2: the largest offset a majority holds.
It only counts once it is above ``epoch_start_offset``, the offset of the LeaderChange entry
this leader wrote first: until an entry of its own epoch is on a majority, the leader cannot
know that older entries it holds are committed (Raft's "Figure 8"). It never goes down.

Check-quorum: a leader that has not heard a Fetch or FetchSnapshot from a majority (itself
included) within 1.5 x fetch timeout resigns, so a partitioned leader stops serving. Kafka keeps
a set of voters that fetched since the last reset, so a voter that fetched just before a
partition can keep a cut-off leader in office for up to two windows; we keep each voter's last
fetch time instead, which bounds that at one window. A fetch counts when it arrives (not when a
long-polled one is answered).

Confirmed leadership (for the controller's timer-driven duties): a leader that was not running
for a while (a stalled event loop, a SIGSTOP) may have been deposed without hearing of it yet;
its timers all expired at once and Fetch requests sent before its followers moved on may still
sit unread in its sockets, so neither its clock nor a fetch arriving "now" proves anything.
After ``note_stall`` leadership counts as confirmed again only once an entry appended after the
stall has committed, as Raft confirms it: a majority fetched past it in this epoch, which none
of them could do after voting in a later one (a fetch sent before the stall cannot reach past
the log end of then). So a leader deposed before its stall ended never confirms. Besides (no
proof, a sign of life) a majority must have fetched within the fetch timeout.

Replica progress for DescribeQuorum (end offset, last fetch, last caught up; observers too):
see ``progress.py``. Unlike check-quorum, it is updated when a fetch is answered, as Kafka does.
"""

from dataclasses import dataclass

from broker.raft.messages import FetchRequest
from broker.raft.progress import (
    ObserverTable,
    QuorumDescription,
    ReplicaDescription,
    ReplicaProgress,
)

CHECK_QUORUM_FACTOR = 1.5


@dataclass(slots=True)
class ParkedFetch:
    sender: int
    correlation_id: int
    request: FetchRequest
    deadline: int


class LeaderState:
    __slots__ = (
        "begin_epoch_deadline",
        "check_quorum_timeout_ms",
        "end_offsets",
        "epoch",
        "epoch_start_offset",
        "high_watermark",
        "last_fetch",
        "local_end",
        "node_id",
        "observers",
        "parked",
        "progress",
        "stall_offset",
        "voters",
    )

    name = "Leader"

    def __init__(
        self,
        node_id: int,
        epoch: int,
        epoch_start_offset: int,
        voters: frozenset[int],
        now_ms: int,
        fetch_timeout_ms: int,
    ) -> None:
        self.node_id = node_id
        self.epoch = epoch
        self.epoch_start_offset = epoch_start_offset
        self.voters = voters
        self.local_end = -1  # the leader's own flushed end offset (it may not be a voter)
        # the voters' end offsets (the leader's own too while it is one)
        self.end_offsets: dict[int, int] = dict.fromkeys(voters, -1)
        self.progress = {v: ReplicaProgress() for v in voters if v != node_id}
        self.observers = ObserverTable()
        self.high_watermark = -1  # unknown until a majority holds an entry of this epoch
        self.check_quorum_timeout_ms = int(fetch_timeout_ms * CHECK_QUORUM_FACTOR)
        # each other voter's last Fetch arrival; a new leader gets one full window
        self.last_fetch: dict[int, int] = {v: now_ms for v in voters if v != node_id}
        self.stall_offset = -1  # the log end at the last stall: an entry there must commit
        self.begin_epoch_deadline = now_ms  # send BeginQuorumEpoch at once
        self.parked: list[ParkedFetch] = []

    @property
    def leader_id(self) -> int:
        return self.node_id

    def can_grant_vote(self, candidate: int, up_to_date: bool, pre_vote: bool) -> bool:
        return False

    def update_local(self, end_offset: int) -> bool:
        """The leader's own flushed end offset; True if the high watermark moved."""
        self.local_end = end_offset
        if self.node_id in self.end_offsets:
            self.end_offsets[self.node_id] = end_offset
        return self._maybe_update_high_watermark()

    def set_voters(self, voters: frozenset[int], now_ms: int) -> bool:
        """KIP-853: the voter set changed (a Voters record was appended or truncated away). A
        new voter brings the progress it made as an observer (its last fetch included);
        True if the high watermark moved."""
        for v in voters - self.voters:
            if v == self.node_id:
                self.end_offsets[v] = self.local_end
                continue
            seen = self.observers.pop(v)
            self.progress[v] = seen if seen is not None else ReplicaProgress()
            self.end_offsets[v] = self.progress[v].end_offset
            # check-quorum counts from its last fetch as an observer, not from now: a voter
            # added while cut off must not keep the leader in office a window longer
            self.last_fetch[v] = seen.last_fetch_ms if seen is not None else now_ms
        for v in self.voters - voters:
            self.end_offsets.pop(v, None)
            self.last_fetch.pop(v, None)
            gone = self.progress.pop(v, None)
            if gone is not None and v != self.node_id:
                self.observers.put(v, gone)
        self.voters = voters
        return self._maybe_update_high_watermark()

    def caught_up(self, replica_id: int, high_watermark: int, since_ms: int) -> bool:
        """An observer whose last fetch (at or after ``since_ms``) reached ``high_watermark``."""
        p = self.observers.get(replica_id)
        return p is not None and p.end_offset >= high_watermark and p.last_fetch_ms >= since_ms

    def update_replica(
        self, replica_id: int, fetch_offset: int, now_ms: int | None, fetched_ms: int | None = None
    ) -> bool:
        """A valid Fetch at ``fetch_offset`` (arrived at ``now_ms``; None when answering one
        that was held back), answered at ``fetched_ms`` (default ``now_ms``); True if the high
        watermark moved."""
        at = now_ms if fetched_ms is None else fetched_ms
        leader_end = self.local_end
        if replica_id in self.end_offsets:
            self.end_offsets[replica_id] = fetch_offset
            progress = self.progress.get(replica_id)
            if progress is not None:
                progress.on_fetch(at, fetch_offset, leader_end)
            if now_ms is not None:
                self.note_voter_fetch(replica_id, now_ms)
            return self._maybe_update_high_watermark()
        if replica_id >= 0:  # an observer (a negative id is a consumer, not a replica)
            self.observers.touch(replica_id).on_fetch(at, fetch_offset, leader_end)
        return False

    def note_voter_fetch(self, replica_id: int, now_ms: int) -> None:
        if replica_id in self.last_fetch:
            self.last_fetch[replica_id] = now_ms

    def note_stall(self, log_end: int) -> None:
        """This node was not running for a while: the entry at ``log_end`` (the next one
        appended) must commit before its leadership counts as confirmed again."""
        self.stall_offset = log_end

    def confirmed(self, now_ms: int, window_ms: int) -> bool:
        """Something of this epoch committed (after the last stall, if any), and a majority
        (itself included while a voter) fetched within ``window_ms``."""
        if self.high_watermark <= max(self.stall_offset, self.epoch_start_offset):
            return False
        needed = len(self.voters) // 2 + (0 if self.node_id in self.voters else 1)
        recent = sum(1 for t in self.last_fetch.values() if t >= now_ms - window_ms)
        return recent >= needed

    @property
    def check_quorum_deadline(self) -> int:
        """When the leader must resign unless more voters fetch: a majority needs n // 2 others
        (n // 2 + 1 when the leader removed itself and is no voter any more)."""
        needed = len(self.voters) // 2 + (0 if self.node_id in self.voters else 1)
        if needed == 0 or not self.last_fetch:
            return 1 << 62
        recent = sorted(self.last_fetch.values(), reverse=True)
        return recent[needed - 1] + self.check_quorum_timeout_ms

    def check_quorum_expired(self, now_ms: int) -> bool:
        return now_ms >= self.check_quorum_deadline

    def _maybe_update_high_watermark(self) -> bool:
        if not self.end_offsets:
            return False
        offsets = sorted(self.end_offsets.values(), reverse=True)
        candidate = offsets[len(offsets) // 2]
        if candidate > self.epoch_start_offset and candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def successors(self) -> tuple[int, ...]:
        """Other voters, most caught up first (the preferred successors on resignation)."""
        others = [v for v in self.end_offsets if v != self.node_id]
        return tuple(sorted(others, key=lambda v: (-self.end_offsets[v], v)))

    def describe(self, now_ms: int) -> QuorumDescription:
        """DescribeQuorum's answer (Kafka's LeaderState.describeQuorum)."""
        self.observers.expire(now_ms)
        voters = []
        for v in sorted(self.voters):
            p = self.progress.get(v)
            if v == self.node_id:
                voters.append(ReplicaDescription(v, self.local_end, now_ms, now_ms))
            elif p is None:
                voters.append(ReplicaDescription(v, -1, -1, -1))
            else:
                voters.append(
                    ReplicaDescription(v, self.end_offsets[v], p.last_fetch_ms, p.last_caught_up_ms)
                )
        observers = tuple(
            ReplicaDescription(r, p.end_offset, p.last_fetch_ms, p.last_caught_up_ms)
            for r, p in self.observers.items()
        )
        return QuorumDescription(
            self.node_id, self.epoch, self.high_watermark, tuple(voters), observers
        )
