"""PartitionLog: appends, reads, indexes, timestamps, epochs, truncation, retention."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker.log import (
    AppendOrigin,
    LogAppendError,
    ManualClock,
    OffsetOutOfRange,
    ProducerStateManager,
    UnexpectedAppendOffsetError,
)
from broker.log.errors import (
    CORRUPT_MESSAGE,
    INVALID_RECORD,
    INVALID_TIMESTAMP,
    MESSAGE_TOO_LARGE,
    RECORD_LIST_TOO_LARGE,
)
from protocol.records import Compression, build_end_txn_marker, iter_records

from .log_helpers import T0, batch, fill, open_log, small_config, views


@pytest.mark.parametrize(
    "codec",
    [Compression.NONE, Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD],
)
def test_append_read_round_trip(tmp_path: Path, codec: Compression) -> None:
    plog = open_log(tmp_path)
    originals = [batch(4, ts=T0 + i, compression=codec, tag=i) for i in range(5)]
    for i, raw in enumerate(originals):
        res = plog.append_as_leader(raw, 7, now_ms=T0 + i)
        assert (res.first_offset, res.last_offset, res.record_count) == (4 * i, 4 * i + 3, 4)
        assert res.log_append_time_ms == -1
    assert plog.log_end_offset == 20
    plog.high_watermark = plog.log_end_offset
    got = views(plog.read(0, 1 << 20).records)
    assert [v.base_offset for v in got] == [0, 4, 8, 12, 16]
    for v, raw in zip(got, originals, strict=True):
        assert v.crc_ok()
        assert v.partition_leader_epoch == 7
        assert v.compression == codec
        # Only base offset and epoch differ from what the producer sent.
        assert bytes(v.raw)[21:] == raw[21:]
        recs = list(iter_records(v))
        assert [r.offset for r in recs] == list(range(v.base_offset, v.base_offset + 4))
        assert recs[0].key == f"k{(v.base_offset // 4)}-0".encode()


def test_caller_buffer_is_not_modified(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    plog.append_as_leader(batch(), 0, now_ms=T0)
    raw = bytearray(batch())
    before = bytes(raw)
    plog.append_as_leader(raw, 3, now_ms=T0)
    assert bytes(raw) == before


def test_log_append_time_rewrites_timestamp_and_crc(tmp_path: Path) -> None:
    plog = open_log(tmp_path, small_config(**{"message.timestamp.type": "LogAppendTime"}))
    now = T0 + 5000
    res = plog.append_as_leader(batch(2, ts=T0), 1, now_ms=now)
    assert res.log_append_time_ms == now
    plog.high_watermark = plog.log_end_offset
    (v,) = views(plog.read(0, 10_000).records)
    assert v.timestamp_type == 1
    assert v.max_timestamp == now
    assert v.crc_ok()
    assert [r.timestamp for r in iter_records(v)] == [now, now]


def test_validation_errors(tmp_path: Path) -> None:
    plog = open_log(tmp_path, small_config(**{"max.message.bytes": "300"}))
    with pytest.raises(LogAppendError) as e:
        plog.append_as_leader(batch(1, value_size=400), 0, now_ms=T0)
    assert e.value.error_code == MESSAGE_TOO_LARGE
    bad = bytearray(batch(1))
    bad[-1] ^= 0xFF
    with pytest.raises(LogAppendError) as e:
        plog.append_as_leader(bad, 0, now_ms=T0)
    assert e.value.error_code == CORRUPT_MESSAGE
    with pytest.raises(LogAppendError) as e:
        plog.append_as_leader(batch(1)[:-3], 0, now_ms=T0)
    assert e.value.error_code == CORRUPT_MESSAGE
    with pytest.raises(LogAppendError) as e:
        plog.append_as_leader(batch(1, base_offset=5), 0, now_ms=T0)
    assert e.value.error_code == INVALID_RECORD
    with pytest.raises(LogAppendError) as e:
        plog.append_as_leader(batch(1) + batch(1), 0, now_ms=T0)
    assert e.value.error_code == INVALID_RECORD
    marker = build_end_txn_marker(True, producer_id=1, producer_epoch=0, coordinator_epoch=0)
    with pytest.raises(LogAppendError) as e:
        plog.append_as_leader(marker, 0, now_ms=T0)
    assert e.value.error_code == INVALID_RECORD
    # The coordinator may write markers and several batches at once.
    res = plog.append_as_leader(marker + marker, 0, now_ms=T0, origin=AppendOrigin.COORDINATOR)
    assert (res.first_offset, res.last_offset) == (0, 1)
    assert plog.log_end_offset == 2


def test_timestamp_and_list_size_checks(tmp_path: Path) -> None:
    plog = open_log(tmp_path, small_config(**{"message.timestamp.before.max.ms": "1000"}))
    with pytest.raises(LogAppendError) as e:
        plog.append_as_leader(batch(1, ts=T0 - 5000), 0, now_ms=T0)
    assert e.value.error_code == INVALID_TIMESTAMP
    with pytest.raises(LogAppendError) as e:  # default after.max.ms is one hour
        plog.append_as_leader(batch(1, ts=T0 + 2 * 3600_000), 0, now_ms=T0)
    assert e.value.error_code == INVALID_TIMESTAMP
    with pytest.raises(LogAppendError) as e:
        plog.append_as_leader(batch(1, ts=T0, log_append_time=True), 0, now_ms=T0)
    assert e.value.error_code == INVALID_TIMESTAMP
    with pytest.raises(LogAppendError) as e:
        plog.append_as_leader(batch(1, value_size=5000), 0, now_ms=T0)
    assert e.value.error_code == RECORD_LIST_TOO_LARGE
    assert plog.log_end_offset == 0


def test_index_lookups_after_many_rolls(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 120)
    assert len(plog.segments) > 5
    seg = plog.segments[1]
    assert seg.index.entries > 0
    # Every index entry points at the batch whose last offset it names.
    for i in range(seg.index.entries):
        off, pos = seg.index.entry(i)
        header = next(seg.headers(pos))
        assert header.last_offset == off
    # Inactive segments' indexes are trimmed to their entries; the active one's file is
    # created at its first flush, preallocated.
    assert os.path.getsize(seg.index.path) == seg.index.entries * 8
    active = plog.active_segment
    assert not active.index.path.exists()
    plog.flush()
    assert os.path.getsize(active.index.path) == 4096
    for offset in (0, 1, 57, 200, 359):
        (first,) = views(plog.read(offset, 1).records)
        assert first.base_offset <= offset <= first.last_offset


def test_read_semantics(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 10)  # offsets 0..29, 3 per batch
    plog.high_watermark = 15
    res = plog.read(4, 1 << 20)
    assert [v.base_offset for v in views(res.records)] == [3, 6, 9, 12]  # HW 15 excludes [15..17]
    assert (res.high_watermark, res.log_start_offset, res.log_end_offset) == (15, 0, 30)
    one = views(plog.read(0, 1).records)
    assert len(one) == 1  # KIP-74: the first batch even if bigger than max_bytes
    assert plog.read(0, 1, min_one_batch=False).records == []
    size = views(plog.read(0, 1).records)[0].size
    assert len(views(plog.read(0, 2 * size + 10).records)) == 2  # whole batches only
    assert len(views(plog.read(0, 1 << 20, upper_bound=30).records)) == 10
    assert plog.read(15, 100).records == []
    assert plog.read(30, 100, upper_bound=30).records == []
    with pytest.raises(OffsetOutOfRange):
        plog.read(31, 100)
    plog.high_watermark = 30
    plog.delete_records_before(9)
    with pytest.raises(OffsetOutOfRange) as e:
        plog.read(3, 100)
    assert (e.value.log_start, e.value.log_end) == (9, 30)


def test_restart_reload(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    plog = open_log(tmp_path, clock=clock)
    fill(plog, 60, epoch=2)
    plog.append_as_leader(batch(2, ts=T0 + 100), 3, now_ms=T0 + 100)
    leo = plog.log_end_offset
    segs = [s.base_offset for s in plog.segments]
    plog.close()
    again = open_log(tmp_path, clock=clock, clean_shutdown=True)
    assert again.log_end_offset == leo
    assert [s.base_offset for s in again.segments] == segs
    assert again.leader_epoch_cache.entries() == [(2, 0), (3, 180)]
    assert again.topic_id is not None
    assert again.recovery_point == leo
    assert [v.base_offset for v in views(again.read(177, 1 << 20).records)] == [177, 180]
    res = again.append_as_leader(batch(1), 3, now_ms=T0 + 200)
    assert res.first_offset == leo


def test_offset_for_timestamp_and_max_timestamp(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    for i in range(40):
        plog.append_as_leader(batch(3, ts=T0 + 10 * i, tag=i), 4, now_ms=T0 + 10 * i)
    # records have timestamps T0+10i, +1, +2
    assert plog.offset_for_timestamp(T0) == (0, T0, 4)
    assert plog.offset_for_timestamp(T0 + 101) == (31, T0 + 101, 4)
    assert plog.offset_for_timestamp(T0 + 103) == (33, T0 + 110, 4)
    assert plog.offset_for_timestamp(T0 + 10_000) is None
    assert plog.max_timestamp_offset() == (119, T0 + 392, 4)


def test_end_offset_for_epoch(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 2, epoch=1)  # 0..5
    fill(plog, 2, epoch=3)  # 6..11
    fill(plog, 1, epoch=5)  # 12..14
    assert plog.end_offset_for_epoch(1) == (1, 6)
    assert plog.end_offset_for_epoch(2) == (1, 6)
    assert plog.end_offset_for_epoch(3) == (3, 12)
    assert plog.end_offset_for_epoch(5) == (5, 15)
    assert plog.end_offset_for_epoch(0) == (0, 0)
    assert plog.end_offset_for_epoch(9) == (-1, -1)
    assert plog.end_offset_for_epoch(-1) == (-1, -1)


def test_truncate_to(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 40, epoch=1)
    fill(plog, 40, epoch=2)  # epoch 2 starts at 120
    assert len(plog.segments) > 3
    assert plog.truncate_to(99)
    # 99 is the first offset of a batch; everything from it on is gone.
    assert plog.log_end_offset == 99
    assert plog.high_watermark == 99
    assert plog.leader_epoch_cache.entries() == [(1, 0)]
    assert all(s.base_offset <= 99 for s in plog.segments)
    assert [v.last_offset for v in views(plog.read(96, 1 << 20).records)] == [98]
    res = plog.append_as_leader(batch(2), 6, now_ms=T0)
    assert res.first_offset == 99
    assert not plog.truncate_to(500)
    plog.truncate_fully_and_start_at(1000)
    assert (plog.log_start_offset, plog.log_end_offset, len(plog.segments)) == (1000, 1000, 1)
    assert plog.segments[0].base_offset == 1000
    assert plog.leader_epoch_cache.entries() == []


def test_delete_records(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    fill(plog, 60)
    seg_count = len(plog.segments)
    plog.high_watermark = 150
    with pytest.raises(OffsetOutOfRange):
        plog.delete_records_before(151)
    assert plog.delete_records_before(100) == 100
    assert plog.log_start_offset == 100
    assert len(plog.segments) < seg_count
    assert plog.segments[0].base_offset <= 100
    assert views(plog.read(100, 1).records)[0].base_offset == 99  # batch holding 100
    assert plog.delete_records_before(-1) == 150


def test_retention_by_size_and_time(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    plog = open_log(
        tmp_path, small_config(**{"retention.bytes": "10000", "file.delete.delay.ms": "0"}), clock
    )
    fill(plog, 150)
    total = plog.size_bytes
    assert total > 10000
    deleted = plog.delete_old_segments(T0)
    assert deleted > 0
    # Kafka deletes whole segments only while the log stays at or above retention.bytes.
    assert plog.size_bytes >= 10000
    assert plog.size_bytes - plog.segments[0].size < 10000
    assert plog.log_start_offset == plog.segments[0].base_offset
    assert not list(plog.dir.glob("*.deleted"))
    # Time: everything older than retention.ms goes, but never the active segment's data.
    plog.update_config(small_config(**{"retention.ms": "1000", "file.delete.delay.ms": "0"}))
    deleted = plog.delete_old_segments(T0 + 1_000_000)
    assert deleted > 0
    assert len(plog.segments) == 1
    assert plog.segments[0].size == 0
    assert plog.log_start_offset == plog.log_end_offset == 450


def test_retention_respects_high_watermark(tmp_path: Path) -> None:
    plog = open_log(tmp_path, small_config(**{"retention.ms": "0"}))
    fill(plog, 60)
    plog.high_watermark = 10
    plog.delete_old_segments(T0 + 10_000_000)
    assert plog.log_start_offset <= 10


def test_deleted_segments_wait_for_delay(tmp_path: Path) -> None:
    plog = open_log(
        tmp_path, small_config(**{"retention.ms": "0", "file.delete.delay.ms": "60000"})
    )
    fill(plog, 60)
    plog.delete_old_segments(T0 + 10_000)
    assert list(plog.dir.glob("*.log.deleted"))
    plog.purge_deleted_files(T0 + 10_000 + 60_000)
    assert not list(plog.dir.glob("*.deleted"))


def test_append_raw_with_gaps_and_epochs(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    raw = [
        batch(3, base_offset=0, partition_leader_epoch=1),
        batch(3, base_offset=10, partition_leader_epoch=1, tag=1),
        batch(3, base_offset=13, partition_leader_epoch=4, tag=2),
    ]
    res = plog.append_raw(b"".join(raw), now_ms=T0)
    assert (res.first_offset, res.last_offset, res.record_count) == (0, 15, 9)
    assert plog.log_end_offset == 16
    assert plog.leader_epoch_cache.entries() == [(1, 0), (4, 13)]
    with pytest.raises(UnexpectedAppendOffsetError):
        plog.append_raw(batch(1, base_offset=15), now_ms=T0)
    # A gap bigger than an int32 forces a new segment.
    far = 5_000_000_000
    plog.append_raw(batch(2, base_offset=far, partition_leader_epoch=4), now_ms=T0)
    assert plog.active_segment.base_offset == far
    plog.high_watermark = plog.log_end_offset
    stored = b"".join(bytes(b) for b in plog.read(0, 1 << 20).records)
    assert stored == b"".join(raw)  # byte for byte, offsets and epochs kept
    assert views(plog.read(5, 1 << 20).records)[0].base_offset == 10  # fetch inside a gap
    assert views(plog.read(16, 1 << 20).records)[0].base_offset == far
    plog.close()
    again = open_log(tmp_path)
    assert again.log_end_offset == far + 2


def test_producer_state_dedupes_a_retried_batch(tmp_path: Path) -> None:
    plog = open_log(tmp_path)
    psm = ProducerStateManager(plog.dir, ManualClock(T0))
    plog.load_producer_state(psm)
    idem = batch(2, producer_id=42, producer_epoch=0, base_sequence=0)
    plog.append_as_leader(idem, 0, now_ms=T0)
    entry = psm.last_entry(42)
    assert entry is not None and entry.last_seq == 1 and entry.last_data_offset == 1
    res = plog.append_as_leader(idem, 0, now_ms=T0)
    assert res.duplicate and (res.first_offset, res.last_offset) == (0, 1)
    assert plog.log_end_offset == 2


def test_flush_messages_moves_recovery_point(tmp_path: Path) -> None:
    plog = open_log(tmp_path, small_config(**{"flush.messages": "6"}))
    plog.append_as_leader(batch(3), 0, now_ms=T0)
    assert plog.recovery_point == 0
    plog.append_as_leader(batch(3), 0, now_ms=T0)
    assert plog.recovery_point == 6
    plog.append_as_leader(batch(3), 0, now_ms=T0)
    assert plog.recovery_point == 6 and plog.unflushed_messages == 3
    plog.flush()
    assert plog.recovery_point == 9


def test_roll_by_time_with_segment_ms(tmp_path: Path) -> None:
    plog = open_log(tmp_path, small_config(**{"segment.ms": "1000"}))
    plog.append_as_leader(batch(1, ts=T0), 0, now_ms=T0)
    plog.append_as_leader(batch(1, ts=T0 + 500), 0, now_ms=T0 + 500)
    assert len(plog.segments) == 1
    plog.append_as_leader(batch(1, ts=T0 + 1500), 0, now_ms=T0 + 1500)
    assert [s.base_offset for s in plog.segments] == [0, 2]
