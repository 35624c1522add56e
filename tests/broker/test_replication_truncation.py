"""broker/replication/truncation.py: where a follower cuts its log."""

import pytest

from broker.replication.truncation import (
    OffsetReset,
    Truncation,
    reset_after_out_of_range,
    truncation_for_diverging_epoch,
)
from tests.broker.replication_support import log_with

# the follower: offsets 0-2 epoch 1, 3-6 epoch 3, 7-11 epoch 5; cache (1,0) (3,3) (5,7); end 12
FOLLOWER = [1, 1, 1, 3, 3, 3, 3, 5, 5, 5, 5, 5]


def cut(leader_epoch: int, leader_end: int, fetch_offset: int = 12) -> Truncation:
    log = log_with(FOLLOWER)
    return truncation_for_diverging_epoch(
        log, log.log_end_offset, leader_epoch, leader_end, fetch_offset
    )


@pytest.mark.parametrize(
    ("leader_epoch", "leader_end", "expected"),
    [
        # we know epoch 3 (it ends at 7 here): min(ours, the leader's, our end)
        (3, 5, Truncation(5, True)),  # the leader's epoch 3 ended earlier
        (3, 9, Truncation(7, True)),  # ours ended earlier
        (3, 7, Truncation(7, True)),
        (5, 20, Truncation(12, True)),  # capped at our log end
        (5, 9, Truncation(9, True)),
        # we never had epoch 4: cut to where our epoch 3 ends and ask again
        (4, 10, Truncation(7, False)),
        (2, 1, Truncation(3, False)),  # epoch 1 ends at 3 here
        # older than anything we hold: (epoch, our first start) counts as that epoch
        (0, 0, Truncation(0, True)),
        # an answer without an epoch (old protocol): the leader's offset, capped
        (-1, 4, Truncation(4, True)),
        (-1, 40, Truncation(12, True)),
        # no offset at all: fall back to the fetch offset
        (3, -1, Truncation(12, True)),
    ],
)
def test_truncation(leader_epoch: int, leader_end: int, expected: Truncation) -> None:
    assert cut(leader_epoch, leader_end) == expected


def test_an_epoch_newer_than_our_cache_trusts_the_leader_offset() -> None:
    # our cache cannot place epoch 9 (newer than all): the leader's offset, capped at our end
    assert cut(9, 10) == Truncation(10, True)
    assert cut(9, 30) == Truncation(12, True)


def test_without_epochs_the_leader_offset_rules() -> None:
    log = log_with([])
    log.truncate_fully_and_start_at(4)
    assert truncation_for_diverging_epoch(log, 4, 3, 2, 4) == Truncation(2, True)


def test_asking_again_converges() -> None:
    """A follower that saw epochs the leader never had walks back epoch by epoch."""
    log = log_with(FOLLOWER)
    first = truncation_for_diverging_epoch(log, log.log_end_offset, 4, 9, 12)
    assert first == Truncation(7, False)
    log.truncate_to(first.offset)
    assert log.latest_epoch == 3
    # the next Fetch carries epoch 3; the leader answers (3, 6): its epoch 3 ended at 6
    second = truncation_for_diverging_epoch(log, log.log_end_offset, 3, 6, 7)
    assert second == Truncation(6, True)


@pytest.mark.parametrize(
    ("ours", "leader_start", "leader_end", "expected"),
    [
        (12, 0, 8, OffsetReset(8, 8, False)),  # the leader ends before us: cut to its end
        (12, 20, 30, OffsetReset(20, -1, True)),  # all we have is below its log start
        (12, 5, 30, OffsetReset(12, -1, False)),  # keep our log, fetch from our end
        (12, 12, 12, OffsetReset(12, -1, False)),
    ],
)
def test_reset_after_out_of_range(
    ours: int, leader_start: int, leader_end: int, expected: OffsetReset
) -> None:
    assert reset_after_out_of_range(ours, leader_start, leader_end) == expected
