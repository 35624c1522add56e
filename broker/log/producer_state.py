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
(one producer's entry and batch metadata), ``producer_append_check`` (`AppendCheck`: ``check``),
``producer_transactions`` (`OpenTransactions`: open/ended transactions, LSO),
``producer_state_snapshots`` (`SnapshotFiles`: the snapshot files); this one owns the producer
map, applies appends and markers and reloads from snapshots. Its parts get what they need (the
map, read only, for the check) and never call back into it; the queries read on every append
or high-watermark move (``check``, the LSO) are the parts' own methods, bound at construction,
so they cost no extra call.

Usage by the log: ``check`` then append then ``on_append`` per batch. Produce v3+ carries one
batch per partition, so checking a batch against state that already includes its predecessors
is all Kafka needs too.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
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
    AppendCheck,
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
from .producer_state_snapshots import SnapshotFiles
from .producer_transactions import CompletedTxn, OngoingTxn, OpenTransactions

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


class ProducerStateManager:
    """Producer state of one partition, plus its snapshot files in ``partition_dir``."""

    def __init__(
        self,
        partition_dir: Path,
        clock: Clock,
        *,
        max_producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
        retained_snapshots: int = DEFAULT_RETAINED_SNAPSHOTS,
    ) -> None:
        self.snapshots = SnapshotFiles(partition_dir, retained_snapshots)
        self._clock = clock
        self.max_producer_id_expiration_ms = max_producer_id_expiration_ms
        # The same dict object for life (cleared, never replaced): AppendCheck reads it.
        self._producers: dict[int, ProducerStateEntry] = {}
        self.transactions = OpenTransactions()
        # COMMIT/ABORT markers applied so far: a transaction verified with the coordinator
        # before a marker may have ended since (KIP-890's verification guard, in one counter)
        self.markers_applied = 0
        self._map_end_offset = 0
        txns = self.transactions
        # The parts' own methods, bound here: no delegating call on the append/HW path.
        self.check: Callable[[BatchView], DuplicateInfo | None] = AppendCheck(self._producers).check
        self.first_unstable_offset: Callable[[], int | None] = txns.first_unstable_offset
        self.first_undecided_offset: Callable[[], int | None] = txns.first_undecided_offset
        self.last_stable_offset: Callable[[int], int] = txns.last_stable_offset
        # Releases ended transactions whose markers are now below the high watermark.
        self.on_high_watermark_updated: Callable[[int], None] = txns.drop_ended_below
        self.ongoing_transactions: Callable[[], list[OngoingTxn]] = txns.ongoing

    # -- inspection ---------------------------------------------------------------------------
    @property
    def partition_dir(self) -> Path:
        return self.snapshots.dir

    @partition_dir.setter
    def partition_dir(self, path: Path) -> None:
        """Follow a partition directory rename (deletion, future-dir promotion)."""
        self.snapshots.dir = path

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
        return not self._producers and not self.transactions.ended_count

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
                self.transactions.add(first_offset, producer_id)
        elif entry.current_txn_first_offset is not None:
            # Kafka raises INVALID_TXN_STATE here; check() already refused it on the leader,
            # and a replica or recovery cannot refuse what is in the log.
            log.warning(
                "%s: non-transactional batch at offset %d from producer %d inside its "
                "transaction starting at %d",
                self.snapshots.dir.name,
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
                "%s: unreadable control batch at offset %d: %s",
                self.snapshots.dir.name,
                offset,
                exc,
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
        txns = self.transactions
        if txns.open_count:
            log.warning(
                "%s: %s drops %d open transaction(s)",
                self.snapshots.dir.name,
                reason,
                txns.open_count,
            )
        if self._producers:
            log.info(
                "%s: %s expired %d producer(s)",
                self.snapshots.dir.name,
                reason,
                len(self._producers),
            )
        self._producers.clear()
        txns.clear_open()

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
            txns = self.transactions
            completed = CompletedTxn(
                producer_id, first, offset, aborted, txns.lso_after(producer_id, offset)
            )
            txns.end(first, producer_id, offset)
        entry.set_epoch(epoch)
        if coordinator_epoch != UNKNOWN_COORDINATOR_EPOCH:  # a marker without one keeps the last
            entry.coordinator_epoch = coordinator_epoch
        entry.current_txn_first_offset = None
        self.markers_applied += 1
        entry.last_timestamp = timestamp
        return completed

    def _reset(self) -> None:
        self._producers.clear()
        self.transactions.clear()

    # -- snapshots (the files are `SnapshotFiles`'; the state in them is this one's) -----------
    def snapshot_offsets(self) -> list[int]:
        return self.snapshots.offsets()

    def latest_snapshot_offset(self) -> int | None:
        offsets = self.snapshots.offsets()
        return offsets[-1] if offsets else None

    def oldest_snapshot_offset(self) -> int | None:
        offsets = self.snapshots.offsets()
        return offsets[0] if offsets else None

    def take_snapshot(self, offset: int | None = None, *, sync: bool = True) -> Path:
        """Write the state as of ``offset`` (default: the map end offset), then keep only the
        newest ``retained_snapshots`` files."""
        at = self._map_end_offset if offset is None else offset
        entries = [self._producers[pid].to_snapshot() for pid in sorted(self._producers)]
        return self.snapshots.write(at, entries, sync=sync)

    def encode_state(self) -> bytes:
        """The snapshot file's bytes for the state as it is now (written by a worker thread)."""
        return SnapshotFiles.encode(
            self._producers[pid].to_snapshot() for pid in sorted(self._producers)
        )

    def snapshot_tmp_path(self, offset: int) -> Path:
        return self.snapshots.tmp_path(offset)

    def install_snapshot(self, tmp: Path, offset: int) -> None:
        """Rename a snapshot written off the loop into place (its data was fsynced first),
        then keep only the newest ``retained_snapshots``."""
        self.snapshots.install(tmp, offset)

    def delete_snapshots_before(self, offset: int) -> None:
        self.snapshots.delete_before(offset)

    def load_latest_snapshot(self, up_to_offset: int) -> int | None:
        """Replace the state with the newest readable snapshot at or below ``up_to_offset``.

        Snapshots above ``up_to_offset`` are deleted, and so is any corrupt one met on the way
        (logged; the next older is tried). Expired producers are not loaded. Returns the
        snapshot's offset (also the new map end offset: replay the log from there), or None
        when none is usable (replay from the log start).
        """
        self._reset()
        found = self.snapshots.read_newest(up_to_offset)
        if found is None:
            return None
        at, entries = found
        now = self._clock.now_ms()
        txns = self.transactions
        for e in entries:
            entry = ProducerStateEntry.from_snapshot(e)
            if self._is_expired(entry, now):
                continue
            self._producers[entry.producer_id] = entry
            if entry.current_txn_first_offset is not None:
                txns.add(entry.current_txn_first_offset, entry.producer_id)
        self._map_end_offset = at
        log.info(
            "%s: loaded producer snapshot at %d (%d producers)",
            self.snapshots.dir.name,
            at,
            len(self._producers),
        )
        return at

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int) -> int:
        """Bring the state in line with a log now spanning ``[log_start, log_end)``.

        Used at recovery and after truncation. Deletes snapshots outside
        ``(log_start, log_end]`` (as Kafka does) and, unless the state already ends at
        ``log_end_offset``, reloads from the newest remaining snapshot. Returns the offset to
        replay batches from with ``replay_batch`` (== ``log_end_offset``: nothing to replay).
        """
        self.snapshots.delete_outside(log_start_offset, log_end_offset)
        if log_end_offset != self._map_end_offset:
            if self.load_latest_snapshot(log_end_offset) is None:
                self._map_end_offset = log_start_offset
        else:
            self.on_log_start_offset_incremented(log_start_offset)
        return self._map_end_offset

    def reload_at_or_below(self, offset: int, log_start_offset: int) -> int:
        """Start over from the newest snapshot at or below ``offset`` (or empty at the log
        start): recovery replays from there to rebuild what may be stale after it. Returns
        the offset to replay from."""
        if self.load_latest_snapshot(offset) is None:
            self._map_end_offset = log_start_offset
        return self._map_end_offset

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Forget everything, snapshots included (the log was emptied and restarts at offset)."""
        self._reset()
        self.snapshots.delete_all()
        self._map_end_offset = offset

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Retention or DeleteRecords moved the log start: ended transactions below it no
        longer hold the LSO back, and the map cannot end before the log starts."""
        self.transactions.drop_ended_below(log_start_offset)
        self._map_end_offset = max(self._map_end_offset, log_start_offset)
