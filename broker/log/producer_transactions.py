"""Transaction tracking in the producer state: which transactions are open (by first offset),
ending them on COMMIT/ABORT markers, and the first unstable offset / last stable offset.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.records import UNKNOWN_COORDINATOR_EPOCH

from .producer_entry import ProducerStateEntry


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


class TransactionTrackingMixin:
    """Open/ended transactions and the LSO for ProducerStateManager (which owns the maps)."""

    _producers: dict[int, ProducerStateEntry]
    # first offset -> producer id, ascending (see ProducerStateManager.__init__)
    _ongoing: dict[int, int]
    # ended, marker not below the HW yet: first offset -> (producer id, marker offset)
    _unreplicated: dict[int, tuple[int, int]]
    markers_applied: int

    def _end_txn(
        self,
        producer_id: int,
        epoch: int,
        coordinator_epoch: int,
        offset: int,
        timestamp: int,
        *,
        aborted: bool,
    ) -> CompletedTxn | None:
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = ProducerStateEntry(producer_id)
        completed: CompletedTxn | None = None
        first = entry.current_txn_first_offset
        if first is not None:
            # Markers of empty transactions leave the LSO and the index alone.
            completed = CompletedTxn(
                producer_id, first, offset, aborted, self._lso_after(producer_id, offset)
            )
            if self._ongoing.pop(first, None) is not None:
                self._unreplicated[first] = (producer_id, offset)
        entry.set_epoch(epoch)
        if coordinator_epoch != UNKNOWN_COORDINATOR_EPOCH:  # a marker without one keeps the last
            entry.coordinator_epoch = coordinator_epoch
        entry.current_txn_first_offset = None
        self.markers_applied += 1
        entry.last_timestamp = timestamp
        return completed

    def _lso_after(self, producer_id: int, marker_offset: int) -> int:
        for first, pid in self._ongoing.items():  # ascending: the first other one is the oldest
            if pid != producer_id:
                return first
        return marker_offset + 1

    def _add_ongoing(self, first_offset: int, producer_id: int) -> None:
        ongoing = self._ongoing
        in_order = not ongoing or next(reversed(ongoing)) < first_offset
        ongoing[first_offset] = producer_id
        if not in_order:
            self._ongoing = dict(sorted(ongoing.items()))

    # -- transactions / LSO -------------------------------------------------------------------
    def ongoing_transactions(self) -> list[OngoingTxn]:
        """Open transactions, oldest first."""
        return [OngoingTxn(pid, first) for first, pid in sorted(self._ongoing.items())]

    def first_undecided_offset(self) -> int | None:
        """First offset of the oldest transaction without a marker yet."""
        return next(iter(self._ongoing), None)

    def first_unstable_offset(self) -> int | None:
        """Kafka's first unstable offset: the oldest open transaction, or an ended one whose
        marker the high watermark has not passed yet (see ``on_high_watermark_updated``)."""
        first = next(iter(self._ongoing), None)
        if self._unreplicated:  # usually empty: the HW follows each append
            ended = min(self._unreplicated)
            if first is None or ended < first:
                return ended
        return first

    def on_high_watermark_updated(self, high_watermark: int) -> None:
        """Release ended transactions whose markers are now below the high watermark."""
        self._drop_unreplicated_below(high_watermark)

    def last_stable_offset(self, high_watermark: int) -> int:
        """min(HW, first unstable offset), releasing what the HW has passed first."""
        self._drop_unreplicated_below(high_watermark)
        first = self.first_unstable_offset()
        return high_watermark if first is None else min(high_watermark, first)

    def _drop_unreplicated_below(self, offset: int) -> None:
        if self._unreplicated:
            done = [f for f, (_, marker) in self._unreplicated.items() if marker < offset]
            for first in done:
                del self._unreplicated[first]
