"""The KRaft state machine, sans IO: Kafka's KafkaRaftClient semantics with no clock, socket or
disk of its own.

Inputs are method calls, each given the current time: ``start``, ``tick``, ``handle`` (a
received request or response), ``append`` (local payloads, leader only), ``snapshot`` (the
state machine's answer to ``SnapshotWanted``) and ``resign`` (graceful shutdown). Each returns
the outputs the shell must act on, in order:

- ``Send(dest, correlation_id, message)``: a request (fresh correlation id) or a response (the
  request's id). The shell delivers responses back through ``handle`` with that id; the core
  keeps at most one request in flight per destination, times it out itself
  (``request_timeout_ms``) and ignores responses it no longer waits for. When a connection
  fails, the shell calls ``request_failed`` so the core retries soon.
- ``Committed(high_watermark)``: entries below it are committed; the state machine applies them.
- ``LeaderChange(leader_id, epoch)``: the known leader or epoch changed (-1: unknown).
- ``SnapshotWanted(end_offset)``: more than ``max_bytes_between_snapshots`` of payload went into
  the log since the last snapshot, or (KIP-876) a committed entry no snapshot holds is
  ``max_snapshot_interval_ms`` old; the state machine answers with ``snapshot(...)`` when it has
  applied up to some offset <= the high watermark.
- ``SnapshotLoaded(snapshot_id)``: a snapshot fetched from the leader replaced the log; the
  state machine reloads its state from ``log.read_snapshot(snapshot_id)``.

The shell calls ``tick`` no later than ``next_wakeup_ms()``.

Durability: the core flushes synchronously through ``ReplicatedLog.flush`` (there is no Flush
output): a voter flushes after appending fetched entries and before each Fetch, so the offset
it reports is durable; the leader flushes before counting its own end offset toward the high
watermark. Every election-state change the rules require to be durable (epoch, vote, leader)
goes through ``QuorumStateStore.write`` before the core acts on it. The high watermark is not
persisted (as in Kafka): after a restart it starts at the log start offset (a snapshot's end is
committed) and moves up again with the first Fetch response or majority.

States, vote rules and the high-watermark rule: see ``states.py`` and ``leader_state.py``.
Elections follow KIP-996: a voter whose fetch (or election) timer expires becomes Prospective
and asks for pre-votes in its current epoch; only a majority of pre-votes makes it a Candidate
(epoch + 1, vote for itself, persisted before any Vote is sent). One departure from Kafka 4.1:
a follower that received EndQuorumEpoch from its leader grants pre-votes (as proposed in
KAFKA-20895), otherwise the preferred successor of a gracefully resigning leader cannot win in
a quorum larger than three.
"""

import uuid
from collections.abc import Sequence
from typing import Any

from broker.raft import messages as m
from broker.raft.election import ElectionHandlers
from broker.raft.leader_state import LeaderState
from broker.raft.outputs import (
    Committed,
    LeaderChange,
    NotLeader,
    Output,
    RaftConfig,
    RaftInvariantError,
    Send,
    SnapshotLoaded,
    SnapshotWanted,
    VoterChangeDone,
)
from broker.raft.progress import QuorumDescription, ReplicaDescription
from broker.raft.quorum_state import ElectionState, QuorumStateError
from broker.raft.reconfig import VoterChangeHandlers, VoterChangeResult
from broker.raft.states import (
    NEVER,
    Candidate,
    EpochState,
    Follower,
    Prospective,
    Resigned,
    Unattached,
)
from broker.raft.voter_set import VoterEndpoint, VoterEntry
from protocol.records.kraft_control import encode_kraft_version

__all__ = [
    "Committed",
    "LeaderChange",
    "NotLeader",
    "Output",
    "QuorumDescription",
    "RaftConfig",
    "RaftCore",
    "RaftInvariantError",
    "ReplicaDescription",
    "Send",
    "SnapshotLoaded",
    "SnapshotWanted",
    "VoterChangeDone",
]


class RaftCore(ElectionHandlers, VoterChangeHandlers):
    """One KRaft replica (voter or observer). See the module docstring for the protocol."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._init_reconfig()

    def start(self, now_ms: int) -> list[Output]:
        """Restore the election state (Kafka's QuorumState.initialize) and begin."""
        self._load_voter_history()
        election = self.store.read() or ElectionState(0, voters=self.static_voters)
        if not self.dynamic and election.voters and election.voters != self.voters:
            raise QuorumStateError(
                f"configured voters {sorted(self.voters)} differ from the quorum state's "
                f"{sorted(election.voters)}"
            )
        me, log_epoch = self.node_id, self.log.last_fetched_epoch
        deadline = now_ms + self._election_timeout()
        st: EpochState
        if election.epoch < log_epoch:
            st = Unattached(log_epoch, -1, deadline if self.can_campaign else NEVER)
        elif election.leader_id == me:  # (a leader that removed itself is no voter now)
            # a leader restarts resigned: it must not vote again in its epoch, and entries it
            # lost unflushed must not reappear under the same (offset, epoch)
            st = Resigned(election.epoch, me, deadline, (), set(self._remote_voters))
        elif election.has_leader and election.leader_id != me:
            # before the vote check: a candidate that lost to a leader keeps its own vote
            voted = election.voted_id if self.can_campaign else -1
            fetch_deadline = now_ms + self.config.fetch_timeout_ms
            st = Follower(election.epoch, election.leader_id, voted, fetch_deadline)
        elif self.can_campaign and election.voted_id == me:
            st = Candidate(election.epoch, deadline, 1, granted={me})
        else:
            voted = election.voted_id if self.can_campaign else -1
            st = Unattached(election.epoch, voted, deadline if self.can_campaign else NEVER)
        if self.voters == {me} and self.is_voter and isinstance(st, (Unattached, Resigned)):
            st.election_deadline = now_ms  # the only voter elects itself at once
        self._switch(now_ms, st, durable=True)
        self._poll(now_ms)
        return self._drain()

    def tick(self, now_ms: int) -> list[Output]:
        self._poll(now_ms)
        return self._drain()

    def handle(
        self, now_ms: int, sender: int, correlation_id: int, message: m.RaftMessage
    ) -> list[Output]:
        if isinstance(message, m.REQUEST_TYPES):
            self._handle_request(now_ms, sender, correlation_id, message)  # type: ignore[arg-type]
        else:
            self._handle_response(now_ms, sender, correlation_id, message)  # type: ignore[arg-type]
        self._poll(now_ms)
        return self._drain()

    def request_failed(self, now_ms: int, dest: int, correlation_id: int) -> list[Output]:
        """The shell could not deliver a request or lost its connection (Kafka answers such a
        request with BROKER_NOT_AVAILABLE): retry after ``retry_backoff_ms``, not at the timeout."""
        waiting = self._inflight.get(dest)
        if waiting is not None and waiting[0] == correlation_id:
            del self._inflight[dest]
            self._backoff[dest] = now_ms + self.config.retry_backoff_ms
        self._poll(now_ms)
        return self._drain()

    def append(
        self, now_ms: int, payloads: Sequence[bytes]
    ) -> tuple[int | NotLeader, list[Output]]:
        """Append as leader; returns the offset of the last payload (committed once the high
        watermark passes it) or ``NotLeader``."""
        self._poll(now_ms)  # a leader whose check-quorum ran out resigns rather than appends
        st = self.state
        if not isinstance(st, LeaderState):
            return NotLeader(st.leader_id, st.epoch), self._drain()
        if not payloads:
            return self.log.end_offset - 1, self._drain()
        last = self.log.append_as_leader(payloads, st.epoch)
        self._bytes_since_snapshot += sum(len(p) for p in payloads)
        self._leader_appended(now_ms, st)
        self._poll(now_ms)
        return last, self._drain()

    def snapshot(self, now_ms: int, end_offset: int, data: bytes) -> list[Output]:
        """Store the state machine's snapshot of everything below ``end_offset`` (which must be
        committed) and drop the log before it. A stale request is ignored."""
        self._snapshot_wanted = False
        self._uncovered_since_ms = -1  # a stale answer: asked again after another interval
        log = self.log
        latest = log.latest_snapshot_id
        if end_offset <= log.start_offset or (
            latest is not None and end_offset <= latest.end_offset
        ):
            return self._drain()
        if end_offset > self._hw:
            raise ValueError(f"snapshot at {end_offset} above the high watermark {self._hw}")
        epoch = log.read(end_offset - 1, 1)[0].epoch
        log.create_snapshot(
            m.SnapshotId(end_offset, epoch), data, self._snapshot_control(end_offset)
        )
        log.delete_before_snapshot()
        self._bytes_since_snapshot = 0
        return self._drain()

    # --- KIP-853 voter changes (the leader's; see reconfig.py) ---------------------------------

    def add_voter(
        self, now_ms: int, voter: VoterEntry, timeout_ms: int
    ) -> tuple[VoterChangeResult, list[Output]]:
        result = self.add_voter_op(now_ms, voter, timeout_ms)
        self._poll(now_ms)
        return result, self._drain()

    def remove_voter(
        self, now_ms: int, voter_id: int, directory_id: uuid.UUID
    ) -> tuple[VoterChangeResult, list[Output]]:
        result = self.remove_voter_op(now_ms, voter_id, directory_id)
        self._poll(now_ms)
        return result, self._drain()

    def update_voter(
        self,
        now_ms: int,
        voter_id: int,
        directory_id: uuid.UUID,
        endpoints: Sequence[VoterEndpoint],
        kraft_range: tuple[int, int],
    ) -> tuple[VoterChangeResult, list[Output]]:
        result = self.update_voter_op(now_ms, voter_id, directory_id, endpoints, kraft_range)
        self._poll(now_ms)
        return result, self._drain()

    def resign(self, now_ms: int) -> list[Output]:
        """Graceful shutdown of a leader: hand over to the most caught-up voters."""
        st = self.state
        if isinstance(st, LeaderState):
            self._to_resigned(now_ms, st.successors())
            self._poll(now_ms)
        return self._drain()

    def note_stall(self) -> None:
        """The shell found that this node did not run for a while (a stalled event loop, a
        SIGSTOP): as leader, it counts as confirmed again only once an entry appended from
        now on has committed (see ``leader_state``)."""
        st = self.state
        if isinstance(st, LeaderState):
            st.note_stall(self.log.end_offset)

    def confirm_needs_append(self) -> bool:
        """A leader that only an entry appended after its last stall can confirm, and none has
        been appended yet (the controller appends a NoOpRecord then)."""
        st = self.state
        return isinstance(st, LeaderState) and self.log.end_offset <= st.stall_offset

    def leader_confirmed(self, now_ms: int) -> bool:
        """This node leads, an entry of its epoch appended after its last stall (if any) has
        committed, and a majority fetched from it within the fetch timeout: what a controller
        checks before it acts on a timer. Call ``tick`` first so that expired timers have
        acted. It proves that this node was not deposed before its last stall ended; not that
        no election is under way now (nothing in KRaft does: what a deposed leader appends
        never commits)."""
        st = self.state
        return isinstance(st, LeaderState) and st.confirmed(now_ms, self.config.fetch_timeout_ms)

    def describe_quorum(self, now_ms: int) -> QuorumDescription | NotLeader:
        """DescribeQuorum's data (Kafka's handleDescribeQuorumRequest): the leader's view of
        every voter and of the observers that fetch from it, or who leads as far as we know."""
        st = self.state
        if not isinstance(st, LeaderState):
            return NotLeader(st.leader_id, st.epoch)
        return st.describe(now_ms)

    def next_wakeup_ms(self) -> int:
        t = NEVER
        for _, deadline in self._inflight.values():
            t = min(t, deadline)
        for until in self._backoff.values():
            t = min(t, until)
        st = self.state
        if isinstance(st, LeaderState):
            t = min(t, st.begin_epoch_deadline)
            t = min(t, st.check_quorum_deadline)
            for p in st.parked:
                t = min(t, p.deadline)
        elif isinstance(st, Follower):
            t = min(t, st.fetch_deadline)
        elif isinstance(st, Candidate) and st.backoff_until >= 0:
            t = min(t, st.backoff_until)
        else:
            t = min(t, st.election_deadline)
        change = self._change_deadline()
        if change is not None:
            t = min(t, change)
        return t

    def _poll(self, now: int) -> None:
        for _ in range(8):  # a transition may enable another (e.g. a lone voter elects itself)
            self._expire_requests(now)
            if not self._poll_state(now):
                break
        self._advance_change(now)
        self._want_snapshot_by_time(now)
        self.stats.settle(now, self._hw, isinstance(self.state, LeaderState))

    def _expire_requests(self, now: int) -> None:
        if self._inflight:
            for dest, (_, deadline) in list(self._inflight.items()):
                if now >= deadline:
                    del self._inflight[dest]
                    self._backoff[dest] = now + self.config.retry_backoff_ms
        if self._backoff:
            for dest, until in list(self._backoff.items()):
                if now >= until:
                    del self._backoff[dest]

    def _poll_state(self, now: int) -> bool:
        """Act on timers and send what the state needs; True after a transition."""
        st = self.state
        if isinstance(st, LeaderState):
            if st.check_quorum_expired(now):
                self._to_resigned(now, st.successors())
                return True
            if self.node_id not in self.voters and self._hw > self.voters_offset:
                # KIP-853: it removed itself and the removal is committed: hand over
                self._to_resigned(now, st.successors())
                return True
            if st.parked and any(p.deadline <= now for p in st.parked):
                due = [p for p in st.parked if p.deadline <= now]
                st.parked = [p for p in st.parked if p.deadline > now]
                for p in due:
                    self._respond(
                        p.sender,
                        p.correlation_id,
                        self._try_complete_fetch(now, p.sender, p.request, arrived=False),
                    )
            if now >= st.begin_epoch_deadline:
                req = m.BeginQuorumEpochRequest(
                    self.node_id, st.epoch, cluster_id=self.config.cluster_id
                )
                for v in self._remote_voters:
                    self._send_request(now, v, req)
                st.begin_epoch_deadline = now + self.config.fetch_timeout_ms // 2
            return False
        if isinstance(st, Follower):
            if now >= st.fetch_deadline:
                if self.can_campaign:
                    self._to_prospective(now)
                    return True
                # an observer keeps its leader but asks the voters in turn who leads now
                st.bootstrapping = True
                st.fetch_deadline = now + self.config.fetch_timeout_ms
            if not st.bootstrapping:
                self._send_fetch(now, st.leader_id)
            elif not self._inflight:
                self._send_fetch(now, self._next_bootstrap(now))
            return False
        if isinstance(st, Unattached):
            if self.can_campaign:
                if now >= st.election_deadline:
                    self._to_prospective(now)
                    return True
            elif not self._inflight:
                self._send_fetch(now, self._next_bootstrap(now))
            return False
        if isinstance(st, (Prospective, Candidate)) and not self.can_campaign:
            # KIP-853: its removal committed meanwhile: an observer now
            voted = self.node_id if isinstance(st, Candidate) else st.voted_id
            self._switch(now, Unattached(st.epoch, voted, NEVER), durable=True)
            return True
        if isinstance(st, Prospective):
            if self._won(st.granted):
                self._to_candidate(now)
                return True
            if now >= st.election_deadline:
                self._election_lost(now, st)
                return True
            self._send_votes(now, st, pre_vote=True)
            return False
        if isinstance(st, Candidate):
            if self._won(st.granted):
                self._to_leader(now)
                return True
            if st.backoff_until >= 0:
                if now >= st.backoff_until:
                    self._to_prospective(now)
                    return True
                return False
            if now >= st.election_deadline:
                st.backoff_until = now + self._election_backoff(st.retries)
                return False
            self._send_votes(now, st, pre_vote=False)
            return False
        # Resigned
        if now >= st.election_deadline:
            self._to_unattached(now, st.epoch + 1, deadline=now)
            return True
        end = m.EndQuorumEpochRequest(
            self.node_id, st.epoch, st.preferred_successors, cluster_id=self.config.cluster_id
        )
        for v in sorted(st.unacked):
            self._send_request(now, v, end)
        return False

    def _to_leader(self, now: int) -> None:
        st = self.state
        assert isinstance(st, Candidate)
        log = self.log
        leader = LeaderState(
            self.node_id, st.epoch, log.end_offset, self.voters, now, self.config.fetch_timeout_ms
        )
        self._switch(now, leader, durable=True)
        first = log.end_offset == 0
        # the LeaderChange entry opens the epoch: the high watermark moves once it is on a majority
        log.append_as_leader([str(self.node_id).encode()], leader.epoch, control=True)
        bootstrap = self._history.latest
        if first and self.dynamic and bootstrap is not None and self.voters_offset < 0:
            # KIP-853: the first leader copies the bootstrap snapshot's KRaftVersion and Voters
            # records into the log, so replicas formatted without them learn the voters
            kv = log.append_as_leader(
                [encode_kraft_version(self.kraft_version)],
                leader.epoch,
                control=True,
                control_type=m.KRAFT_VERSION,
            )
            self._kraft_versions.append((kv, self.kraft_version))
            at = log.append_as_leader(
                [bootstrap.encode()], leader.epoch, control=True, control_type=m.KRAFT_VOTERS
            )
            self._history.add(at, bootstrap)
        self._leader_appended(now, leader)

    def _handle_request(self, now: int, sender: int, cid: int, req: m.RaftRequest) -> None:
        mine = self.config.cluster_id
        if req.cluster_id is not None and mine is not None and req.cluster_id != mine:
            self._respond(sender, cid, self._error_response(req, m.INCONSISTENT_CLUSTER_ID))
            return
        if isinstance(req, m.FetchRequest):
            self._on_fetch_request(now, sender, cid, req)
        elif isinstance(req, m.VoteRequest):
            self._respond(sender, cid, self._on_vote_request(now, req))
        elif isinstance(req, m.BeginQuorumEpochRequest):
            error = self._on_leader_announcement(now, req.leader_id, req.leader_epoch)
            self._respond(
                sender, cid, m.BeginQuorumEpochResponse(error, self.leader_id, self.epoch)
            )
        elif isinstance(req, m.EndQuorumEpochRequest):
            error = self._on_leader_announcement(now, req.leader_id, req.leader_epoch)
            st = self.state
            if error == m.NONE and isinstance(st, Follower) and st.leader_id == req.leader_id:
                st.leader_resigned = True
                st.fetch_deadline = min(
                    st.fetch_deadline, now + self._end_epoch_backoff(req.preferred_successors)
                )
            self._respond(sender, cid, m.EndQuorumEpochResponse(error, self.leader_id, self.epoch))
        else:
            self._respond(sender, cid, self._on_fetch_snapshot_request(now, sender, req))

    def _error_response(self, req: m.RaftRequest, error: int) -> m.RaftResponse:
        if isinstance(req, m.VoteRequest):
            return m.VoteResponse(error, self.leader_id, self.epoch, False)
        if isinstance(req, m.BeginQuorumEpochRequest):
            return m.BeginQuorumEpochResponse(error, self.leader_id, self.epoch)
        if isinstance(req, m.EndQuorumEpochRequest):
            return m.EndQuorumEpochResponse(error, self.leader_id, self.epoch)
        if isinstance(req, m.FetchRequest):
            return self._fetch_error(error)
        return m.FetchSnapshotResponse(error, m.LeaderIdAndEpoch(self.leader_id, self.epoch))

    def _handle_response(self, now: int, sender: int, cid: int, resp: m.RaftResponse) -> None:
        waiting = self._inflight.get(sender)
        if waiting is None or waiting[0] != cid:
            return  # a response we no longer wait for (late, duplicated, or before a transition)
        del self._inflight[sender]
        if isinstance(resp, m.FetchResponse):
            ok = self._on_fetch_response(now, sender, resp)
        elif isinstance(resp, m.VoteResponse):
            ok = self._on_vote_response(now, sender, resp)
        elif isinstance(resp, m.FetchSnapshotResponse):
            ok = self._on_fetch_snapshot_response(now, sender, resp)
        elif isinstance(resp, m.EndQuorumEpochResponse):
            ok = self._common(now, resp.error_code, resp.leader_id, resp.leader_epoch) is not False
            st = self.state
            if (
                resp.error_code == m.NONE
                and isinstance(st, Resigned)
                and resp.leader_epoch == st.epoch
            ):
                st.unacked.discard(sender)
        else:
            ok = self._common(now, resp.error_code, resp.leader_id, resp.leader_epoch) is not False
        if not ok or resp.error_code != m.NONE:
            # an error answer (e.g. "not the leader") is no reason to ask again at once
            self._backoff[sender] = now + self.config.retry_backoff_ms
