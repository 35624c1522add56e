"""The follower's truncation decisions (Kafka's ``AbstractFetcherThread``).

Two situations make a follower cut its log:

- the leader answered a Fetch with DivergingEpoch {epoch, end offset}
  (``truncation_for_diverging_epoch``: ``getOffsetTruncationState``);
- the leader answered OFFSET_OUT_OF_RANGE and the follower asked for the leader's earliest and
  latest offsets (``reset_after_out_of_range``: ``fetchOffsetAndTruncate``).

Both are pure: they read the follower's log end offset and epoch cache and say what to do.
"""

from typing import NamedTuple

from broker.replication.leader_epochs import UNDEFINED_EPOCH, UNDEFINED_OFFSET, EpochLookup


class Truncation(NamedTuple):
    """Truncate the log to ``offset`` (drop everything at or above it).

    ``completed`` False: the follower did not know the leader's epoch; it cut to the end of its
    own older epoch and must fetch again, so the leader answers for that older epoch.
    """

    offset: int
    completed: bool


def truncation_for_diverging_epoch(
    log: EpochLookup,
    log_end_offset: int,
    leader_epoch: int,
    leader_end_offset: int,
    fetch_offset: int,
) -> Truncation:
    """Where to cut after a DivergingEpoch {``leader_epoch``, ``leader_end_offset``}.

    Kafka's rule: look the leader's epoch up in our own cache. If we hold that epoch, cut to
    min(our end offset for it, the leader's end offset, our log end offset): done. If our answer
    is an older epoch (we never saw the leader's), cut to min(our end for that older epoch, our
    log end offset) and ask again. With no usable cache entry, trust the leader's end offset.
    An undefined leader offset (only from old protocol versions) falls back to ``fetch_offset``.
    """
    if leader_end_offset == UNDEFINED_OFFSET:
        return Truncation(fetch_offset, True)
    if leader_epoch == UNDEFINED_EPOCH:
        return Truncation(min(leader_end_offset, log_end_offset), True)
    our_epoch, our_end = log.end_offset_for_epoch(leader_epoch)
    if our_end == UNDEFINED_OFFSET:
        return Truncation(min(leader_end_offset, log_end_offset), True)
    if our_epoch != leader_epoch:
        return Truncation(min(our_end, log_end_offset), False)
    return Truncation(min(our_end, leader_end_offset, log_end_offset), True)


class OffsetReset(NamedTuple):
    """After OFFSET_OUT_OF_RANGE: how to fix the log, then fetch from ``fetch_offset``.

    ``truncate_to``: cut the log there (-1: keep it); ``start_fresh``: delete everything and
    restart the log empty at ``fetch_offset`` (our data is all below the leader's log start).
    """

    fetch_offset: int
    truncate_to: int
    start_fresh: bool


def reset_after_out_of_range(
    log_end_offset: int, leader_log_start: int, leader_log_end: int
) -> OffsetReset:
    """Kafka's ``fetchOffsetAndTruncate``, given the leader's earliest and latest offsets.

    - The leader ends before us (an unclean election left us ahead): cut to its end, fetch there.
    - Our log ends before the leader's log start (it deleted what we miss): start over empty at
      its log start.
    - Otherwise keep our log and fetch from our end.
    """
    if leader_log_end < log_end_offset:
        return OffsetReset(leader_log_end, leader_log_end, False)
    if leader_log_start > log_end_offset:
        return OffsetReset(leader_log_start, -1, True)
    return OffsetReset(log_end_offset, -1, False)
