"""broker/replication/follower_state.py: the follower's side of a partition."""

import pytest
from kio.schema.errors import ErrorCode

from broker.replication.follower_state import (
    FetchPartition,
    FetchResponsePartition,
    FollowerPartitionState,
    FollowerStatus,
    ReplicationStateError,
)
from broker.replication.leader_epochs import EpochEndOffset
from tests.broker.replication_sim import Batch
from tests.broker.replication_support import UnitLog, log_with

# the follower: 0-2 epoch 1, 3-7 epoch 3; its leader is broker 2 in epoch 5
EPOCHS = [1, 1, 1, 3, 3, 3, 3, 3]

Response = FetchResponsePartition[Batch]


def follower(epochs: list[int] = EPOCHS, hw: int = 2) -> FollowerPartitionState[Batch]:
    f: FollowerPartitionState[Batch] = FollowerPartitionState(3, log_with(epochs, hw=hw))
    assert f.become_follower(2, 5) is True
    return f


def records(base: int, *epochs: int) -> Batch:
    return base, [(e, 2000 + base + i) for i, e in enumerate(epochs)]


def log_of(f: FollowerPartitionState[Batch]) -> UnitLog:
    assert isinstance(f.log, UnitLog)
    return f.log


def test_fetch_request() -> None:
    f = follower()
    assert f.status is FollowerStatus.FETCHING
    assert f.fetch_request() == FetchPartition(8, 3, 5, 0)
    empty: FollowerPartitionState[Batch] = FollowerPartitionState(3, log_with([]))
    assert empty.fetch_request() is None  # no leader yet
    empty.become_follower(2, 5)
    assert empty.fetch_request() == FetchPartition(0, -1, 5, 0)  # no epoch to check


def test_become_follower() -> None:
    f = follower()
    assert f.become_follower(2, 5) is False  # the same epoch: keep fetching as before
    assert f.become_follower(1, 4) is False and f.leader_epoch == 5  # stale metadata
    assert f.become_follower(-1, 6) is False and f.status is FollowerStatus.NO_LEADER
    assert f.fetch_request() is None
    assert f.become_follower(1, 7) is True and f.leader_id == 1
    assert f.fetch_request() == FetchPartition(8, 3, 7, 0)


def test_records_are_appended_and_the_hw_is_capped_by_our_end() -> None:
    f = follower()
    req = f.fetch_request()
    assert req is not None
    step = f.on_fetch_response(req, Response(ErrorCode.none, 100, 0, None, records(8, 3, 5, 5)))
    log = log_of(f)
    assert step.appended and step.hw_changed and not step.backoff
    assert log.log_end_offset == 11 and log.latest_epoch == 5
    assert log.end_offset_for_epoch(3) == (3, 9)  # epoch 5 starts at 9
    assert log.hw_writes == [11]  # min(the leader's 100, our end 11)
    assert f.fetch_request() == FetchPartition(11, 5, 5, 0)


def test_the_leader_hw_below_ours_is_taken() -> None:
    """Kafka's follower takes the leader's HW even when lower (a new leader may lag)."""
    f = follower(hw=6)
    req = f.fetch_request()
    assert req is not None
    f.on_fetch_response(req, Response(ErrorCode.none, 4, 0, None, records(8)))
    assert log_of(f).hw == 4


def test_the_log_start_follows_the_leader_within_the_hw() -> None:
    f = follower()
    req = f.fetch_request()
    assert req is not None
    f.on_fetch_response(req, Response(ErrorCode.none, 6, 4, None, records(8)))
    assert log_of(f).log_start_offset == 4
    req = f.fetch_request()
    assert req is not None and req.log_start_offset == 4
    # a leader log start past our HW cannot be applied yet (Kafka refuses it)
    f.on_fetch_response(req, Response(ErrorCode.none, 6, 7, None, records(8)))
    assert log_of(f).log_start_offset == 4


def test_stale_answers_are_ignored() -> None:
    f = follower()
    req = f.fetch_request()
    assert req is not None
    answer = Response(ErrorCode.none, 9, 0, None, records(8, 5))
    assert f.on_fetch_response(req._replace(fetch_offset=7), answer).ignored
    assert f.on_fetch_response(req._replace(current_leader_epoch=4), answer).ignored
    f.become_follower(-1, 6)
    assert f.on_fetch_response(req, answer).ignored
    assert log_of(f).log_end_offset == 8


def test_diverging_epoch_truncates() -> None:
    f = follower()
    req = f.fetch_request()
    assert req is not None
    step = f.on_fetch_response(req, Response(ErrorCode.none, 5, 0, EpochEndOffset(3, 6)))
    log = log_of(f)
    assert step.truncated_to == 6 and not step.appended
    assert log.log_end_offset == 6 and log.hw == 2  # nothing else of the answer applied
    assert f.fetch_request() == FetchPartition(6, 3, 5, 0)


def test_an_unknown_epoch_truncates_partway_and_asks_again() -> None:
    f = follower([1, 1, 3, 3, 6, 6, 6], hw=2)
    req = f.fetch_request()
    assert req is not None and req.last_fetched_epoch == 6
    step = f.on_fetch_response(req, Response(ErrorCode.none, 5, 0, EpochEndOffset(4, 5)))
    assert step.truncated_to == 4  # where our epoch 3 ends: we never had epoch 4
    req = f.fetch_request()
    assert req == FetchPartition(4, 3, 5, 0)  # the next Fetch carries epoch 3


def test_truncation_lowers_the_hw() -> None:
    f = follower(hw=8)
    req = f.fetch_request()
    assert req is not None
    f.on_fetch_response(req, Response(ErrorCode.none, 5, 0, EpochEndOffset(3, 5)))
    assert log_of(f).hw == 5


def test_out_of_range_asks_for_the_leader_offsets() -> None:
    f = follower()
    req = f.fetch_request()
    assert req is not None
    f.on_fetch_response(req, Response(ErrorCode.offset_out_of_range))
    assert f.status is FollowerStatus.NEEDS_OFFSETS and f.fetch_request() is None
    assert f.on_leader_offsets(0, 6).truncated_to == 6  # the leader ends before us
    assert log_of(f).log_end_offset == 6 and f.status is FollowerStatus.FETCHING
    assert f.fetch_request() == FetchPartition(6, 3, 5, 0)
    assert f.on_leader_offsets(0, 6).ignored  # not asked for


def test_out_of_range_below_the_leader_log_start_starts_over() -> None:
    f = follower()
    req = f.fetch_request()
    assert req is not None
    f.on_fetch_response(req, Response(ErrorCode.offset_out_of_range))
    step = f.on_leader_offsets(20, 30)
    log = log_of(f)
    assert step.truncated_to == 20
    assert (log.log_start_offset, log.log_end_offset, log.latest_epoch) == (20, 20, None)
    assert f.fetch_request() == FetchPartition(20, -1, 5, 20)


def test_out_of_range_inside_the_leader_log_keeps_ours() -> None:
    f = follower()
    req = f.fetch_request()
    assert req is not None
    f.on_fetch_response(req, Response(ErrorCode.offset_out_of_range))
    assert f.on_leader_offsets(0, 30).truncated_to == -1
    assert log_of(f).log_end_offset == 8 and f.fetch_request() == FetchPartition(8, 3, 5, 0)


def test_fenced_leader_epoch_waits_for_metadata() -> None:
    f = follower()
    req = f.fetch_request()
    assert req is not None
    f.on_fetch_response(req, Response(ErrorCode.fenced_leader_epoch))
    assert f.status is FollowerStatus.FENCED and f.fetch_request() is None
    assert f.become_follower(2, 5) is False and f.fetch_request() is None
    assert f.become_follower(1, 6) is True and f.fetch_request() is not None


@pytest.mark.parametrize(
    "error",
    [ErrorCode.not_leader_or_follower, ErrorCode.unknown_leader_epoch, ErrorCode.request_timed_out],
)
def test_other_errors_back_off(error: ErrorCode) -> None:
    f = follower()
    req = f.fetch_request()
    assert req is not None
    step = f.on_fetch_response(req, Response(error))
    assert step.backoff and f.fetch_request() == req


def test_records_must_land_at_our_log_end() -> None:
    f = follower()
    req = f.fetch_request()
    assert req is not None
    log_of(f).recs.append((3, 1))  # something else appended behind the state's back
    with pytest.raises(ReplicationStateError):
        f.on_fetch_response(req, Response(ErrorCode.none, 5, 0, None, records(8, 5)))


def test_batches_of_an_epoch_above_the_fetched_one_are_refused() -> None:
    # KAFKA-18723: the answer vouches for batches up to the leader epoch we fetched with (5)
    f = follower()
    req = f.fetch_request()
    assert req is not None
    step = f.on_fetch_response(req, Response(ErrorCode.none, 100, 0, None, records(8, 5, 6, 6)))
    assert step.beyond_epoch and step.backoff and step.appended
    assert log_of(f).log_end_offset == 9 and f.fetch_offset == 9  # the epoch-5 batch only


def test_a_mirror_partition_checks_against_the_mirror_leader_epoch() -> None:
    # KIP-1279: the batches carry the source's epochs (here 9 and 12, above our epoch 5)
    f = follower()
    f.mirrored = True
    req = f.fetch_request()
    assert req is not None and req.mirror_leader_epoch == -1
    answer = Response(ErrorCode.none, 100, 0, None, records(8, 9, 12, 13), mirror_leader_epoch=12)
    step = f.on_fetch_response(req, answer)
    assert step.beyond_epoch and log_of(f).log_end_offset == 10  # 13 > 12: not vouched for
    req = f.fetch_request()
    assert req is not None and req.mirror_leader_epoch == 12  # what the leader said last
    step = f.on_fetch_response(
        req, Response(ErrorCode.none, 100, 0, None, records(10, 13), mirror_leader_epoch=13)
    )
    assert not step.beyond_epoch and log_of(f).log_end_offset == 11


def test_a_mirror_partition_without_a_mirror_leader_epoch_is_not_checked() -> None:
    # a leader that does not send the field (Fetch below v19): nothing to check against
    f = follower()
    f.mirrored = True
    req = f.fetch_request()
    assert req is not None
    step = f.on_fetch_response(req, Response(ErrorCode.none, 100, 0, None, records(8, 9, 12)))
    assert not step.beyond_epoch and log_of(f).log_end_offset == 10
