"""Kafka's small text files: offset checkpoints, leader-epoch checkpoint, partition.metadata.

Checkpoint format (Kafka's CheckpointFile): a version line, a count line, then one entry per
line. Writes go to ``<name>.tmp``, are fsynced, renamed over the target, and the directory is
fsynced, so a crash leaves either the old or the new file.
"""

from __future__ import annotations

import base64
import os
import uuid
from pathlib import Path
from typing import Final

RECOVERY_POINT_CHECKPOINT: Final = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT: Final = "log-start-offset-checkpoint"
REPLICATION_OFFSET_CHECKPOINT: Final = "replication-offset-checkpoint"  # high watermarks
LEADER_EPOCH_CHECKPOINT: Final = "leader-epoch-checkpoint"
PARTITION_METADATA: Final = "partition.metadata"
CHECKPOINT_VERSION: Final = 0


class CheckpointError(ValueError):
    """A checkpoint file does not parse; the message names the file and the line."""


def fsync_dir(path: Path) -> None:
    """fsync a directory (its entries), or a file through a read-only descriptor."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, text: str, *, sync: bool = True) -> None:
    """Via a temporary file and a rename; ``sync=False`` leaves the fsyncs to the caller
    (durable against a process crash at once, against power loss once fsynced)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        data = text.encode()
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


def _format(entries: list[str]) -> str:
    lines = [str(CHECKPOINT_VERSION), str(len(entries)), *entries]
    return "\n".join(lines) + "\n"


def _read_text(path: Path) -> str:
    """The file as text; bytes that are not UTF-8 (a torn or overwritten file) are a
    CheckpointError naming it, like any other malformed content."""
    try:
        return path.read_bytes().decode()
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"{path}: not text ({exc.reason} at byte {exc.start})") from None


def _parse(path: Path, fields: int) -> list[list[str]]:
    lines = _read_text(path).splitlines()
    if len(lines) < 2:
        raise CheckpointError(f"{path}: needs a version line and a count line")
    try:
        version = int(lines[0])
        count = int(lines[1])
    except ValueError:
        raise CheckpointError(f"{path}: malformed header {lines[:2]!r}") from None
    if version != CHECKPOINT_VERSION:
        raise CheckpointError(f"{path}: unrecognised version {version}, expected 0")
    body = [line for line in lines[2:] if line.strip()]
    if len(body) != count:
        raise CheckpointError(f"{path}: expected {count} entries, found {len(body)}")
    out = []
    for line in body:
        parts = line.split()
        if len(parts) != fields:
            raise CheckpointError(f"{path}: malformed line {line!r}")
        out.append(parts)
    return out


# -- offset checkpoints (per log dir) -----------------------------------------------------


def write_offset_checkpoint(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    entries = [f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())]
    write_atomically(path, _format(entries))


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """Missing file -> empty map (a fresh log dir)."""
    if not path.exists():
        return {}
    out: dict[tuple[str, int], int] = {}
    for topic, partition, offset in _parse(path, 3):
        try:
            out[(topic, int(partition))] = int(offset)
        except ValueError:
            raise CheckpointError(f"{path}: malformed line {topic} {partition} {offset}") from None
    return out


# -- leader-epoch-checkpoint (per partition) ----------------------------------------------


def write_epoch_checkpoint(
    path: Path, entries: list[tuple[int, int]], *, rename: bool = True
) -> None:
    """``rename=False``: write ``path`` itself, fsynced (a temporary file renamed into
    place later by the caller)."""
    text = _format([f"{e} {o}" for e, o in entries])
    if rename:
        write_atomically(path, text)
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(text.encode())
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def read_epoch_checkpoint(path: Path) -> list[tuple[int, int]]:
    if not path.exists():
        return []
    try:
        return [(int(e), int(o)) for e, o in _parse(path, 2)]
    except ValueError:
        raise CheckpointError(f"{path}: non-integer epoch entry") from None


# -- partition.metadata ---------------------------------------------------------------------


def topic_id_to_str(topic_id: uuid.UUID) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def topic_id_from_str(text: str) -> uuid.UUID:
    raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    if len(raw) != 16:
        raise ValueError(f"topic id {text!r} does not decode to 16 bytes")
    return uuid.UUID(bytes=raw)


def write_partition_metadata(path: Path, topic_id: uuid.UUID, *, sync: bool = True) -> None:
    # Kafka writes exactly these two lines with no trailing newline.
    write_atomically(path, f"version: 0\ntopic_id: {topic_id_to_str(topic_id)}", sync=sync)


def create_partition_metadata(path: Path, topic_id: uuid.UUID) -> None:
    """The file of a partition whose directory was made just now: one write, no temporary
    file and rename (two fewer file system operations for each of thousands of new
    partitions). Nothing reads it before the write returns, and a crash leaves it missing or
    empty, both read as no id (the id comes from the metadata log again)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, f"version: 0\ntopic_id: {topic_id_to_str(topic_id)}".encode())
    finally:
        os.close(fd)


def read_partition_metadata(path: Path) -> uuid.UUID | None:
    """The topic id, or None when the file is missing or empty (a power loss before the new
    partition's files were fsynced: the id comes from the metadata log again)."""
    if not path.exists() or path.stat().st_size == 0:
        return None
    fields: dict[str, str] = {}
    for line in _read_text(path).splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise CheckpointError(f"{path}: malformed line {line!r}")
        fields[key.strip()] = value.strip()
    if fields.get("version") != "0":
        raise CheckpointError(f"{path}: unsupported version {fields.get('version')!r}")
    if "topic_id" not in fields:
        raise CheckpointError(f"{path}: no topic_id")
    try:
        return topic_id_from_str(fields["topic_id"])
    except ValueError as exc:
        raise CheckpointError(f"{path}: {exc}") from None
