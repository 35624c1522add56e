"""One segment's aborted-transaction index file, ``<base offset>.txnindex`` (Kafka's format,
see ``protocol.txn_index``).

An entry is appended when an ABORT marker for a transaction that wrote data lands in the
segment; READ_COMMITTED fetches read the entries overlapping what they return, so consumers
can drop aborted records themselves. Like Kafka, the file is created on the first entry: most
segments never have one, and those cost a ``stat`` at open and nothing afterwards. Entries are
read lazily and cached once a fetch or a truncation needs them. No descriptor is held: an
append (one per aborted transaction, rare) opens the file for its ``pwrite`` and closes it.
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

from protocol.errors import CorruptRecordError
from protocol.txn_index import ENTRY_SIZE, AbortedTxn, decode_entries, decode_entry, encode_entry

from .checkpoint import fsync_dir

log = logging.getLogger(__name__)


class TransactionIndex:
    def __init__(self, path: Path, base_offset: int, *, missing: bool = False) -> None:
        self.path = path
        self.base_offset = base_offset
        self._entries: list[AbortedTxn] | None = None
        size = 0
        if not missing:  # missing: the caller knows (a new log)
            with contextlib.suppress(FileNotFoundError):
                size = path.stat().st_size
        self._size = size
        self._dirty = False
        self._created = False  # created since the last flush: its directory entry is not durable

    def __repr__(self) -> str:
        return f"TransactionIndex({self.path.name}, entries={self.count})"

    @property
    def count(self) -> int:
        """Whole entries in the file (no read needed)."""
        return self._size // ENTRY_SIZE

    # -- reading ---------------------------------------------------------------------------
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            if self.count == 0:
                self._entries = []
            else:
                self._entries = decode_entries(self._read())[0]
        return self._entries

    def _read(self) -> bytes:
        with self.path.open("rb") as fh:
            return fh.read(self._size)

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions overlapping ``[fetch_offset, upper_bound)``, and whether the
        search may stop here: an entry whose last stable offset reaches ``upper_bound`` proves
        that every transaction starting below the bound ended at or before it (Kafka's
        ``collectAbortedTxns``)."""
        found: list[AbortedTxn] = []
        if self.count == 0:
            return found, False
        for txn in self.entries():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return found, True
        return found, False

    def sanity_check(self) -> str | None:
        """Validate the file at load; repair it to its valid prefix and say why, or None.

        A torn tail (a partial entry), an unknown version, an entry whose marker lies below the
        segment's base offset or whose marker offsets do not increase: everything from the
        first bad entry on is cut, and the caller rebuilds the cut part from the log.
        """
        if self._size == 0:
            return None
        raw = self._read()
        valid = 0
        why: str | None = None
        last = -1
        for pos in range(0, len(raw) - len(raw) % ENTRY_SIZE, ENTRY_SIZE):
            try:
                txn = decode_entry(raw, pos)
            except CorruptRecordError as exc:
                why = str(exc)
                break
            if txn.last_offset < self.base_offset:
                why = (
                    f"entry at byte {pos} ends at offset {txn.last_offset}, below the segment's "
                    f"base offset {self.base_offset}"
                )
                break
            if txn.last_offset <= last or txn.first_offset > txn.last_offset:
                why = f"entry at byte {pos} is out of order ({txn})"
                break
            last = txn.last_offset
            valid = pos + ENTRY_SIZE
        else:
            if len(raw) % ENTRY_SIZE:
                why = f"{len(raw) % ENTRY_SIZE} trailing bytes (a torn entry)"
        if why is not None:
            self._truncate_file(valid)
            self._entries = None
            log.warning("%s: %s; cut to %d entries", self.path, why, self.count)
        return why

    # -- writing ---------------------------------------------------------------------------
    def append(self, txn: AbortedTxn) -> None:
        entries = self.entries()
        if entries and entries[-1].last_offset >= txn.last_offset:
            raise ValueError(
                f"{self.path}: aborted transactions must be appended in marker order: "
                f"{txn.last_offset} after {entries[-1].last_offset}"
            )
        if self._size % ENTRY_SIZE:
            self._truncate_file(self.count * ENTRY_SIZE)  # a torn entry never checked
        data = encode_entry(txn)
        self._created |= not self._size and not self.path.exists()
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            written = 0
            while written < len(data):
                written += os.pwrite(fd, data[written:], self._size + written)
        finally:
            os.close(fd)
        self._size += len(data)
        entries.append(txn)
        self._dirty = True

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose ABORT marker is at or after ``offset``."""
        if self.count == 0:
            return
        entries = self.entries()
        keep = len(entries)
        while keep and entries[keep - 1].last_offset >= offset:
            keep -= 1
        if keep != len(entries):
            del entries[keep:]
            self._truncate_file(keep * ENTRY_SIZE)

    def reset(self) -> None:
        self._truncate_file(0)
        self._entries = []

    def _truncate_file(self, size: int) -> None:
        if size == self._size:
            return
        os.truncate(self.path, size)
        self._size = size
        self._dirty = True

    def flush(self) -> None:
        """fsync the file, and its directory when the file is new: entries below the recovery
        point must survive a crash (recovery rebuilds only those above it)."""
        if self._dirty and self.path.exists():
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
            if self._created:
                fsync_dir(self.path.parent)
        self._dirty = False
        self._created = False

    def close(self) -> None:
        """Nothing to release (no descriptor is held); kept for the segment's lifecycle."""
