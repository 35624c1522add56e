"""The follower's side of one replicated partition, sans-IO (Kafka's ``AbstractFetcherThread``
partition state and ``ReplicaFetcherThread.processPartitionData``).

The shell asks ``fetch_request()`` what to put in the next Fetch, sends it to the leader, and
hands the answer to ``on_fetch_response``; this object appends, truncates and sets the high
watermark through the ``FollowerLog`` interface. Records are opaque (``R``: bytes of record
batches in the broker, anything in a simulation): only the log looks inside.

Rules, as in Kafka:

- Fetch from the log end offset, carrying the log's latest epoch as LastFetchedEpoch and the
  leader epoch we believe current.
- Only the answer to the outstanding request counts: same fetch offset, same leader epoch,
  still fetching. Anything else is stale and ignored.
- DivergingEpoch: truncate (``truncation.truncation_for_diverging_epoch``); nothing else of that
  answer is applied. The next Fetch carries the new end and epoch, so an incomplete truncation
  asks again by itself.
- Records: appended at the log end offset (any other position is a bug), but only the batches
  whose leader epoch is at most the epoch the answer is valid for (KAFKA-18723: a late answer
  must not bring batches of a newer epoch): the leader epoch we fetched with, or, for a mirror
  partition whose batches carry the source's epochs, the MirrorLeaderEpoch the leader sent
  (KIP-1279). The rest is fetched again. The high watermark
  becomes min(leader's HW, our log end offset); the log start moves up to the leader's when the
  HW allows it.
- OFFSET_OUT_OF_RANGE: ask the leader for its earliest and latest offsets (ListOffsets), then
  ``truncation.reset_after_out_of_range``. FENCED_LEADER_EPOCH: our leader epoch is old; stop
  until metadata brings a newer one. Other errors: retry after a back-off.
"""

import enum
from typing import Generic, NamedTuple, Protocol, TypeVar

from kio.schema.errors import ErrorCode

from broker.replication.leader_epochs import EpochEndOffset, EpochLookup
from broker.replication.truncation import (
    reset_after_out_of_range,
    truncation_for_diverging_epoch,
)

R = TypeVar("R")
R_contra = TypeVar("R_contra", contravariant=True)


class FollowerLog(EpochLookup, Protocol[R_contra]):
    @property
    def log_start_offset(self) -> int: ...

    @property
    def log_end_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None: ...

    def append_as_follower(self, records: R_contra, max_epoch: int) -> bool:
        """Append the leader's records at the log end offset, keeping their offsets and epochs
        (and teaching the epoch cache their epochs), up to the first batch whose leader epoch
        exceeds ``max_epoch`` (-1: no bound). True when every batch was appended."""
        ...

    def truncate_to(self, offset: int) -> object:
        """Drop everything at or above ``offset``, with the epoch cache entries starting there;
        the high watermark comes down with the log end if it was above. (Any return value is
        ignored: ``PartitionLog.truncate_to`` says whether data went.)"""
        ...

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete everything; the log restarts empty at ``offset``."""
        ...

    def increment_log_start_offset(self, offset: int) -> None: ...


class FollowerStatus(enum.Enum):
    FETCHING = "fetching"
    NEEDS_OFFSETS = "needs-offsets"  # out of range: waiting for the leader's earliest/latest
    FENCED = "fenced"  # our leader epoch is stale: waiting for metadata
    NO_LEADER = "no-leader"


class FetchPartition(NamedTuple):
    """What goes into one partition of the follower's Fetch (-1: absent)."""

    fetch_offset: int
    last_fetched_epoch: int
    current_leader_epoch: int
    log_start_offset: int
    mirror_leader_epoch: int = -1  # the latest the leader sent (KIP-1279), -1: none yet


class FetchResponsePartition(NamedTuple, Generic[R]):
    error: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    diverging: EpochEndOffset | None = None
    records: R | None = None
    mirror_leader_epoch: int = -1  # the latest epoch in a mirror partition leader's log


class FollowerStep(NamedTuple):
    """What applying an answer did. ``backoff``: retry the fetch after a delay."""

    ignored: bool = False
    appended: bool = False
    truncated_to: int = -1
    hw_changed: bool = False
    backoff: bool = False
    beyond_epoch: bool = False  # a batch of a newer epoch than the answer is valid for was refused


class ReplicationStateError(Exception):
    """The leader's answer cannot fit our log: a bug somewhere, never papered over."""


_IGNORED = FollowerStep(ignored=True)


class FollowerPartitionState(Generic[R]):
    def __init__(self, local_id: int, log: FollowerLog[R]) -> None:
        self.local_id = local_id
        self.log = log
        self.leader_id = -1
        self.leader_epoch = -1
        self.status = FollowerStatus.NO_LEADER
        self.fetch_offset = log.log_end_offset
        # A mirror partition's batches carry the source's epochs: without a MirrorLeaderEpoch
        # from the leader there is nothing to check them against.
        self.mirrored = False
        self.mirror_leader_epoch = -1

    def become_follower(self, leader_id: int, leader_epoch: int) -> bool:
        """Apply a registration naming ``leader_id`` (-1: none) leader. A new leader epoch
        restarts fetching from the log end offset; True when it did."""
        if leader_epoch < self.leader_epoch:
            return False
        new_epoch = leader_epoch > self.leader_epoch
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        if leader_id < 0:
            self.status = FollowerStatus.NO_LEADER
            return False
        if not new_epoch and self.status is not FollowerStatus.NO_LEADER:
            return False
        self.status = FollowerStatus.FETCHING
        self.fetch_offset = self.log.log_end_offset
        return True

    def fetch_request(self) -> FetchPartition | None:
        if self.status is not FollowerStatus.FETCHING:
            return None
        epoch = self.log.latest_epoch
        return FetchPartition(
            self.fetch_offset,
            -1 if epoch is None else epoch,
            self.leader_epoch,
            self.log.log_start_offset,
            self.mirror_leader_epoch,
        )

    def on_fetch_response(
        self, request: FetchPartition, response: FetchResponsePartition[R]
    ) -> FollowerStep:
        if (
            self.status is not FollowerStatus.FETCHING
            or request.fetch_offset != self.fetch_offset
            or request.current_leader_epoch != self.leader_epoch
        ):
            return _IGNORED
        error = response.error
        if error == ErrorCode.none:
            if response.diverging is not None:
                return self._truncate(response.diverging)
            return self._append(response)
        if error == ErrorCode.offset_out_of_range:
            self.status = FollowerStatus.NEEDS_OFFSETS
            return FollowerStep()
        if error == ErrorCode.fenced_leader_epoch:
            self.status = FollowerStatus.FENCED
            return FollowerStep()
        return FollowerStep(backoff=True)

    def _truncate(self, diverging: EpochEndOffset) -> FollowerStep:
        log = self.log
        cut = truncation_for_diverging_epoch(
            log, log.log_end_offset, diverging.epoch, diverging.end_offset, self.fetch_offset
        )
        log.truncate_to(cut.offset)
        self.fetch_offset = log.log_end_offset
        return FollowerStep(truncated_to=cut.offset)

    def _append(self, response: FetchResponsePartition[R]) -> FollowerStep:
        log = self.log
        if self.fetch_offset != log.log_end_offset:
            raise ReplicationStateError(
                f"fetched at {self.fetch_offset} but the log ends at {log.log_end_offset}"
            )
        complete = True
        if response.mirror_leader_epoch >= 0:
            self.mirror_leader_epoch = response.mirror_leader_epoch
        if response.records is not None:
            complete = log.append_as_follower(response.records, self._epoch_bound(response))
        end = log.log_end_offset
        appended = end != self.fetch_offset
        hw = min(max(response.high_watermark, log.log_start_offset), end)
        changed = hw != log.high_watermark
        if changed:
            log.high_watermark = hw
        if log.log_start_offset < response.log_start_offset <= hw:
            log.increment_log_start_offset(response.log_start_offset)
        self.fetch_offset = end
        return FollowerStep(
            appended=appended, hw_changed=changed, backoff=not complete, beyond_epoch=not complete
        )

    def _epoch_bound(self, response: FetchResponsePartition[R]) -> int:
        if response.mirror_leader_epoch >= 0:
            return response.mirror_leader_epoch
        return -1 if self.mirrored else self.leader_epoch

    def on_leader_offsets(self, leader_log_start: int, leader_log_end: int) -> FollowerStep:
        """The leader's earliest and latest offsets, asked for after OFFSET_OUT_OF_RANGE."""
        if self.status is not FollowerStatus.NEEDS_OFFSETS:
            return _IGNORED
        log = self.log
        reset = reset_after_out_of_range(log.log_end_offset, leader_log_start, leader_log_end)
        truncated = -1
        if reset.start_fresh:
            log.truncate_fully_and_start_at(reset.fetch_offset)
            truncated = reset.fetch_offset
        elif reset.truncate_to >= 0:
            log.truncate_to(reset.truncate_to)
            truncated = reset.truncate_to
        self.fetch_offset = log.log_end_offset
        self.status = FollowerStatus.FETCHING
        return FollowerStep(truncated_to=truncated)
