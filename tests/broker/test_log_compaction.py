"""The compaction rules on bytes (broker.log.compaction): offset map, record and batch
retention, rebuilt batches, empty headers for producers' last batches."""

from __future__ import annotations

import pytest
from crc32c import crc32c

from broker.log.compaction import (
    AbortedIndex,
    FilterContext,
    FilterStats,
    TxnState,
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
    read_control_batch,
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


DAY = 86_400_000


def clean(
    data: bytes | bytearray,
    *,
    now: int = T0,
    retention: int = DAY,
    aborted: list[AbortedTxn] | None = None,
    last_data: dict[int, int] | None = None,
    last_epochs: dict[int, int] | None = None,
    start: int = 0,
    end: int = 1 << 40,
    upper: int = -1,
    txns: TxnState | None = None,
) -> tuple[bytearray, FilterStats]:
    index = AbortedIndex(aborted or [])
    omap = build_offset_map(scan_batches(data), start, end, index)
    stats = FilterStats()
    ctx = FilterContext(
        omap,
        index,
        last_data or {},
        end=end,
        now_ms=now,
        delete_retention_ms=retention,
        upper_bound=upper,
        last_marker_epochs=last_epochs or {},
    )
    state = txns if txns is not None else TxnState(aborted or [])
    return filter_segment(data, ctx, state, stats), stats


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


def test_tombstones_stamped_by_the_first_clean_and_dropped_after_the_horizon() -> None:
    """KIP-534: the first clean keeping a tombstone writes now + delete.retention.ms into its
    batch (the delete-horizon bit, the horizon as base timestamp); record timestamps stay."""
    data = kv(0, (b"a", b"1"), (b"a", None), (b"b", b"1")) + kv(3, (b"c", b"1"))
    first, _ = clean(data, now=T0 + 5)
    stamped, untouched = scan_batches(first)
    assert stamped.has_delete_horizon and stamped.base_timestamp == T0 + 5 + DAY
    assert stamped.crc_ok() and stamped.max_timestamp == T0 + 2
    assert stamped.last_offset == 2 and not untouched.has_delete_horizon
    assert bytes(untouched.raw) == kv(3, (b"c", b"1"))
    assert decoded(first) == [(1, b"a", None, T0 + 1), (2, b"b", b"1", T0 + 2), (3, b"c", b"1", T0)]
    # Cleaned again before the horizon: kept, the stamp not moved (copied byte for byte).
    again, stats = clean(first, now=T0 + DAY)
    assert again == first and stats.batches_copied == 2
    # At the horizon: gone. The other record keeps its timestamp; the bit stays.
    gone, _ = clean(first, now=T0 + 5 + DAY)
    assert decoded(gone) == [(2, b"b", b"1", T0 + 2), (3, b"c", b"1", T0)]
    assert next(scan_batches(gone)).has_delete_horizon


def test_batches_without_tombstones_are_not_stamped() -> None:
    data = kv(0, (b"a", b"1"), (b"a", b"2"))
    out, _ = clean(data)
    (batch,) = scan_batches(out)
    assert not batch.has_delete_horizon and batch.base_timestamp == T0


def test_records_past_the_mapped_end_are_all_kept() -> None:
    """The offset map filled up at offset 2: what follows was not looked at, so a delete
    there must not go (the value it deletes was kept)."""
    data = kv(0, (b"a", b"1"), (b"b", b"1")) + kv(2, (b"a", None), (None, b"x"), (b"b", b"2"))
    stamped, _ = clean(data, retention=0, end=2)  # the delete's horizon: T0, passed below
    out, _ = clean(stamped, now=T0 + 1, end=2)
    assert [(o, k, v) for o, k, v, _ in decoded(out)] == [
        (0, b"a", b"1"),
        (1, b"b", b"1"),
        (2, b"a", None),
        (3, None, b"x"),
        (4, b"b", b"2"),
    ]


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


def marker(commit: bool, pid: int, offset: int, epoch: int = 0) -> bytes:
    return build_end_txn_marker(
        commit,
        producer_id=pid,
        producer_epoch=epoch,
        coordinator_epoch=0,
        base_offset=offset,
        timestamp=T0,
    )


def controls(data: bytes | bytearray) -> list[tuple[int, bool]]:
    """(offset, stamped) of each control batch."""
    return [(b.base_offset, b.has_delete_horizon) for b in scan_batches(data) if b.is_control]


def test_markers_go_in_two_passes_once_their_transaction_has_no_data() -> None:
    """Kafka's CleanedTransactionMetadata + KIP-534: the clean that removes a transaction's
    last data keeps its marker; the next one finds the marker alone and stamps it; one after
    the horizon drops it. A marker whose transaction still has data stays."""
    txn = {"producer_epoch": 0, "base_sequence": 0, "is_transactional": True}
    aborted_txn = AbortedTxn(7, 1, 2, 3)
    data = (
        kv(0, (b"a", b"plain"))
        + kv(1, (b"a", b"aborted"), producer_id=7, **txn)  # type: ignore[arg-type]
        + marker(False, 7, 2)
        + kv(3, (b"b", b"committed"), producer_id=8, **txn)  # type: ignore[arg-type]
        + marker(True, 8, 4)
        + kv(5, (b"c", b"stays"), producer_id=9, **txn)  # type: ignore[arg-type]
        + marker(True, 9, 6)
        + kv(7, (b"b", b"later"))
    )
    state = TxnState([aborted_txn])
    first, _ = clean(data, aborted=[aborted_txn], txns=state)
    # The aborted record and the superseded committed one are gone; every marker stays, as
    # this clean still saw data of each transaction. The ABORT keeps its .txnindex entry.
    assert [(o, v) for o, _, v, _ in decoded(first) if o not in (2, 4, 6)] == [
        (0, b"plain"),
        (5, b"stays"),
        (7, b"later"),
    ]
    assert controls(first) == [(2, False), (4, False), (6, False)]
    assert state.take_kept() == [aborted_txn]

    state = TxnState([aborted_txn])
    second, _ = clean(first, now=T0 + 10, aborted=[aborted_txn], txns=state)
    assert controls(second) == [(2, True), (4, True), (6, False)]
    assert state.take_kept() == []  # no data left to hide from read_committed consumers
    stamped = [b for b in scan_batches(second) if b.has_delete_horizon]
    for batch in stamped:
        assert batch.base_timestamp == T0 + 10 + DAY and batch.crc_ok()
        assert read_control_batch(batch) == read_control_batch(
            next(b for b in scan_batches(data) if b.base_offset == batch.base_offset)
        )
        assert [r.timestamp for r in iter_records(batch)] == [T0]

    kept, _ = clean(second, now=T0 + 9 + DAY)
    assert kept == second
    gone, _ = clean(second, now=T0 + 10 + DAY)
    assert controls(gone) == [(6, False)]
    assert [o for o, _, _, _ in decoded(gone)] == [0, 5, 6, 7]


def test_the_batch_ending_the_cleaned_range_stays_as_an_empty_header() -> None:
    data = kv(0, (b"a", b"1")) + kv(1, (None, b"keyless"))
    dropped, _ = clean(data)
    assert [b.base_offset for b in scan_batches(dropped)] == [0]
    kept, stats = clean(data, upper=2)
    empty = list(scan_batches(kept))[1]
    assert (empty.base_offset, empty.last_offset, empty.record_count) == (1, 1, 0)
    assert stats.batches_emptied == 1


def test_the_last_marker_of_a_producer_without_data_stays_for_its_epoch() -> None:
    data = kv(0, (b"a", b"1")) + marker(True, 9, 1, epoch=2)
    stamped, _ = clean(data, retention=0)
    assert controls(stamped) == [(1, True)]
    gone, _ = clean(stamped, now=T0 + 1)
    assert controls(gone) == []
    kept, _ = clean(stamped, now=T0 + 1, last_epochs={9: 2})
    (_, empty) = scan_batches(kept)
    assert empty.is_control and empty.record_count == 0 and empty.producer_epoch == 2
    other_epoch, _ = clean(stamped, now=T0 + 1, last_epochs={9: 3})
    assert controls(other_epoch) == []
