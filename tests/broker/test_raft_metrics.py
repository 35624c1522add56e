"""The metadata quorum's Prometheus series (broker/metrics/raft_metrics.py) and the snapshot
read from a Raft core (broker/quorum/quorum_metrics.py)."""

import random

from prometheus_client import generate_latest

from broker.metrics.broker_metrics import BrokerMetrics
from broker.metrics.raft_metrics import QuorumSnapshot
from broker.quorum.quorum_metrics import quorum_snapshot
from broker.raft.core import RaftCore
from broker.raft.quorum_state import ElectionState, MemoryQuorumStateStore
from broker.raft.replicated_log import MemoryLog
from tests.broker.test_raft_core import VOTERS, make_core


def scrape(snap: QuorumSnapshot | None) -> str:
    m = BrokerMetrics()
    m.watch_quorum(lambda: snap)
    return generate_latest(m.registry).decode()


def test_series_of_a_leading_controller() -> None:
    text = scrape(
        QuorumSnapshot(
            current_state="leader",
            current_leader=1,
            current_epoch=4,
            current_vote=1,
            high_watermark=120,
            log_end_offset=121,
            log_end_epoch=4,
            is_voter=True,
            commit_latency_avg_ms=2.5,
            commit_latency_max_ms=7.0,
            election_latency_avg_ms=None,
            election_latency_max_ms=None,
            elections=3,
            append_records=40,
            fetch_records=9,
            fenced_brokers=2,
        )
    )
    for line in (
        'kafka_server_raft_metrics_current_state{state="leader"} 1.0',
        "kafka_server_raft_metrics_current_leader 1.0",
        "kafka_server_raft_metrics_current_epoch 4.0",
        "kafka_server_raft_metrics_current_vote 1.0",
        "kafka_server_raft_metrics_high_watermark 120.0",
        "kafka_server_raft_metrics_log_end_offset 121.0",
        "kafka_server_raft_metrics_log_end_epoch 4.0",
        "kafka_server_raft_metrics_commit_latency_avg 2.5",
        "kafka_server_raft_metrics_commit_latency_max 7.0",
        "kafka_server_raft_metrics_election_latency_avg NaN",  # nothing in the window
        "kafka_server_raft_metrics_election_latency_max NaN",
        "kafka_server_raft_metrics_elections_total 3.0",
        "kafka_server_raft_metrics_append_records_total 40.0",
        "kafka_server_raft_metrics_fetch_records_total 9.0",
        "kafka_controller_kafkacontroller_activecontrollercount 1.0",
        "kafka_controller_kafkacontroller_fencedbrokercount 2.0",
    ):
        assert line + "\n" in text, line


def test_an_observer_has_no_controller_series_and_no_snapshot_no_series() -> None:
    text = scrape(QuorumSnapshot("observer", 1, 4, -1, 120, 120, 4, is_voter=False))
    assert 'kafka_server_raft_metrics_current_state{state="observer"} 1.0' in text
    assert "kafkacontroller" not in text
    assert "raft_metrics" not in scrape(None)


def test_snapshot_of_a_lone_voter_after_commits() -> None:
    now = [1000]
    core = RaftCore(1, frozenset({1}), MemoryLog(), MemoryQuorumStateStore(), random.Random(1))
    core.start(now[0])
    core.append(1005, [b"a", b"b"])
    snap = quorum_snapshot(core, 1010, fenced_brokers=lambda: 0)
    assert (snap.current_state, snap.current_leader, snap.current_vote) == ("leader", 1, 1)
    assert (snap.current_epoch, snap.high_watermark, snap.log_end_offset) == (1, 3, 3)
    assert snap.log_end_epoch == 1 and snap.is_voter
    assert snap.append_records == 3 and snap.elections == 1  # its own election at start
    assert snap.commit_latency_max_ms == 0  # a lone voter commits at once
    assert snap.election_latency_avg_ms == 0
    assert snap.fenced_brokers == 0
    assert quorum_snapshot(core, 1010).fenced_brokers is None


def test_state_names_are_kafkas() -> None:
    follower, _ = make_core(2, state=ElectionState(3, leader_id=1, voters=VOTERS))
    assert quorum_snapshot(follower, 0).current_state == "follower"
    observer, _ = make_core(7, state=ElectionState(3, leader_id=1, voters=VOTERS))
    snap = quorum_snapshot(observer, 0)
    assert (snap.current_state, snap.is_voter) == ("observer", False)
    voted, _ = make_core(2, state=ElectionState(3, voted_id=3, voters=VOTERS))
    assert (quorum_snapshot(voted, 0).current_state, quorum_snapshot(voted, 0).current_vote) == (
        "voted",
        3,
    )
    unattached, _ = make_core(2, state=ElectionState(3, voters=VOTERS))
    assert quorum_snapshot(unattached, 0).current_state == "unattached"
    unattached.tick(10_000)
    assert quorum_snapshot(unattached, 10_000).current_state == "prospective"
