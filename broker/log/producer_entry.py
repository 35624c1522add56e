"""What the producer state remembers per producer id: its epochs, open transaction and the
metadata of its last 5 batches (the dedupe window), convertible to and from snapshot entries.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Final

from .producer_sequence import NO_PRODUCER_EPOCH, NO_SEQUENCE, NO_TIMESTAMP, decrement_sequence
from .producer_snapshot import SnapshotEntry

NUM_BATCHES_TO_RETAIN: Final = 5


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """What is remembered of one appended batch (as Kafka stores it: first values derived)."""

    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class ProducerStateEntry:
    """Mutable state of one producer id."""

    __slots__ = (
        "batches",
        "coordinator_epoch",
        "current_txn_first_offset",
        "last_timestamp",
        "producer_epoch",
        "producer_id",
    )

    def __init__(
        self,
        producer_id: int,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        coordinator_epoch: int = -1,
        last_timestamp: int = NO_TIMESTAMP,
        current_txn_first_offset: int | None = None,
    ) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset
        self.batches: deque[BatchMetadata] = deque(maxlen=NUM_BATCHES_TO_RETAIN)

    def __repr__(self) -> str:
        return (
            f"ProducerStateEntry(producer_id={self.producer_id}, epoch={self.producer_epoch}, "
            f"coordinator_epoch={self.coordinator_epoch}, last_timestamp={self.last_timestamp}, "
            f"txn_first_offset={self.current_txn_first_offset}, batches={list(self.batches)})"
        )

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.producer_epoch:
            return None
        for meta in self.batches:
            if meta.first_seq == first_seq and meta.last_seq == last_seq:
                return meta
        return None

    def set_epoch(self, epoch: int) -> None:
        # Sequences restart with every epoch, so the dedupe window does too.
        if epoch != self.producer_epoch:
            self.batches.clear()
            self.producer_epoch = epoch

    def add_batch(self, epoch: int, meta: BatchMetadata) -> None:
        self.set_epoch(epoch)
        self.batches.append(meta)  # the deque drops the oldest beyond 5
        self.last_timestamp = meta.timestamp

    def to_snapshot(self) -> SnapshotEntry:
        txn = self.current_txn_first_offset
        return SnapshotEntry(
            producer_id=self.producer_id,
            epoch=self.producer_epoch,
            last_sequence=self.last_seq,
            last_offset=self.last_data_offset,
            offset_delta=self.last_offset_delta,
            timestamp=self.last_timestamp,
            coordinator_epoch=self.coordinator_epoch,
            current_txn_first_offset=-1 if txn is None else txn,
        )

    @classmethod
    def from_snapshot(cls, e: SnapshotEntry) -> ProducerStateEntry:
        entry = cls(
            e.producer_id,
            e.epoch,
            e.coordinator_epoch,
            e.timestamp,
            e.current_txn_first_offset if e.current_txn_first_offset >= 0 else None,
        )
        if e.last_offset >= 0:
            entry.batches.append(
                BatchMetadata(e.last_sequence, e.last_offset, e.offset_delta, e.timestamp)
            )
        return entry
