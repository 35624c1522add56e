"""Scan one byte range of a segment file into canonical records, touching headers only.

Ownership: a batch belongs to the range holding its first byte, so consecutive ranges read
each batch exactly once. A task starting mid-file first finds the first batch boundary at or
after its start: from the nearest ``.index`` entry below it when that entry checks out (its
batch has a valid CRC), else by hopping 12-byte heads from the segment start (batch bodies are
skipped, not read). The owned batches are then read in large blocks; a batch running past the
range end is still read whole by its owner.

Per batch: the header is copied into the record, the CRC32C is recomputed over the bytes (no
decompression), and a control batch's first record key is read to tell markers apart.
"""

from __future__ import annotations

import os
import struct
from typing import Final

from crc32c import crc32c

from protocol.errors import ProtocolError
from protocol.records import BatchView, iter_records, parse_control_record
from protocol.records.batch import (
    COMPRESSION_MASK,
    CRC_START,
    HEAD,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_OFFSET,
    MAGIC_V2,
    MIN_BATCH_LENGTH,
)

from .records import (
    HEAD_PART_END,
    MIRROR_PID_RESET,
    TAIL_PART_END,
    TAIL_PART_START,
    UNKNOWN_CONTROL,
)
from .summary import summarize_blob
from .tasks import Chunk, ScanTask

BLOCK: Final = 4 << 20
HOP_BLOCK: Final = 64 << 10
_U32 = struct.Struct(">I")
_INDEX_ENTRY = struct.Struct(">ii")
_CONTROL_LOW_BYTE: Final = 22  # low byte of the big-endian attributes
_CONTROL_BIT: Final = 0x20
_NOT_CONTROL_TAIL: Final = (b"\x00\xff", b"\x01\xff")  # crc_ok, control_type -1


def _framing_ok(head: bytes | memoryview, p: int) -> bool:
    _, length = HEAD.unpack_from(head, p)
    return bool(length >= MIN_BATCH_LENGTH and head[p + MAGIC_OFFSET] == MAGIC_V2)


def _batch_checks_out(fd: int, pos: int, segment_base: int) -> bool:
    """True when a whole, CRC-valid batch of this segment starts at ``pos``."""
    head = os.pread(fd, HEADER_SIZE, pos)
    if len(head) < HEADER_SIZE or not _framing_ok(head, 0):
        return False
    base, length = HEAD.unpack_from(head, 0)
    if base < segment_base:
        return False
    body = os.pread(fd, LOG_OVERHEAD + length, pos)
    if len(body) != LOG_OVERHEAD + length:
        return False
    return bool(int(crc32c(memoryview(body)[CRC_START:])) == _U32.unpack_from(body, 17)[0])


def _index_hint(index_path: str, start: int) -> list[int]:
    """Positions from the offset index at or below ``start``, nearest first."""
    try:
        with open(index_path, "rb") as fh:
            raw = fh.read()
    except OSError:
        return []
    hints: list[int] = []
    for i, (rel, position) in enumerate(_INDEX_ENTRY.iter_unpack(raw[: len(raw) // 8 * 8])):
        if i > 0 and rel == 0:
            break  # preallocated zeros after the last entry
        if position > start:
            break
        hints.append(position)
    hints.reverse()
    return hints[:3]


def _hop_to(fd: int, pos: int, start: int) -> int | None:
    """Hop batch heads from the boundary ``pos`` to the first boundary >= ``start``."""
    while pos < start:
        block = os.pread(fd, HOP_BLOCK, pos)
        n = len(block)
        p = 0
        while p + LOG_OVERHEAD <= n and pos + p < start:
            if p + MAGIC_OFFSET < n and not _framing_ok(block, p):
                return None  # corrupt framing: the owner of that byte reports it
            _, length = HEAD.unpack_from(block, p)
            p += LOG_OVERHEAD + length
        if p == 0:
            return None  # torn tail before the range
        pos += p
    return pos


def find_boundary(fd: int, path: str, segment_base: int, start: int) -> int | None:
    if start == 0:
        return 0
    index_path = path[: -len(".log")] + ".index"
    for hint in _index_hint(index_path, start):
        if _batch_checks_out(fd, hint, segment_base):
            found = _hop_to(fd, hint, start)
            if found is not None:
                return found
    return _hop_to(fd, 0, start)


def _control_type(block: bytes | memoryview, p: int) -> tuple[int, str | None]:
    """The control type of the control batch at ``p`` (and a marker's cluster id)."""
    view = BatchView(block, p)
    if view.compression & COMPRESSION_MASK:
        return UNKNOWN_CONTROL, None  # control batches are never compressed; do not inflate
    try:
        first = next(iter(iter_records(view)), None)
        if first is None:
            return UNKNOWN_CONTROL, None
        rec = parse_control_record(first.key, first.value)
    except ProtocolError:
        return UNKNOWN_CONTROL, None
    if rec.type == MIRROR_PID_RESET and not view.is_transactional:
        return MIRROR_PID_RESET, rec.source_cluster_id
    return UNKNOWN_CONTROL, None


def scan_range(task: ScanTask, verify_crc: bool = True) -> Chunk:
    out = bytearray()
    cluster_ids: dict[int, str] = {}
    problems: list[str] = []
    corrupt = False
    fd = os.open(task.path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        end = min(task.end, size)
        found = find_boundary(fd, task.path, task.segment_base, task.start)
        pos = end if found is None else found
        need = BLOCK
        while pos < end:
            block = os.pread(fd, need, pos)
            n = len(block)
            mv = memoryview(block)
            p = 0
            while p + HEADER_SIZE <= n and pos + p < end:
                base, length = HEAD.unpack_from(mv, p)
                if length < MIN_BATCH_LENGTH or mv[p + MAGIC_OFFSET] != MAGIC_V2:
                    if length == 0 and base == 0:
                        problems.append(f"{task.path}: zero fill from byte {pos + p}")
                    else:
                        corrupt = True
                        problems.append(
                            f"{task.path}: corrupt batch framing at byte {pos + p} "
                            f"(batch_length {length}, magic {mv[p + MAGIC_OFFSET]})"
                        )
                    pos = end
                    p = 0
                    break
                stop = p + LOG_OVERHEAD + length
                if stop > n:
                    break
                out += mv[p : HEAD_PART_END + p]
                out += mv[TAIL_PART_START + p : TAIL_PART_END + p]
                ok = (
                    int(crc32c(mv[p + CRC_START : stop])) == _U32.unpack_from(mv, p + 17)[0]
                    if verify_crc
                    else True
                )
                if mv[p + _CONTROL_LOW_BYTE] & _CONTROL_BIT:
                    ctype, cluster_id = _control_type(mv, p)
                    if cluster_id is not None:
                        cluster_ids[base] = cluster_id
                    out.append(1 if ok else 0)
                    out.append(ctype & 0xFF)
                else:
                    out += _NOT_CONTROL_TAIL[ok]
                p = stop
            mv.release()
            if pos >= end:
                break
            if p == 0:
                # The batch at ``pos`` does not fit in what was read.
                if n < need or n < HEADER_SIZE:
                    problems.append(
                        f"{task.path}: torn tail, {size - pos} bytes from byte {pos} "
                        "do not hold a whole batch"
                    )
                    break
                need = LOG_OVERHEAD + HEAD.unpack_from(block, 0)[1]
            else:
                pos += p
                need = BLOCK
    finally:
        os.close(fd)
    blob = bytes(out)
    return Chunk(
        side=task.side,
        topic=task.topic,
        partition=task.partition,
        copy=task.copy,
        segment_base=task.segment_base,
        start=task.start,
        blob=blob,
        summary=summarize_blob(blob),
        cluster_ids=cluster_ids,
        problems=problems,
        corrupt=corrupt,
    )
