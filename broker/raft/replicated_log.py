"""The log under the Raft core: a narrow interface like Kafka's ``ReplicatedLog``, and ``MemoryLog``.

The core only needs offsets, epochs and opaque payloads: append (as leader or follower),
truncate, read, the leader-epoch lookup used for divergence, flush, and snapshots. The real
implementation over ``PartitionLog`` (record batches, the ``.checkpoint`` files) comes later;
``MemoryLog`` is the one the simulation and the unit tests use.

Durability model (what ``MemoryLog.crash`` models, as Kafka's MockLog does): appended entries
are volatile until ``flush``; truncation, snapshots and the log start offset are durable at once
(they are file operations that the real log makes durable before returning). The high
watermark is not durable: it is recomputed by the core after a restart.

Epoch lookup (``end_offset_for_epoch``), in Kafka's terms: for a requested epoch E, answer the
largest epoch E' <= E the log knows and the offset where E' ends (the start of the next epoch,
or the log end offset). If E is below every epoch the log still holds, the answer is the log
start: the snapshot id when the log starts at a snapshot, else (first epoch start, E).
"""

from collections.abc import Sequence
from typing import Protocol

from broker.raft.messages import LEADER_CHANGE, LogEntry, OffsetAndEpoch, SnapshotId

# A snapshot's KIP-853 control records, (control type, value), stored after its header as
# Kafka's snapshots hold them: the KRaftVersion and Voters records in force at its end offset.
SnapshotControl = tuple[tuple[int, bytes], ...]


class LogError(Exception):
    """An operation the log refuses: the core asked for something it must never ask."""


# The contract every ReplicatedLog enforces the same way (MemoryLog here, MetadataLog on disk).


def check_leader_append(epoch: int, last_epoch: int) -> None:
    if epoch < last_epoch:
        raise LogError(f"leader epoch {epoch} below the log's last epoch {last_epoch}")


def check_follower_entry(offset: int, epoch: int, end_offset: int, last_epoch: int) -> None:
    if offset != end_offset:
        raise LogError(f"entry at {offset} appended at end offset {end_offset}")
    if epoch < last_epoch:
        raise LogError(f"entry epoch {epoch} below {last_epoch}")


def check_truncation(offset: int, start: int) -> None:
    if offset < start:
        raise LogError(f"truncation to {offset} below the log start {start}")


def check_read(from_offset: int, start: int, end: int) -> None:
    if from_offset < start or from_offset > end:
        raise LogError(f"read at {from_offset} outside [{start}, {end}]")


def check_snapshot(
    snapshot_id: SnapshotId, hw: int, start: int, end: int, latest: SnapshotId | None
) -> None:
    if snapshot_id.end_offset > hw:
        raise LogError(f"snapshot {snapshot_id} above the high watermark {hw}")
    if not start <= snapshot_id.end_offset <= end:
        raise LogError(f"snapshot {snapshot_id} outside the log [{start}, {end}]")
    if latest is not None and snapshot_id.end_offset <= latest.end_offset:
        raise LogError(f"snapshot {snapshot_id} not after the latest {latest}")


class ReplicatedLog(Protocol):
    @property
    def start_offset(self) -> int: ...

    @property
    def end_offset(self) -> int: ...

    @property
    def last_fetched_epoch(self) -> int:
        """Epoch of the last entry; the snapshot's epoch for an empty log after a snapshot."""
        ...

    @property
    def flushed_offset(self) -> int: ...

    @property
    def high_watermark(self) -> int: ...

    def append_as_leader(
        self,
        payloads: Sequence[bytes],
        epoch: int,
        *,
        control: bool = False,
        control_type: int = LEADER_CHANGE,
    ) -> int:
        """Append at the end with the leader's epoch; returns the offset of the last entry."""
        ...

    def append_as_follower(self, entries: Sequence[LogEntry]) -> None:
        """Append entries replicated from the leader; the first must sit at ``end_offset``."""
        ...

    def truncate_to(self, offset: int) -> None:
        """Drop every entry at or above ``offset`` (never below the log start)."""
        ...

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch: ...

    def read(self, from_offset: int, max_entries: int) -> list[LogEntry]: ...

    def read_control(self, from_offset: int) -> list[LogEntry]:
        """The KRaftVersion and Voters control entries from ``from_offset`` to the end."""
        ...

    def flush(self) -> None: ...

    def update_high_watermark(self, offset: int) -> None: ...

    def create_snapshot(
        self, snapshot_id: SnapshotId, data: bytes, control: SnapshotControl = ()
    ) -> None:
        """Store a snapshot of the state up to ``snapshot_id.end_offset`` (<= high watermark)."""
        ...

    @property
    def latest_snapshot_id(self) -> SnapshotId | None: ...

    def read_snapshot(self, snapshot_id: SnapshotId) -> bytes | None: ...

    def snapshot_control(self, snapshot_id: SnapshotId) -> SnapshotControl:
        """The snapshot's KRaftVersion / Voters records (none for an unknown snapshot)."""
        ...

    def install_snapshot(
        self, snapshot_id: SnapshotId, data: bytes, control: SnapshotControl = ()
    ) -> None:
        """Store a snapshot fetched from the leader and truncate the whole log to it."""
        ...

    def delete_before_snapshot(self) -> bool:
        """Move the log start to the latest snapshot's end offset; True if anything moved."""
        ...


class MemoryLog:
    """An in-memory ``ReplicatedLog``. ``crash()`` forgets unflushed entries, like a power cut."""

    def __init__(self) -> None:
        self._start = 0
        self._entries: list[LogEntry] = []
        # (epoch, first offset) for each epoch present in the log, ascending; when the log starts
        # at a snapshot, the first element is that snapshot's (epoch, end offset).
        self._epochs: list[tuple[int, int]] = []
        self._flushed = 0
        self._hw = 0
        self._snapshots: dict[SnapshotId, bytes] = {}
        self._snapshot_control: dict[SnapshotId, SnapshotControl] = {}
        self._latest_snapshot: SnapshotId | None = None

    # --- properties ---------------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return self._start

    @property
    def end_offset(self) -> int:
        return self._start + len(self._entries)

    @property
    def last_fetched_epoch(self) -> int:
        if self._entries:
            return self._entries[-1].epoch
        return self._epochs[-1][0] if self._epochs else 0

    @property
    def flushed_offset(self) -> int:
        return self._flushed

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def latest_snapshot_id(self) -> SnapshotId | None:
        return self._latest_snapshot

    # --- writes -------------------------------------------------------------------------------

    def append_as_leader(
        self,
        payloads: Sequence[bytes],
        epoch: int,
        *,
        control: bool = False,
        control_type: int = LEADER_CHANGE,
    ) -> int:
        check_leader_append(epoch, self.last_fetched_epoch)
        offset = self.end_offset
        if not payloads:
            return offset - 1
        self._note_epoch(epoch, offset)
        for payload in payloads:
            self._entries.append(LogEntry(offset, epoch, payload, control, control_type))
            offset += 1
        return offset - 1

    def append_as_follower(self, entries: Sequence[LogEntry]) -> None:
        for entry in entries:
            check_follower_entry(
                entry.offset, entry.epoch, self.end_offset, self.last_fetched_epoch
            )
            self._note_epoch(entry.epoch, entry.offset)
            self._entries.append(entry)

    def _note_epoch(self, epoch: int, offset: int) -> None:
        if not self._epochs or self._epochs[-1][0] < epoch:
            self._epochs.append((epoch, offset))

    def truncate_to(self, offset: int) -> None:
        check_truncation(offset, self._start)
        if offset >= self.end_offset:
            return
        del self._entries[offset - self._start :]
        base = self._base()
        while self._epochs and self._epochs[-1][1] >= offset and self._epochs[-1] != base:
            self._epochs.pop()
        self._flushed = min(self._flushed, offset)
        self._hw = min(self._hw, offset)

    def flush(self) -> None:
        self._flushed = self.end_offset

    def update_high_watermark(self, offset: int) -> None:
        self._hw = max(self._start, min(offset, self.end_offset))

    # --- reads --------------------------------------------------------------------------------

    def read(self, from_offset: int, max_entries: int) -> list[LogEntry]:
        check_read(from_offset, self._start, self.end_offset)
        i = from_offset - self._start
        return self._entries[i : i + max_entries]

    def read_control(self, from_offset: int) -> list[LogEntry]:
        i = max(0, from_offset - self._start)
        return [e for e in self._entries[i:] if e.is_voters or e.is_kraft_version]

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        epochs = self._epochs
        if not epochs:
            return OffsetAndEpoch(self.end_offset, 0)
        if epoch >= epochs[-1][0]:
            return OffsetAndEpoch(self.end_offset, epochs[-1][0])
        # first index whose epoch is above the requested one (epochs are few: linear is fine)
        i = 0
        while epochs[i][0] <= epoch:
            i += 1
        if i == 0:
            if epochs[0] == self._base():
                return OffsetAndEpoch(epochs[0][1], epochs[0][0])
            return OffsetAndEpoch(epochs[0][1], epoch)
        return OffsetAndEpoch(epochs[i][1], epochs[i - 1][0])

    # --- snapshots ----------------------------------------------------------------------------

    def _base(self) -> tuple[int, int] | None:
        s = self._latest_snapshot
        if s is not None and s.end_offset == self._start:
            return (s.epoch, s.end_offset)
        return None

    def create_snapshot(
        self, snapshot_id: SnapshotId, data: bytes, control: SnapshotControl = ()
    ) -> None:
        check_snapshot(snapshot_id, self._hw, self._start, self.end_offset, self._latest_snapshot)
        self._snapshots[snapshot_id] = bytes(data)
        self._snapshot_control[snapshot_id] = tuple(control)
        self._latest_snapshot = snapshot_id

    def read_snapshot(self, snapshot_id: SnapshotId) -> bytes | None:
        return self._snapshots.get(snapshot_id)

    def snapshot_control(self, snapshot_id: SnapshotId) -> SnapshotControl:
        return self._snapshot_control.get(snapshot_id, ())

    def bootstrap(self, control: SnapshotControl) -> None:
        """What ``kafka-storage.sh format`` writes: the bootstrap snapshot (0, 0) holding the
        initial KRaftVersion and Voters records."""
        sid = SnapshotId(0, 0)
        self._snapshots[sid] = b""
        self._snapshot_control[sid] = tuple(control)
        self._latest_snapshot = sid

    def install_snapshot(
        self, snapshot_id: SnapshotId, data: bytes, control: SnapshotControl = ()
    ) -> None:
        self._snapshots[snapshot_id] = bytes(data)
        self._snapshot_control[snapshot_id] = tuple(control)
        self._latest_snapshot = snapshot_id
        self._entries = []
        self._start = snapshot_id.end_offset
        self._epochs = [(snapshot_id.epoch, snapshot_id.end_offset)]
        self._flushed = self._start
        self._hw = self._start
        self._drop_older_snapshots()

    def delete_before_snapshot(self) -> bool:
        s = self._latest_snapshot
        if s is None or s.end_offset <= self._start or s.end_offset > self.end_offset:
            return False
        del self._entries[: s.end_offset - self._start]
        self._start = s.end_offset
        epochs = [(s.epoch, s.end_offset)]
        for epoch, first in self._epochs:
            if epoch > s.epoch:
                epochs.append((epoch, max(first, s.end_offset)))
        self._epochs = epochs
        self._flushed = max(self._flushed, self._start)
        self._hw = max(self._hw, self._start)
        self._drop_older_snapshots()
        return True

    def _drop_older_snapshots(self) -> None:
        latest = self._latest_snapshot
        for sid in [s for s in self._snapshots if s != latest]:
            del self._snapshots[sid]
            self._snapshot_control.pop(sid, None)

    # --- simulation hooks ---------------------------------------------------------------------

    def crash(self) -> None:
        """Lose what a power cut loses: unflushed entries and the (volatile) high watermark."""
        self.truncate_to(max(self._flushed, self._start))
        self._hw = self._start

    def entries(self) -> list[LogEntry]:
        """Every entry held (tests and checkers only)."""
        return list(self._entries)
