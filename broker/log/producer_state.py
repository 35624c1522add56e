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

Usage by the log: ``check`` then append then ``on_append`` per batch. Produce v3+ carries one
batch per partition, so checking a batch against state that already includes its predecessors
is all Kafka needs too.
"""

from __future__ import annotations

import logging
import os
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
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
from .errors import LogAppendError
from .producer_snapshot import (
    CorruptSnapshotError,
    SnapshotEntry,
    encode_snapshot,
    list_snapshots,
    read_snapshot,
    snapshot_file_name,
    snapshot_path,
    write_snapshot,
)

log = logging.getLogger(__name__)

# Kafka error codes a failed check carries.
OUT_OF_ORDER_SEQUENCE_NUMBER: Final = 45
INVALID_PRODUCER_EPOCH: Final = 47
INVALID_TXN_STATE: Final = 48
TRANSACTION_COORDINATOR_FENCED: Final = 52

NUM_BATCHES_TO_RETAIN: Final = 5
DEFAULT_PRODUCER_ID_EXPIRATION_MS: Final = 86_400_000
DEFAULT_RETAINED_SNAPSHOTS: Final = 2

NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_TIMESTAMP: Final = -1
INT32_MAX: Final = 0x7FFFFFFF


# -- sequence arithmetic (sequences wrap from INT32_MAX to 0) ---------------------------------
def increment_sequence(sequence: int, increment: int) -> int:
    if sequence > INT32_MAX - increment:
        return increment - (INT32_MAX - sequence) - 1
    return sequence + increment


def decrement_sequence(sequence: int, decrement: int) -> int:
    if sequence < decrement:
        return INT32_MAX - (decrement - sequence) + 1
    return sequence - decrement


def last_sequence(batch: BatchView) -> int:
    base = batch.base_sequence
    if base == NO_SEQUENCE:
        return NO_SEQUENCE
    return increment_sequence(base, batch.last_offset_delta)


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


# -- value types ------------------------------------------------------------------------------
class ProducerStateError(LogAppendError):
    """A batch fails the producer checks; ``error_code`` is 45, 47, 48 or 52."""


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


@dataclass(frozen=True, slots=True)
class DuplicateInfo:
    """A retried batch already in the log: answer these instead of appending."""

    first_offset: int
    last_offset: int
    timestamp: int  # Kafka reports it as the response's log_append_time

    @property
    def log_append_time_ms(self) -> int:
        return self.timestamp


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


# -- the manager ------------------------------------------------------------------------------
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

    # -- leader-side validation ---------------------------------------------------------------
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

    # -- snapshots ----------------------------------------------------------------------------
    def snapshot_offsets(self) -> list[int]:
        return list(list_snapshots(self._dir))

    def latest_snapshot_offset(self) -> int | None:
        offsets = self.snapshot_offsets()
        return offsets[-1] if offsets else None

    def oldest_snapshot_offset(self) -> int | None:
        offsets = self.snapshot_offsets()
        return offsets[0] if offsets else None

    def take_snapshot(self, offset: int | None = None, *, sync: bool = True) -> Path:
        """Write the state as of ``offset`` (default: the map end offset), then keep only the
        newest ``retained_snapshots`` files."""
        at = self._map_end_offset if offset is None else offset
        entries = [self._producers[pid].to_snapshot() for pid in sorted(self._producers)]
        path = snapshot_path(self._dir, at)
        write_snapshot(path, entries, sync=sync)
        log.debug(
            "%s: wrote producer snapshot at %d (%d producers)", self._dir.name, at, len(entries)
        )
        offsets = self.snapshot_offsets()
        for old in offsets[: max(0, len(offsets) - self._retained_snapshots)]:
            self._delete_snapshot(old)
        return path

    def encode_state(self) -> bytes:
        """The snapshot file's bytes for the state as it is now (written by a worker thread)."""
        return encode_snapshot(
            self._producers[pid].to_snapshot() for pid in sorted(self._producers)
        )

    def snapshot_tmp_path(self, offset: int) -> Path:
        return snapshot_path(self._dir, offset).with_name(
            f"{snapshot_file_name(offset)}.background.tmp"
        )

    def install_snapshot(self, tmp: Path, offset: int) -> None:
        """Rename a snapshot written off the loop into place (its data was fsynced first),
        then keep only the newest ``retained_snapshots``."""
        path = snapshot_path(self._dir, offset)
        try:
            os.replace(tmp, path)
        except OSError:
            log.exception(
                "%s: could not install the producer snapshot at %d", self._dir.name, offset
            )
            tmp.unlink(missing_ok=True)
            return
        offsets = self.snapshot_offsets()
        for old in offsets[: max(0, len(offsets) - self._retained_snapshots)]:
            self._delete_snapshot(old)

    def delete_snapshots_before(self, offset: int) -> None:
        for at in self.snapshot_offsets():
            if at < offset:
                self._delete_snapshot(at)

    def _delete_snapshot(self, offset: int) -> None:
        snapshot_path(self._dir, offset).unlink(missing_ok=True)

    def _reset(self) -> None:
        self._producers.clear()
        self._ongoing.clear()
        self._unreplicated.clear()

    def load_latest_snapshot(self, up_to_offset: int) -> int | None:
        """Replace the state with the newest readable snapshot at or below ``up_to_offset``.

        Snapshots above ``up_to_offset`` are deleted, and so is any corrupt one met on the way
        (logged; the next older is tried). Expired producers are not loaded. Returns the
        snapshot's offset (also the new map end offset: replay the log from there), or None
        when none is usable (replay from the log start).
        """
        self._reset()
        for at in reversed(self.snapshot_offsets()):
            if at > up_to_offset:
                self._delete_snapshot(at)
                continue
            path = snapshot_path(self._dir, at)
            try:
                entries = read_snapshot(path)
            except CorruptSnapshotError as exc:
                log.warning("deleting corrupt producer snapshot: %s", exc)
                self._delete_snapshot(at)
                continue
            now = self._clock.now_ms()
            for e in entries:
                entry = ProducerStateEntry.from_snapshot(e)
                if self._is_expired(entry, now):
                    continue
                self._producers[entry.producer_id] = entry
                if entry.current_txn_first_offset is not None:
                    self._add_ongoing(entry.current_txn_first_offset, entry.producer_id)
            self._map_end_offset = at
            log.info(
                "%s: loaded producer snapshot at %d (%d producers)",
                self._dir.name,
                at,
                len(self._producers),
            )
            return at
        return None

    def truncate_and_reload(self, log_start_offset: int, log_end_offset: int) -> int:
        """Bring the state in line with a log now spanning ``[log_start, log_end)``.

        Used at recovery and after truncation. Deletes snapshots outside
        ``(log_start, log_end]`` (as Kafka does) and, unless the state already ends at
        ``log_end_offset``, reloads from the newest remaining snapshot. Returns the offset to
        replay batches from with ``replay_batch`` (== ``log_end_offset``: nothing to replay).
        """
        for at in self.snapshot_offsets():
            if at > log_end_offset or at <= log_start_offset:
                self._delete_snapshot(at)
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
        for at in self.snapshot_offsets():
            self._delete_snapshot(at)
        self._map_end_offset = offset

    def on_log_start_offset_incremented(self, log_start_offset: int) -> None:
        """Retention or DeleteRecords moved the log start: ended transactions below it no
        longer hold the LSO back, and the map cannot end before the log starts."""
        self._drop_unreplicated_below(log_start_offset)
        self._map_end_offset = max(self._map_end_offset, log_start_offset)
