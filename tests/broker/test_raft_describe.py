"""What the Raft core's leader tracks for DescribeQuorum (broker/raft/progress.py) and its
metrics (broker/raft/stats.py): end offsets, last fetch and last caught-up times of voters and
observers, Kafka's caught-up rule, the observer bound, commit and election latency."""

import math

from broker.raft import messages as m
from broker.raft.core import NotLeader, Output, QuorumDescription, RaftConfig, RaftCore
from broker.raft.leader_state import LeaderState
from broker.raft.progress import (
    OBSERVER_SESSION_TIMEOUT_MS,
    ObserverTable,
    ReplicaDescription,
    ReplicaProgress,
)
from broker.raft.quorum_state import ElectionState
from broker.raft.stats import Window
from tests.broker.test_raft_core import VOTERS, Net, elect, fetch, make_core, reply, sends


def leader_core() -> RaftCore:
    """Node 1 of {1, 2, 3}, elected at t=2000: its log holds the LeaderChange entry (end 1)."""
    core, _ = make_core(1, state=ElectionState(0, voters=VOTERS))
    elect(core, 0)
    return core


def describe(core: RaftCore, now: int) -> QuorumDescription:
    d = core.describe_quorum(now)
    assert isinstance(d, QuorumDescription)
    return d


def test_a_node_that_does_not_lead_names_the_leader_it_knows() -> None:
    follower, _ = make_core(2, state=ElectionState(4, leader_id=1, voters=VOTERS))
    assert follower.describe_quorum(0) == NotLeader(1, 4)
    unattached, _ = make_core(2, state=ElectionState(4, voters=VOTERS))
    assert unattached.describe_quorum(0) == NotLeader(-1, 4)


def test_a_new_leader_knows_only_itself() -> None:
    core = leader_core()
    d = describe(core, 2500)
    assert (d.leader_id, d.leader_epoch, d.high_watermark) == (1, 1, -1)
    assert d.voters == (
        ReplicaDescription(1, 1, 2500, 2500),  # the leader: its end offset, now, now
        ReplicaDescription(2, -1, -1, -1),
        ReplicaDescription(3, -1, -1, -1),
    )
    assert d.observers == ()


def test_a_fetch_at_the_leaders_end_is_caught_up_then() -> None:
    core = leader_core()
    fetch(core, 2100, 2, 1, 1)  # at the leader's end offset: commits the LeaderChange entry
    d = describe(core, 2600)
    assert d.high_watermark == 1
    assert d.voters[1] == ReplicaDescription(2, 1, 2100, 2100)
    assert d.voters[2] == ReplicaDescription(3, -1, -1, -1)


def test_caught_up_means_reaching_the_leaders_end_as_of_the_previous_fetch() -> None:
    """Kafka's rule: a fetch below the leader's end still proves the replica was caught up at
    its previous fetch if it reached the leader's end offset of that time."""
    core = leader_core()
    fetch(core, 2100, 2, 1, 1)  # caught up at 2100
    core.append(2200, [b"a", b"b", b"c"])  # leader end 4
    fetch(core, 2300, 2, 1, 1)  # behind: leader end 4 at this fetch
    assert describe(core, 2300).voters[1] == ReplicaDescription(2, 1, 2300, 2100)
    core.append(2350, [b"d"])  # leader end 5
    fetch(core, 2400, 2, 4, 1)  # below 5, but >= 4: it was caught up at 2300
    assert describe(core, 2400).voters[1] == ReplicaDescription(2, 4, 2400, 2300)
    fetch(core, 2500, 2, 5, 1)  # at the end: caught up now
    assert describe(core, 2500).voters[1] == ReplicaDescription(2, 5, 2500, 2500)


def test_progress_rule_in_isolation() -> None:
    p = ReplicaProgress()
    p.on_fetch(100, 3, 10)  # first fetch, behind
    assert (p.end_offset, p.last_fetch_ms, p.last_caught_up_ms) == (3, 100, -1)
    p.on_fetch(200, 9, 12)  # still below the previous leader end (10): not caught up
    assert p.last_caught_up_ms == -1
    p.on_fetch(300, 12, 15)  # >= 12 (the end at the previous fetch): caught up at 200
    assert p.last_caught_up_ms == 200
    p.on_fetch(250, 15, 15)  # an older time never moves the timestamps back
    assert (p.last_fetch_ms, p.last_caught_up_ms) == (300, 250)
    p.on_fetch(None, 16, 20)  # time unknown: only the end offset moves
    assert (p.end_offset, p.last_fetch_ms) == (16, 300)


def test_a_long_polled_fetch_counts_when_it_is_answered() -> None:
    core = leader_core()
    fetch(core, 2100, 2, 1, 1)
    fetch(core, 2200, 2, 1, 1, wait=500)  # caught up, held back
    core.append(2350, [b"x"])  # answers it: the follower fetched "at" 2350, caught up at 2200
    assert describe(core, 2400).voters[1] == ReplicaDescription(2, 1, 2350, 2200)
    st = core.state
    assert isinstance(st, LeaderState) and st.last_fetch[2] == 2200  # check-quorum: arrival


def test_observers_are_listed_and_consumers_are_not() -> None:
    core = leader_core()
    fetch(core, 2100, 7, 1, 1)
    fetch(core, 2150, 5, 0, 0)
    fetch(core, 2160, -1, 1, 1)  # a consumer's fetch (replica id -1)
    d = describe(core, 2200)
    assert d.observers == (
        ReplicaDescription(5, 0, 2150, -1),
        ReplicaDescription(7, 1, 2100, 2100),
    )
    assert [v.replica_id for v in d.voters] == [1, 2, 3]


def test_observers_that_stop_fetching_are_forgotten() -> None:
    core, _ = make_core(1, voters=frozenset({1}))  # a lone voter leads at once, for ever
    assert core.is_leader
    t = OBSERVER_SESSION_TIMEOUT_MS
    fetch(core, 100, 7, 1, 1)
    fetch(core, 100 + t - 1, 8, 1, 1)

    def observers(now: int) -> list[int]:
        return [o.replica_id for o in describe(core, now).observers]

    assert observers(99 + t) == [7, 8]
    assert observers(100 + t) == [8]


def test_the_observer_table_is_bounded() -> None:
    table = ObserverTable(limit=2)
    for r in (10, 11):
        table.touch(r).on_fetch(1, 0, 0)
    table.touch(10).on_fetch(2, 0, 0)  # 10 fetched last: 11 is the oldest now
    table.touch(12).on_fetch(3, 0, 0)
    assert [r for r, _ in table.items()] == [10, 12] and len(table) == 2

    core, _ = make_core(1, voters=frozenset({1}))
    st = core.state
    assert isinstance(st, LeaderState)
    st.observers.limit = 3
    for r in range(100, 110):
        fetch(core, r, r, 1, 1)
    assert [o.replica_id for o in describe(core, 300).observers] == [107, 108, 109]


def test_commit_latency_runs_from_append_to_commit() -> None:
    core = leader_core()
    fetch(core, 2100, 2, 1, 1)  # the LeaderChange entry (appended at 2000) commits at 2100
    core.append(3000, [b"a", b"b"])
    core.append(3010, [b"c"])
    fetch(core, 3040, 2, 4, 1)  # both commit at 3040: 40 and 30 ms
    w = core.stats.commit_latency
    assert (w.avg(3040), w.max(3040)) == ((100 + 40 + 30) / 3, 100)
    assert core.stats.appended_records == 4  # the LeaderChange entry and three payloads
    assert w.avg(3040 + 60_000) is None  # out of the window


def test_appends_a_leader_never_commits_are_dropped() -> None:
    core = leader_core()
    fetch(core, 2100, 2, 1, 1)
    core.append(2200, [b"a"])
    core.tick(10_000)  # check-quorum: no majority fetched, it resigns
    assert core.state_name == "Resigned"
    before = core.stats.commit_latency.max(10_000)
    core.tick(10_001)
    assert core.stats.commit_latency.max(10_001) == before == 100


def test_election_latency_runs_from_the_pre_vote_to_a_known_leader() -> None:
    core, _ = make_core(1, state=ElectionState(0, voters=VOTERS))
    out = core.tick(2000)  # the election timer expired: Prospective
    assert core.state_name == "Prospective" and core.stats.election_started_ms == 2000
    granted: list[Output] = []
    for s in sends(out, m.VoteRequest):
        granted += reply(core, 2050, s, m.VoteResponse(m.NONE, -1, 0, True))  # pre-votes
    out = granted
    assert core.state_name == "Candidate"
    for s in sends(out, m.VoteRequest):
        reply(core, 2120, s, m.VoteResponse(m.NONE, -1, 1, True))
    assert core.is_leader
    assert core.stats.elections == 1 and core.stats.election_latency.max(2120) == 120
    # a follower that learns the leader after its own election started counts one too
    follower, _ = make_core(2, state=ElectionState(0, voters=VOTERS))
    follower.tick(3000)
    assert follower.state_name == "Prospective"
    follower.handle(3300, 1, 7, m.BeginQuorumEpochRequest(1, 1))
    assert follower.state_name == "Follower" and follower.stats.elections == 1
    assert follower.stats.election_latency.avg(3300) == 300


def test_elections_and_records_in_a_cluster() -> None:
    net = Net(3, observers=1, config=RaftConfig())
    assert net.run(10_000, net.elected)
    leader = net.leader()
    assert leader is not None
    assert leader.stats.elections == 1
    assert net.cores[101].stats.elections == 0  # the observer never runs an election
    assert net.cores[101].stats.election_latency.max(net.now) is None
    net.append([b"x"] * 3)
    assert net.run(5000, lambda: all(net.hw.get(i) == 4 for i in net.ids))
    assert leader.stats.appended_records == 4  # the LeaderChange entry and three payloads
    for i in net.ids:
        if net.cores[i] is not leader:  # followers and the observer fetched all four
            assert net.cores[i].stats.fetched_records == 4
            assert net.cores[i].stats.appended_records == 0


def test_window_average_and_maximum() -> None:
    w = Window(span_ms=100, cap=3)
    assert w.avg(0) is None and w.max(0) is None
    for t, v in ((0, 5.0), (10, 1.0), (20, 3.0), (30, 2.0)):  # cap 3: the 5.0 goes
        w.record(t, v)
    assert (w.avg(30), w.max(30)) == (2.0, 3.0)
    assert w.max(115) == 3.0 and w.max(125) == 2.0 and w.avg(130) is None
    assert not math.isnan(w.max(30) or 0.0)


def test_error_entries_are_never_counted_as_fetched() -> None:
    core = leader_core()
    before = describe(core, 2050).voters[1]
    core.handle(2100, 2, 1, m.FetchRequest(2, 1, 5, 1))  # beyond the log: diverging answer
    assert describe(core, 2100).voters[1] == before
