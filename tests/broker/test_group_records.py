import uuid

import pytest

from broker.coordinator.group import records as rec
from broker.coordinator.runtime import java_string_hash, partition_for


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("hello", 99162322),
        ("polygenelubricants", -(2**31)),  # Java's Integer.MIN_VALUE
        ("\U0001f600", 0xD83D * 31 + 0xDE00),  # hashed as two UTF-16 code units
        ("é", 233),
    ],
)
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_partition_for_matches_kafka_utils_abs() -> None:
    assert partition_for("polygenelubricants", 50) == 0  # abs(MIN_VALUE) is 0 in Utils.abs
    assert partition_for("hello", 50) == 99162322 % 50
    h = java_string_hash("my-group")
    assert partition_for("my-group", 7) == abs(h) % 7


def test_offset_record_bytes() -> None:
    key = rec.offset_key("g", "t", 3)
    # int16 type 1, then string "g", string "t", int32 3 (non-flexible)
    assert key == b"\x00\x01" + b"\x00\x01g" + b"\x00\x01t" + b"\x00\x00\x00\x03"
    value = rec.offset_value(rec.OffsetValue(5, 2, "m", 7))
    # v4 (flexible): compact string metadata and an empty tag buffer
    assert value == (
        b"\x00\x04"
        + (5).to_bytes(8, "big")
        + (2).to_bytes(4, "big")
        + b"\x02m"
        + (7).to_bytes(8, "big")
        + b"\x00"
    )
    assert rec.decode_key(key) == rec.OffsetKey("g", "t", 3)
    assert rec.decode_offset_value(value) == rec.OffsetValue(5, 2, "m", 7)


def test_offset_value_v1_when_expiring_and_tagged_topic_id() -> None:
    v1 = rec.offset_value(rec.OffsetValue(5, -1, "", 7, expire_timestamp=99))
    assert v1[:2] == b"\x00\x01"
    assert rec.decode_offset_value(v1) == rec.OffsetValue(5, -1, "", 7, 99)
    tid = uuid.uuid4()
    v4 = rec.offset_value(rec.OffsetValue(5, 1, "x", 7, topic_id=tid))
    assert rec.decode_offset_value(v4).topic_id == tid


def test_legacy_key_type_zero_reads_as_offset_key() -> None:
    key = b"\x00\x00" + rec.offset_key("g", "t", 1)[2:]
    assert rec.decode_key(key) == rec.OffsetKey("g", "t", 1)


def test_group_record_round_trip_v3() -> None:
    member = rec.MemberValue("m1", "i1", "c", "/h", 300, 10, b"sub", b"asg")
    value = rec.GroupValue("consumer", 4, "range", "m1", 123, (member,))
    raw = rec.group_value(value)
    assert raw[:2] == b"\x00\x03"
    assert rec.decode_key(rec.group_key("g")) == rec.GroupKey("g")
    assert rec.decode_group_value(raw) == value


def test_unknown_record_type_is_skipped_and_garbage_rejected() -> None:
    assert rec.decode_key(b"\x00\x05\x00\x01g") is None  # a KIP-848 record type
    with pytest.raises(rec.RecordFormatError):
        rec.decode_offset_value(b"\x00\x09")
    with pytest.raises(rec.RecordFormatError):
        rec.decode_key(b"\x00")
