"""KIP-848 `__consumer_offsets` records: Kafka 4.1's byte layouts, round trips, and what a
log written by Kafka holds that we skip."""

import struct
import uuid

from broker.coordinator.group import consumer_records as crec
from broker.coordinator.group.consumer_group import compile_regex

T1 = uuid.UUID(int=5)


def _string(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def test_keys_are_the_record_type_then_a_version_0_key() -> None:
    assert crec.group_metadata_key("g") == b"\x00\x03" + _string("g")
    assert crec.target_metadata_key("g") == b"\x00\x06" + _string("g")
    for t, key in (
        (5, crec.member_metadata_key("g", "m")),
        (7, crec.target_member_key("g", "m")),
        (8, crec.current_member_key("g", "m")),
    ):
        assert key == struct.pack(">h", t) + _string("g") + _string("m")
        assert crec.decode_key(key) == crec.MemberRecordKey(t, "g", "m")
    assert crec.decode_key(crec.group_metadata_key("g")) == crec.GroupKey(3, "g")
    # type 4 (partition metadata, no longer written by Kafka 4.1) is recognised and skipped
    assert crec.decode_key(b"\x00\x04" + _string("g")) == crec.GroupKey(4, "")
    assert crec.decode_key(b"\x00\x10" + _string("g")) is None  # e.g. regex resolutions


def test_group_metadata_value_carries_the_hash_as_tag_0() -> None:
    value = crec.group_metadata_value(7, 42)
    # version 0, epoch, one tagged field: tag 0, 8 bytes, the hash
    assert value == b"\x00\x00" + struct.pack(">i", 7) + b"\x01\x00\x08" + struct.pack(">q", 42)
    assert crec.decode_group_metadata(value) == (7, 42)
    # without the tag (as older Kafka writes it) the hash reads as 0
    assert crec.decode_group_metadata(b"\x00\x00" + struct.pack(">i", 3) + b"\x00") == (3, 0)


def test_value_round_trips() -> None:
    m = crec.MemberMetadata("i", None, "cid", "/1.2.3.4", ("a", "b"), None, 30_000, "range")
    assert crec.decode_member_metadata(crec.member_metadata_value(m)) == m
    assert crec.decode_target_metadata(crec.target_metadata_value(9)) == 9
    a = {T1: frozenset({2, 0})}
    assert crec.decode_target_member(crec.target_member_value(a)) == a
    c = crec.CurrentAssignment(4, 3, 1, a, {uuid.UUID(int=6): frozenset({1})})
    assert crec.decode_current_member(crec.current_member_value(c)) == c


def test_escaped_quantifier_is_not_taken_for_a_possessive_one() -> None:
    assert compile_regex(r"a\++").fullmatch("a++")


def test_member_value_with_kafkas_classic_member_tag() -> None:
    m = crec.MemberMetadata(None, None, "cid", "h", ("a",), None, 1000, None)
    value = crec.member_metadata_value(m)
    assert value.endswith(b"\x00")  # no tagged fields for a consumer-protocol member
    # tag 0 as Kafka's generated code writes a tagged nullable struct: size + 1, a presence
    # byte, then ClassicMemberMetadata (SessionTimeoutMs, SupportedProtocols [Name, Metadata])
    struct_bytes = (
        struct.pack(">i", 45_000)
        + b"\x02"  # one protocol
        + b"\x06range"
        + b"\x03\x00\x01"
        + b"\x00"  # the protocol's tagged fields
        + b"\x00"  # the struct's tagged fields
    )
    tagged = value[:-1] + b"\x01\x00" + bytes([len(struct_bytes) + 1]) + b"\x01" + struct_bytes
    classic = crec.ClassicMeta(45_000, (("range", b"\x00\x01"),))
    with_classic = crec.MemberMetadata(None, None, "cid", "h", ("a",), None, 1000, None, classic)
    assert crec.decode_member_metadata(tagged) == with_classic
    assert crec.member_metadata_value(with_classic) == tagged
    # another tag (one a later Kafka might add) is skipped
    other = value[:-1] + b"\x01\x07\x02\x01\x00"
    assert crec.decode_member_metadata(other) == m
