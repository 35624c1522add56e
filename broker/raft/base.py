"""State, transitions and shared plumbing of the Raft core (see ``core.py`` for the overview).

``CoreBase`` owns the epoch state and the persisted election state: every transition goes
through ``_switch``, which writes the election state first when the rules need it durable,
forgets requests in flight (Kafka resets its connections on each transition) and reports a
leader change. Kafka's common response handling (``_common``) and ``maybeTransition`` live here
too, since every RPC family uses them.
"""

import random
import uuid

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
from broker.raft.voter_set import ZERO_UUID, VoterHistory, VoterSet
from protocol.records.kraft_control import decode_kraft_version, encode_kraft_version

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
        *,
        directory_id: uuid.UUID = ZERO_UUID,
        bootstrap_ids: tuple[int, ...] = (),
    ) -> None:
        self.node_id = node_id
        self.directory_id = directory_id
        self.log = log
        self.store = store
        self.rng = rng
        self.config = config or RaftConfig()
        # static voters (controller.quorum.voters, kraft.version 0); empty: the set is in the log
        self.static_voters = voters
        self._history = VoterHistory(None)
        self._kraft_versions: list[tuple[int, int]] = []  # (offset, kraft.version) from the log
        # whom an observer asks who leads when it knows no voter (controller.quorum.bootstrap.servers)
        self.bootstrap_ids = bootstrap_ids
        self.voter_set = VoterSet.of_ids(voters)
        self.voters: frozenset[int] = frozenset()
        self.is_voter = False
        self.majority = 1
        self._remote_voters: tuple[int, ...] = ()
        self._set_voters(self.voter_set)
        self.state: EpochState = Unattached(0, -1, NEVER)
        self._persisted: ElectionState | None = None
        self._out: list[Output] = []
        self._inflight: dict[int, tuple[int, int]] = {}  # dest -> (correlation id, deadline)
        self._backoff: dict[int, int] = {}  # dest -> no request before this time
        self._correlation = rng.randrange(1 << 30)
        self._hw = log.start_offset
        self._reported_leader = (-2, -2)
        self._bootstrap = rng.randrange(1 << 16)
        self._bytes_since_snapshot = 0
        self._snapshot_wanted = False
        # since when committed entries are in no snapshot (-1: none are)
        self._uncovered_since_ms = -1
        self._completing = False
        self.stats = RaftStats()

    # --- the voter set (KIP-853) ---------------------------------------------------------------

    @property
    def dynamic(self) -> bool:
        """Voters from the log (a quorum that can change shape), not from the configuration."""
        return not self.static_voters

    @property
    def kraft_version(self) -> int:
        if self._kraft_versions:
            return self._kraft_versions[-1][1]
        return 1 if self._history.latest is not None else 0

    @property
    def voters_offset(self) -> int:
        """Where the newest VotersRecord sits (-1: in the snapshot, or none)."""
        return self._history.latest_offset

    def _is_me(self, vs: VoterSet | None) -> bool:
        me = vs.get(self.node_id) if vs is not None else None
        return me is not None and (
            me.directory_id == ZERO_UUID
            or self.directory_id == ZERO_UUID
            or me.directory_id == self.directory_id
        )

    @property
    def electorate(self) -> frozenset[int]:
        """The voters this node campaigns among (empty: it never campaigns). A voter's own set;
        but a node that an uncommitted Voters record removes campaigns among the set before it
        (the two differ by one, so their majorities overlap): the removal may still be undone,
        and when a leader removing itself from two voters lost its office before the removal
        committed, the other voter cannot win without it."""
        if self.is_voter:
            return self.voters
        if self.dynamic and self._history.latest_offset >= self._hw:
            prev = self._history.previous
            if prev is not None and self._is_me(prev):
                return prev.ids
        return frozenset()

    @property
    def can_campaign(self) -> bool:
        return bool(self.electorate)

    def _won(self, granted: set[int]) -> bool:
        e = self.electorate
        return bool(e) and len(granted & e) >= len(e) // 2 + 1

    def _lost(self, rejected: set[int]) -> bool:
        e = self.electorate
        return len(rejected & e) > len(e) - (len(e) // 2 + 1)

    def _set_voters(self, vs: VoterSet) -> None:
        self.voter_set = vs
        self.voters = vs.ids
        # a node that lost its disk comes back with a new directory id: not the voter it was
        self.is_voter = self._is_me(vs)
        self.majority = len(vs.ids) // 2 + 1
        self._remote_voters = tuple(sorted(v for v in vs.ids if v != self.node_id))

    def _load_voter_history(self) -> None:
        """At start: the voter set of the snapshot the log starts at, then every Voters and
        KRaftVersion record in the log (Kafka's KRaftControlRecordStateMachine)."""
        log = self.log
        sid = log.latest_snapshot_id
        base: VoterSet | None = None
        self._kraft_versions = []
        if sid is not None:
            for kind, value in log.snapshot_control(sid):
                if kind == m.KRAFT_VOTERS:
                    base = VoterSet.decode(value)
                elif kind == m.KRAFT_VERSION:
                    self._kraft_versions = [(sid.end_offset - 1, decode_kraft_version(value))]
        self._history.reset(base, sid.end_offset - 1 if sid is not None else -1)
        for e in log.read_control(log.start_offset):
            self._note_control(e)
        self._refresh_voters(None)

    def _note_control(self, e: m.LogEntry) -> None:
        if e.is_voters:
            self._history.add(e.offset, VoterSet.decode(e.payload))
        elif e.is_kraft_version:
            self._kraft_versions.append((e.offset, decode_kraft_version(e.payload)))

    def _log_appended(self, now: int | None, entries: list[m.LogEntry]) -> None:
        """Entries went into the log: a Voters record takes effect at once, committed or not."""
        changed = False
        for e in entries:
            if e.control and (e.is_voters or e.is_kraft_version):
                self._note_control(e)
                changed = True
        if changed:
            self._refresh_voters(now)

    def _log_truncated(self, now: int, offset: int) -> None:
        self._history.truncate_from(offset)
        while self._kraft_versions and self._kraft_versions[-1][0] >= offset:
            self._kraft_versions.pop()
        self._refresh_voters(now)

    def _snapshot_installed(self, now: int, sid: m.SnapshotId) -> None:
        self._history.reset(None, -1)
        self._kraft_versions = []
        for kind, value in self.log.snapshot_control(sid):
            if kind == m.KRAFT_VOTERS:
                self._history.reset(VoterSet.decode(value), sid.end_offset - 1)
            elif kind == m.KRAFT_VERSION:
                self._kraft_versions = [(sid.end_offset - 1, decode_kraft_version(value))]
        self._refresh_voters(now)

    def _snapshot_control(self, end_offset: int) -> tuple[tuple[int, bytes], ...]:
        """The KRaftVersion and Voters records a snapshot ending at ``end_offset`` holds."""
        if not self.dynamic:
            return ()
        voters = self._history.committed(end_offset)
        out = [(m.KRAFT_VERSION, encode_kraft_version(self.kraft_version))]
        if voters is not None:
            out.append((m.KRAFT_VOTERS, voters.encode()))
        return tuple(out)

    def _refresh_voters(self, now: int | None) -> None:
        vs = self._history.latest
        if vs is None:
            vs = VoterSet.of_ids(self.static_voters)
        if vs == self.voter_set:
            return
        was_voter = self.can_campaign
        self._set_voters(vs)
        if now is None:
            return  # at start: the state is built from the new set
        st = self.state
        if isinstance(st, LeaderState):
            st.set_voters(self.voters, now)
        elif self.can_campaign and not was_voter:
            if isinstance(st, Unattached) and st.election_deadline >= NEVER:
                st.election_deadline = now + self._election_timeout()
        elif was_voter and not self.can_campaign:
            if isinstance(st, Candidate):
                self._switch(now, Unattached(st.epoch, self.node_id, NEVER), durable=True)
            elif isinstance(st, Prospective):
                if st.leader_id >= 0:
                    self._to_follower(now, st.epoch, st.leader_id)
                else:
                    self._switch(now, Unattached(st.epoch, st.voted_id, NEVER), durable=True)
            elif isinstance(st, Unattached):
                st.election_deadline = NEVER

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
            return ElectionState(st.epoch, me, me, self.static_voters)
        if isinstance(st, Candidate):
            return ElectionState(st.epoch, -1, me, self.static_voters)
        if isinstance(st, Unattached):
            return ElectionState(st.epoch, -1, st.voted_id, self.static_voters)
        return ElectionState(st.epoch, st.leader_id, st.voted_id, self.static_voters)

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
        if not self.can_campaign:
            deadline = NEVER
        elif deadline is None:
            deadline = now + self._election_timeout()
        self._switch(now, Unattached(epoch, voted, deadline), durable=True)

    def _to_follower(self, now: int, epoch: int, leader_id: int) -> None:
        # with voters in the log, a leader may be in a set this node has not read yet
        if leader_id == self.node_id or (not self.dynamic and leader_id not in self.voters):
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
