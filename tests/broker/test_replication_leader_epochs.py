"""broker/replication/leader_epochs.py: the leader's divergence rule for a follower's Fetch."""

from pathlib import Path

import pytest

from broker.replication.leader_epochs import (
    AGREE,
    DivergenceCheck,
    EpochEndOffset,
    diverging_epoch,
)
from tests.broker.log_helpers import fill, open_log
from tests.broker.replication_support import log_with

# offsets 0-2 epoch 1, 3-6 epoch 3, 7-9 epoch 4: the cache is (1, 0), (3, 3), (4, 7); end 10
EPOCHS = [1, 1, 1, 3, 3, 3, 3, 4, 4, 4]


def test_no_last_fetched_epoch_is_not_checked() -> None:
    assert diverging_epoch(log_with(EPOCHS), -1, 10, 0) == AGREE


@pytest.mark.parametrize(
    ("last_epoch", "fetch_offset", "expected"),
    [
        (4, 10, AGREE),  # caught up in our latest epoch
        (4, 8, AGREE),  # behind, same history
        (3, 7, AGREE),  # fetching from where epoch 3 ends
        (3, 5, AGREE),
        # epoch 3 ends at 7 here: the follower has epoch-3 records we do not
        (3, 9, DivergenceCheck(False, EpochEndOffset(3, 7))),
        # an epoch we never had: the largest older one and where it ends
        (2, 3, DivergenceCheck(False, EpochEndOffset(1, 3))),
        (2, 2, DivergenceCheck(False, EpochEndOffset(1, 3))),
        # an epoch newer than ours: we cannot place it
        (5, 10, DivergenceCheck(True, None)),
        # the follower is past our log end in our own latest epoch
        (4, 12, DivergenceCheck(False, EpochEndOffset(4, 10))),
    ],
)
def test_divergence(last_epoch: int, fetch_offset: int, expected: DivergenceCheck) -> None:
    assert diverging_epoch(log_with(EPOCHS), last_epoch, fetch_offset, 0) == expected


def test_fetch_below_the_log_start_is_out_of_range() -> None:
    log = log_with(EPOCHS)
    log.hw = 6
    log.increment_log_start_offset(5)
    assert diverging_epoch(log, 3, 4, log.log_start_offset) == DivergenceCheck(True, None)
    assert diverging_epoch(log, 3, 5, log.log_start_offset) == AGREE


def test_an_epoch_older_than_the_cache_answers_with_the_first_start() -> None:
    log = log_with(EPOCHS)
    log.hw = 6
    log.increment_log_start_offset(5)  # the cache now starts (3, 5)
    # epoch 1 is gone: (1, 5), and the follower at 6 has records we cannot vouch for
    assert diverging_epoch(log, 1, 6, 5) == DivergenceCheck(False, EpochEndOffset(1, 5))


def test_an_empty_cache_cannot_place_any_epoch() -> None:
    assert diverging_epoch(log_with([]), 0, 0, 0) == DivergenceCheck(True, None)


def test_the_partition_log_answers_as_the_rule_expects(tmp_path: Path) -> None:
    """``PartitionLog`` is the log the broker passes as ``EpochLookup``."""
    plog = open_log(tmp_path)
    try:
        fill(plog, 1, epoch=1, n=3)  # 0-2
        fill(plog, 2, epoch=3, n=2)  # 3-6
        fill(plog, 1, epoch=4, n=3)  # 7-9
        assert plog.log_end_offset == 10
        assert plog.latest_epoch == 4
        assert diverging_epoch(plog, 3, 9, 0) == DivergenceCheck(False, EpochEndOffset(3, 7))
        assert diverging_epoch(plog, 2, 3, 0) == DivergenceCheck(False, EpochEndOffset(1, 3))
        assert diverging_epoch(plog, 4, 10, 0) == AGREE
        assert diverging_epoch(plog, 5, 10, 0) == DivergenceCheck(True, None)
    finally:
        plog.close()


def test_undefined_answers() -> None:
    assert EpochEndOffset(-1, -1).undefined
    assert EpochEndOffset(3, -1).undefined
    assert not EpochEndOffset(3, 0).undefined
