"""Control records: end-txn markers and MIRROR_PID_RESET (KIP-1279)."""

from __future__ import annotations

import io
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16

from protocol.errors import CorruptRecordError
from protocol.generated.mirror_pid_reset_record.v0.data import MirrorPidResetRecord
from protocol.records import (
    ControlRecord,
    ControlType,
    build_end_txn_marker,
    build_mirror_pid_reset,
    iter_records,
    mirror_pid_reset_value,
    parse_control_record,
    scan_batches,
)


def test_control_type_ids_match_kafka() -> None:
    assert [(t.name, t.value) for t in ControlType] == [
        ("ABORT", 0),
        ("COMMIT", 1),
        ("LEADER_CHANGE", 2),
        ("SNAPSHOT_HEADER", 3),
        ("SNAPSHOT_FOOTER", 4),
        ("KRAFT_VERSION", 5),
        ("KRAFT_VOTERS", 6),
        ("MIRROR_PID_RESET", 7),
    ]


@given(
    commit=st.booleans(),
    pid=st.integers(0, 2**63 - 1),
    epoch=st.integers(0, 2**15 - 1),
    coord=st.integers(-(2**31), 2**31 - 1),
    base_offset=st.integers(0, 2**40),
    ts=st.integers(0, 2**45),
)
def test_end_txn_marker(
    commit: bool, pid: int, epoch: int, coord: int, base_offset: int, ts: int
) -> None:
    raw = build_end_txn_marker(
        commit,
        producer_id=pid,
        producer_epoch=epoch,
        coordinator_epoch=coord,
        base_offset=base_offset,
        partition_leader_epoch=4,
        timestamp=ts,
    )
    (v,) = scan_batches(raw)
    assert v.is_control and v.is_transactional
    assert (v.producer_id, v.producer_epoch, v.base_sequence) == (pid, epoch, -1)
    assert (v.base_offset, v.last_offset, v.partition_leader_epoch) == (base_offset, base_offset, 4)
    assert v.base_timestamp == v.max_timestamp == ts
    (rec,) = iter_records(v)
    assert rec.key == struct.pack(">hh", 0, 1 if commit else 0)
    assert rec.value == struct.pack(">hi", 0, coord)
    parsed = parse_control_record(rec.key, rec.value)
    assert parsed == ControlRecord(
        ControlType.COMMIT if commit else ControlType.ABORT, 0, 0, coordinator_epoch=coord
    )


def test_mirror_pid_reset_value_layout() -> None:
    cid = "lkc-4bnZQ1WwT7mK9y2PgqA0Vw"
    value = mirror_pid_reset_value(cid)
    # int16 version 0, compact string (uvarint len+1), empty tagged-field section.
    assert value == b"\x00\x00" + bytes([len(cid) + 1]) + cid.encode() + b"\x00"
    long_id = "é" * 100  # 200 UTF-8 bytes: the compact length needs two varint bytes
    value = mirror_pid_reset_value(long_id)
    assert value[2:4] == bytes([201 & 0x7F | 0x80, 201 >> 7])
    assert parse_control_record(struct.pack(">hh", 0, 7), value).source_cluster_id == long_id


@given(cid=st.text(max_size=60), base_offset=st.integers(0, 2**40), ts=st.integers(0, 2**45))
def test_mirror_pid_reset_batch(cid: str, base_offset: int, ts: int) -> None:
    raw = build_mirror_pid_reset(
        cid, base_offset=base_offset, partition_leader_epoch=9, timestamp=ts
    )
    (v,) = scan_batches(raw)
    assert v.is_control and not v.is_transactional
    assert (v.producer_id, v.producer_epoch, v.base_sequence) == (-1, -1, -1)
    assert (v.base_offset, v.partition_leader_epoch, v.record_count) == (base_offset, 9, 1)
    assert v.compression == 0 and v.timestamp_type == 0
    assert v.base_timestamp == v.max_timestamp == ts
    (rec,) = iter_records(v)
    assert rec.key == b"\x00\x00\x00\x07"
    assert parse_control_record(rec.key, rec.value) == ControlRecord(
        ControlType.MIRROR_PID_RESET, 0, 0, source_cluster_id=cid
    )


def test_mirror_pid_reset_skips_tagged_fields_and_newer_versions() -> None:
    value = b"\x00\x01" + b"\x04abc" + b"\x02" + b"\x00\x02xy" + b"\x05\x00"
    parsed = parse_control_record(b"\x00\x00\x00\x07", value)
    assert parsed.value_version == 1 and parsed.source_cluster_id == "abc"


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        (None, b"", "at least 4 bytes, got null"),
        (b"\x00\x00\x00", b"", "at least 4 bytes, got 3"),
        (b"\xff\xff\x00\x01", b"\x00\x00\x00\x00\x00\x00", "negative version"),
        (b"\x00\x00\x00\x00", b"\xff\xff\x00\x00\x00\x00", "negative version"),
        (b"\x00\x00\x00\x07", None, "null value"),
        (b"\x00\x00\x00\x07", b"\x00", "needs at least"),
        (b"\x00\x00\x00\x07", b"\x00\x00\x00\x00", "is null"),
        (b"\x00\x00\x00\x07", b"\x00\x00\x05ab", "overruns"),
        (b"\x00\x00\x00\x07", b"\x00\x00\x02\xff\x00", "not UTF-8"),
        (b"\x00\x00\x00\x07", b"\x00\x00\x02a", "varint runs past"),
        (b"\x00\x00\x00\x07", b"\x00\x00\x02a\x01\x00\x09x", "tagged field overruns"),
    ],
)
def test_malformed_control_records(key: bytes | None, value: bytes | None, match: str) -> None:
    with pytest.raises(CorruptRecordError, match=match):
        parse_control_record(key, value)


def test_unknown_and_kraft_types_are_not_errors() -> None:
    assert parse_control_record(b"\x00\x00\x00\x63", None) == ControlRecord(99, 0)
    assert parse_control_record(b"\x00\x00\xff\xff", b"junk") == ControlRecord(-1, 0)
    kraft = parse_control_record(b"\x00\x00\x00\x02", b"\x00\x00whatever")
    assert kraft.type is ControlType.LEADER_CHANGE and kraft.value_version is None
    # A newer key version is read as v0, as Kafka does.
    assert parse_control_record(b"\x00\x03\x00\x01extra", b"\x00\x00\x00\x00\x00\x05").type == 1


@given(cid=st.text(max_size=40))
def test_mirror_pid_reset_value_matches_generated_schema_type(cid: str) -> None:
    """Our hand encoding agrees with kio's serializer over schemas/MirrorPidResetRecord.json."""
    generated = MirrorPidResetRecord
    out = io.BytesIO()
    entity_writer(generated)(out, generated(version=i16(0), source_cluster_id=cid))
    assert out.getvalue() == mirror_pid_reset_value(cid)
    decoded, size = entity_reader(generated)(mirror_pid_reset_value(cid), 0)
    assert (decoded.source_cluster_id, size) == (cid, len(out.getvalue()))
