"""Focused tests of the sans-IO KRaft core (broker/raft): the log, the quorum-state file, the
vote rules, divergence, the high-watermark rule, check-quorum and snapshots.

Most tests drive one core by hand (inject a message, read the outputs); ``Net`` wires a few
cores together with instant, ordered delivery for the scenarios that need several nodes.
"""

import json
import random
from collections import deque
from collections.abc import Callable
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode

from broker.raft import messages as m
from broker.raft.core import (
    Committed,
    NotLeader,
    Output,
    RaftConfig,
    RaftCore,
    Send,
    SnapshotLoaded,
)
from broker.raft.leader_state import LeaderState
from broker.raft.quorum_state import (
    ElectionState,
    FileQuorumStateStore,
    MemoryQuorumStateStore,
    QuorumStateError,
)
from broker.raft.replicated_log import LogError, MemoryLog

VOTERS = frozenset({1, 2, 3})


# --- helpers --------------------------------------------------------------------------------


def log_with(epochs: list[int]) -> MemoryLog:
    """A flushed log with one entry per element, in that element's epoch."""
    log = MemoryLog()
    for i, epoch in enumerate(epochs):
        log.append_as_follower([m.LogEntry(i, epoch, b"e%d" % i)])
    log.flush()
    return log


def make_core(
    node_id: int = 1,
    voters: frozenset[int] = VOTERS,
    log: MemoryLog | None = None,
    state: ElectionState | None = None,
    config: RaftConfig | None = None,
    now: int = 0,
) -> tuple[RaftCore, list[Output]]:
    store = MemoryQuorumStateStore()
    if state is not None:
        store.state = state
    core = RaftCore(node_id, voters, log or MemoryLog(), store, random.Random(node_id), config)
    return core, core.start(now)


def sends(outputs: list[Output], kind: type | None = None) -> list[Send]:
    return [
        o for o in outputs if isinstance(o, Send) and (kind is None or isinstance(o.message, kind))
    ]


def reply(core: RaftCore, now: int, request: Send, response: m.RaftResponse) -> list[Output]:
    return core.handle(now, request.dest, request.correlation_id, response)


def elect(core: RaftCore, now: int) -> list[Output]:
    """Make ``core`` leader: wait for its election timer, then grant its pre-votes and votes."""
    out = core.tick(now + 2000)
    for _ in range(2):  # pre-vote round, then vote round
        grants: list[Output] = []
        for s in sends(out, m.VoteRequest):
            resp = m.VoteResponse(m.NONE, -1, s.message.replica_epoch, True)  # type: ignore[union-attr]
            grants += reply(core, now + 2000, s, resp)
        out = grants
    assert core.is_leader, core.state_name
    return out


def fetch(
    core: RaftCore, now: int, sender: int, offset: int, last_epoch: int, wait: int = 0
) -> list[Output]:
    req = m.FetchRequest(sender, core.epoch, offset, last_epoch, max_wait_ms=wait)
    return core.handle(now, sender, 1000 + now, req)


def fetch_response(outputs: list[Output]) -> m.FetchResponse:
    (resp,) = [s.message for s in sends(outputs, m.FetchResponse)]
    assert isinstance(resp, m.FetchResponse)
    return resp


def committed(outputs: list[Output]) -> list[int]:
    return [o.high_watermark for o in outputs if isinstance(o, Committed)]


class Net:
    """A few cores with instant, in-order delivery; links can be cut and nodes crashed."""

    def __init__(self, voters: int, observers: int = 0, config: RaftConfig | None = None) -> None:
        self.now = 0
        self.config = config or RaftConfig()
        self.voters = frozenset(range(1, voters + 1))
        self.ids = sorted(self.voters) + [100 + i for i in range(1, observers + 1)]
        self.logs = {i: MemoryLog() for i in self.ids}
        self.stores = {i: MemoryQuorumStateStore() for i in self.ids}
        self.cores: dict[int, RaftCore] = {}
        self.queue: deque[tuple[int, Send]] = deque()
        self.cut: set[frozenset[int]] = set()
        self.down: set[int] = set()
        self.hw: dict[int, int] = {}
        for i in self.ids:
            self.boot(i)

    def boot(self, i: int) -> None:
        core = RaftCore(
            i,
            self.voters,
            self.logs[i],
            self.stores[i],
            random.Random(i * 7919 + self.now),
            self.config,
        )
        self.cores[i] = core
        self.apply(i, core.start(self.now))

    def apply(self, i: int, outputs: list[Output]) -> None:
        for o in outputs:
            if isinstance(o, Send):
                self.queue.append((i, o))
            elif isinstance(o, Committed):
                self.hw[i] = o.high_watermark

    def deliver(self) -> None:
        for _ in range(100_000):
            if not self.queue:
                return
            src, send = self.queue.popleft()
            if (
                send.dest in self.down
                or src in self.down
                or frozenset((src, send.dest)) in self.cut
            ):
                continue
            self.apply(
                send.dest,
                self.cores[send.dest].handle(self.now, src, send.correlation_id, send.message),
            )
        raise AssertionError("message storm")

    def run(self, ms: int, until: Callable[[], bool] | None = None) -> bool:
        end = self.now + ms
        while True:
            self.deliver()
            if until is not None and until():
                return True
            live = [i for i in self.ids if i not in self.down]
            nxt = min(self.cores[i].next_wakeup_ms() for i in live)
            if nxt > end:
                self.now = end
                return until is None
            self.now = max(self.now, nxt)
            for i in live:
                if self.cores[i].next_wakeup_ms() <= self.now:
                    self.apply(i, self.cores[i].tick(self.now))

    def leader(self) -> RaftCore | None:
        leaders = [
            self.cores[i] for i in self.ids if i not in self.down and self.cores[i].is_leader
        ]
        return max(leaders, key=lambda c: c.epoch) if leaders else None

    def elected(self) -> bool:
        leader = self.leader()
        return leader is not None and leader.high_watermark > leader.state.epoch_start_offset  # type: ignore[union-attr]

    def append(self, payloads: list[bytes]) -> int:
        leader = self.leader()
        assert leader is not None
        offset, out = leader.append(self.now, payloads)
        assert isinstance(offset, int)
        self.apply(leader.node_id, out)
        return offset

    def crash(self, i: int) -> None:
        self.down.add(i)
        self.logs[i].crash()

    def restart(self, i: int) -> None:
        self.down.discard(i)
        self.hw.pop(i, None)
        self.boot(i)


# --- messages, log, quorum-state file ----------------------------------------------------------


def test_error_codes_are_kafkas() -> None:
    for name in (
        "none",
        "offset_out_of_range",
        "not_leader_or_follower",
        "request_timed_out",
        "broker_not_available",
        "invalid_request",
        "fenced_leader_epoch",
        "unknown_leader_epoch",
        "inconsistent_voter_set",
        "snapshot_not_found",
        "position_out_of_range",
        "inconsistent_cluster_id",
    ):
        assert getattr(m, name.upper()) == ErrorCode[name].value, name


def test_end_offset_for_epoch() -> None:
    log = log_with([1, 1, 2, 2, 2, 4])
    assert log.end_offset_for_epoch(1) == m.OffsetAndEpoch(2, 1)
    assert log.end_offset_for_epoch(2) == m.OffsetAndEpoch(5, 2)
    assert log.end_offset_for_epoch(3) == m.OffsetAndEpoch(5, 2)  # largest epoch <= 3 is 2
    assert log.end_offset_for_epoch(4) == m.OffsetAndEpoch(6, 4)
    assert log.end_offset_for_epoch(9) == m.OffsetAndEpoch(6, 4)
    assert log.end_offset_for_epoch(0) == m.OffsetAndEpoch(0, 0)  # below every epoch
    assert log.last_fetched_epoch == 4


def test_log_after_a_snapshot_answers_with_the_snapshot() -> None:
    log = log_with([1, 1, 2, 2, 2, 4])
    log.update_high_watermark(4)
    with pytest.raises(LogError):
        log.create_snapshot(m.SnapshotId(5, 2), b"x")  # above the high watermark
    log.create_snapshot(m.SnapshotId(4, 2), b"state")
    assert log.delete_before_snapshot()
    assert (log.start_offset, log.end_offset) == (4, 6)
    assert log.end_offset_for_epoch(1) == m.OffsetAndEpoch(4, 2)  # the snapshot id
    assert log.end_offset_for_epoch(2) == m.OffsetAndEpoch(5, 2)
    with pytest.raises(LogError):
        log.truncate_to(3)
    log.truncate_to(4)
    assert log.last_fetched_epoch == 2 and log.end_offset == 4


def test_crash_loses_only_unflushed_entries() -> None:
    log = log_with([1, 1])
    log.append_as_leader([b"a", b"b"], 3)
    log.crash()
    assert log.end_offset == 2 and log.last_fetched_epoch == 1
    log.append_as_leader([b"c"], 3)
    log.flush()
    log.truncate_to(1)  # truncation is durable at once
    log.crash()
    assert log.end_offset == 1


def test_install_snapshot_replaces_the_log() -> None:
    log = log_with([1, 1, 1])
    log.install_snapshot(m.SnapshotId(10, 3), b"state")
    assert (log.start_offset, log.end_offset, log.last_fetched_epoch) == (10, 10, 3)
    assert log.read_snapshot(m.SnapshotId(10, 3)) == b"state"
    assert log.end_offset_for_epoch(2) == m.OffsetAndEpoch(10, 3)


def test_quorum_state_file_is_kafkas(tmp_path: Path) -> None:
    path = tmp_path / "quorum-state"
    store = FileQuorumStateStore(path, cluster_id="c1")
    assert store.read() is None
    store.write(ElectionState(7, leader_id=2, voted_id=1, voters=frozenset({3, 1, 2})))
    text = path.read_text()
    assert text == (
        '{"clusterId":"c1","leaderId":2,"leaderEpoch":7,"votedId":1,"appliedOffset":0,'
        '"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}'
    )
    assert not (tmp_path / "quorum-state.tmp").exists()
    assert store.read() == ElectionState(7, 2, 1, frozenset({1, 2, 3}))
    # KIP-853's version 1 is readable too
    path.write_text(
        json.dumps(
            {
                "leaderId": -1,
                "leaderEpoch": 2,
                "votedId": 1,
                "votedDirectoryId": "x",
                "data_version": 1,
            }
        )
    )
    assert store.read() == ElectionState(2, -1, 1, frozenset())
    path.write_text("not json")
    with pytest.raises(QuorumStateError):
        store.read()


def test_configured_voters_must_match_the_quorum_state() -> None:
    with pytest.raises(QuorumStateError):
        make_core(state=ElectionState(3, voters=frozenset({1, 2, 4})))


# --- votes -------------------------------------------------------------------------------------


def vote(
    core: RaftCore, candidate: int, epoch: int, last_epoch: int, last_offset: int, pre: bool = False
) -> m.VoteResponse:
    req = m.VoteRequest(candidate, epoch, last_epoch, last_offset, pre_vote=pre)
    (resp,) = [s.message for s in sends(core.handle(0, candidate, 7, req), m.VoteResponse)]
    assert isinstance(resp, m.VoteResponse)
    return resp


def test_vote_is_persisted_and_given_once_per_epoch() -> None:
    core, _ = make_core()
    assert vote(core, 2, 1, 0, 0).vote_granted
    assert core.store.read() == ElectionState(1, -1, 2, VOTERS)  # durable before the response
    assert not vote(core, 3, 1, 0, 0).vote_granted  # already voted for 2 in epoch 1
    assert vote(core, 2, 1, 0, 0).vote_granted  # the same candidate again: yes
    assert vote(core, 3, 2, 0, 0).vote_granted  # a new epoch: a new vote
    assert core.store.read() == ElectionState(2, -1, 3, VOTERS)


def test_vote_needs_an_up_to_date_log() -> None:
    core, _ = make_core(log=log_with([1, 2, 2]), state=ElectionState(2, voters=VOTERS))
    assert not vote(core, 2, 3, 1, 10).vote_granted  # older last epoch, longer log: no
    assert not vote(core, 2, 4, 2, 2).vote_granted  # same last epoch, shorter log: no
    assert vote(core, 2, 5, 2, 3).vote_granted  # same epoch, same length: yes
    assert vote(core, 3, 6, 3, 1).vote_granted  # newer last epoch, shorter log: yes


def test_follower_refuses_votes_in_its_epoch_but_not_in_a_later_one() -> None:
    core, _ = make_core(state=ElectionState(4, leader_id=3, voters=VOTERS))
    assert core.state_name == "Follower"
    resp = vote(core, 2, 4, 0, 0)
    assert not resp.vote_granted and (resp.leader_id, resp.leader_epoch) == (3, 4)
    resp = vote(core, 2, 3, 0, 0)
    assert resp.error_code == m.FENCED_LEADER_EPOCH
    assert vote(core, 2, 5, 0, 0).vote_granted
    assert core.state_name == "Voted" and core.epoch == 5


def test_pre_vote_binds_nothing() -> None:
    core, _ = make_core(state=ElectionState(3, voters=VOTERS))
    writes = core.store.writes  # type: ignore[attr-defined]
    assert vote(core, 2, 3, 0, 0, pre=True).vote_granted
    assert vote(core, 3, 3, 0, 0, pre=True).vote_granted  # non-binding: several may be granted
    assert core.store.writes == writes and core.epoch == 3  # type: ignore[attr-defined]
    assert vote(core, 3, 4, 0, 0).vote_granted  # a real vote after pre-votes for others


def test_follower_grants_pre_votes_only_until_it_hears_from_its_leader() -> None:
    core, out = make_core(state=ElectionState(2, leader_id=3, voters=VOTERS))
    assert vote(core, 2, 2, 0, 0, pre=True).vote_granted
    (req,) = sends(out, m.FetchRequest)
    reply(core, 10, req, m.FetchResponse(m.NONE, m.LeaderIdAndEpoch(3, 2), high_watermark=0))
    assert not vote(core, 2, 2, 0, 0, pre=True).vote_granted


def test_fetch_timeout_starts_a_pre_vote_without_bumping_the_epoch() -> None:
    core, _ = make_core(log=log_with([1, 2]), state=ElectionState(2, leader_id=3, voters=VOTERS))
    assert core.tick(1999) == [] or core.state_name == "Follower"
    out = core.tick(2000)  # fetch timeout
    assert core.state_name == "Prospective" and core.epoch == 2
    assert core.store.read() == ElectionState(2, 3, -1, VOTERS)  # nothing new persisted
    reqs = [s.message for s in sends(out, m.VoteRequest)]
    assert {r.voter_id for r in reqs} == {2, 3}  # type: ignore[union-attr]
    for r in reqs:
        assert isinstance(r, m.VoteRequest) and r.pre_vote and r.replica_epoch == 2
        assert (r.last_offset_epoch, r.last_offset) == (2, 2)
    # a rejected pre-vote majority sends it back to its leader, still in epoch 2
    for s in sends(out, m.VoteRequest):
        reply(core, 2001, s, m.VoteResponse(m.NONE, 3, 2, False))
    assert core.state_name == "Follower" and core.epoch == 2 and core.leader_id == 3


def test_candidate_persists_its_vote_before_asking() -> None:
    core, _ = make_core(state=ElectionState(2, voters=VOTERS))
    out = core.tick(5000)
    assert core.state_name == "Prospective"
    (pre, _) = sends(out, m.VoteRequest)
    out = reply(core, 5001, pre, m.VoteResponse(m.NONE, -1, 2, True))
    assert core.state_name == "Candidate" and core.epoch == 3
    assert core.store.read() == ElectionState(3, -1, 1, VOTERS)
    reqs = [s.message for s in sends(out, m.VoteRequest)]
    assert len(reqs) == 2 and all(not r.pre_vote and r.replica_epoch == 3 for r in reqs)  # type: ignore[union-attr]


def test_observer_never_votes_nor_runs() -> None:
    core, out = make_core(node_id=101)
    resp = vote(core, 2, 1, 0, 0)
    assert not resp.vote_granted
    for t in range(0, 60_000, 500):
        out += core.tick(t)
        assert core.state_name in ("Unattached", "Follower")
    assert all(isinstance(s.message, m.FetchRequest) for s in sends(out))


def test_restarted_leader_is_resigned_and_keeps_its_vote() -> None:
    core, out = make_core(state=ElectionState(5, leader_id=1, voted_id=1, voters=VOTERS))
    assert core.state_name == "Resigned" and core.epoch == 5
    assert {s.dest for s in sends(out, m.EndQuorumEpochRequest)} == {2, 3}
    assert not vote(core, 2, 5, 0, 0).vote_granted
    assert vote(core, 2, 6, 0, 0).vote_granted


def test_candidate_that_lost_restarts_as_follower() -> None:
    # found by the simulation (seed 839): restoring it as Candidate made it send a Vote whose
    # last epoch equals its epoch, which Kafka rejects as INVALID_REQUEST
    log = log_with([1, 2])
    core, out = make_core(log=log, state=ElectionState(2, leader_id=2, voted_id=1, voters=VOTERS))
    assert core.state_name == "Follower" and core.leader_id == 2
    assert not sends(out, m.VoteRequest)


# --- replication -------------------------------------------------------------------------------


def test_diverging_follower_truncates_to_the_leaders_epoch_end() -> None:
    # leader 1: epoch 1 at 0-1, its old epoch 3 at 2-3; follower 2: epoch 1 at 0-2, epoch 2 at 3-5
    leader, _ = make_core(1, log=log_with([1, 1, 3, 3]), state=ElectionState(3, voters=VOTERS))
    elect(leader, 0)  # epoch 4, LeaderChange at 4
    follower_log = log_with([1, 1, 1, 2, 2, 2])
    follower, out = make_core(2, log=follower_log, state=ElectionState(4, 1, -1, VOTERS), now=3000)
    answers = []
    for _ in range(3):
        (req,) = sends(out, m.FetchRequest)
        (resp,) = sends(leader.handle(3000, 2, req.correlation_id, req.message))
        answers.append(resp.message)
        out = follower.handle(3000, 1, resp.correlation_id, resp.message)
    # (6, epoch 2): the leader's largest epoch <= 2 is 1, which ends at 2 -> truncate to
    # min(2, where the follower's epoch 1 ends = 3) = 2; then (2, epoch 1) matches
    assert answers[0].diverging_epoch == m.EpochEndOffset(1, 2)  # type: ignore[union-attr]
    assert [(e.offset, e.epoch) for e in follower_log.entries()] == [
        (0, 1),
        (1, 1),
        (2, 3),
        (3, 3),
        (4, 4),
    ]


def test_high_watermark_waits_for_an_entry_of_the_leaders_epoch() -> None:
    """Raft's Figure 8: a new leader must not count old-epoch entries as committed until its
    own LeaderChange entry (at epoch_start_offset) is on a majority."""
    leader, _ = make_core(1, log=log_with([1, 1, 1, 3, 3]), state=ElectionState(3, voters=VOTERS))
    out = elect(leader, 0)
    st = leader.state
    assert isinstance(st, LeaderState) and st.epoch == 4 and st.epoch_start_offset == 5
    # both followers hold everything before the epoch start, not the LeaderChange entry
    assert committed(fetch(leader, 2100, 2, 5, 3) + fetch(leader, 2100, 3, 5, 3)) == []
    assert leader.high_watermark == 0 and committed(out) == []
    assert committed(fetch(leader, 2200, 2, 6, 4)) == [6]
    # a late, duplicated fetch from before does not move it back
    assert committed(fetch(leader, 2300, 2, 5, 3)) == [] and leader.high_watermark == 6


def test_follower_high_watermark_is_capped_by_its_own_log() -> None:
    core, out = make_core(2, state=ElectionState(1, leader_id=1, voters=VOTERS))
    (req,) = sends(out, m.FetchRequest)
    entries = (m.LogEntry(0, 1, b"a"), m.LogEntry(1, 1, b"b"))
    out = reply(
        core,
        1,
        req,
        m.FetchResponse(m.NONE, m.LeaderIdAndEpoch(1, 1), high_watermark=5, records=entries),
    )
    assert committed(out) == [2] and core.log.flushed_offset == 2


def test_leader_holds_an_empty_fetch_until_there_is_data() -> None:
    leader, _ = make_core(1, state=ElectionState(0, voters=VOTERS))
    elect(leader, 0)
    assert committed(fetch(leader, 2100, 3, 1, 1, wait=500)) == [1]  # answered: it moved the HW
    assert not sends(fetch(leader, 2100, 2, 1, 1, wait=500), m.FetchResponse)
    offset, out = leader.append(2150, [b"x"])
    assert offset == 1
    resp = fetch_response(out)
    assert [e.payload for e in resp.records] == [b"x"]
    assert isinstance(leader.append(2150, []), tuple)
    follower, _ = make_core(2)
    assert isinstance(follower.append(0, [b"y"])[0], NotLeader)


def test_check_quorum_resigns_a_leader_cut_off_from_its_majority() -> None:
    leader, _ = make_core(1, state=ElectionState(0, voters=VOTERS))
    elect(leader, 0)  # elected at 2000: one 3000 ms window to hear from a majority
    assert leader.next_wakeup_ms() <= 5000
    fetch(leader, 4000, 2, 1, 1)
    leader.tick(6999)
    assert leader.is_leader
    out = leader.tick(7000)
    assert leader.state_name == "Resigned"
    assert {s.dest for s in sends(out, m.EndQuorumEpochRequest)} == {2, 3}


def test_check_quorum_counts_fetch_times_not_a_set() -> None:
    # found by the simulation (seed 14764): with Kafka's set of fetched voters, a voter that
    # fetched just before a partition, plus one still reachable, kept the leader up two windows
    voters = frozenset({1, 2, 3, 4, 5})
    leader, _ = make_core(1, voters=voters, state=ElectionState(0, voters=voters))
    elect(leader, 0)
    for v in (2, 3, 4):
        fetch(leader, 2100, v, 1, 1)
    fetch(leader, 2200, 5, 1, 1)  # 5 fetches, then the others are cut off; only 5 goes on
    for t in range(2700, 5300, 500):
        fetch(leader, t, 5, 1, 1)
        leader.tick(t)
    leader.tick(5100)  # 2100 + 3000: only 5 (and itself) fetched since
    assert leader.state_name == "Resigned"


def test_follower_installs_the_leaders_snapshot_in_chunks() -> None:
    config = RaftConfig(snapshot_chunk_bytes=4)
    leader, _ = make_core(1, state=ElectionState(0, voters=VOTERS), config=config)
    elect(leader, 0)
    leader.append(2100, [b"a", b"b", b"c"])
    fetch(leader, 2100, 3, 4, 1)
    assert leader.high_watermark == 4
    leader.snapshot(2100, 4, b"0123456789")
    assert leader.log.start_offset == 4
    follower, out = make_core(
        2, state=ElectionState(1, leader_id=1, voters=VOTERS), config=config, now=2100
    )
    loaded: list[Output] = []
    for _ in range(8):
        reqs = sends(out, m.FetchRequest) + sends(out, m.FetchSnapshotRequest)
        if not reqs:
            break
        (req,) = reqs
        answer = sends(leader.handle(2100, 2, req.correlation_id, req.message))
        if not answer:
            break  # caught up: the fetch is held back (long poll)
        out = follower.handle(2100, 1, answer[0].correlation_id, answer[0].message)
        loaded += out
    assert [o for o in loaded if isinstance(o, SnapshotLoaded)] == [
        SnapshotLoaded(m.SnapshotId(4, 1))
    ]
    assert follower.log.read_snapshot(m.SnapshotId(4, 1)) == b"0123456789"
    assert follower.log.start_offset == 4 and follower.high_watermark == 4


def test_fetch_snapshot_position_out_of_range() -> None:
    leader, _ = make_core(1, state=ElectionState(0, voters=VOTERS))
    elect(leader, 0)
    fetch(leader, 2100, 3, 1, 1)
    leader.snapshot(2100, 1, b"abc")
    req = m.FetchSnapshotRequest(2, leader.epoch, m.SnapshotId(1, 1), 3, 100)
    (resp,) = sends(leader.handle(2100, 2, 9, req))
    assert resp.message.error_code == m.POSITION_OUT_OF_RANGE  # type: ignore[union-attr]
    req = m.FetchSnapshotRequest(2, leader.epoch, m.SnapshotId(9, 1), 0, 100)
    (resp,) = sends(leader.handle(2100, 2, 10, req))
    assert resp.message.error_code == m.SNAPSHOT_NOT_FOUND  # type: ignore[union-attr]


# --- small clusters ----------------------------------------------------------------------------


def test_single_voter_leads_and_commits_alone() -> None:
    net = Net(1)
    assert net.cores[1].is_leader and net.cores[1].epoch == 1
    offset = net.append([b"x"])
    assert net.hw[1] == offset + 1
    net.crash(1)
    net.restart(1)  # restarts resigned, then elects itself at once in a later epoch
    assert net.cores[1].is_leader and net.cores[1].epoch > 1
    assert net.hw[1] == offset + 2  # its previous entries plus the new LeaderChange


def test_three_voters_and_an_observer_survive_a_leader_crash() -> None:
    net = Net(3, observers=1)
    assert net.run(10_000, net.elected)
    offset = net.append([b"a", b"b"])
    net.run(600)  # followers learn the new high watermark with their next fetch (long poll)
    assert all(net.hw.get(i, 0) > offset for i in net.ids)
    old = net.leader()
    assert old is not None
    net.crash(old.node_id)
    assert net.run(10_000, lambda: net.elected() and net.leader() is not old)
    new = net.leader()
    assert new is not None and new.epoch > old.epoch
    assert [e.payload for e in new.log.read(1, 2)] == [b"a", b"b"]
    net.restart(old.node_id)
    net.append([b"c"])
    net.run(3000)
    assert {net.hw[i] for i in net.ids} == {new.log.end_offset}


def test_graceful_resignation_hands_over_to_the_most_caught_up_voter() -> None:
    net = Net(5)
    assert net.run(10_000, net.elected)
    leader = net.leader()
    assert leader is not None
    net.append([b"x"])
    net.run(50)
    # voter 2 is cut off from everyone for a moment and misses the next entry
    for i in net.ids:
        if i != 2:
            net.cut.add(frozenset((2, i)))
    net.append([b"y"])
    net.run(10)
    net.cut.clear()
    st = leader.state
    assert isinstance(st, LeaderState)
    successor = st.successors()[0]
    net.apply(leader.node_id, leader.resign(net.now))
    start = net.now
    assert net.run(5000, lambda: net.elected() and net.leader() is not leader)
    new = net.leader()
    assert new is not None and new.node_id == successor
    assert net.now - start < 1000, "the preferred successor should not wait for a fetch timeout"


def test_after_a_stall_only_a_new_entry_committed_confirms_leadership() -> None:
    leader, _ = make_core(1, state=ElectionState(0, voters=VOTERS))
    elect(leader, 0)  # elected at 2000; its LeaderChange entry is at offset 0
    assert not leader.leader_confirmed(2000)  # nothing of its epoch committed yet
    fetch(leader, 2500, 2, 1, 1)  # 2 holds the LeaderChange: committed
    assert leader.leader_confirmed(4500)  # 2's fetch at 2500, within the fetch timeout
    assert not leader.leader_confirmed(4501)
    fetch(leader, 4600, 3, 1, 1)
    assert leader.leader_confirmed(4600) and not leader.confirm_needs_append()
    # the loop stalls: what arrives next may have waited in a socket since before the stall
    leader.note_stall()
    assert not leader.leader_confirmed(4600) and leader.confirm_needs_append()
    out = fetch(leader, 4700, 2, 1, 1)  # arrived after the stall, maybe sent before it
    assert fetch_response(out).error_code == m.NONE  # served as ever
    assert not leader.leader_confirmed(4700)  # a fetch proves nothing about now
    last, _ = leader.append(4720, [b"no-op"])
    assert last == 1 and not leader.confirm_needs_append()
    assert not leader.leader_confirmed(4720)
    fetch(leader, 4730, 2, 2, 1)  # 2 holds it: a majority followed this leader after the stall
    assert leader.leader_confirmed(4730)
    assert leader.is_leader and not leader.leader_confirmed(6731)  # nobody fetched since


def test_a_leader_whose_check_quorum_ran_out_appends_nothing() -> None:
    # a paused leader wakes up with its timers expired: the append comes before any tick, and
    # must not land in its log (the others may have a new leader by now)
    leader, _ = make_core(1, state=ElectionState(0, voters=VOTERS))
    elect(leader, 0)
    end = leader.log.end_offset
    result, _ = leader.append(20_000, [b"fence broker 3"])
    assert isinstance(result, NotLeader)
    assert leader.log.end_offset == end and leader.state_name == "Resigned"
