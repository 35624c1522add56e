"""broker/replication/partition_state.py (with isr.py and replica_progress.py): the leader's
side of a partition, one Kafka rule per test."""

import pytest
from kio.schema.errors import ErrorCode

from broker.replication.isr import AlterPartitionRequest, PendingIsrChange
from broker.replication.leader_epochs import EpochEndOffset
from broker.replication.partition_state import (
    FetchResult,
    LeaderPartitionState,
    ReplicationConfig,
)
from broker.replication.replica_progress import NEVER, ReplicaProgress
from tests.broker.replication_support import Brokers, UnitLog, config, log_with, reg

# the leader's log: 0-2 epoch 1, 3-9 epoch 3; it becomes leader in epoch 5 at offset 10
EPOCHS = [1, 1, 1, 3, 3, 3, 3, 3, 3, 3]
LAG = 1000


def leader(
    isr: tuple[int, ...] = (1, 2, 3),
    *,
    hw: int = 4,
    min_isr: int = 2,
    replicas: tuple[int, ...] = (1, 2, 3),
    brokers: Brokers | None = None,
) -> LeaderPartitionState:
    state = LeaderPartitionState(
        1, 101, log_with(EPOCHS, hw=hw), brokers or Brokers(), config(LAG, min_isr)
    )
    state.become_leader(0, reg(isr, replicas=replicas))
    return state


def fetch(
    state: LeaderPartitionState,
    replica: int,
    offset: int,
    now: int = 0,
    *,
    epoch: int = 5,
    last_epoch: int | None = None,
    broker_epoch: int | None = None,
) -> FetchResult:
    if last_epoch is None:
        last_epoch = state.log.latest_epoch if offset >= 10 else 3
    return state.on_follower_fetch(
        now,
        replica,
        offset,
        last_fetched_epoch=last_epoch,
        current_leader_epoch=epoch,
        broker_epoch=100 + replica if broker_epoch is None else broker_epoch,
        log_start_offset=0,
    )


def append(state: LeaderPartitionState, n: int, now: int = 0) -> bool:
    log = state.log
    assert isinstance(log, UnitLog)
    log.append_as_leader(state.leader_epoch, list(range(n)))
    return state.on_append(now)


def alter_ok(
    state: LeaderPartitionState, req: AlterPartitionRequest, now: int = 0
) -> tuple[bool, AlterPartitionRequest | None]:
    result = reg(sorted(req.isr), partition_epoch=req.partition_epoch + 1)
    out = state.on_alter_partition_response(now, req.request_id, ErrorCode.none, result)
    return out.hw_moved, out.retry


# --- becoming leader ---------------------------------------------------------------------------


def test_become_leader_starts_the_epoch_at_the_log_end() -> None:
    state = leader()
    assert state.is_leader and state.leader_epoch == 5 and state.partition_epoch == 10
    assert state.epoch_start_offset == 10
    assert state.log.end_offset_for_epoch(5) == (5, 10)  # written to the epoch cache
    assert state.log.end_offset_for_epoch(3) == (3, 10)
    assert state.isr == {1, 2, 3} and not state.isr_state.in_flight
    assert state.high_watermark == 4  # the log's, until the followers report
    assert all(p.log_end_offset == -1 for p in state.followers.values())


def test_followers_that_never_fetched_hold_the_hw() -> None:
    state = leader()
    assert fetch(state, 2, 10).hw_moved is False
    assert state.high_watermark == 4  # replica 3 (in the ISR) has not fetched in this epoch
    assert fetch(state, 3, 10).hw_moved is True
    assert state.high_watermark == 10 and state.log.high_watermark == 10


def test_an_older_partition_epoch_is_ignored() -> None:
    state = leader()
    assert state.become_leader(0, reg((1,), partition_epoch=9)) is False
    assert state.isr == {1, 2, 3} and state.partition_epoch == 10


def test_a_registration_for_another_leader_is_refused() -> None:
    state = leader()
    with pytest.raises(ValueError):
        state.become_leader(0, reg(leader=2, leader_epoch=6, partition_epoch=11))


def test_a_new_epoch_resets_follower_progress() -> None:
    state = leader()
    fetch(state, 2, 10, now=50)
    state.become_leader(100, reg(leader_epoch=6, partition_epoch=11))
    p = state.followers[2]
    # re-elected: the end offset is kept; ISR members count as caught up now
    assert p.log_end_offset == 10 and p.last_caught_up_ms == 100 and p.last_fetch_ms == 100
    assert state.epoch_start_offset == 10 and state.log.latest_epoch == 6


# --- follower fetches --------------------------------------------------------------------------


def test_fetch_errors() -> None:
    not_yet = LeaderPartitionState(1, 101, log_with(EPOCHS), Brokers(), config())
    assert not_yet.on_follower_fetch(0, 2, 0).error == ErrorCode.not_leader_or_follower
    state = leader()
    assert fetch(state, 2, 10, epoch=4).error == ErrorCode.fenced_leader_epoch
    assert fetch(state, 2, 10, epoch=6).error == ErrorCode.unknown_leader_epoch
    assert fetch(state, 7, 10).error == ErrorCode.unknown_leader_epoch
    assert state.on_follower_fetch(0, 7, 10).error == ErrorCode.not_leader_or_follower
    assert fetch(state, 2, 11, last_epoch=-1).error == ErrorCode.offset_out_of_range
    # with its last epoch, a follower ahead of us has diverged (checked first, as Kafka does)
    assert fetch(state, 2, 11).diverging == EpochEndOffset(5, 10)
    assert fetch(state, 2, 10, last_epoch=9).error == ErrorCode.offset_out_of_range
    state.resign()
    assert fetch(state, 2, 10).error == ErrorCode.not_leader_or_follower


def test_a_fetch_below_the_log_start_is_out_of_range() -> None:
    state = leader(hw=8)
    state.log.increment_log_start_offset(6)
    assert fetch(state, 2, 5).error == ErrorCode.offset_out_of_range
    assert fetch(state, 2, 5, last_epoch=-1).error == ErrorCode.offset_out_of_range
    assert fetch(state, 2, 6).error == ErrorCode.none


def test_a_diverging_follower_gets_the_epoch_end_and_nothing_else() -> None:
    state = leader()
    fetch(state, 3, 10)
    res = fetch(state, 2, 12, last_epoch=3)  # our epoch 3 ends at 10
    assert res.error == ErrorCode.none
    assert res.diverging == EpochEndOffset(3, 10)
    assert res.read_offset == -1 and res.alter_partition is None
    # no progress recorded: the fetch offset is not a position in our log
    assert state.followers[2].log_end_offset == -1 and state.high_watermark == 4
    res = fetch(state, 2, 4, last_epoch=2)  # epoch 2 was never ours: epoch 1 ends at 3
    assert res.diverging == EpochEndOffset(1, 3)


def test_an_agreeing_fetch_reads_from_its_offset() -> None:
    state = leader()
    res = fetch(state, 2, 7, last_epoch=3)
    assert res.error == ErrorCode.none and res.diverging is None
    assert (res.read_offset, res.log_end_offset, res.log_start_offset) == (7, 10, 0)
    assert state.followers[2].log_end_offset == 7


def test_a_fetch_from_a_dead_incarnation_is_refused() -> None:
    brokers = Brokers()
    state = leader(brokers=brokers)
    brokers.epochs[2] = 150  # broker 2 re-registered; its old process still fetches
    res = fetch(state, 2, 10, broker_epoch=102)
    assert res.error == ErrorCode.not_leader_or_follower
    assert state.followers[2].log_end_offset == -1
    assert fetch(state, 2, 10, broker_epoch=150).error == ErrorCode.none
    assert fetch(state, 2, 10, broker_epoch=-1).error == ErrorCode.none


# --- the high watermark ------------------------------------------------------------------------


def test_hw_is_the_minimum_over_the_isr_and_never_goes_down() -> None:
    state = leader()
    append(state, 5)  # log end 15
    fetch(state, 2, 15)
    fetch(state, 3, 12)
    assert state.high_watermark == 12
    fetch(state, 3, 15)
    assert state.high_watermark == 15
    fetch(state, 3, 10)  # a follower that lost records reports less: the HW stays
    assert state.high_watermark == 15
    assert state.log.hw_writes == [12, 15]


def test_hw_with_an_isr_of_one_follows_the_log_end() -> None:
    state = leader((1,), min_isr=1)
    assert state.high_watermark == 10  # nobody else to wait for
    assert append(state, 3) is True and state.high_watermark == 13


def test_hw_is_frozen_under_min_isr() -> None:
    state = leader((1,), min_isr=2)
    assert state.under_min_isr
    assert append(state, 3) is False and state.high_watermark == 4
    state.followers[2].broker_epoch = None  # keep replica 2 out of the ISR: no expansion
    assert state.update_config(0, ReplicationConfig(LAG, 1)) is True
    assert state.high_watermark == 13


def test_min_isr_above_the_replication_factor_counts_as_the_factor() -> None:
    state = leader((1,), min_isr=3, replicas=(1,))
    assert state.effective_min_isr == 1 and not state.under_min_isr
    assert state.high_watermark == 10


def test_hw_counts_a_pending_expansion_at_once() -> None:
    state = leader((1, 2))
    append(state, 5)
    fetch(state, 2, 15)
    assert state.high_watermark == 15
    append(state, 5)  # log end 20
    res = fetch(state, 3, 15)  # 3 reached the HW: expansion proposed
    assert res.alter_partition is not None
    assert state.isr == {1, 2} and state.maximal_isr == {1, 2, 3}
    fetch(state, 2, 20)
    assert state.high_watermark == 15  # waits for 3 before the controller answers


def test_hw_keeps_counting_a_member_whose_removal_is_pending() -> None:
    state = leader()
    fetch(state, 2, 10, now=0)
    fetch(state, 3, 10, now=0)
    append(state, 5)
    fetch(state, 2, 15, now=LAG)
    req = state.maybe_shrink_isr(LAG + 1)  # 3 fell behind
    assert req is not None and req.isr == {1, 2}
    assert state.maximal_isr == {1, 2, 3}
    append(state, 1, now=LAG + 1)
    fetch(state, 2, 16, now=LAG + 1)
    assert state.high_watermark == 10  # 3 is still in the maximal ISR
    moved, _ = alter_ok(state, req, now=LAG + 1)
    assert moved and state.high_watermark == 16 and state.isr == {1, 2}


def test_hw_waits_for_a_caught_up_replica_about_to_join() -> None:
    """Kafka's shouldWaitForReplicaToJoinIsr: a caught-up, eligible follower outside the ISR
    holds the HW even while its expansion cannot be proposed (another change in flight)."""
    state = leader((1, 2))
    fetch(state, 2, 10, now=0)
    append(state, 1, now=0)
    shrink = state.maybe_shrink_isr(2 * LAG)  # 2 stopped fetching: a shrink is in flight
    assert shrink is not None
    assert fetch(state, 3, 11, now=2 * LAG).alter_partition is None
    append(state, 4, now=2 * LAG)
    fetch(state, 2, 15, now=2 * LAG)
    assert state.high_watermark == 11  # 3 is caught up and eligible: it holds the HW
    fetch(state, 3, 15, now=2 * LAG)
    assert state.high_watermark == 15


def test_an_ineligible_caught_up_replica_does_not_hold_the_hw() -> None:
    brokers = Brokers()
    state = leader((1, 2), brokers=brokers)
    brokers.shutting_down.add(3)
    fetch(state, 3, 10)
    append(state, 5)
    fetch(state, 2, 15)
    assert state.high_watermark == 15


# --- ISR expansion -----------------------------------------------------------------------------


def test_expansion_request() -> None:
    state = leader((1, 2))
    fetch(state, 2, 10)
    res = fetch(state, 3, 10)
    req = res.alter_partition
    assert req == AlterPartitionRequest(req.request_id, 1, 5, 10, ((1, 101), (2, 102), (3, 103)))
    assert isinstance(state.isr_state, PendingIsrChange) and state.isr_state.expanding
    assert fetch(state, 3, 10).alter_partition is None  # one in flight


def test_expansion_needs_the_current_epoch_start() -> None:
    state = leader((1, 2), hw=4)
    res = fetch(state, 3, 6, last_epoch=3)  # above the HW (4), below the epoch start (10)
    assert res.alter_partition is None
    assert fetch(state, 3, 10).alter_partition is not None


def test_a_local_truncation_brings_the_epoch_start_down() -> None:
    # a mirror leader elected at 10 cuts its log to 2 (KIP-1279 truncation) and refills it
    # from the source to 6: the epoch start (10) must not stay above the refilled log
    state = leader((1, 2), hw=4)
    log = state.log
    assert isinstance(log, UnitLog)
    log.truncate_to(2)
    state.on_local_truncation(0)
    assert state.epoch_start_offset == 2 and state.high_watermark == 2
    log.append_as_leader(3, [0, 1, 2, 3])
    state.on_append(0)
    assert fetch(state, 2, 6, last_epoch=3).hw_moved and state.high_watermark == 6
    assert state.epoch_start_offset <= state.high_watermark  # ListOffsets answers
    assert fetch(state, 3, 6, last_epoch=3).alter_partition is not None  # 3 may rejoin


def test_expansion_needs_the_hw() -> None:
    state = leader((1, 2))
    append(state, 5)
    fetch(state, 2, 15)
    assert state.high_watermark == 15
    assert fetch(state, 3, 12).alter_partition is None
    assert fetch(state, 3, 15).alter_partition is not None


@pytest.mark.parametrize("why", ["fenced", "shutting down", "unknown", "epoch mismatch"])
def test_expansion_needs_an_eligible_broker(why: str) -> None:
    brokers = Brokers()
    state = leader((1, 2), brokers=brokers)
    broker_epoch = 103
    if why == "fenced":
        brokers.fenced.add(3)
    elif why == "shutting down":
        brokers.shutting_down.add(3)
    elif why == "unknown":
        del brokers.epochs[3]
    else:
        broker_epoch = 200  # the fetch comes from a newer incarnation than the metadata knows
    res = fetch(state, 3, 10, broker_epoch=broker_epoch)
    assert res.error == ErrorCode.none and res.alter_partition is None


def test_expansion_with_an_unchecked_broker_epoch() -> None:
    state = leader((1, 2))
    req = fetch(state, 3, 10, broker_epoch=-1).alter_partition
    assert req is not None and (3, -1) in req.new_isr


# --- ISR shrink --------------------------------------------------------------------------------


def test_shrink_after_the_lag_time() -> None:
    state = leader()
    fetch(state, 2, 10, now=0)
    fetch(state, 3, 10, now=0)
    append(state, 1, now=10)
    fetch(state, 2, 11, now=LAG)
    assert state.maybe_shrink_isr(LAG) is None  # 3 was caught up at 0: exactly the lag
    req = state.maybe_shrink_isr(LAG + 1)
    assert req is not None and req.isr == {1, 2} and req.new_isr == ((1, 101), (2, 102))
    assert isinstance(state.isr_state, PendingIsrChange) and not state.isr_state.expanding
    assert state.maybe_shrink_isr(LAG + 2) is None  # one in flight


def test_a_member_at_the_log_end_is_never_out_of_sync() -> None:
    state = leader()
    fetch(state, 2, 10, now=0)
    fetch(state, 3, 10, now=0)
    assert state.maybe_shrink_isr(100 * LAG) is None  # idle partition: nothing to lag behind


def test_an_isr_member_that_never_fetches_is_dropped() -> None:
    state = leader()
    fetch(state, 2, 10, now=0)
    req = state.maybe_shrink_isr(LAG + 1)
    assert req is not None and req.isr == {1, 2}


def test_shrink_only_as_leader() -> None:
    state = leader()
    state.resign()
    assert state.maybe_shrink_isr(10 * LAG) is None


# --- AlterPartition responses ------------------------------------------------------------------


def pending_expansion() -> tuple[LeaderPartitionState, AlterPartitionRequest]:
    state = leader((1, 2))
    fetch(state, 2, 10)
    req = fetch(state, 3, 10).alter_partition
    assert req is not None
    return state, req


def test_success_commits_the_isr_and_partition_epoch() -> None:
    state, req = pending_expansion()
    moved, retry = alter_ok(state, req)
    assert retry is None
    assert state.isr == {1, 2, 3} and not state.isr_state.in_flight
    assert state.partition_epoch == 11
    assert not moved and state.high_watermark == 10  # the HW already waited for 3


@pytest.mark.parametrize("error", [ErrorCode.ineligible_replica, ErrorCode.operation_not_attempted])
def test_not_applied_reverts_to_the_committed_isr(error: ErrorCode) -> None:
    state, req = pending_expansion()
    out = state.on_alter_partition_response(0, req.request_id, error)
    assert out.retry is None and state.isr == {1, 2} and not state.isr_state.in_flight
    assert state.maximal_isr == {1, 2}


@pytest.mark.parametrize(
    "error",
    [
        ErrorCode.fenced_leader_epoch,
        ErrorCode.invalid_update_version,
        ErrorCode.unknown_topic_or_partition,
        ErrorCode.new_leader_elected,
    ],
)
def test_an_out_of_date_view_waits_for_metadata(error: ErrorCode) -> None:
    state, req = pending_expansion()
    out = state.on_alter_partition_response(0, req.request_id, error)
    assert out.retry is None and state.isr_state.in_flight and state.maximal_isr == {1, 2, 3}


def test_other_errors_retry_the_same_request() -> None:
    state, req = pending_expansion()
    out = state.on_alter_partition_response(0, req.request_id, ErrorCode.request_timed_out)
    assert out.retry is req and state.isr_state.in_flight


def test_stale_answers_are_ignored() -> None:
    state, req = pending_expansion()
    out = state.on_alter_partition_response(0, req.request_id + 1, ErrorCode.ineligible_replica)
    assert out.retry is None and state.isr_state.in_flight
    other_epoch = reg((1, 2, 3), leader_epoch=6, partition_epoch=11)
    state.on_alter_partition_response(0, req.request_id, ErrorCode.none, other_epoch)
    assert state.isr_state.in_flight  # a success for another leader epoch
    older = reg((1, 2, 3), partition_epoch=9)
    state.on_alter_partition_response(0, req.request_id, ErrorCode.none, older)
    assert state.isr_state.in_flight and state.partition_epoch == 10


def test_metadata_echoing_our_partition_epoch_keeps_the_change_in_flight() -> None:
    """Our deviation from Kafka 3.9's makeLeader: the request in flight carries this partition
    epoch and may still be applied, so its member must keep holding the HW."""
    state, _ = pending_expansion()
    state.become_leader(0, reg((1, 2), partition_epoch=10))
    assert state.isr_state.in_flight and state.maximal_isr == {1, 2, 3}
    state.become_leader(0, reg((1, 2), partition_epoch=11))  # the controller moved on
    assert not state.isr_state.in_flight and state.maximal_isr == {1, 2}


# --- produce -----------------------------------------------------------------------------------


def test_append_check() -> None:
    state = leader((1,), min_isr=2)
    assert state.append_check(-1) == ErrorCode.not_enough_replicas
    assert state.append_check(1) is None and state.append_check(0) is None
    # a pending expansion does not count: only what the controller committed
    fetch(state, 2, 10)
    assert state.isr_state.in_flight and state.append_check(-1) == ErrorCode.not_enough_replicas
    state = leader((1, 2), min_isr=2)
    assert state.append_check(-1) is None
    state.resign()
    assert state.append_check(1) == ErrorCode.not_leader_or_follower


def test_acks_all_waits_for_the_hw() -> None:
    state = leader((1, 2))
    fetch(state, 2, 10)
    append(state, 3)  # 10-12: the produce needs the HW at 13
    assert state.acks_all_done(13) == (False, ErrorCode.none)
    fetch(state, 2, 13)
    assert state.acks_all_done(13) == (True, ErrorCode.none)


def test_acks_all_after_the_isr_shrank_under_min() -> None:
    state = leader((1, 2))
    fetch(state, 2, 10, now=0)
    append(state, 3, now=0)
    fetch(state, 2, 13, now=0)
    req = state.maybe_shrink_isr(LAG + 1)  # nothing to shrink: 2 is at the log end
    assert req is None
    append(state, 2, now=LAG)  # 13-14
    req = state.maybe_shrink_isr(3 * LAG)
    assert req is not None
    alter_ok(state, req)
    assert state.isr == {1} and state.high_watermark == 13
    assert state.acks_all_done(13) == (True, ErrorCode.not_enough_replicas_after_append)
    assert state.acks_all_done(15) == (False, ErrorCode.none)  # frozen HW: it times out
    state.resign()
    assert state.acks_all_done(13) == (False, ErrorCode.not_leader_or_follower)


# --- follower progress (Replica.java) ----------------------------------------------------------


def test_caught_up_at_the_leader_end() -> None:
    p = ReplicaProgress()
    p.on_fetch(10, 0, now_ms=500, leader_end_offset=10, broker_epoch=7)
    assert p.last_caught_up_ms == 500 and p.broker_epoch == 7
    assert p.is_caught_up(10, 10_000, 100)  # same end offset as the leader: caught up
    assert not p.is_caught_up(11, 601, 100)
    assert p.is_caught_up(11, 600, 100)


def test_reading_what_the_leader_had_at_the_previous_fetch_counts() -> None:
    """A follower always a little behind a busy leader stays caught up."""
    p = ReplicaProgress()
    p.on_fetch(5, 0, now_ms=100, leader_end_offset=12, broker_epoch=7)
    assert p.last_caught_up_ms == NEVER  # the first fetch with the leader ahead: unknown
    p.on_fetch(12, 0, now_ms=200, leader_end_offset=20, broker_epoch=7)
    assert p.last_caught_up_ms == 100  # it now has what the leader had at 100
    p.on_fetch(15, 0, now_ms=300, leader_end_offset=25, broker_epoch=7)
    assert p.last_caught_up_ms == 100  # 15 < 20: it did not get all of what was there at 200


def test_reset_for_a_new_leader() -> None:
    p = ReplicaProgress()
    p.on_fetch(10, 0, now_ms=100, leader_end_offset=10, broker_epoch=7)
    p.reset(1000, 10, new_leader=True, in_isr=True)
    assert (p.log_end_offset, p.broker_epoch, p.last_caught_up_ms) == (-1, None, 1000)
    p.reset(2000, 10, new_leader=True, in_isr=False)
    assert p.last_caught_up_ms == NEVER
