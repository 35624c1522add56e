"""Transaction tracking in the producer state: which transactions are open (by first offset),
which ended ones still hold the LSO back, and the first unstable offset / last stable offset.
The producer entries themselves (what a marker changes in them) are `ProducerStateManager`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a COMMIT/ABORT marker ended (only those that wrote data emit one).

    ``last_stable_offset`` is what Kafka stores in the aborted-transaction index entry: the
    first offset of the earliest transaction still open by another producer, else
    ``last_offset + 1``.
    """

    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    is_aborted: bool
    last_stable_offset: int


@dataclass(frozen=True, slots=True)
class OngoingTxn:
    producer_id: int
    first_offset: int


class OpenTransactions:
    """The transactions of one partition that hold its LSO back, by first offset."""

    __slots__ = ("_ongoing", "_unreplicated")

    def __init__(self) -> None:
        # first offset -> producer id, kept in ascending key order (appends only add higher
        # offsets; a snapshot load sorts), so the first key is the oldest: O(1) LSO.
        self._ongoing: dict[int, int] = {}
        # Ended transactions whose marker is not below the high watermark yet:
        # first offset -> (producer id, marker offset).
        self._unreplicated: dict[int, tuple[int, int]] = {}

    @property
    def open_count(self) -> int:
        return len(self._ongoing)

    @property
    def ended_count(self) -> int:
        return len(self._unreplicated)

    def ended(self) -> Mapping[int, tuple[int, int]]:
        """Ended transactions still holding the LSO: first offset -> (producer id, marker
        offset). A read-only view."""
        return MappingProxyType(self._unreplicated)

    def add(self, first_offset: int, producer_id: int) -> None:
        """A transaction starts at ``first_offset``."""
        ongoing = self._ongoing
        in_order = not ongoing or next(reversed(ongoing)) < first_offset
        ongoing[first_offset] = producer_id
        if not in_order:
            self._ongoing = dict(sorted(ongoing.items()))

    def end(self, first_offset: int, producer_id: int, marker_offset: int) -> None:
        """Its marker is at ``marker_offset``: it holds the LSO until the HW passes that."""
        if self._ongoing.pop(first_offset, None) is not None:
            self._unreplicated[first_offset] = (producer_id, marker_offset)

    def lso_after(self, producer_id: int, marker_offset: int) -> int:
        """The LSO once ``producer_id``'s transaction ends at ``marker_offset``."""
        for first, pid in self._ongoing.items():  # ascending: the first other one is the oldest
            if pid != producer_id:
                return first
        return marker_offset + 1

    def ongoing(self) -> list[OngoingTxn]:
        """Open transactions, oldest first."""
        return [OngoingTxn(pid, first) for first, pid in sorted(self._ongoing.items())]

    def first_undecided_offset(self) -> int | None:
        """First offset of the oldest transaction without a marker yet."""
        return next(iter(self._ongoing), None)

    def first_unstable_offset(self) -> int | None:
        """Kafka's first unstable offset: the oldest open transaction, or an ended one whose
        marker the high watermark has not passed yet (see `drop_ended_below`)."""
        first = next(iter(self._ongoing), None)
        if self._unreplicated:  # usually empty: the HW follows each append
            ended = min(self._unreplicated)
            if first is None or ended < first:
                return ended
        return first

    def drop_ended_below(self, offset: int) -> None:
        """Release ended transactions whose markers are below ``offset`` (the high watermark,
        or a new log start)."""
        if self._unreplicated:
            done = [f for f, (_, marker) in self._unreplicated.items() if marker < offset]
            for first in done:
                del self._unreplicated[first]

    def last_stable_offset(self, high_watermark: int) -> int:
        """min(HW, first unstable offset), releasing what the HW has passed first."""
        self.drop_ended_below(high_watermark)
        first = self.first_unstable_offset()
        return high_watermark if first is None else min(high_watermark, first)

    def clear_open(self) -> None:
        self._ongoing.clear()

    def clear(self) -> None:
        self._ongoing.clear()
        self._unreplicated.clear()
