"""Produce response encoder and zero-copy request parser, checked against kio."""

import datetime
import importlib
import io
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from protocol.build import build
from protocol.encoders import primitives as p
from protocol.encoders.produce import (
    encode_produce_rows,
    parse_produce_request,
)
from protocol.errors import DecodeError, TruncatedError

from .strategies import entities

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
VERSIONS = range(3, 14)


def kio_class(version: int, kind: str) -> type[Any]:
    mod = importlib.import_module(f"kio.schema.produce.v{version}.{kind}")
    cls: type[Any] = mod.ProduceRequest if kind == "request" else mod.ProduceResponse
    return cls


def kio_bytes(cls: type[Any], obj: Any) -> bytes:
    buf = io.BytesIO()
    entity_writer(cls)(buf, obj)
    return buf.getvalue()


# A broker's partition rows, as ProduceApi fills them (errors, record errors, append time).
_ROWS = st.lists(
    st.fixed_dictionaries(
        {
            "index": st.integers(0, 2**31 - 1),
            "base_offset": st.integers(-1, 2**62),
            "log_append_time": st.sampled_from([-1, 0, 1_700_000_000_123]),
            "log_start_offset": st.integers(-1, 2**62),
        },
        optional={
            "error_code": st.sampled_from([ErrorCode.none, ErrorCode.not_leader_or_follower, 134]),
            "error_message": st.one_of(st.none(), st.text(max_size=20)),
            "record_errors": st.lists(
                st.tuples(st.integers(0, 100), st.one_of(st.none(), st.text(max_size=10))),
                max_size=2,
            ),
        },
    ),
    max_size=4,
)
_TOPIC_ROWS = st.lists(
    st.fixed_dictionaries(
        {"name": st.text(min_size=1, max_size=12), "topic_id": st.uuids(), "partitions": _ROWS}
    ),
    max_size=3,
)


def _kio_response(version: int, topics: list[dict[str, Any]], throttle_ms: int) -> Any:
    """The rows as a kio ProduceResponse: the reference the hand-written encoder matches."""

    def when(ms: int) -> datetime.datetime | None:
        return None if ms < 0 else datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)

    responses = [
        {
            "name": t["name"],
            "topic_id": t["topic_id"],
            "partition_responses": [
                {
                    "index": r["index"],
                    "error_code": r.get("error_code", ErrorCode.none),
                    "base_offset": r["base_offset"],
                    "log_append_time": when(r["log_append_time"]),
                    "log_start_offset": r["log_start_offset"],
                    "record_errors": [
                        {"batch_index": i, "batch_index_error_message": m}
                        for i, m in r.get("record_errors", ())
                    ],
                    "error_message": r.get("error_message"),
                }
                for r in t["partitions"]
            ],
        }
        for t in topics
    ]
    cls = kio_class(version, "response")
    return cls, build(cls, {"responses": responses, "throttle_time": throttle_ms})


@pytest.mark.parametrize("version", VERSIONS)
def test_rows_encoder_matches_kio_writer(version: int) -> None:
    @SETTINGS
    @given(_TOPIC_ROWS, st.integers(0, 2**31 - 1))
    def check(topics: list[dict[str, Any]], throttle_ms: int) -> None:
        cls, resp = _kio_response(version, topics, throttle_ms)
        assert encode_produce_rows(topics, throttle_ms, version) == kio_bytes(cls, resp)

    check()


def assert_agrees_with_kio(raw: bytes, version: int, prefix: int = 0) -> None:
    cls = kio_class(version, "request")
    expected, consumed = entity_reader(cls)(memoryview(raw), prefix)
    view = parse_produce_request(memoryview(raw), prefix, version)
    assert view.end == prefix + consumed == len(raw)
    assert view.transactional_id == expected.transactional_id
    assert view.acks == expected.acks
    assert view.timeout_ms == round(expected.timeout.total_seconds() * 1000)
    assert len(view.topics) == len(expected.topic_data)
    for topic, kio_topic in zip(view.topics, expected.topic_data, strict=True):
        if version >= 13:
            assert topic.name is None
            assert topic.topic_id == kio_topic.topic_id
        else:
            assert topic.topic_id is None
            assert topic.name == kio_topic.name
        ours = [
            (q.index, None if q.records is None else q.records.tobytes()) for q in topic.partitions
        ]
        assert ours == [(q.index, q.records) for q in kio_topic.partition_data]
        for q in topic.partitions:
            if q.records is not None:
                assert q.records.obj is raw  # a view into the frame, not a copy


@pytest.mark.parametrize("version", VERSIONS)
def test_request_parser_agrees_with_kio_reader(version: int) -> None:
    cls = kio_class(version, "request")

    @SETTINGS
    @given(entities(cls), st.binary(max_size=3))
    def check(req: Any, prefix: bytes) -> None:
        assert_agrees_with_kio(prefix + kio_bytes(cls, req), version, len(prefix))

    check()


@pytest.mark.parametrize("version", [3, 8, 9, 11, 13])
def test_every_truncation_is_reported_as_truncated_error(version: int) -> None:
    cls = kio_class(version, "request")

    @settings(max_examples=20, deadline=None)
    @given(entities(cls))
    def check(req: Any) -> None:
        raw = kio_bytes(cls, req)
        for cut in range(len(raw)):
            with pytest.raises((TruncatedError, DecodeError)):
                parse_produce_request(memoryview(raw[:cut]), 0, version)

    check()


@pytest.mark.parametrize("version", [3, 9, 13])
@SETTINGS
@given(data=st.data())
def test_corrupt_bytes_raise_only_protocol_errors(version: int, data: st.DataObject) -> None:
    raw = bytearray(
        kio_bytes(kio_class(version, "request"), data.draw(entities(kio_class(version, "request"))))
    )
    for _ in range(data.draw(st.integers(1, 4))):
        raw[data.draw(st.integers(0, len(raw) - 1))] = data.draw(st.integers(0, 255))
    try:
        parse_produce_request(memoryview(raw), 0, version)
    except (TruncatedError, DecodeError) as e:
        assert str(e).startswith("produce request:")


def flexible_request(version: int, tag_blob: bytes) -> bytes:
    """A hand-built flexible request with ``tag_blob`` as every tagged-field section."""
    topic_key = uuid.UUID(int=7).bytes if version >= 13 else p.compact_string("orders")
    parts = [
        p.compact_nullable_string("txn-1"),
        p.I16.pack(-1),
        p.I32.pack(30_000),
        p.uvarint(2),  # one topic
        topic_key,
        p.uvarint(3),  # two partitions
        p.I32.pack(0),
        p.uvarint(6),
        b"batch",
        tag_blob,
        p.I32.pack(1),
        p.NULL_COMPACT,
        tag_blob,
        tag_blob,  # topic
        tag_blob,  # request
    ]
    return b"".join(parts)


@pytest.mark.parametrize("version", [9, 12, 13])
def test_unknown_tagged_fields_are_skipped(version: int) -> None:
    plain = flexible_request(version, p.EMPTY_TAGS)
    assert_agrees_with_kio(plain, version)  # the hand-built layout is what kio expects
    tags = p.tagged_fields([(5, b"\x01\x02\x03"), (0, b""), (300, bytes(200))])
    tagged = flexible_request(version, tags)
    with pytest.raises(Exception):  # noqa: B017 - kio rejects unknown tags; the protocol allows them
        entity_reader(kio_class(version, "request"))(memoryview(tagged), 0)
    view = parse_produce_request(tagged, 0, version)
    ref = parse_produce_request(plain, 0, version)
    assert view.end == len(tagged)
    assert (view.transactional_id, view.acks, view.timeout_ms) == ("txn-1", -1, 30_000)
    assert [t.name for t in view.topics] == [t.name for t in ref.topics]
    assert [t.topic_id for t in view.topics] == [t.topic_id for t in ref.topics]
    got = [(q.index, q.records and q.records.tobytes()) for q in view.topics[0].partitions]
    assert got == [(0, b"batch"), (1, None)]


def test_error_messages_name_the_field() -> None:
    good = flexible_request(9, p.EMPTY_TAGS)
    bad_name = good.replace(b"orders", b"ord\xffrs")
    with pytest.raises(DecodeError, match="topic name"):
        parse_produce_request(bad_name, 0, 9)
    legacy = b"".join(
        [
            p.NULL_LEGACY_STRING,  # transactional_id
            p.I16.pack(1),  # acks
            p.I32.pack(100),  # timeout
            p.I32.pack(1),  # one topic
            p.legacy_string("t"),
            p.I32.pack(1),  # one partition
            p.I32.pack(0),  # index
            p.I32.pack(-5),  # records length
        ]
    )
    with pytest.raises(DecodeError, match="records"):
        parse_produce_request(legacy, 0, 8)
    too_long = legacy[:-4] + p.I32.pack(1000) + b"abc"
    with pytest.raises(TruncatedError, match="records of partition 0"):
        parse_produce_request(too_long, 0, 8)
    null_topics = legacy[:8] + p.I32.pack(-1)
    with pytest.raises(DecodeError, match="topic_data"):
        parse_produce_request(null_topics, 0, 3)
    with pytest.raises(TruncatedError, match="transactional_id length"):
        parse_produce_request(b"\xff" * 8, 0, 9)
    with pytest.raises(DecodeError, match="longer than 10 bytes"):
        parse_produce_request(b"\xff" * 12, 0, 9)
    with pytest.raises(ValueError, match="version"):
        parse_produce_request(good, 0, 14)


def test_accepts_bytes_and_non_byte_memoryviews() -> None:
    raw = flexible_request(11, p.EMPTY_TAGS)
    by_bytes = parse_produce_request(raw, 0, 11)
    padded = raw + bytes(-len(raw) % 4)
    by_words = parse_produce_request(memoryview(padded).cast("I"), 0, 11)
    assert by_bytes.topics == by_words.topics
    assert by_bytes.timeout_ms == 30_000


def test_response_log_append_time_and_throttle() -> None:
    when_ms = 1_714_564_800_123
    row = {"index": 0, "base_offset": 10, "log_append_time": when_ms, "log_start_offset": 0}
    enc = encode_produce_rows([{"name": "t", "topic_id": None, "partitions": [row]}], 250, 11)
    assert p.I64.pack(when_ms) in enc
    assert enc.endswith(p.I32.pack(250) + p.EMPTY_TAGS)


@pytest.mark.parametrize("version", VERSIONS)
def test_response_with_record_errors_matches_kio(version: int) -> None:
    """KIP-467: a batch refused for some of its records lists them (v8+) with the partition's
    error message; older versions carry the error code alone."""
    errors = [(0, "no key"), (90, None), (2**31 - 1, "é")]
    row = {
        "index": 3,
        "error_code": ErrorCode.invalid_record,
        "base_offset": -1,
        "log_append_time": -1,
        "log_start_offset": -1,
        "error_message": "3 record(s) of the batch were rejected",
        "record_errors": errors,
    }
    topics = [{"name": "orders", "topic_id": uuid.UUID(int=9), "partitions": [row]}]
    cls, resp = _kio_response(version, topics, 0)
    raw = encode_produce_rows(topics, 0, version)
    assert raw == kio_bytes(cls, resp)
    back, _ = entity_reader(cls)(memoryview(raw), 0)
    got = back.responses[0].partition_responses[0]
    if version >= 8:
        assert [e.batch_index for e in got.record_errors] == [0, 90, 2**31 - 1]
        assert [e.batch_index_error_message for e in got.record_errors] == ["no key", None, "é"]
        assert got.error_message == "3 record(s) of the batch were rejected"
