"""The producer state's snapshot files in the partition directory: taking them (inline or
written off the loop and installed), retention, and reloading the state from the newest
usable one at recovery and truncation. The file format is ``producer_snapshot``'s.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from .clock import Clock
from .producer_entry import ProducerStateEntry
from .producer_snapshot import (
    CorruptSnapshotError,
    encode_snapshot,
    list_snapshots,
    read_snapshot,
    snapshot_file_name,
    snapshot_path,
    write_snapshot,
)

# the manager's logger: snapshot messages read as before the split
log = logging.getLogger("broker.log.producer_state")


class ProducerSnapshotsMixin:
    """Snapshot files of one partition for ProducerStateManager (which owns the state)."""

    _dir: Path
    _clock: Clock
    _retained_snapshots: int
    _producers: dict[int, ProducerStateEntry]
    _map_end_offset: int

    if TYPE_CHECKING:  # defined by ProducerStateManager / TransactionTrackingMixin

        def _reset(self) -> None: ...
        def _is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool: ...
        def _add_ongoing(self, first_offset: int, producer_id: int) -> None: ...
        def _drop_unreplicated_below(self, offset: int) -> None: ...

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
