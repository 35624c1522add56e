"""Per-partition producer state: idempotent dedupe, epoch fencing, ongoing transactions.

Follows Kafka 4.1's ProducerStateManager / ProducerAppendInfo / ProducerStateEntry:

- per producer id: epoch, coordinator epoch, the last timestamp, the first offset of its
  ongoing transaction, and the metadata of its last 5 batches (the dedupe window);
- ``check`` runs on the leader before a batch is written: a retried batch matching one of
  the cached 5 is a duplicate (the broker answers the original offsets and writes nothing);
  otherwise epoch and sequence must line up; a COMMIT/ABORT marker (the coordinator's) must
  not come from an older producer epoch or an older coordinator epoch;
- ``on_append`` / ``replay_batch`` update the state once a batch is in the log (leader,
  follower, mirror, recovery), ending transactions on COMMIT/ABORT markers and dropping every
  producer on KIP-1279's MIRROR_PID_RESET;
- snapshots (``producer_snapshot``) let recovery replay only the tail of the log.

Modules: ``producer_sequence`` (sentinels, wrapping sequence arithmetic), ``producer_entry``
(one producer's entry and batch metadata), ``producer_append_check`` (``check``),
``producer_transactions`` (open/ended transactions, LSO), ``producer_state_snapshots``
(snapshot files, reload); this one composes ``ProducerStateManager`` and applies appends.

Usage by the log: ``check`` then append then ``on_append`` per batch. Produce v3+ carries one
batch per partition, so checking a batch against state that already includes its predecessors
is all Kafka needs too.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Final

from protocol.errors import CorruptRecordError
from protocol.records import (
    UNKNOWN_COORDINATOR_EPOCH,
    BatchView,
    ControlType,
    read_control_batch,
)

from .clock import Clock
from .producer_append_check import (
    INVALID_PRODUCER_EPOCH,
    INVALID_TXN_STATE,
    OUT_OF_ORDER_SEQUENCE_NUMBER,
    TRANSACTION_COORDINATOR_FENCED,
    AppendCheckMixin,
    DuplicateInfo,
    ProducerStateError,
)
from .producer_entry import NUM_BATCHES_TO_RETAIN, BatchMetadata, ProducerStateEntry
from .producer_sequence import (
    INT32_MAX,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    NO_TIMESTAMP,
    decrement_sequence,
    in_sequence,
    increment_sequence,
    last_sequence,
)
from .producer_state_snapshots import ProducerSnapshotsMixin
from .producer_transactions import CompletedTxn, OngoingTxn, TransactionTrackingMixin

__all__ = [
    "DEFAULT_PRODUCER_ID_EXPIRATION_MS",
    "DEFAULT_RETAINED_SNAPSHOTS",
    "INT32_MAX",
    "INVALID_PRODUCER_EPOCH",
    "INVALID_TXN_STATE",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "NUM_BATCHES_TO_RETAIN",
    "OUT_OF_ORDER_SEQUENCE_NUMBER",
    "TRANSACTION_COORDINATOR_FENCED",
    "BatchMetadata",
    "CompletedTxn",
    "DuplicateInfo",
    "OngoingTxn",
    "ProducerStateEntry",
    "ProducerStateError",
    "ProducerStateManager",
    "decrement_sequence",
    "in_sequence",
    "increment_sequence",
    "last_sequence",
]

log = logging.getLogger(__name__)

DEFAULT_PRODUCER_ID_EXPIRATION_MS: Final = 86_400_000
DEFAULT_RETAINED_SNAPSHOTS: Final = 2


class ProducerStateManager(AppendCheckMixin, TransactionTrackingMixin, ProducerSnapshotsMixin):
    """Producer state of one partition, plus its snapshot files in ``partition_dir``."""

    def __init__(
        self,
        partition_dir: Path,
        clock: Clock,
        *,
        max_producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        retained_snapshots: int = DEFAULT_RETAINED_SNAPSHOTS,
    ) -> None:
        if retained_snapshots < 1:
            raise ValueError("retained_snapshots must be at least 1")
        self._dir = partition_dir
        self._clock = clock
        self.max_producer_id_expiration_ms = max_producer_id_expiration_ms
        self._retained_snapshots = retained_snapshots
        self._producers: dict[int, ProducerStateEntry] = {}
        # first offset -> producer id, kept in ascending key order (appends only add higher
        # offsets; a snapshot load sorts), so the first key is the oldest: O(1) LSO.
        self._ongoing: dict[int, int] = {}
        # COMMIT/ABORT markers applied so far: a transaction verified with the coordinator
        # before a marker may have ended since (KIP-890's verification guard, in one counter)
        self.markers_applied = 0
        # Ended transactions whose marker is not below the high watermark yet:
        # first offset -> (producer id, marker offset). They still hold the LSO back.
        self._unreplicated: dict[int, tuple[int, int]] = {}
        self._map_end_offset = 0

    # -- inspection ---------------------------------------------------------------------------
    @property
    def partition_dir(self) -> Path:
        return self._dir

    @partition_dir.setter
    def partition_dir(self, path: Path) -> None:
        """Follow a partition directory rename (deletion, future-dir promotion)."""
        self._dir = path

    @property
    def map_end_offset(self) -> int:
        """The offset after the last batch this state has seen."""
        return self._map_end_offset

    def update_map_end_offset(self, offset: int) -> None:
        self._map_end_offset = offset

    @property
    def producer_count(self) -> int:
        return len(self._producers)

    @property
    def active_producers(self) -> Mapping[int, ProducerStateEntry]:
        return MappingProxyType(self._producers)

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.get(producer_id)

    def in_transaction(self, producer_id: int, epoch: int) -> bool:
        """Has this producer (at this epoch) an open transaction on the partition already?"""
        entry = self._producers.get(producer_id)
        return (
            entry is not None
            and entry.producer_epoch == epoch
            and entry.current_txn_first_offset is not None
        )

    def is_empty(self) -> bool:
        return not self._producers and not self._unreplicated

    # -- state updates ------------------------------------------------------------------------
    def on_append(
        self,
        batch: BatchView,
        first_offset: int,
        last_offset: int | None = None,
        append_time_ms: int | None = None,
    ) -> CompletedTxn | None:
        """Record a batch now in the log at ``[first_offset, last_offset]``.

        ``last_offset`` defaults to ``first_offset`` plus the batch's last offset delta.

        ``append_time_ms``: pass the broker's append time for LogAppendTime topics (it is what
        Kafka writes into the batch's max timestamp); otherwise the batch's max timestamp is
        used, as Kafka does. Returns the transaction a COMMIT/ABORT marker ended, if any.
        No validation: followers, mirrors and recovery take the leader's word.
        """
        if last_offset is None:
            last_offset = first_offset + batch.last_offset_delta
        self._map_end_offset = max(self._map_end_offset, last_offset + 1)
        if batch.is_control:
            return self._apply_control(batch, first_offset)
        producer_id = batch.producer_id
        if producer_id == NO_PRODUCER_ID:
            return None
        timestamp = batch.max_timestamp if append_time_ms is None else append_time_ms
        entry = self._producers.get(producer_id)
        if entry is None:
            entry = self._producers[producer_id] = ProducerStateEntry(producer_id)
        entry.add_batch(
            batch.producer_epoch,
            BatchMetadata(last_sequence(batch), last_offset, last_offset - first_offset, timestamp),
        )
        if batch.is_transactional:
            if entry.current_txn_first_offset is None:
                entry.current_txn_first_offset = first_offset
                self._add_ongoing(first_offset, producer_id)
        elif entry.current_txn_first_offset is not None:
            # Kafka raises INVALID_TXN_STATE here; check() already refused it on the leader,
            # and a replica or recovery cannot refuse what is in the log.
            log.warning(
                "%s: non-transactional batch at offset %d from producer %d inside its "
                "transaction starting at %d",
                self._dir.name,
                first_offset,
                producer_id,
                entry.current_txn_first_offset,
            )
        return None

    def replay_batch(self, batch: BatchView) -> CompletedTxn | None:
        """Rebuild state from a batch already in the log (recovery, segment reload)."""
        return self.on_append(batch, batch.base_offset, batch.last_offset)

    def _apply_control(self, batch: BatchView, offset: int) -> CompletedTxn | None:
        # The mirror refuses an unreadable control batch before it gets here (the partition
        # FAILS); recovery and replicas cannot refuse what is in the log, so they only warn.
        try:
            control = read_control_batch(batch)
        except CorruptRecordError as exc:
            log.warning(
                "%s: unreadable control batch at offset %d: %s", self._dir.name, offset, exc
            )
            return None
        if control is None:
            return None  # compaction emptied it: its transaction is gone from the log
        if control.type == ControlType.MIRROR_PID_RESET:
            self.clear_producers(reason=f"MIRROR_PID_RESET at offset {offset}")
            return None
        producer_id = batch.producer_id
        if producer_id == NO_PRODUCER_ID or not control.is_end_txn:
            return None
        return self._end_txn(
            producer_id,
            batch.producer_epoch,
            UNKNOWN_COORDINATOR_EPOCH
            if control.coordinator_epoch is None
            else control.coordinator_epoch,
            offset,
            batch.max_timestamp,  # what Kafka records as the producer's last timestamp
            aborted=control.type == ControlType.ABORT,
        )

    def clear_producers(self, *, reason: str = "cleared") -> None:
        """Forget every producer (KIP-1279 MIRROR_PID_RESET).

        The prototype clears only the producer map. Open transactions go too here: their
        markers could no longer end them (the entry that knew their first offset is gone), and
        a reload from a snapshot would drop them anyway, so live state and recovery agree.
        A mirror truncates to its LSO before writing the reset, so normally there are none.
        """
        if self._ongoing:
            log.warning(
                "%s: %s drops %d open transaction(s)", self._dir.name, reason, len(self._ongoing)
            )
        if self._producers:
            log.info("%s: %s expired %d producer(s)", self._dir.name, reason, len(self._producers))
        self._producers.clear()
        self._ongoing.clear()

    def remove_expired(self, now_ms: int | None = None) -> int:
        """Drop producers idle for producer.id.expiration.ms without an open transaction.

        Idle time is measured from the producer's last batch timestamp, as in Kafka.
        Returns how many were removed.
        """
        now = self._clock.now_ms() if now_ms is None else now_ms
        expired = [pid for pid, e in self._producers.items() if self._is_expired(e, now)]
        for pid in expired:
            del self._producers[pid]
        return len(expired)

    def _is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return (
            entry.current_txn_first_offset is None
            and now_ms - entry.last_timestamp >= self.max_producer_id_expiration_ms
        )

    def _reset(self) -> None:
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()
