"""State, transitions and shared plumbing of the Raft core (see ``core.py`` for the overview).

``CoreBase`` owns the epoch state and the persisted election state: every transition goes
through ``_switch``, which writes the election state first when the rules need it durable,
forgets requests in flight (Kafka resets its connections on each transition) and reports a
leader change. Kafka's common response handling (``_common``) and ``maybeTransition`` live here
too, since every RPC family uses them.
"""

import random

from broker.raft import messages as m
from broker.raft.leader_state import LeaderState
from broker.raft.outputs import (
    Committed,
    LeaderChange,
    Output,
    RaftConfig,
    RaftInvariantError,
    Send,
    SnapshotWanted,
)
from broker.raft.quorum_state import ElectionState, QuorumStateStore
from broker.raft.replicated_log import ReplicatedLog
from broker.raft.states import (
    NEVER,
    Candidate,
    EpochState,
    Follower,
    Prospective,
    Resigned,
    Unattached,
)
from broker.raft.stats import RaftStats

RETRY_BACKOFF_BASE_MS = 100  # Kafka's base for the candidate's exponential election backoff


class CoreBase:
    def __init__(
        self,
        node_id: int,
        voters: frozenset[int],
        log: ReplicatedLog,
        store: QuorumStateStore,
        rng: random.Random,
        config: RaftConfig | None = None,
    ) -> None:
        self.node_id = node_id
        self.voters = voters
        self.log = log
        self.store = store
        self.rng = rng
        self.config = config or RaftConfig()
        self.is_voter = node_id in voters
        self.majority = len(voters) // 2 + 1
        self._remote_voters = tuple(sorted(v for v in voters if v != node_id))
        self.state: EpochState = Unattached(0, -1, NEVER)
        self._persisted: ElectionState | None = None
        self._out: list[Output] = []
        self._inflight: dict[int, tuple[int, int]] = {}  # dest -> (correlation id, deadline)
        self._backoff: dict[int, int] = {}  # dest -> no request before this time
        self._correlation = rng.randrange(1 << 30)
        self._hw = log.start_offset
        self._reported_leader = (-2, -2)
        self._bootstrap = rng.randrange(len(voters)) if voters else 0
        self._bytes_since_snapshot = 0
        self._snapshot_wanted = False
        # since when committed entries are in no snapshot (-1: none are)
        self._uncovered_since_ms = -1
        self._completing = False
        self.stats = RaftStats()

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int:
        return self.state.leader_id

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def state_name(self) -> str:
        st = self.state
        if isinstance(st, Unattached) and st.voted_id >= 0:
            return "Voted"
        return st.name

    @property
    def is_leader(self) -> bool:
        return isinstance(self.state, LeaderState)

    def epoch_start_offset(self) -> int | None:
        """As the leader, the offset of this epoch's LeaderChange entry; None otherwise."""
        st = self.state
        return st.epoch_start_offset if isinstance(st, LeaderState) else None

    def _drain(self) -> list[Output]:
        out, self._out = self._out, []
        return out

    def _can_send(self, now: int, dest: int) -> bool:
        return dest not in self._inflight and self._backoff.get(dest, -1) <= now

    def _send_request(self, now: int, dest: int, req: m.RaftRequest) -> None:
        if not self._can_send(now, dest):
            return
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        self._inflight[dest] = (self._correlation, now + self.config.request_timeout_ms)
        self._out.append(Send(dest, self._correlation, req))

    def _respond(self, dest: int, correlation_id: int, resp: m.RaftResponse) -> None:
        self._out.append(Send(dest, correlation_id, resp))

    def _election_timeout(self) -> int:
        t = self.config.election_timeout_ms
        return t + self.rng.randrange(t) if t > 0 else 0

    def _election_backoff(self, retries: int) -> int:
        r = self.rng.randrange(2 << min(20, retries - 1))
        return min(RETRY_BACKOFF_BASE_MS * r, self.config.election_backoff_max_ms)

    def _election_of(self, st: EpochState) -> ElectionState:
        me = self.node_id
        if isinstance(st, (LeaderState, Resigned)):
            return ElectionState(st.epoch, me, me, self.voters)
        if isinstance(st, Candidate):
            return ElectionState(st.epoch, -1, me, self.voters)
        if isinstance(st, Unattached):
            return ElectionState(st.epoch, -1, st.voted_id, self.voters)
        return ElectionState(st.epoch, st.leader_id, st.voted_id, self.voters)

    def _switch(self, now: int, new: EpochState, durable: bool) -> None:
        if durable:
            election = self._election_of(new)
            if election != self._persisted:
                self.store.write(election)  # durable before we act in the new state
                self._persisted = election
        old = self.state
        self.state = new
        if isinstance(new, (Prospective, Candidate)):
            self.stats.election_started(now)
        elif isinstance(new, (LeaderState, Follower)):
            self.stats.leader_known(now)
        self._inflight.clear()
        self._backoff.clear()
        if isinstance(old, LeaderState) and old is not new:
            for p in old.parked:
                self._respond(
                    p.sender, p.correlation_id, self._fetch_error(m.NOT_LEADER_OR_FOLLOWER)
                )
            old.parked = []
        key = (new.leader_id, new.epoch)
        if key != self._reported_leader:
            self._reported_leader = key
            self._out.append(LeaderChange(*key))

    def _to_unattached(
        self, now: int, epoch: int, voted: int = -1, deadline: int | None = None
    ) -> None:
        if not self.is_voter:
            deadline = NEVER
        elif deadline is None:
            deadline = now + self._election_timeout()
        self._switch(now, Unattached(epoch, voted, deadline), durable=True)

    def _to_follower(self, now: int, epoch: int, leader_id: int) -> None:
        if leader_id == self.node_id or leader_id not in self.voters:
            raise RaftInvariantError(
                f"node {self.node_id} told that {leader_id} leads epoch {epoch}"
            )
        st = self.state
        voted = (
            st.voted_id
            if epoch == st.epoch and isinstance(st, (Unattached, Prospective, Follower))
            else -1
        )
        if epoch == st.epoch and isinstance(st, Candidate):
            voted = self.node_id
        new = Follower(epoch, leader_id, voted, now + self.config.fetch_timeout_ms)
        self._switch(now, new, durable=True)

    def _to_prospective(self, now: int) -> None:
        st = self.state
        me = self.node_id
        if isinstance(st, Candidate):
            leader, voted, retries = -1, me, st.retries + 1
        elif isinstance(st, (Unattached, Follower)):
            leader, voted, retries = st.leader_id, st.voted_id, 1
        else:
            raise RaftInvariantError(f"{st.name} cannot become Prospective")
        new = Prospective(
            st.epoch, leader, voted, now + self._election_timeout(), retries, granted={me}
        )
        self._switch(now, new, durable=False)  # nothing persisted changes: no epoch bump

    def _to_candidate(self, now: int) -> None:
        st = self.state
        assert isinstance(st, Prospective)
        new = Candidate(
            st.epoch + 1, now + self._election_timeout(), st.retries, granted={self.node_id}
        )
        self._switch(now, new, durable=True)

    def _to_resigned(self, now: int, successors: tuple[int, ...]) -> None:
        st = self.state
        new = Resigned(
            st.epoch,
            self.node_id,
            now + self._election_timeout(),
            successors,
            set(self._remote_voters),
        )
        self._switch(now, new, durable=False)

    def _election_lost(self, now: int, st: Prospective) -> None:
        if st.leader_id >= 0:
            self._to_follower(now, st.epoch, st.leader_id)
        else:
            self._switch(
                now, Unattached(st.epoch, st.voted_id, now + self._election_timeout()), durable=True
            )

    def _has_leader(self) -> bool:
        return self.state.leader_id >= 0

    def _maybe_transition(self, now: int, leader_id: int, epoch: int) -> None:
        """Kafka's maybeTransition: follow what a peer says about the leader of an epoch."""
        st = self.state
        if leader_id == self.node_id:
            if epoch == st.epoch and isinstance(st, (LeaderState, Resigned)):
                return
            raise RaftInvariantError(
                f"node {self.node_id} told it leads epoch {epoch} in {st.name} {st.epoch}"
            )
        if epoch == st.epoch and leader_id >= 0 and st.leader_id >= 0 and st.leader_id != leader_id:
            raise RaftInvariantError(
                f"two leaders for epoch {epoch}: {st.leader_id} and {leader_id}"
            )
        if epoch > st.epoch:
            if leader_id >= 0:
                self._to_follower(now, epoch, leader_id)
            else:
                self._to_unattached(now, epoch)
        elif epoch == st.epoch and leader_id >= 0 and st.leader_id < 0:
            self._to_follower(now, epoch, leader_id)

    def _set_hw(self, hw: int) -> None:
        if hw <= self._hw:
            return
        self._hw = hw
        self.log.update_high_watermark(hw)
        self._out.append(Committed(hw))
        if (
            not self._snapshot_wanted
            and self._bytes_since_snapshot >= self.config.max_bytes_between_snapshots
        ):
            self._snapshot_wanted = True
            self._out.append(SnapshotWanted(hw))

    def _want_snapshot_by_time(self, now: int) -> None:
        """KIP-876: a committed entry that no snapshot holds has waited
        ``max_snapshot_interval_ms`` (its wait starts at the first poll that sees it)."""
        interval = self.config.max_snapshot_interval_ms
        if interval <= 0 or self._snapshot_wanted:
            return
        latest = self.log.latest_snapshot_id
        base = max(self.log.start_offset, latest.end_offset if latest is not None else 0)
        if self._hw <= base:
            self._uncovered_since_ms = -1
        elif self._uncovered_since_ms < 0:
            self._uncovered_since_ms = now
        elif now - self._uncovered_since_ms >= interval:
            self._snapshot_wanted = True
            self._out.append(SnapshotWanted(self._hw))

    def _common(self, now: int, error: int, leader_id: int, epoch: int) -> bool | None:
        """Kafka's maybeHandleCommonResponse: None if the specific handler should go on."""
        if epoch < self.epoch or error == m.UNKNOWN_LEADER_EPOCH:
            return True
        if epoch > self.epoch or error in (m.FENCED_LEADER_EPOCH, m.NOT_LEADER_OR_FOLLOWER):
            self._maybe_transition(now, leader_id, epoch)
            return True
        if leader_id >= 0 and not self._has_leader():
            self._to_follower(now, epoch, leader_id)
            return None if error == m.NONE else True
        if error == m.BROKER_NOT_AVAILABLE:
            return False
        if error == m.INVALID_REQUEST:
            raise RaftInvariantError(f"node {self.node_id} sent an invalid request")
        return None

    def _fetch_error(self, error: int) -> m.FetchResponse:
        return m.FetchResponse(error, m.LeaderIdAndEpoch(self.leader_id, self.epoch))
