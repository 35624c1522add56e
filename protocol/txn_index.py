"""The aborted-transaction index (``<base offset>.txnindex``) in Kafka's byte layout.

A file is a plain run of fixed-size entries, no header, one per transaction aborted by an ABORT
marker written into that segment (version 0, big-endian, 34 bytes each):

    int16 version (0)
    int64 producer id
    int64 first offset        the transaction's first data offset
    int64 last offset         the ABORT marker's offset
    int64 last stable offset  the partition's LSO right after the marker: the first offset of
                              the earliest transaction still open, else last offset + 1

Entries are in marker order, so ``last_offset`` increases through a file. Pure codec: the log
layer owns the files, and the audit and dump tools read them through this module.
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

from protocol.errors import CorruptRecordError

TXN_INDEX_VERSION: Final = 0
_ENTRY: Final = struct.Struct(">hqqqq")
ENTRY_SIZE: Final = _ENTRY.size  # 34

Buffer = bytes | bytearray | memoryview


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = TXN_INDEX_VERSION


def encode_entry(txn: AbortedTxn) -> bytes:
    return _ENTRY.pack(
        txn.version, txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset
    )


def encode_entries(txns: list[AbortedTxn]) -> bytes:
    return b"".join(encode_entry(t) for t in txns)


def decode_entry(buf: Buffer, pos: int = 0) -> AbortedTxn:
    """The entry at byte ``pos``; CorruptRecordError for an unknown version."""
    version, producer_id, first, last, lso = _ENTRY.unpack_from(buf, pos)
    if version != TXN_INDEX_VERSION:
        raise CorruptRecordError(
            f"transaction index entry at byte {pos} has unknown version {version}", pos
        )
    return AbortedTxn(producer_id, first, last, lso, version)


def decode_entries(buf: Buffer) -> tuple[list[AbortedTxn], int]:
    """Every whole entry of ``buf``, and the count of trailing bytes that form no entry
    (a torn write; Kafka's reader ignores them too)."""
    size = len(buf) if not isinstance(buf, memoryview) else buf.nbytes
    whole = size - size % ENTRY_SIZE
    return [decode_entry(buf, pos) for pos in range(0, whole, ENTRY_SIZE)], size - whole
