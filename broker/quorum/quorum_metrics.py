"""The quorum's metrics snapshot (``broker.metrics.raft_metrics``), read from a Raft core.

Call it on the event loop (the core is not thread-safe): ``BrokerMetrics.watch_quorum`` takes
``read_on_loop(loop, lambda: quorum_snapshot(driver.core, clock.now_ms(), fenced))``.
"""

from __future__ import annotations

from collections.abc import Callable

from ..metrics.raft_metrics import QuorumSnapshot
from ..raft.core import RaftCore
from ..raft.leader_state import LeaderState
from ..raft.states import Candidate, Follower, Prospective, Resigned, Unattached


def _state(core: RaftCore) -> tuple[str, int]:
    """Kafka's current-state name and current-vote."""
    st = core.state
    if isinstance(st, LeaderState):
        return "leader", core.node_id
    if isinstance(st, Candidate):
        return "candidate", core.node_id
    if isinstance(st, Prospective):
        return "prospective", st.voted_id
    if isinstance(st, Follower):
        return ("follower" if core.is_voter else "observer"), st.voted_id
    if isinstance(st, Resigned):
        return "unattached", core.node_id  # it voted for itself in its epoch
    assert isinstance(st, Unattached)
    return ("voted" if st.voted_id >= 0 else "unattached"), st.voted_id


def quorum_snapshot(
    core: RaftCore, now_ms: int, fenced_brokers: Callable[[], int] | None = None
) -> QuorumSnapshot:
    state, vote = _state(core)
    stats = core.stats
    return QuorumSnapshot(
        current_state=state,
        current_leader=core.leader_id,
        current_epoch=core.epoch,
        current_vote=vote,
        high_watermark=core.high_watermark,
        log_end_offset=core.log.end_offset,
        log_end_epoch=core.log.last_fetched_epoch,
        is_voter=core.is_voter,
        commit_latency_avg_ms=stats.commit_latency.avg(now_ms),
        commit_latency_max_ms=stats.commit_latency.max(now_ms),
        election_latency_avg_ms=stats.election_latency.avg(now_ms),
        election_latency_max_ms=stats.election_latency.max(now_ms),
        elections=stats.elections,
        append_records=stats.appended_records,
        fetch_records=stats.fetched_records,
        fenced_brokers=None if fenced_brokers is None else fenced_brokers(),
    )
