"""``ReplicatedLog`` over the node's ``__cluster_metadata-0`` ``PartitionLog`` and its snapshots.

The Raft core sees entries (offset, epoch, payload); on disk they are Kafka's KRaft layout, so
Kafka's tools read them: each append is one record batch (null keys, the payloads as values,
the epoch as partition leader epoch); Raft's own control entries (LeaderChange) are control
batches keyed ``(0, LEADER_CHANGE)``. Offsets are given by the core, so every append goes
through ``append_raw`` (the leader's too): the partition log keeps the epoch cache from the
batches' leader epochs.

Snapshots are ``<end offset %020d>-<epoch %010d>.checkpoint`` files in the partition directory,
shaped as Kafka writes them: a SnapshotHeader control batch, the state in records of at most
``SNAPSHOT_CHUNK`` bytes, a SnapshotFooter control batch; written to ``.checkpoint.part``,
fsynced, then renamed. Only the newest snapshot is kept once the log start has passed it.

Durability is the core's model (see ``broker.raft.replicated_log``): appends are volatile until
``flush`` (the recovery point); truncations, snapshots and the log start are durable when the
call returns.
"""

from __future__ import annotations

import os
import re
import struct
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Final, Protocol

from protocol.records import ControlType, Record, build_batch, iter_records, scan_batches
from protocol.records.control import control_key

from ..log.checkpoint import fsync_dir
from ..log.partition_log import PartitionLog
from ..raft.messages import LEADER_CHANGE, LogEntry, OffsetAndEpoch, SnapshotId
from ..raft.replicated_log import (
    SnapshotControl,
    check_follower_entry,
    check_leader_append,
    check_read,
    check_snapshot,
    check_truncation,
)
from .entries import decode_entries, entry_batch, runs

SNAPSHOT_SUFFIX: Final = ".checkpoint"
PARTIAL_SUFFIX: Final = ".checkpoint.part"
SNAPSHOT_CHUNK: Final = 512 * 1024
SNAPSHOT_BATCH_RECORDS: Final = 1000  # records per batch of a snapshot written by a codec
READ_BYTES: Final = 1 << 20  # a read of entries asks the log for at most this much per batch run
_SNAPSHOT_NAME: Final = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
_HEADER_VALUE: Final = struct.Struct(">hq")  # version, last contained log timestamp
_FOOTER_VALUE: Final = struct.Struct(">h")  # version


def snapshot_name(snapshot_id: SnapshotId) -> str:
    return f"{snapshot_id.end_offset:020d}-{snapshot_id.epoch:010d}{SNAPSHOT_SUFFIX}"


class SnapshotCodec(Protocol):
    """How a snapshot's state maps to records, so a ``.checkpoint`` holds one record per
    metadata record (Kafka's layout, which its dump tool reads) rather than opaque chunks."""

    def split(self, data: bytes) -> list[tuple[bytes | None, bytes]] | None:
        """(key, value) records for ``data``; None: not this codec's data (stored as chunks)."""
        ...

    def join(self, records: list[tuple[bytes | None, bytes]]) -> bytes:
        """``split``'s inverse."""
        ...


class MetadataLog:
    def __init__(
        self,
        plog: PartitionLog,
        now_ms: Callable[[], int],
        codec: SnapshotCodec | None = None,
    ) -> None:
        self._log = plog
        self._now_ms = now_ms
        self._codec = codec
        self._dir = Path(plog.dir)
        for part in self._dir.glob(f"*{PARTIAL_SUFFIX}"):
            part.unlink()  # a snapshot a crash interrupted: never complete, never used
        self._snapshots = sorted(self._list_snapshots(), key=lambda s: s.end_offset)
        latest = self.latest_snapshot_id
        if latest is not None and plog.log_end_offset < latest.end_offset:
            # the log lost what the snapshot covers (or never had it): restart at the snapshot
            plog.truncate_fully_and_start_at(latest.end_offset)
        self._hw = self.start_offset

    # --- properties ---------------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        return int(self._log.log_start_offset)

    @property
    def end_offset(self) -> int:
        return int(self._log.log_end_offset)

    @property
    def last_fetched_epoch(self) -> int:
        latest = self._log.latest_epoch
        if latest is not None and self.end_offset > self.start_offset:
            return int(latest)
        base = self._base()
        if base is not None:
            return base.epoch
        return int(latest) if latest is not None else 0

    @property
    def flushed_offset(self) -> int:
        return int(self._log.recovery_point)

    @property
    def high_watermark(self) -> int:
        return self._hw

    @property
    def latest_snapshot_id(self) -> SnapshotId | None:
        return self._snapshots[-1] if self._snapshots else None

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
        self._write(entry_batch(offset, epoch, control, payloads, self._now_ms(), control_type))
        return offset + len(payloads) - 1

    def append_as_follower(self, entries: Sequence[LogEntry]) -> None:
        batches: list[bytes] = []
        expected = self.end_offset
        last_epoch = self.last_fetched_epoch
        now = self._now_ms()
        for run in runs(entries):
            first = run[0]
            check_follower_entry(first.offset, first.epoch, expected, last_epoch)
            batches.append(
                entry_batch(
                    first.offset,
                    first.epoch,
                    first.control,
                    [e.payload for e in run],
                    now,
                    first.control_type,
                )
            )
            expected += len(run)
            last_epoch = first.epoch
        if batches:
            self._write(b"".join(batches))

    def _write(self, data: bytes) -> None:
        self._log.append_raw(data, now_ms=self._now_ms())

    def truncate_to(self, offset: int) -> None:
        check_truncation(offset, self.start_offset)
        if offset >= self.end_offset:
            return
        self._log.truncate_to(offset)
        self._hw = min(self._hw, offset)

    def flush(self) -> None:
        self._log.flush()

    def update_high_watermark(self, offset: int) -> None:
        self._hw = max(self.start_offset, min(offset, self.end_offset))
        # the partition's own HW bounds what its Fetch path serves to tools and observers
        self._log.high_watermark = self._hw

    # --- reads --------------------------------------------------------------------------------

    def read(self, from_offset: int, max_entries: int) -> list[LogEntry]:
        check_read(from_offset, self.start_offset, self.end_offset)
        out: list[LogEntry] = []
        offset = from_offset
        end = self.end_offset
        while offset < end and len(out) < max_entries:
            result = self._log.read(offset, READ_BYTES, upper_bound=end)
            got = [e for buf in result.records for e in decode_entries(buf, offset)]
            if not got:
                break
            out.extend(got[: max_entries - len(out)])
            offset = got[-1].offset + 1
        return out

    def read_control(self, from_offset: int) -> list[LogEntry]:
        """Only control batches are opened: the rest is skipped by its header."""
        out: list[LogEntry] = []
        offset = max(from_offset, self.start_offset)
        end = self.end_offset
        while offset < end:
            result = self._log.read(offset, READ_BYTES, upper_bound=end)
            last = -1
            for buf in result.records:
                for batch in scan_batches(buf, allow_partial_tail=True):
                    last = max(last, batch.last_offset)
                    if batch.is_control and batch.last_offset >= offset:
                        out.extend(
                            e
                            for e in decode_entries(batch.raw, offset)
                            if e.is_voters or e.is_kraft_version
                        )
            if last < offset:
                break
            offset = last + 1
        return out

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        epochs = self._log.leader_epoch_cache.entries()  # (epoch, start offset), ascending
        base = self._base()
        if base is not None:
            epochs = [(base.epoch, base.end_offset)] + [e for e in epochs if e[0] > base.epoch]
        if not epochs:
            return OffsetAndEpoch(self.end_offset, 0)
        if epoch >= epochs[-1][0]:
            return OffsetAndEpoch(self.end_offset, epochs[-1][0])
        i = 0
        while epochs[i][0] <= epoch:
            i += 1
        if i == 0:
            if base is not None:
                return OffsetAndEpoch(base.end_offset, base.epoch)
            return OffsetAndEpoch(epochs[0][1], epoch)
        return OffsetAndEpoch(epochs[i][1], epochs[i - 1][0])

    # --- snapshots ----------------------------------------------------------------------------

    def _base(self) -> SnapshotId | None:
        """The snapshot the log starts at, if it starts at one."""
        s = self.latest_snapshot_id
        return s if s is not None and s.end_offset == self.start_offset else None

    def create_snapshot(
        self, snapshot_id: SnapshotId, data: bytes, control: SnapshotControl = ()
    ) -> None:
        check_snapshot(
            snapshot_id, self._hw, self.start_offset, self.end_offset, self.latest_snapshot_id
        )
        self._write_snapshot(snapshot_id, data, control)

    def read_snapshot(self, snapshot_id: SnapshotId) -> bytes | None:
        if snapshot_id not in self._snapshots:
            return None
        try:
            raw = (self._dir / snapshot_name(snapshot_id)).read_bytes()
        except FileNotFoundError:
            return None
        records = [
            (None if rec.key is None else bytes(rec.key), bytes(rec.value or b""))
            for batch in scan_batches(raw)
            if not batch.is_control
            for rec in iter_records(batch)
        ]
        if self._codec is not None and all(k is not None for k, _ in records):
            return self._codec.join(records)
        return b"".join(v for _, v in records)

    def snapshot_control(self, snapshot_id: SnapshotId) -> SnapshotControl:
        if snapshot_id not in self._snapshots:
            return ()
        return self.snapshot_control_of(self._dir, snapshot_id)

    @staticmethod
    def snapshot_control_of(directory: Path, snapshot_id: SnapshotId) -> SnapshotControl:
        """The KRaftVersion / Voters records of the snapshot file in ``directory``."""
        try:
            raw = (directory / snapshot_name(snapshot_id)).read_bytes()
        except FileNotFoundError:
            return ()
        out = []
        for batch in scan_batches(raw):
            if batch.is_control:
                for e in decode_entries(batch.raw):
                    if e.is_voters or e.is_kraft_version:
                        out.append((e.control_type, e.payload))
        return tuple(out)

    def install_snapshot(
        self, snapshot_id: SnapshotId, data: bytes, control: SnapshotControl = ()
    ) -> None:
        self._write_snapshot(snapshot_id, data, control)
        self._log.truncate_fully_and_start_at(snapshot_id.end_offset)
        self._hw = snapshot_id.end_offset
        self._drop_older_snapshots()

    def delete_before_snapshot(self) -> bool:
        s = self.latest_snapshot_id
        if s is None or s.end_offset <= self.start_offset or s.end_offset > self.end_offset:
            return False
        if s.end_offset > self._log.high_watermark:
            self._log.high_watermark = s.end_offset  # the partition log moves its start <= HW
        self._log.delete_records_before(s.end_offset)
        self._hw = max(self._hw, self.start_offset)
        self._drop_older_snapshots()
        return True

    def _write_snapshot(
        self, snapshot_id: SnapshotId, data: bytes, control: SnapshotControl = ()
    ) -> None:
        records = self._codec.split(data) if self._codec is not None else None
        if records is None:
            records = [
                (None, data[i : i + SNAPSHOT_CHUNK]) for i in range(0, len(data), SNAPSHOT_CHUNK)
            ]
        raw = snapshot_file_bytes(snapshot_id, control, records, self._now_ms())
        final = self._dir / snapshot_name(snapshot_id)
        part = final.with_name(final.name[: -len(SNAPSHOT_SUFFIX)] + PARTIAL_SUFFIX)
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, raw)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(part, final)
        fsync_dir(self._dir)
        if snapshot_id not in self._snapshots:
            self._snapshots.append(snapshot_id)
            self._snapshots.sort(key=lambda s: s.end_offset)

    def _drop_older_snapshots(self) -> None:
        """Keep the snapshots at or after the log start's (the older ones serve nobody)."""
        keep = [s for s in self._snapshots if s.end_offset >= self.start_offset]
        for s in self._snapshots:
            if s not in keep:
                (self._dir / snapshot_name(s)).unlink(missing_ok=True)
        self._snapshots = keep

    def _list_snapshots(self) -> Iterator[SnapshotId]:
        for path in self._dir.iterdir():
            m = _SNAPSHOT_NAME.match(path.name)
            if m is not None:
                yield SnapshotId(int(m[1]), int(m[2]))


def snapshot_file_bytes(
    snapshot_id: SnapshotId,
    control: SnapshotControl,
    records: list[tuple[bytes | None, bytes]],
    now: int,
) -> bytes:
    """A ``.checkpoint`` file as Kafka lays it out: SnapshotHeader, the KIP-853 control records
    in force at its end offset (KRaftVersion, Voters), the state's records, SnapshotFooter."""
    header = _control_batch(
        0, snapshot_id.epoch, ControlType.SNAPSHOT_HEADER, _HEADER_VALUE.pack(0, now), now
    )
    kraft = b"".join(
        _control_batch(1 + i, snapshot_id.epoch, ControlType(kind), value, now)
        for i, (kind, value) in enumerate(control)
    )
    first = 1 + len(control)
    body = b"".join(
        build_batch(
            [Record(key=k, value=v) for k, v in records[i : i + SNAPSHOT_BATCH_RECORDS]],
            base_offset=first + i,
            partition_leader_epoch=snapshot_id.epoch,
            base_timestamp=now,
        )
        for i in range(0, len(records), SNAPSHOT_BATCH_RECORDS)
    )
    footer = _control_batch(
        first + len(records),
        snapshot_id.epoch,
        ControlType.SNAPSHOT_FOOTER,
        _FOOTER_VALUE.pack(0),
        now,
    )
    return header + kraft + body + footer


def _control_batch(offset: int, epoch: int, kind: ControlType, value: bytes, now: int) -> bytes:
    return build_batch(
        [Record(key=control_key(kind), value=value)],
        base_offset=offset,
        partition_leader_epoch=epoch,
        is_control=True,
        base_timestamp=now,
    )
