"""One share-partition (KIP-932): the delivery state of a (share group, topic-partition) on the
partition leader. Sans-IO: every input carries the time, nothing here reads the log.

The state is a start offset (SPSO: everything below is done), the next offset never acquired
(`next_offset`, one past Kafka's SPEO) and the in-flight ranges between them, each a run of
offsets in one state: AVAILABLE (to be redelivered), ACQUIRED (by a member, under a lock until
a deadline), ACKNOWLEDGED or ARCHIVED (done). Offsets are acquired by whole record batches
(`acquire(lo, hi)` with a batch's base and last offsets), so records are never looked at; an
acknowledgement of part of a range splits it. A range whose lock expires, or that is released,
becomes AVAILABLE again unless its delivery count reached the limit, then ARCHIVED. The SPSO
moves up past done ranges.
"""

import bisect
import enum
from collections.abc import Iterable
from dataclasses import dataclass, replace

from kio.schema.errors import ErrorCode


class RecordState(enum.IntEnum):
    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AckType(enum.IntEnum):
    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


_ACK_TYPES = frozenset(int(t) for t in AckType)
_DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
_ACK_STATES = {
    AckType.GAP: RecordState.ARCHIVED,
    AckType.ACCEPT: RecordState.ACKNOWLEDGED,
    AckType.REJECT: RecordState.ARCHIVED,
}


@dataclass(slots=True)
class InFlight:
    first: int
    last: int
    state: RecordState
    delivery_count: int
    member: str | None = None
    deadline_ms: int = 0


@dataclass(frozen=True, slots=True)
class Acquired:
    first: int
    last: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class ShareConfig:
    lock_duration_ms: int = 30_000  # group.share.record.lock.duration.ms
    delivery_count_limit: int = 5  # group.share.delivery.count.limit
    max_record_locks: int = 2_000  # group.share.partition.max.record.locks


class SharePartition:
    def __init__(self, start_offset: int, config: ShareConfig | None = None) -> None:
        self.config = config or ShareConfig()
        self.start_offset = start_offset
        self.next_offset = start_offset
        self.ranges: list[InFlight] = []  # sorted, disjoint, all within [start, next)

    @classmethod
    def restore(
        cls,
        start_offset: int,
        batches: Iterable[tuple[int, int, int, int]],
        config: ShareConfig | None = None,
    ) -> "SharePartition":
        """The state persisted by `persisted()`: (first, last, state, delivery count) runs."""
        sp = cls(start_offset, config)
        for first, last, state, count in sorted(batches):
            first = max(first, sp.next_offset)
            if first > last:
                continue  # below the start, or overlapping a run already taken
            known = state in (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)
            sp.ranges.append(
                InFlight(first, last, RecordState(state) if known else RecordState.AVAILABLE, count)
            )
            sp.next_offset = last + 1
        sp._advance()
        return sp

    def persisted(self) -> list[tuple[int, int, int, int]]:
        """What survives a leader change: (first, last, state, delivery count) of each range,
        acquired ones as AVAILABLE (their locks end with the leader)."""
        out: list[tuple[int, int, int, int]] = []
        for r in self.ranges:
            state = RecordState.AVAILABLE if r.state is RecordState.ACQUIRED else r.state
            if out and out[-1][1] + 1 == r.first and out[-1][2:] == (int(state), r.delivery_count):
                out[-1] = (out[-1][0], r.last, int(state), r.delivery_count)
            else:
                out.append((r.first, r.last, int(state), r.delivery_count))
        return out

    # -- queries -----------------------------------------------------------------------------

    def available(self) -> list[tuple[int, int]]:
        """The (first, last) runs waiting for redelivery, in offset order."""
        return [(r.first, r.last) for r in self.ranges if r.state is RecordState.AVAILABLE]

    def can_acquire_new(self) -> bool:
        """Fewer offsets in flight than the lock limit (Kafka's max.record.locks)."""
        return self.next_offset - self.start_offset < self.config.max_record_locks

    def next_deadline(self) -> int | None:
        deadlines = [r.deadline_ms for r in self.ranges if r.state is RecordState.ACQUIRED]
        return min(deadlines) if deadlines else None

    def state_of(self, offset: int) -> tuple[RecordState, int, str | None] | None:
        """(state, delivery count, member) of an in-flight offset; None outside the ranges."""
        i = self._index(offset)
        if i is None:
            return None
        r = self.ranges[i]
        return r.state, r.delivery_count, r.member

    # -- inputs ------------------------------------------------------------------------------

    def acquire(self, member: str, lo: int, hi: int, now_ms: int) -> list[Acquired]:
        """Acquire for `member` what is acquirable in [lo, hi] (a run of whole batches read
        from the log): AVAILABLE in-flight offsets, and offsets from `next_offset` on."""
        out: list[Acquired] = []
        deadline = now_ms + self.config.lock_duration_ms
        if lo <= min(hi, self.next_offset - 1):
            self._split(lo)
            self._split(min(hi, self.next_offset - 1) + 1)
            for r in self.ranges:
                if r.last < lo or r.first > hi:
                    continue
                if r.state is RecordState.AVAILABLE:
                    r.state, r.member, r.deadline_ms = RecordState.ACQUIRED, member, deadline
                    r.delivery_count += 1
                    out.append(Acquired(r.first, r.last, r.delivery_count))
        if hi >= self.next_offset:
            first = max(lo, self.next_offset)
            self.ranges.append(InFlight(first, hi, RecordState.ACQUIRED, 1, member, deadline))
            self.next_offset = hi + 1
            out.append(Acquired(first, hi, 1))
        self._merge()
        return out

    def acknowledge(self, member: str, first: int, last: int, types: list[int]) -> ErrorCode:
        """One AcknowledgementBatch of `member`: one type for the whole run, or one per offset.
        Every offset must be ACQUIRED by `member` (INVALID_RECORD_STATE otherwise, nothing
        changes)."""
        if first > last or first < 0:
            return ErrorCode.invalid_request
        if len(types) not in (1, last - first + 1) or any(t not in _ACK_TYPES for t in types):
            return ErrorCode.invalid_request
        if not self._held_by(member, first, last):
            return ErrorCode.invalid_record_state
        runs: list[tuple[int, int, int]] = []  # (first, last, type), consecutive equal types
        if len(types) == 1:
            runs.append((first, last, types[0]))
        else:
            start = first
            for i in range(1, len(types) + 1):
                if i == len(types) or types[i] != types[i - 1]:
                    runs.append((start, first + i - 1, types[i - 1]))
                    start = first + i
        for lo, hi, t in runs:
            self._split(lo)
            self._split(hi + 1)
            for r in self.ranges:
                if lo <= r.first and r.last <= hi:
                    self._settle(r, AckType(t))
        self._advance()
        return ErrorCode.none

    def release_member(self, member: str) -> int:
        """A member's share session ended: what it holds goes back (Kafka releases it at
        once rather than waiting for the locks). Returns how many ranges were released."""
        released = 0
        for r in self.ranges:
            if r.state is RecordState.ACQUIRED and r.member == member:
                self._settle(r, AckType.RELEASE)
                released += 1
        self._advance()
        return released

    def expire_locks(self, now_ms: int) -> bool:
        """Locks past their deadline: the records go back (or are archived at the delivery
        limit). True if some became AVAILABLE."""
        freed = False
        for r in self.ranges:
            if r.state is RecordState.ACQUIRED and r.deadline_ms <= now_ms:
                freed |= self._settle(r, AckType.RELEASE)
        self._advance()
        return freed

    def move_start(self, log_start_offset: int) -> None:
        """The log's start moved past the SPSO (retention, DeleteRecords): those are gone."""
        if log_start_offset <= self.start_offset:
            return
        self._split(log_start_offset)
        self.ranges = [r for r in self.ranges if r.first >= log_start_offset]
        self.start_offset = log_start_offset
        self.next_offset = max(self.next_offset, log_start_offset)
        self._advance()

    # -- internals ---------------------------------------------------------------------------

    def _settle(self, r: InFlight, ack: AckType) -> bool:
        """Apply an acknowledgement (or a release) to a range; True if it became AVAILABLE."""
        r.member, r.deadline_ms = None, 0
        if ack is not AckType.RELEASE:
            r.state = _ACK_STATES[ack]
            return False
        if r.delivery_count >= self.config.delivery_count_limit:
            r.state = RecordState.ARCHIVED
            return False
        r.state = RecordState.AVAILABLE
        return True

    def _held_by(self, member: str, first: int, last: int) -> bool:
        """Whether every offset of [first, last] is in a range ACQUIRED by `member`."""
        i = self._index(first)
        if i is None:
            return False
        expected = first
        for r in self.ranges[i:]:
            if r.first > expected or r.state is not RecordState.ACQUIRED or r.member != member:
                return False
            if r.last >= last:
                return True
            expected = r.last + 1
        return False

    def _index(self, offset: int) -> int | None:
        i = bisect.bisect_right(self.ranges, offset, key=lambda r: r.first) - 1
        if i < 0 or self.ranges[i].last < offset:
            return None
        return i

    def _split(self, offset: int) -> None:
        """Make `offset` the first offset of a range, if it falls inside one."""
        i = self._index(offset)
        if i is None or self.ranges[i].first == offset:
            return
        r = self.ranges[i]
        tail = replace(r, first=offset)
        r.last = offset - 1
        self.ranges.insert(i + 1, tail)

    def _merge(self) -> None:
        """Join adjacent ranges in the same state (keeps the list short)."""
        merged: list[InFlight] = []
        for r in self.ranges:
            p = merged[-1] if merged else None
            if (
                p is not None
                and p.last + 1 == r.first
                and (p.state, p.delivery_count, p.member, p.deadline_ms)
                == (r.state, r.delivery_count, r.member, r.deadline_ms)
            ):
                p.last = r.last
            else:
                merged.append(r)
        self.ranges = merged

    def _advance(self) -> None:
        """Move the SPSO past done ranges (and past offsets no range holds, e.g. compacted)."""
        i = 0
        while i < len(self.ranges) and self.ranges[i].state in _DONE:
            i += 1
        del self.ranges[:i]
        self.start_offset = self.ranges[0].first if self.ranges else self.next_offset
        self._merge()
