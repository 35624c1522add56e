"""Leader-side validation of a client batch against the producer state, before it is written:
duplicate detection (the last 5 batches), producer epoch fencing, sequence order, and the
coordinator epoch of COMMIT/ABORT markers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from protocol.errors import CorruptRecordError
from protocol.records import UNKNOWN_COORDINATOR_EPOCH, BatchView, read_control_batch

from .errors import LogAppendError
from .producer_entry import ProducerStateEntry
from .producer_sequence import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, in_sequence, last_sequence

# Kafka error codes a failed check carries.
OUT_OF_ORDER_SEQUENCE_NUMBER: Final = 45
INVALID_PRODUCER_EPOCH: Final = 47
INVALID_TXN_STATE: Final = 48
TRANSACTION_COORDINATOR_FENCED: Final = 52


class ProducerStateError(LogAppendError):
    """A batch fails the producer checks; ``error_code`` is 45, 47, 48 or 52."""


@dataclass(frozen=True, slots=True)
class DuplicateInfo:
    """A retried batch already in the log: answer these instead of appending."""

    first_offset: int
    last_offset: int
    timestamp: int  # Kafka reports it as the response's log_append_time

    @property
    def log_append_time_ms(self) -> int:
        return self.timestamp


class AppendCheck:
    """The leader's checks of a client batch against the producers' entries (the producer
    state's map, read only here)."""

    __slots__ = ("_producers",)

    def __init__(self, producers: Mapping[int, ProducerStateEntry]) -> None:
        self._producers = producers

    def check(self, batch: BatchView) -> DuplicateInfo | None:
        """Validate a client batch before it is appended.

        Returns the original offsets for a retried duplicate, None when the batch may be
        appended, and raises ProducerStateError otherwise. Kafka 4.1 semantics:

        - no producer id: nothing to check;
        - a COMMIT/ABORT marker (written by the transaction coordinator): an epoch older than
          the producer's is INVALID_PRODUCER_EPOCH, a coordinator epoch older than the last
          marker's is TRANSACTION_COORDINATOR_FENCED (Kafka's appendEndTxnMarker, transaction
          version < 2); other control batches are not checked;
        - a duplicate is looked up first: same epoch and the same (first, last) sequence as one
          of the producer's last 5 batches;
        - an older epoch: INVALID_PRODUCER_EPOCH;
        - a newer epoch: the sequence must be 0 (OUT_OF_ORDER_SEQUENCE_NUMBER otherwise);
        - the same epoch: the sequence must follow the last one, wrapping INT32_MAX -> 0;
        - an unknown producer (never seen, expired, or wiped by MIRROR_PID_RESET) is accepted
          with any sequence: since KIP-360 Kafka no longer answers UNKNOWN_PRODUCER_ID here
          (the entry may have been lost to retention/DeleteRecords; the client resets it);
        - a non-transactional batch while the producer has an open transaction:
          INVALID_TXN_STATE.

        Transaction verification (KIP-890) is not done here yet.
        """
        producer_id = batch.producer_id
        if producer_id == NO_PRODUCER_ID:
            return None
        if batch.is_control:
            self._check_marker(batch)
            return None
        epoch = batch.producer_epoch
        first_seq = batch.base_sequence
        entry = self._producers.get(producer_id)
        if entry is None:
            return None
        last_seq = last_sequence(batch)
        dup = entry.find_duplicate(epoch, first_seq, last_seq)
        if dup is not None:
            return DuplicateInfo(dup.first_offset, dup.last_offset, dup.timestamp)
        current_epoch = entry.producer_epoch
        if epoch < current_epoch:
            raise ProducerStateError(
                INVALID_PRODUCER_EPOCH,
                f"epoch {epoch} of producer {producer_id} is older than the last seen epoch "
                f"{current_epoch}",
            )
        if epoch != current_epoch:
            if first_seq != 0 and current_epoch != NO_PRODUCER_EPOCH:
                raise ProducerStateError(
                    OUT_OF_ORDER_SEQUENCE_NUMBER,
                    f"producer {producer_id} starts epoch {epoch} with sequence {first_seq}, "
                    f"expected 0 (current epoch {current_epoch})",
                )
        elif current_epoch != NO_PRODUCER_EPOCH and not in_sequence(entry.last_seq, first_seq):
            raise ProducerStateError(
                OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"out of order sequence for producer {producer_id}: {first_seq} (incoming), "
                f"{entry.last_seq} (last appended)",
            )
        if entry.current_txn_first_offset is not None and not batch.is_transactional:
            raise ProducerStateError(
                INVALID_TXN_STATE,
                f"non-transactional batch from producer {producer_id} while its transaction "
                f"at offset {entry.current_txn_first_offset} is open",
            )
        return None

    def _check_marker(self, batch: BatchView) -> None:
        entry = self._producers.get(batch.producer_id)
        if entry is None or not batch.is_transactional:
            return
        if batch.producer_epoch < entry.producer_epoch:
            raise ProducerStateError(
                INVALID_PRODUCER_EPOCH,
                f"transaction marker of producer {batch.producer_id} has epoch "
                f"{batch.producer_epoch}, older than the last seen epoch {entry.producer_epoch}",
            )
        try:
            control = read_control_batch(batch)
        except CorruptRecordError:
            return  # not a marker this state understands; on_append will ignore it too
        if (
            control is not None
            and control.is_end_txn
            and control.coordinator_epoch is not None
            and control.coordinator_epoch != UNKNOWN_COORDINATOR_EPOCH  # nothing to fence with
            and control.coordinator_epoch < entry.coordinator_epoch
        ):
            raise ProducerStateError(
                TRANSACTION_COORDINATOR_FENCED,
                f"transaction marker of producer {batch.producer_id} has coordinator epoch "
                f"{control.coordinator_epoch}, older than the current {entry.coordinator_epoch}",
            )
