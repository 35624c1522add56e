"""build_batch -> scan_batches -> iter_records round trips, header fields and patchers."""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from protocol.records import (
    HEADER_SIZE,
    BatchView,
    Compression,
    Record,
    build_batch,
    iter_records,
    scan_batches,
    set_base_offset,
    set_partition_leader_epoch,
)
from protocol.records.batch import CRC_OFFSET
from tests.protocol.records_strategies import (
    any_records,
    base_offsets,
    codecs,
    expected_decoded,
    int16,
    int32,
    int64,
    timestamps,
)

fast = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@fast
@given(
    records=any_records,
    codec=codecs,
    base_offset=base_offsets,
    leader_epoch=int32,
    producer_id=int64,
    producer_epoch=int16,
    base_sequence=int32,
    transactional=st.booleans(),
    control=st.booleans(),
    base_ts=timestamps,
    xerial=st.booleans(),
)
def test_build_scan_iterate_round_trip(
    records: list[Record],
    codec: Compression,
    base_offset: int,
    leader_epoch: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    transactional: bool,
    control: bool,
    base_ts: int,
    xerial: bool,
) -> None:
    raw = build_batch(
        records,
        base_offset=base_offset,
        partition_leader_epoch=leader_epoch,
        compression=codec,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        is_transactional=transactional,
        is_control=control,
        base_timestamp=base_ts,
        xerial_snappy=xerial,
    )
    views = list(scan_batches(raw))
    assert len(views) == 1
    v = views[0]
    assert v.size == len(raw) and v.crc_ok()
    assert v.magic == 2
    assert v.base_offset == base_offset
    assert v.partition_leader_epoch == leader_epoch
    assert v.compression == codec
    assert v.timestamp_type == 0
    assert v.is_transactional is transactional
    assert v.is_control is control
    assert v.has_delete_horizon is False
    assert v.producer_id == producer_id
    assert v.producer_epoch == producer_epoch
    assert v.base_sequence == base_sequence
    assert v.record_count == len(records)
    assert v.base_timestamp == base_ts
    assert v.max_timestamp == base_ts + max(r.timestamp_delta for r in records)
    deltas = [i if r.offset_delta is None else r.offset_delta for i, r in enumerate(records)]
    assert v.last_offset_delta == deltas[-1]
    assert v.last_offset == base_offset + deltas[-1]
    assert v.next_offset == v.last_offset + 1
    assert bytes(v.raw) == raw
    assert bytes(v.records_payload) == raw[HEADER_SIZE:]
    assert list(iter_records(v)) == expected_decoded(records, base_offset, base_ts)


@fast
@given(records=any_records, codec=codecs, append_time=timestamps)
def test_log_append_time_reports_max_timestamp(
    records: list[Record], codec: Compression, append_time: int
) -> None:
    raw = build_batch(
        records,
        compression=codec,
        log_append_time=True,
        base_timestamp=1000,
        max_timestamp=append_time,
    )
    v = next(scan_batches(raw))
    assert v.timestamp_type == 1
    assert v.max_timestamp == append_time
    assert list(iter_records(v)) == expected_decoded(records, 0, 1000, append_time)


@fast
@given(
    records=any_records,
    codec=codecs,
    new_offset=int64,
    new_epoch=int32,
    prefix=st.binary(max_size=7),
)
def test_patchers_keep_crc_and_touch_only_their_field(
    records: list[Record], codec: Compression, new_offset: int, new_epoch: int, prefix: bytes
) -> None:
    raw = build_batch(records, compression=codec, base_offset=5, partition_leader_epoch=3)
    buf = bytearray(prefix + raw)
    pos = len(prefix)
    before = BatchView(bytes(buf), pos)
    set_base_offset(buf, pos, new_offset)
    set_partition_leader_epoch(memoryview(buf), pos, new_epoch)
    after = BatchView(buf, pos)
    assert after.base_offset == new_offset
    assert after.partition_leader_epoch == new_epoch
    assert after.crc_ok() and after.crc == before.crc
    # Only bytes 0..8 and 12..16 of the batch may differ.
    for i in range(len(raw)):
        if not (0 <= i < 8 or 12 <= i < 16):
            assert buf[pos + i] == raw[i], i
    assert buf[:pos] == prefix
    assert next(iter(scan_batches(buf, pos))).last_offset == new_offset + after.last_offset_delta


def test_patchers_refuse_immutable_buffers() -> None:
    raw = build_batch([Record(value=b"x")])
    with pytest.raises(TypeError):
        set_base_offset(raw, 0, 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        set_partition_leader_epoch(memoryview(raw), 0, 1)


def test_view_over_several_batches_at_positions() -> None:
    a = build_batch([Record(value=b"a")], base_offset=0, base_timestamp=1)
    b = build_batch([Record(value=b"b"), Record(value=b"c")], base_offset=1, base_timestamp=2)
    buf = memoryview(a + b)
    views = list(scan_batches(buf))
    assert [(v.position, v.base_offset, v.last_offset) for v in views] == [
        (0, 0, 0),
        (len(a), 1, 2),
    ]
    assert [r.value for v in views for r in iter_records(v)] == [b"a", b"b", b"c"]


def test_known_bytes_of_a_simple_batch() -> None:
    """Pin the exact encoding of one small batch (checked by hand against the spec)."""
    raw = build_batch(
        [Record(key=b"k", value=b"v", headers=(("h", b"1"),))],
        base_offset=7,
        base_timestamp=1_700_000_000_000,
    )
    record = bytes([0, 0, 0, 2]) + b"k" + bytes([2]) + b"v" + bytes([2, 2]) + b"h" + bytes([2])
    record += b"1"
    assert raw[HEADER_SIZE:] == bytes([2 * len(record)]) + record
    fields = struct.unpack(">qiibIhiqqqhii", raw[:HEADER_SIZE])
    assert fields == (
        7,
        len(raw) - 12,
        -1,
        2,
        fields[4],
        0,
        0,
        1_700_000_000_000,
        1_700_000_000_000,
        -1,
        -1,
        -1,
        1,
    )
    assert struct.unpack_from(">I", raw, CRC_OFFSET)[0] == BatchView(raw).compute_crc()


def test_builder_defaults_and_errors() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        build_batch([])
    with pytest.raises(ValueError, match="out of range"):
        build_batch([Record()], producer_epoch=2**15)
    raw = build_batch([Record(timestamp_delta=5), Record(timestamp_delta=2)])
    v = BatchView(raw)
    assert v.max_timestamp == v.base_timestamp + 5
    assert v.base_timestamp > 1_600_000_000_000  # defaults to now
