"""Leader-epoch lookups as replication uses them, and the leader's divergence rule.

The lookup itself already lives in the log: ``LeaderEpochCache.end_offset_for`` (and
``PartitionLog.end_offset_for_epoch``) answer as Kafka's ``LeaderEpochFileCache.endOffsetFor``:
for a requested epoch E, the largest epoch E' <= E the cache holds and the offset where E' ends
(the start of the next epoch, or the log end offset for the latest epoch); (E, first start
offset) when E is older than every entry; (-1, -1) when the cache is empty or E is newer than
every entry. So this module only names that contract (``EpochLookup``) for the sans-IO core and
adds the one rule built on it that the leader applies to a follower's Fetch
(``diverging_epoch``: Kafka's ``Partition.readRecords``).
"""

from typing import NamedTuple, Protocol

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


class EpochEndOffset(NamedTuple):
    """An epoch and the offset where it ends (Fetch's DivergingEpoch, OffsetForLeaderEpoch)."""

    epoch: int
    end_offset: int

    @property
    def undefined(self) -> bool:
        return self.epoch == UNDEFINED_EPOCH or self.end_offset == UNDEFINED_OFFSET


class EpochLookup(Protocol):
    """What replication needs from a log's leader-epoch cache (``PartitionLog`` has it)."""

    @property
    def latest_epoch(self) -> int | None:
        """The epoch of the newest cache entry; None for an empty cache."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) with ``LeaderEpochFileCache.endOffsetFor`` semantics."""
        ...


class DivergenceCheck(NamedTuple):
    """The leader's answer to a follower's (last fetched epoch, fetch offset).

    ``out_of_range``: the leader cannot place the epoch (OFFSET_OUT_OF_RANGE);
    ``diverging``: where the follower's log stops matching ours (send DivergingEpoch and nothing
    else); both unset: the logs agree up to the fetch offset, read from there.
    """

    out_of_range: bool
    diverging: EpochEndOffset | None


AGREE = DivergenceCheck(False, None)


def diverging_epoch(
    log: EpochLookup, last_fetched_epoch: int, fetch_offset: int, log_start_offset: int
) -> DivergenceCheck:
    """Kafka's check of a Fetch that carries LastFetchedEpoch (v12+), ``Partition.readRecords``.

    The leader looks up the follower's last fetched epoch: an undefined answer, or a fetch
    offset below the log start, is OFFSET_OUT_OF_RANGE; if the answer's epoch is older than the
    follower's (the leader never had that epoch) or the epoch ends before the fetch offset (the
    follower has records the leader does not), the follower diverged at that answer.
    ``last_fetched_epoch`` < 0 means the request carried none: nothing to check.
    """
    if last_fetched_epoch < 0:
        return AGREE
    answer = EpochEndOffset(*log.end_offset_for_epoch(last_fetched_epoch))
    if answer.undefined or fetch_offset < log_start_offset:
        return DivergenceCheck(True, None)
    if answer.epoch < last_fetched_epoch or answer.end_offset < fetch_offset:
        return DivergenceCheck(False, answer)
    return AGREE
