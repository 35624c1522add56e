"""Log compaction on bytes: the offset map and the per-batch filter (Kafka's Cleaner and
``MemoryRecords.filterTo`` semantics). Pure: no files, no asyncio; the cleaner feeds it the
bytes of closed segments from a worker thread.

Rules (Kafka 4.x):

* The offset map holds, for every key written in the dirty range ``[start, end)``, the offset
  of its latest record. Control batches and batches of aborted transactions do not count.
* A data record survives if it has a key and its offset is >= the map's offset for that key
  (or the key is absent). A record without a key is dropped, as Kafka's cleaner does (the
  produce path already refuses such records for compacted topics; they can only come from
  data written before the topic became compacted).
* A tombstone (null value) is dropped once ``drop_tombstones`` is set for its segment: the
  cleaner sets it when the segment's largest timestamp is older than now - delete.retention.ms
  (the pre-KIP-534 horizon; the delete-horizon batch attribute is not written).
* A batch of an aborted transaction loses all its records. COMMIT/ABORT markers are kept.
* A batch whose records all survive is copied byte for byte. Otherwise it is rebuilt with
  the same base offset, last offset delta (so the producer's last sequence stays derivable),
  producer id/epoch, base sequence, partition leader epoch, attributes, base timestamp and
  codec; each survivor keeps its offset and timestamp deltas.
* An emptied batch is dropped, except the last data batch of a producer the partition still
  tracks: then an empty header (no records) is kept, as Kafka's ``RETAIN_EMPTY``, so that a
  producer-state rebuild from the log still finds that producer's last sequence.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final

from crc32c import crc32c

from protocol.records import (
    BatchView,
    DecodedRecord,
    Record,
    build_batch,
    iter_records,
    scan_batches,
)
from protocol.records.batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC_OFFSET,
    CRC_START,
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC_V2,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
)
from protocol.records.codecs import XERIAL_MAGIC, Compression
from protocol.txn_index import AbortedTxn

Buffer = bytes | bytearray | memoryview

_I16: Final = struct.Struct(">h")
_U32: Final = struct.Struct(">I")
_NO_TIMESTAMP: Final = -1


class AbortedIndex:
    """Which transactional batches belong to an aborted transaction (from .txnindex entries)."""

    def __init__(self, txns: Iterable[AbortedTxn]) -> None:
        self._by_pid: dict[int, list[tuple[int, int]]] = {}
        for txn in txns:
            self._by_pid.setdefault(txn.producer_id, []).append((txn.first_offset, txn.last_offset))

    def __bool__(self) -> bool:
        return bool(self._by_pid)

    def is_aborted(self, batch: BatchView) -> bool:
        if not batch.is_transactional or batch.is_control:
            return False
        ranges = self._by_pid.get(batch.producer_id)
        if not ranges:
            return False
        base = batch.base_offset
        return any(first <= base <= last for first, last in ranges)


def build_offset_map(
    batches: Iterable[BatchView],
    start: int,
    end: int,
    aborted: AbortedIndex,
    into: dict[bytes, int] | None = None,
) -> dict[bytes, int]:
    """key -> offset of its latest record in ``[start, end)`` over ``batches`` (in offset
    order; feed several segments into one map with ``into``)."""
    out: dict[bytes, int] = {} if into is None else into
    for batch in batches:
        if batch.last_offset < start or batch.base_offset >= end:
            continue
        if batch.is_control or aborted.is_aborted(batch):
            continue
        for rec in iter_records(batch):
            if rec.key is not None and start <= rec.offset < end:
                out[rec.key] = rec.offset
    return out


@dataclass
class FilterStats:
    batches_read: int = 0
    batches_copied: int = 0
    batches_rebuilt: int = 0
    batches_emptied: int = 0  # kept as an empty header
    batches_dropped: int = 0
    records_read: int = 0
    records_kept: int = 0
    bytes_read: int = 0
    bytes_written: int = 0

    def add(self, other: FilterStats) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass(frozen=True, slots=True)
class FilterContext:
    """What the filter needs besides the bytes (the same for every segment of one pass)."""

    offset_map: Mapping[bytes, int]
    aborted: AbortedIndex
    # producer id -> offset of the last data batch the producer state holds for it
    last_data_offsets: Mapping[int, int]


def filter_batches(
    batches: Iterable[BatchView],
    ctx: FilterContext,
    *,
    drop_tombstones: bool,
    stats: FilterStats | None = None,
) -> Iterator[Buffer]:
    """The cleaned form of each batch that stays (see the module docstring for the rules)."""
    st = stats if stats is not None else FilterStats()
    for batch in batches:
        st.batches_read += 1
        st.bytes_read += batch.size
        kept = _filter_batch(batch, ctx, drop_tombstones, st)
        if kept is not None:
            st.bytes_written += len(kept) if not isinstance(kept, memoryview) else kept.nbytes
            yield kept


def filter_segment(
    data: Buffer,
    ctx: FilterContext,
    *,
    drop_tombstones: bool,
    stats: FilterStats | None = None,
) -> bytearray:
    """The cleaned bytes of a whole segment held in memory (CRCs checked)."""
    out = bytearray()
    for kept in filter_batches(
        scan_batches(data), ctx, drop_tombstones=drop_tombstones, stats=stats
    ):
        out += kept
    return out


def _filter_batch(
    batch: BatchView, ctx: FilterContext, drop_tombstones: bool, st: FilterStats
) -> Buffer | None:
    count = batch.record_count
    st.records_read += max(count, 0)
    if batch.is_control:
        st.batches_copied += 1
        st.records_kept += max(count, 0)
        return batch.raw
    survivors: list[DecodedRecord] = []
    if not ctx.aborted.is_aborted(batch):
        offset_map = ctx.offset_map
        for rec in iter_records(batch):
            if rec.key is None:
                continue
            if rec.offset < offset_map.get(rec.key, -1):
                continue
            if rec.value is None and drop_tombstones:
                continue
            survivors.append(rec)
    st.records_kept += len(survivors)
    if len(survivors) == count:
        st.batches_copied += 1
        return batch.raw
    if survivors:
        st.batches_rebuilt += 1
        return _rebuild(batch, survivors)
    pid = batch.producer_id
    if pid >= 0 and ctx.last_data_offsets.get(pid) == batch.last_offset:
        st.batches_emptied += 1
        return empty_batch_like(batch)
    st.batches_dropped += 1
    return None


def _rebuild(batch: BatchView, survivors: list[DecodedRecord]) -> bytes:
    records = []
    max_ts = _NO_TIMESTAMP
    for rec in survivors:
        records.append(
            Record(
                key=rec.key,
                value=rec.value,
                headers=rec.headers,
                timestamp_delta=rec.timestamp_delta,
                offset_delta=rec.offset_delta,
            )
        )
        max_ts = max(max_ts, batch.base_timestamp + rec.timestamp_delta)
    append_time = batch.timestamp_type == 1
    codec = Compression(batch.compression)
    xerial = codec is Compression.SNAPPY and bytes(batch.records_payload[:8]) == XERIAL_MAGIC
    out = build_batch(
        records,
        base_offset=batch.base_offset,
        partition_leader_epoch=batch.partition_leader_epoch,
        compression=codec,
        producer_id=batch.producer_id,
        producer_epoch=batch.producer_epoch,
        base_sequence=batch.base_sequence,
        is_transactional=batch.is_transactional,
        log_append_time=append_time,
        base_timestamp=batch.base_timestamp,
        # LogAppendTime: the append time lives there; CreateTime: the survivors' maximum.
        max_timestamp=batch.max_timestamp if append_time else max_ts,
        last_offset_delta=batch.last_offset_delta,
        xerial_snappy=xerial,
    )
    if batch.has_delete_horizon:
        return _with_attributes(
            out, _I16.unpack_from(out, ATTRIBUTES_OFFSET)[0] | DELETE_HORIZON_MASK
        )
    return out


def _with_attributes(data: bytes, attributes: int) -> bytes:
    buf = bytearray(data)
    _I16.pack_into(buf, ATTRIBUTES_OFFSET, attributes)
    _U32.pack_into(buf, CRC_OFFSET, crc32c(memoryview(buf)[CRC_START:]))
    return bytes(buf)


def empty_batch_like(batch: BatchView) -> bytes:
    """A batch header without records keeping ``batch``'s offsets, producer fields, epoch,
    max timestamp and flags (uncompressed, base timestamp -1), as Kafka writes one."""
    attrs = batch.attributes & ~COMPRESSION_MASK & ~DELETE_HORIZON_MASK
    attrs &= TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK
    buf = bytearray(HEADER_SIZE)
    HEADER_STRUCT.pack_into(
        buf,
        0,
        batch.base_offset,
        HEADER_SIZE - LOG_OVERHEAD,
        batch.partition_leader_epoch,
        MAGIC_V2,
        0,
        attrs,
        batch.last_offset_delta,
        _NO_TIMESTAMP,
        batch.max_timestamp,
        batch.producer_id,
        batch.producer_epoch,
        batch.base_sequence,
        0,
    )
    _U32.pack_into(buf, CRC_OFFSET, crc32c(memoryview(buf)[CRC_START:]))
    return bytes(buf)
