"""Raft entries <-> record batches, the form they take on disk and in KRaft Fetch responses.

Consecutive entries of one epoch and kind make one batch: null keys, the payloads as values,
the epoch as partition leader epoch. Raft's own control entries are control batches keyed
``(0, type)``: LEADER_CHANGE, and KIP-853's KRAFT_VERSION and KRAFT_VOTERS. Offsets are the
entries' own.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

from protocol.records import Record, build_batch, iter_records, scan_batches
from protocol.records.control import control_key

from ..raft.messages import LEADER_CHANGE, LogEntry

Buffer = bytes | bytearray | memoryview

_KEY = struct.Struct(">hh")


def runs(entries: Sequence[LogEntry]) -> Iterator[list[LogEntry]]:
    """Consecutive entries of one epoch and kind: one batch each."""
    run: list[LogEntry] = []
    for e in entries:
        if run and (
            e.epoch != run[0].epoch
            or e.control != run[0].control
            or (e.control and e.control_type != run[0].control_type)
        ):
            yield run
            run = []
        run.append(e)
    if run:
        yield run


def entry_batch(
    offset: int,
    epoch: int,
    control: bool,
    payloads: Sequence[bytes],
    now_ms: int,
    control_type: int = LEADER_CHANGE,
) -> bytes:
    key = control_key(control_type) if control else None
    return build_batch(
        [Record(key=key, value=p) for p in payloads],
        base_offset=offset,
        partition_leader_epoch=epoch,
        is_control=control,
        base_timestamp=now_ms,
    )


def encode_entries(entries: Sequence[LogEntry], now_ms: int) -> bytes:
    return b"".join(
        entry_batch(
            r[0].offset, r[0].epoch, r[0].control, [e.payload for e in r], now_ms, r[0].control_type
        )
        for r in runs(entries)
    )


def decode_entries(buf: Buffer, from_offset: int = 0, limit: int | None = None) -> list[LogEntry]:
    """The entries at or after ``from_offset`` in whole batches of ``buf`` (a partial trailing
    batch, as a size-limited read may end with, is ignored)."""
    out: list[LogEntry] = []
    for batch in scan_batches(buf, allow_partial_tail=True):
        if batch.last_offset < from_offset:
            continue
        for rec in iter_records(batch):
            if rec.offset < from_offset:
                continue
            if limit is not None and len(out) >= limit:
                return out
            out.append(
                LogEntry(
                    rec.offset,
                    batch.partition_leader_epoch,
                    bytes(rec.value or b""),
                    batch.is_control,
                    _control_type(rec.key) if batch.is_control else LEADER_CHANGE,
                )
            )
    return out


def _control_type(key: Buffer | None) -> int:
    if key is None or len(key) < _KEY.size:
        return LEADER_CHANGE  # as the one-voter quorum wrote them
    return int(_KEY.unpack_from(key, 0)[1])
