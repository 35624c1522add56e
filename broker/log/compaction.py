"""Log compaction on bytes: the offset map and the per-batch filter (Kafka's Cleaner,
``CleanedTransactionMetadata`` and ``MemoryRecords.filterTo`` semantics). Pure: no files, no
asyncio; the cleaner feeds it the bytes of closed segments from a worker process.

Rules (Kafka 4.x):

* The offset map holds, for every key written in the dirty range ``[start, end)``, the offset
  of its latest record. Control batches and batches of aborted transactions do not count.
* A data record at or past ``end`` (the offset map filled up before it) is kept. Below it a
  record survives if it has a key and its offset is >= the map's offset for that key (or the
  key is absent). A record without a key is dropped, as Kafka's cleaner does (the produce
  path already refuses such records for compacted topics).
* Delete horizon (KIP-534), for tombstones and transaction markers alike: the first clean that
  keeps a batch holding a tombstone, or a marker whose transaction has no data left, stamps it
  with ``now + delete.retention.ms`` (the batch's delete-horizon attribute bit, the horizon as
  its base timestamp, the records' timestamp deltas shifted so their timestamps stay). A later
  clean at or after the horizon drops the tombstone, or the marker.
* Transactions are followed through the cleaned range in offset order (``TxnState``): a batch
  of an aborted transaction loses all its records; an ABORT marker stays while batches of its
  transaction were seen in this clean (and only then keeps its ``.txnindex`` entry), a COMMIT
  marker while batches of its transaction were seen since the producer's previous marker.
  So a marker goes in two passes: one clean drops the last data of its transaction, a later
  one finds it alone and stamps it, one after its horizon drops it.
* A batch whose records all survive, and that needs no stamp, is copied byte for byte.
  Otherwise it is rebuilt with the same base offset, last offset delta (so the producer's last
  sequence stays derivable), producer id/epoch, base sequence, partition leader epoch,
  attributes and codec; each survivor keeps its offset delta and its timestamp.
* An emptied batch is dropped, except (Kafka's ``RETAIN_EMPTY``) the last data batch of a
  producer the partition still tracks (or its last marker, when it has no data), so that a
  producer-state rebuild from the log still finds its last sequence and epoch, and the batch
  that ends the cleaned range (its last offset stays known): those stay as a header without
  records.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

from crc32c import crc32c

from protocol.records import (
    BatchView,
    ControlType,
    DecodedRecord,
    Record,
    build_batch,
    iter_records,
    read_control_batch,
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
    """What the filter needs besides the bytes (the same for every segment of one clean)."""

    offset_map: Mapping[bytes, int]
    aborted: AbortedIndex
    # producer id -> offset of the last data batch the producer state holds for it
    last_data_offsets: Mapping[int, int]
    # Records from here on were not mapped (the map filled up): all kept, as Kafka keeps
    # records past its map's latest offset.
    end: int = 1 << 62
    now_ms: int = 0
    delete_retention_ms: int = 86_400_000
    # The end of the cleaned range (Kafka's upper bound of the cleaning round): the batch
    # ending there stays, if only as an empty header.
    upper_bound: int = -1
    # producer id -> epoch, for tracked producers without a data batch (their last record is
    # a marker: it stays, if only as an empty header, for the epoch it carries)
    last_marker_epochs: Mapping[int, int] = field(default_factory=dict)


class TxnState:
    """Kafka's CleanedTransactionMetadata: the transactions the cleaner walks through, in
    offset order over every group of one clean. Says which data batches are aborted, which
    markers may go, and which ``.txnindex`` entries the cleaned segments keep."""

    def __init__(self, aborted: Iterable[AbortedTxn]) -> None:
        self._pending = sorted(aborted, key=lambda t: t.first_offset)
        self._next = 0
        self._aborted: dict[int, tuple[AbortedTxn, list[bool]]] = {}  # pid -> (txn, [seen])
        self._committed: set[int] = set()  # pids with batches seen since their last marker
        self._kept: list[AbortedTxn] = []

    def _advance(self, offset: int) -> None:
        pending = self._pending
        while self._next < len(pending) and pending[self._next].first_offset <= offset:
            txn = pending[self._next]
            self._next += 1
            self._aborted.setdefault(txn.producer_id, (txn, [False]))

    def on_data(self, batch: BatchView) -> bool:
        """A data batch: True when it belongs to an aborted transaction."""
        self._advance(batch.last_offset)
        if not batch.is_transactional:
            return False
        open_aborted = self._aborted.get(batch.producer_id)
        if open_aborted is not None:
            open_aborted[1][0] = True
            return True
        self._committed.add(batch.producer_id)
        return False

    def on_marker(self, batch: BatchView) -> bool:
        """A control batch: True when its transaction has no data left (it may go once its
        delete horizon passed)."""
        self._advance(batch.last_offset)
        record = read_control_batch(batch)
        if record is None:
            return True  # emptied by an earlier clean
        pid = batch.producer_id
        if record.type == ControlType.ABORT:
            open_aborted = self._aborted.pop(pid, None)
            if open_aborted is not None and open_aborted[1][0]:
                self._kept.append(open_aborted[0])
                return False
            return True
        if record.type == ControlType.COMMIT:
            if pid in self._committed:
                self._committed.discard(pid)
                return False
            return True
        return False

    def take_kept(self) -> list[AbortedTxn]:
        """The aborted transactions whose markers stayed since the last call, for the
        ``.txnindex`` of the segment just written."""
        kept, self._kept = self._kept, []
        return kept


def filter_batches(
    batches: Iterable[BatchView],
    ctx: FilterContext,
    txns: TxnState,
    stats: FilterStats | None = None,
) -> Iterator[Buffer]:
    """The cleaned form of each batch that stays (see the module docstring for the rules)."""
    st = stats if stats is not None else FilterStats()
    for batch in batches:
        st.batches_read += 1
        st.bytes_read += batch.size
        kept = _filter_batch(batch, ctx, txns, st)
        if kept is not None:
            st.bytes_written += len(kept) if not isinstance(kept, memoryview) else kept.nbytes
            yield kept


def filter_segment(
    data: Buffer,
    ctx: FilterContext,
    txns: TxnState | None = None,
    stats: FilterStats | None = None,
) -> bytearray:
    """The cleaned bytes of a whole segment held in memory (CRCs checked)."""
    out = bytearray()
    state = txns if txns is not None else TxnState([])
    for kept in filter_batches(scan_batches(data), ctx, state, stats):
        out += kept
    return out


def _filter_batch(
    batch: BatchView, ctx: FilterContext, txns: TxnState, st: FilterStats
) -> Buffer | None:
    count = max(batch.record_count, 0)
    st.records_read += count
    horizon_passed = batch.has_delete_horizon and batch.base_timestamp <= ctx.now_ms
    survivors: list[DecodedRecord] = []
    stampable = False  # holds a tombstone, or is a marker whose transaction has no data left
    if batch.is_control:
        alone = txns.on_marker(batch)
        discard = alone and horizon_passed
        stampable = alone
        if not discard:
            survivors = list(iter_records(batch))
    else:
        discard = txns.on_data(batch)
        if not discard:
            offset_map = ctx.offset_map
            for rec in iter_records(batch):
                if rec.offset < ctx.end:
                    if rec.key is None or rec.offset < offset_map.get(rec.key, -1):
                        continue
                    if rec.value is None and horizon_passed:
                        continue
                survivors.append(rec)
                stampable = stampable or rec.value is None
    st.records_kept += len(survivors)
    if survivors:
        stamp = stampable and not batch.has_delete_horizon
        if len(survivors) == count and not stamp:
            st.batches_copied += 1
            return batch.raw
        st.batches_rebuilt += 1
        if stamp:
            return _rebuild(batch, survivors, ctx.now_ms + ctx.delete_retention_ms)
        return _rebuild(
            batch, survivors, batch.base_timestamp if batch.has_delete_horizon else None
        )
    if _retain_empty(batch, ctx):
        st.batches_emptied += 1
        return empty_batch_like(batch)
    st.batches_dropped += 1
    return None


def _retain_empty(batch: BatchView, ctx: FilterContext) -> bool:
    """Kafka's RETAIN_EMPTY: a producer's last batch (its last data, or its last marker when it
    has none), and the batch that ends the cleaned range."""
    pid = batch.producer_id
    if pid >= 0:
        last_data = ctx.last_data_offsets.get(pid)
        if last_data is not None:
            if batch.last_offset == last_data:
                return True
        elif batch.is_control and ctx.last_marker_epochs.get(pid) == batch.producer_epoch:
            return True
    return batch.next_offset == ctx.upper_bound


def _rebuild(batch: BatchView, survivors: list[DecodedRecord], horizon: int | None) -> bytes:
    """``survivors`` in a batch like ``batch``; with ``horizon``, stamped with it (the
    delete-horizon bit and the base timestamp), each record keeping its timestamp."""
    base_ts = batch.base_timestamp if horizon is None else horizon
    shift = batch.base_timestamp - base_ts
    records = []
    max_ts = _NO_TIMESTAMP
    for rec in survivors:
        records.append(
            Record(
                key=rec.key,
                value=rec.value,
                headers=rec.headers,
                timestamp_delta=rec.timestamp_delta + shift,
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
        is_control=batch.is_control,
        log_append_time=append_time,
        base_timestamp=base_ts,
        # LogAppendTime: the append time lives there; CreateTime: the survivors' maximum.
        max_timestamp=batch.max_timestamp if append_time else max_ts,
        last_offset_delta=batch.last_offset_delta,
        xerial_snappy=xerial,
    )
    if horizon is not None:
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
