"""Issue 31: the high watermark after a healed network cut (broker/replication/partition_state.py).

The leader (1) of replicas [1, 2, 3] with ISR [1, 2]: replica 3 was cut off, fenced, dropped from
the ISR and, once its link healed, unfenced again. Its last catch-up predates the cut by less
than ``replica.lag.time.max.ms`` (30 s), so Kafka's rule (wait for a caught-up, eligible replica
about to join) kept it holding the HW although its fetching had not resumed (its connection
stuck for the request timeout): acks=all stalled with the only other ISR member at the log end
(``HW 1921, log end 1922, ISR [2, 3], followers {2: leo=1922}``).
"""

import asyncio
import time
from pathlib import Path

from kio.schema.errors import ErrorCode

from broker.replication.partition import Partition
from broker.replication.partition_state import LeaderPartitionState, ReplicationConfig
from tests.broker.log_helpers import T0, batch, open_log
from tests.broker.replication_support import Brokers, UnitLog, log_with, reg

LAG = 30_000
WAIT = 500  # replica.fetch.wait.max.ms
HOLD = ReplicationConfig(replica_fetch_wait_max_ms=WAIT).joining_hold_ms


def leader(
    brokers: Brokers, isr: tuple[int, ...] = (1, 2, 3), min_isr: int = 2
) -> LeaderPartitionState:
    config = ReplicationConfig(LAG, min_isr, replica_fetch_wait_max_ms=WAIT)
    state = LeaderPartitionState(1, 101, log_with([5] * 10, hw=10), brokers, config)
    state.become_leader(0, reg(isr))
    return state


def joining(state: LeaderPartitionState) -> None:
    """ISR [1]: 2's expansion goes to the controller, so 3's cannot be proposed (one change at
    a time) and 3 stays outside the ISR while it fetches."""
    assert state.on_follower_fetch(
        0, 2, 10, last_fetched_epoch=5, current_leader_epoch=5, broker_epoch=102
    ).alter_partition


def fetch(state: LeaderPartitionState, replica: int, offset: int, now: int) -> bool:
    result = state.on_follower_fetch(
        now,
        replica,
        offset,
        last_fetched_epoch=5,
        current_leader_epoch=5,
        broker_epoch=100 + replica,
        log_start_offset=0,
    )
    return result.hw_moved


def append(state: LeaderPartitionState, n: int, now: int) -> None:
    log = state.log
    assert isinstance(log, UnitLog)
    log.append_as_leader(state.leader_epoch, list(range(n)))
    state.on_append(now)


def test_a_healed_replica_that_is_not_fetching_does_not_hold_the_hw() -> None:
    brokers = Brokers()
    state = leader(brokers)
    fetch(state, 3, 10, now=0)  # caught up, then its link is cut
    fetch(state, 2, 10, now=0)
    brokers.fenced.add(3)  # the controller fences 3 and takes it out of the ISR
    state.become_leader(4_000, reg((1, 2), partition_epoch=11))
    append(state, 5, now=5_000)
    assert fetch(state, 2, 15, now=5_000) and state.high_watermark == 15
    brokers.fenced.discard(3)  # the cut heals: 3 heartbeats and is unfenced
    append(state, 1, now=15_000)
    # 3 caught up 15 s ago (< the 30 s lag) and is eligible, but its fetch has not come back
    fetch(state, 2, 16, now=15_001)
    assert state.high_watermark == 16


def test_a_fetching_replica_outside_the_isr_holds_the_hw_then_lapses() -> None:
    """A caught-up follower whose Fetch just arrived holds the HW (it is about to join); if
    its next Fetch does not follow within the hold, the HW moves without any other event."""
    state = leader(Brokers(), (1,), min_isr=1)
    joining(state)
    fetch(state, 3, 10, now=0)
    append(state, 4, now=0)
    fetch(state, 3, 12, now=100)  # eligible and caught up (read what the leader had), not in ISR
    fetch(state, 2, 14, now=100)
    assert state.high_watermark == 12  # 3 holds it: Kafka's rule while 3 fetches
    assert state.hold_lapses_at(200) == 100 + HOLD + 1
    assert not state.recheck_hw(100 + HOLD)
    assert state.recheck_hw(100 + HOLD + 1) and state.high_watermark == 14
    assert state.hold_lapses_at(100 + HOLD + 1) is None


def test_a_follower_fetch_that_does_not_move_recomputes_a_trailing_hw() -> None:
    """The ISR member's long-poll Fetch at the same offset lets the HW pass a lapsed hold."""
    state = leader(Brokers(), (1,), min_isr=1)
    joining(state)
    fetch(state, 3, 10, now=0)
    append(state, 4, now=0)
    fetch(state, 3, 12, now=0)
    fetch(state, 2, 14, now=0)
    assert state.high_watermark == 12
    assert fetch(state, 2, 14, now=HOLD + 1) and state.high_watermark == 14


def test_isr_members_still_hold_the_hw_until_they_are_removed() -> None:
    """The ISR rule is unchanged: an ISR member that stopped fetching holds the HW until the
    controller or the lag check takes it out (what min.insync.replicas promises)."""
    state = leader(Brokers(), (1, 2))
    fetch(state, 2, 10, now=0)
    append(state, 4, now=0)
    assert not state.recheck_hw(LAG - 1)
    assert state.high_watermark == 10 and state.hold_lapses_at(LAG - 1) is None


def test_acks_all_returns_once_the_hold_lapses(tmp_path: Path) -> None:
    """Partition.wait_committed wakes when the hold of a follower that stopped fetching lapses,
    with no other event (before, it waited for its whole timeout)."""
    asyncio.run(_acks_all_after_a_lapsed_hold(tmp_path))


async def _acks_all_after_a_lapsed_hold(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    start = time.monotonic()

    def now_ms() -> int:
        return T0 + int((time.monotonic() - start) * 1000)

    part = Partition(
        plog.topic,
        plog.partition,
        None,
        plog,
        1,
        Brokers(),
        ReplicationConfig(LAG, 1, replica_fetch_wait_max_ms=WAIT),
        now_ms,
    )
    try:
        part.become(reg((1,), leader_epoch=0, partition_epoch=1), broker_epoch=101)
        args = {"last_fetched_epoch": -1, "current_leader_epoch": 0, "log_start_offset": 0}
        # 2 joins (its expansion in flight), 3 fetches at the log end, outside the ISR
        assert part.on_follower_fetch(2, 0, broker_epoch=102, **args).alter_partition
        part.on_follower_fetch(3, 0, broker_epoch=103, **args)
        part.append_records(batch(1), acks=-1)
        assert await part.wait_written(1, 5.0) == ErrorCode.none
        part.on_follower_fetch(2, 1, broker_epoch=102, **args)  # 3 fetches no more
        assert part.leader.high_watermark == 0  # 3 holds it
        t0 = time.monotonic()
        code = await asyncio.wait_for(part.wait_committed(1, 10.0), 5.0)
        waited = time.monotonic() - t0
        assert code == ErrorCode.none and part.leader.high_watermark == 1
        assert waited < (HOLD + 500) / 1000, waited
    finally:
        plog.close()
