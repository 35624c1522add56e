"""Producer-state snapshot files, byte-compatible with Kafka's ``<20-digit offset>.snapshot``.

Layout (version 1, big-endian, no flexible fields):

    int16  version (1)
    uint32 CRC32C of every byte after this field (the entry count and the entries)
    int32  entry count
    entries, 46 bytes each:
        int64 producer id, int16 epoch, int32 last sequence, int64 last offset,
        int32 offset delta, int64 timestamp, int32 coordinator epoch,
        int64 current transaction first offset (-1: none)

The offset in the file name is the log offset the state covers up to (exclusive).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from crc32c import crc32c

SNAPSHOT_SUFFIX: Final = ".snapshot"
SNAPSHOT_VERSION: Final = 1

_HEADER: Final = struct.Struct(">hIi")  # version, crc, entry count
_ENTRY: Final = struct.Struct(">qhiqiqiq")
_CRC_FIELD: Final = 2  # byte position of the CRC
_CRC_START: Final = 6  # the CRC covers everything from the entry count on
ENTRY_SIZE: Final = _ENTRY.size


class CorruptSnapshotError(ValueError):
    """A snapshot file is truncated, has an unknown version or fails its CRC."""


@dataclass(frozen=True, slots=True)
class SnapshotEntry:
    """One producer as a snapshot stores it (only the newest batch's metadata survives)."""

    producer_id: int
    epoch: int
    last_sequence: int  # -1 when the producer has no batch metadata
    last_offset: int  # -1 when the producer has no batch metadata
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int  # -1 when no transaction is ongoing


def snapshot_file_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / snapshot_file_name(offset)


def offset_of(path: Path) -> int | None:
    """The offset a snapshot file name encodes, or None if ``path`` is not a snapshot file."""
    name = path.name
    if not name.endswith(SNAPSHOT_SUFFIX):
        return None
    stem = name[: -len(SNAPSHOT_SUFFIX)]
    if not stem or not stem.isdigit() or not stem.isascii():
        return None
    return int(stem)


def list_snapshots(directory: Path) -> dict[int, Path]:
    """Snapshot files in ``directory`` by offset, in ascending offset order."""
    if not directory.is_dir():
        return {}
    found: dict[int, Path] = {}
    for path in directory.iterdir():
        offset = offset_of(path)
        if offset is not None and path.is_file():
            found[offset] = path
    return dict(sorted(found.items()))


def encode_snapshot(entries: Iterable[SnapshotEntry]) -> bytes:
    items = list(entries)
    buf = bytearray(_HEADER.size + ENTRY_SIZE * len(items))
    _HEADER.pack_into(buf, 0, SNAPSHOT_VERSION, 0, len(items))
    pos = _HEADER.size
    for e in items:
        _ENTRY.pack_into(
            buf,
            pos,
            e.producer_id,
            e.epoch,
            e.last_sequence,
            e.last_offset,
            e.offset_delta,
            e.timestamp,
            e.coordinator_epoch,
            e.current_txn_first_offset,
        )
        pos += ENTRY_SIZE
    struct.pack_into(">I", buf, _CRC_FIELD, crc32c(memoryview(buf)[_CRC_START:]))
    return bytes(buf)


def decode_snapshot(data: bytes | bytearray | memoryview) -> list[SnapshotEntry]:
    if len(data) < _HEADER.size:
        raise CorruptSnapshotError(f"snapshot has {len(data)} bytes, shorter than its header")
    version, stored_crc, count = _HEADER.unpack_from(data, 0)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"snapshot has unknown version {version}")
    computed = crc32c(memoryview(data)[_CRC_START:])
    if stored_crc != computed:
        raise CorruptSnapshotError(
            f"snapshot CRC mismatch: stored {stored_crc:#010x}, computed {computed:#010x}"
        )
    # A valid CRC over a bad count is possible only for a hand-made file; check anyway.
    if count < 0 or _HEADER.size + count * ENTRY_SIZE > len(data):
        raise CorruptSnapshotError(f"snapshot declares {count} entries the file cannot hold")
    return [
        SnapshotEntry(*_ENTRY.unpack_from(data, _HEADER.size + i * ENTRY_SIZE))
        for i in range(count)
    ]


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_snapshot(path: Path, entries: Iterable[SnapshotEntry], *, sync: bool = True) -> None:
    """Write via a temporary file and a rename, so a crash never leaves a half-written snapshot
    under the real name (Kafka writes in place and relies on the CRC; this is stricter)."""
    data = encode_snapshot(entries)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        _fsync_dir(path.parent)


def read_snapshot(path: Path) -> list[SnapshotEntry]:
    """Entries of the snapshot at ``path``; CorruptSnapshotError names the file."""
    try:
        return decode_snapshot(path.read_bytes())
    except CorruptSnapshotError as exc:
        raise CorruptSnapshotError(f"{path}: {exc}") from exc
