"""The producer state's snapshot files in the partition directory: writing them (inline, or
written off the loop and installed), retention, and finding the newest usable one at recovery
and truncation. The file format is ``producer_snapshot``'s; what a snapshot's entries mean is
the producer state's business (`ProducerStateManager` rebuilds itself from them).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from pathlib import Path

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

# the manager's logger: snapshot messages read as before the split
log = logging.getLogger("broker.log.producer_state")


class SnapshotFiles:
    """The producer snapshot files of one partition directory; the newest ``retained`` are
    kept. ``dir`` follows the partition directory when it is renamed."""

    __slots__ = ("dir", "retained")

    def __init__(self, directory: Path, retained: int) -> None:
        if retained < 1:
            raise ValueError("retained_snapshots must be at least 1")
        self.dir = directory
        self.retained = retained

    def offsets(self) -> list[int]:
        """The offsets of the snapshots there, ascending."""
        return list(list_snapshots(self.dir))

    def write(self, offset: int, entries: list[SnapshotEntry], *, sync: bool = True) -> Path:
        """Write the snapshot at ``offset``, then keep only the newest ``retained``."""
        path = snapshot_path(self.dir, offset)
        write_snapshot(path, entries, sync=sync)
        log.debug(
            "%s: wrote producer snapshot at %d (%d producers)", self.dir.name, offset, len(entries)
        )
        self._retain()
        return path

    @staticmethod
    def encode(entries: Iterable[SnapshotEntry]) -> bytes:
        """A snapshot file's bytes (to be written off the loop, then `install`-ed)."""
        return encode_snapshot(entries)

    def tmp_path(self, offset: int) -> Path:
        return snapshot_path(self.dir, offset).with_name(
            f"{snapshot_file_name(offset)}.background.tmp"
        )

    def install(self, tmp: Path, offset: int) -> None:
        """Rename a snapshot written off the loop into place (its data was fsynced first),
        then keep only the newest ``retained``."""
        path = snapshot_path(self.dir, offset)
        try:
            os.replace(tmp, path)
        except OSError:
            log.exception(
                "%s: could not install the producer snapshot at %d", self.dir.name, offset
            )
            tmp.unlink(missing_ok=True)
            return
        self._retain()

    def delete(self, offset: int) -> None:
        snapshot_path(self.dir, offset).unlink(missing_ok=True)

    def delete_before(self, offset: int) -> None:
        for at in self.offsets():
            if at < offset:
                self.delete(at)

    def delete_outside(self, start: int, end: int) -> None:
        """Delete the snapshots not in ``(start, end]`` (a log spanning ``[start, end)``)."""
        for at in self.offsets():
            if at > end or at <= start:
                self.delete(at)

    def delete_all(self) -> None:
        for at in self.offsets():
            self.delete(at)

    def read_newest(self, up_to_offset: int) -> tuple[int, list[SnapshotEntry]] | None:
        """The newest readable snapshot at or below ``up_to_offset``: (its offset, its
        entries). Snapshots above ``up_to_offset`` are deleted, and so is any corrupt one met
        on the way (logged; the next older is tried). None: there is none."""
        for at in reversed(self.offsets()):
            if at > up_to_offset:
                self.delete(at)
                continue
            try:
                return at, read_snapshot(snapshot_path(self.dir, at))
            except CorruptSnapshotError as exc:
                log.warning("deleting corrupt producer snapshot: %s", exc)
                self.delete(at)
        return None

    def _retain(self) -> None:
        offsets = self.offsets()
        for old in offsets[: max(0, len(offsets) - self.retained)]:
            self.delete(old)
