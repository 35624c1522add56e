"""The compaction rules on bytes (broker.log.compaction): offset map, record and batch
retention, rebuilt batches, empty headers for producers' last batches."""

from __future__ import annotations

import pytest
from crc32c import crc32c

from broker.log.compaction import (
    AbortedIndex,
    FilterContext,
    FilterStats,
    build_offset_map,
    filter_segment,
)
from protocol.records import (
    BatchView,
    Compression,
    Record,
    build_batch,
    build_end_txn_marker,
    iter_records,
    scan_batches,
)
from protocol.records.batch import ATTRIBUTES_OFFSET, CRC_OFFSET, CRC_START, DELETE_HORIZON_MASK
from protocol.txn_index import AbortedTxn

from .log_helpers import T0


def kv(base: int, *pairs: tuple[bytes | None, bytes | None], **kw: object) -> bytes:
    recs = [Record(key=k, value=v, timestamp_delta=i) for i, (k, v) in enumerate(pairs)]
    return build_batch(recs, base_offset=base, base_timestamp=T0, **kw)  # type: ignore[arg-type]


def decoded(data: bytes | bytearray) -> list[tuple[int, bytes | None, bytes | None, int]]:
    return [
        (r.offset, r.key, r.value, r.timestamp) for b in scan_batches(data) for r in iter_records(b)
    ]


def clean(
    data: bytes,
    *,
    drop_tombstones: bool = False,
    aborted: list[AbortedTxn] | None = None,
    last_data: dict[int, int] | None = None,
    start: int = 0,
    end: int = 1 << 40,
) -> tuple[bytearray, FilterStats]:
    index = AbortedIndex(aborted or [])
    omap = build_offset_map(scan_batches(data), start, end, index)
    stats = FilterStats()
    ctx = FilterContext(omap, index, last_data or {})
    return filter_segment(data, ctx, drop_tombstones=drop_tombstones, stats=stats), stats


def test_offset_map_latest_offset_per_key_within_the_dirty_range() -> None:
    data = kv(0, (b"a", b"1"), (b"b", b"1")) + kv(2, (b"a", b"2"), (b"c", b"1"))
    assert build_offset_map(scan_batches(data), 0, 10, AbortedIndex([])) == {
        b"a": 2,
        b"b": 1,
        b"c": 3,
    }
    # Records outside [start, end) do not count.
    assert build_offset_map(scan_batches(data), 1, 3, AbortedIndex([])) == {b"b": 1, b"a": 2}


def test_latest_value_per_key_survives_at_its_offset() -> None:
    data = (
        kv(0, (b"a", b"1"), (b"b", b"1"), (b"a", b"2"))
        + kv(3, (b"b", b"2"), (b"c", b"1"))
        + kv(5, (b"a", b"3"))
    )
    out, stats = clean(data)
    assert decoded(out) == [(3, b"b", b"2", T0), (4, b"c", b"1", T0 + 1), (5, b"a", b"3", T0)]
    assert stats.batches_dropped == 1 and stats.batches_copied == 2
    assert stats.records_read == 6 and stats.records_kept == 3


def test_untouched_batches_are_byte_identical_and_rebuilt_ones_keep_header_fields() -> None:
    first = kv(
        10,
        (b"a", b"1"),
        (b"b", b"1"),
        (b"a", b"2"),
        producer_id=42,
        producer_epoch=3,
        base_sequence=7,
        partition_leader_epoch=5,
    )
    second = kv(13, (b"b", b"2"), (b"z", b"9"), partition_leader_epoch=6)
    out, _ = clean(first + second)
    batches = list(scan_batches(out))
    assert len(batches) == 2
    rebuilt, copied = batches
    assert bytes(copied.raw) == second
    orig = BatchView(first)
    assert rebuilt.base_offset == 10 and rebuilt.last_offset == orig.last_offset == 12
    assert (rebuilt.producer_id, rebuilt.producer_epoch, rebuilt.base_sequence) == (42, 3, 7)
    assert rebuilt.partition_leader_epoch == 5
    assert rebuilt.base_timestamp == orig.base_timestamp
    assert rebuilt.attributes == orig.attributes
    assert rebuilt.crc_ok() and rebuilt.record_count == 1
    assert [(r.offset, r.key, r.value, r.timestamp) for r in iter_records(rebuilt)] == [
        (12, b"a", b"2", T0 + 2)
    ]
    assert rebuilt.max_timestamp == T0 + 2


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.ZSTD, Compression.SNAPPY])
def test_rebuilt_compressed_batch_keeps_its_codec(codec: Compression) -> None:
    pairs = [(f"k{i % 3}".encode(), f"v{i}".encode() * 20) for i in range(9)]
    data = kv(0, *pairs, compression=codec, xerial_snappy=codec is Compression.SNAPPY)
    out, stats = clean(data)
    (batch,) = scan_batches(out)
    assert stats.batches_rebuilt == 1
    assert batch.compression == codec
    assert bytes(batch.records_payload[:8]).startswith(b"\x82SNAPPY") == (
        codec is Compression.SNAPPY
    )
    assert [(o, k, v) for o, k, v, _ in decoded(out)] == [
        (6, b"k0", b"v6" * 20),
        (7, b"k1", b"v7" * 20),
        (8, b"k2", b"v8" * 20),
    ]


def test_tombstones_stay_until_the_horizon_then_go() -> None:
    data = kv(0, (b"a", b"1"), (b"a", None), (b"b", b"1"))
    kept, _ = clean(data)
    assert [(o, k, v) for o, k, v, _ in decoded(kept)] == [(1, b"a", None), (2, b"b", b"1")]
    gone, _ = clean(data, drop_tombstones=True)
    assert [(o, k, v) for o, k, v, _ in decoded(gone)] == [(2, b"b", b"1")]


def test_null_keys_are_dropped_as_kafka_does() -> None:
    data = kv(0, (None, b"x"), (b"a", b"1"))
    out, _ = clean(data)
    assert [(o, k) for o, k, _, _ in decoded(out)] == [(1, b"a")]


def test_aborted_records_go_committed_stay_markers_stay_and_do_not_supersede() -> None:
    txn = {"producer_id": 7, "producer_epoch": 0, "is_transactional": True}
    data = (
        kv(0, (b"a", b"plain"))
        + kv(1, (b"a", b"aborted"), base_sequence=0, **txn)  # type: ignore[arg-type]
        + build_end_txn_marker(
            False, producer_id=7, producer_epoch=0, coordinator_epoch=0, base_offset=2
        )
        + kv(
            3,
            (b"b", b"committed"),
            producer_id=8,
            producer_epoch=0,
            base_sequence=0,
            is_transactional=True,
        )
        + build_end_txn_marker(
            True, producer_id=8, producer_epoch=0, coordinator_epoch=0, base_offset=4
        )
    )
    out, stats = clean(data, aborted=[AbortedTxn(7, 1, 2, 3)])
    assert [(o, k, v) for o, k, v, _ in decoded(out) if k in (b"a", b"b")] == [
        (0, b"a", b"plain"),
        (3, b"b", b"committed"),
    ]
    controls = [b for b in scan_batches(out) if b.is_control]
    assert [b.base_offset for b in controls] == [2, 4]
    assert stats.batches_dropped == 1


def test_emptied_last_batch_of_a_tracked_producer_keeps_an_empty_header() -> None:
    idem = kv(0, (b"a", b"1"), (b"a", b"2"), producer_id=5, producer_epoch=1, base_sequence=9)
    later = kv(2, (b"a", b"3"))
    dropped, _ = clean(idem + later)
    assert [b.base_offset for b in scan_batches(dropped)] == [2]
    kept, stats = clean(idem + later, last_data={5: 1})
    empty, _ = scan_batches(kept)
    assert stats.batches_emptied == 1
    assert empty.record_count == 0 and empty.crc_ok() and empty.size == 61
    assert (empty.base_offset, empty.last_offset) == (0, 1)
    assert (empty.producer_id, empty.producer_epoch, empty.base_sequence) == (5, 1, 9)
    assert empty.max_timestamp == BatchView(idem).max_timestamp
    assert empty.base_timestamp == -1 and empty.compression == 0


def test_delete_horizon_attribute_survives_a_rebuild() -> None:
    data = bytearray(kv(0, (b"a", b"1"), (b"a", b"2")))
    data[ATTRIBUTES_OFFSET + 1] |= DELETE_HORIZON_MASK
    data[CRC_OFFSET : CRC_OFFSET + 4] = crc32c(bytes(data[CRC_START:])).to_bytes(4, "big")
    out, _ = clean(bytes(data))
    (batch,) = scan_batches(out)
    assert batch.has_delete_horizon and batch.crc_ok() and batch.record_count == 1
