import contextlib
import io
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.serial import entity_reader, entity_writer

from protocol import lenient
from protocol.errors import (
    DecodeError,
    ProtocolError,
    RequestBodyError,
    UnknownApiKeyError,
    UnsupportedVersionError,
)
from protocol.headers import encode_request_header
from protocol.registry import REGISTRY, body_bytes, decode_body, decode_request

from .strategies import entities

ALL_VERSIONS = [(s.api_key, v) for s in REGISTRY.specs() for v in s.versions if s.supports(v)]


def _kio_bytes(body: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(body))(out, body)
    return out.getvalue()


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), which=st.sampled_from(ALL_VERSIONS), corr=st.integers(0, 2**31 - 1))
def test_every_request_and_response_round_trips(
    data: st.DataObject, which: tuple[int, int], corr: int
) -> None:
    key, version = which
    spec = REGISTRY.spec(key)
    req = data.draw(entities(spec.request_type(version)))
    frame = REGISTRY.encode_request(version, corr, "cid", req)
    decoded = decode_request(frame[4:])
    assert decoded.body == req
    assert (decoded.header.api_key, decoded.header.api_version) == (key, version)
    assert decoded.header.correlation_id == corr
    resp = data.draw(entities(spec.response_type(version)))
    rframe = REGISTRY.encode_response(key, version, corr, resp)
    assert int.from_bytes(rframe[:4], "big") == len(rframe) - 4
    got_corr, got = REGISTRY.decode_response(key, version, rframe[4:])
    assert (got_corr, got) == (corr, resp)


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), which=st.sampled_from(ALL_VERSIONS), response=st.booleans())
def test_lenient_decoder_agrees_with_kio(
    data: st.DataObject, which: tuple[int, int], response: bool
) -> None:
    spec = REGISTRY.spec(which[0])
    cls = spec.response_type(which[1]) if response else spec.request_type(which[1])
    body = data.draw(entities(cls))
    raw = _kio_bytes(body)
    native, size = entity_reader(cls)(raw, 0)
    ours, end = lenient.decode(cls, raw)
    assert ours == native == body
    assert end == size == len(raw)


def test_unknown_tagged_field_in_nested_struct_is_skipped() -> None:
    from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic

    part = FetchPartition(partition=1, fetch_offset=5, partition_max_bytes=100)
    body = FetchRequest(
        max_wait=__import__("datetime").timedelta(milliseconds=10),
        min_bytes=1,
        topics=(FetchTopic(topic="t", partitions=(part,)),),
        forgotten_topics_data=(),
    )
    raw = bytearray(_kio_bytes(body))
    # The partition's tagged section is the byte right after partition_max_bytes (int32 100).
    at = raw.index(b"\x00\x00\x00\x64") + 4
    assert raw[at] == 0
    raw[at : at + 1] = bytes([1, 99, 2, 0xAB, 0xCD])  # one unknown tag 99 of 2 bytes
    header = encode_request_header(1, 12, 5, "c", 2)
    decoded = decode_request(header + bytes(raw))
    assert decoded.body == body


def test_error_codes_unknown_to_kio_decode_as_ints() -> None:
    from kio.schema.errors import ErrorCode
    from kio.schema.metadata.v12.response import MetadataResponse, MetadataResponseTopic

    topic = MetadataResponseTopic(error_code=ErrorCode.none, name="t", topic_id=None, partitions=())
    resp = MetadataResponse(
        throttle_time=__import__("datetime").timedelta(0), brokers=(), topics=(topic,)
    )
    raw = bytearray(_kio_bytes(resp))
    at = raw.index(b"\x02t") - 2  # topic error_code precedes the compact name "t"
    raw[at : at + 2] = (134).to_bytes(2, "big")
    got = decode_body(MetadataResponse, bytes(raw), 0)
    assert got.topics[0].error_code == 134
    assert _kio_bytes(got) == bytes(raw)  # and it can be written back
    raw[at : at + 2] = (999).to_bytes(2, "big")
    got = decode_body(MetadataResponse, bytes(raw), 0)
    assert got.topics[0].error_code == 999 and _kio_bytes(got) == bytes(raw)


def test_api_versions_unsupported_version_carries_ids() -> None:
    frame = encode_request_header(18, 99, 77, "probe", 2) + b"\x00"
    with pytest.raises(UnsupportedVersionError) as e:
        decode_request(frame)
    assert (e.value.api_key, e.value.api_version, e.value.correlation_id) == (18, 99, 77)
    assert e.value.client_id == "probe"
    assert REGISTRY.spec(18).response_header_version(99) == 0
    assert "supported: 0-" in str(e.value)


def test_unknown_api_key() -> None:
    with pytest.raises(UnknownApiKeyError, match="unknown api key 9999"):
        decode_request(encode_request_header(9999, 0, 1, "c", 1))


def test_body_errors_name_the_field_and_keep_the_header() -> None:
    from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic

    body = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name="abc"),),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    frame = REGISTRY.encode_request(12, 3, "cli", body)[4:]
    with pytest.raises(RequestBodyError) as e:
        decode_request(frame[:-4])
    assert e.value.correlation_id == 3 and e.value.client_id == "cli"
    assert "metadata v12" in str(e.value)
    # Trailing bytes after a request body are ignored, as Kafka ignores them (librdkafka sends some).
    assert decode_request(frame + b"\x00\x00\x01").body == body
    with pytest.raises(DecodeError, match="unexpected bytes"):
        decode_body(type(body), frame + b"\x00", len(frame) - len(body_bytes(body)))


def test_header_too_short_is_a_decode_error() -> None:
    with pytest.raises(DecodeError):
        decode_request(b"\x00\x03\x00")


@settings(max_examples=1500, deadline=None)
@given(st.binary(max_size=200))
def test_random_bytes_only_raise_protocol_errors(raw: bytes) -> None:
    with contextlib.suppress(ProtocolError):
        decode_request(raw)


@settings(max_examples=600, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data(), which=st.sampled_from(ALL_VERSIONS))
def test_mutated_valid_frames_only_raise_protocol_errors(
    data: st.DataObject, which: tuple[int, int]
) -> None:
    spec = REGISTRY.spec(which[0])
    body = data.draw(entities(spec.request_type(which[1])))
    frame = bytearray(REGISTRY.encode_request(which[1], 1, "c", body)[4:])
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(frame) - 1))
        frame[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(frame)))
    with contextlib.suppress(ProtocolError):
        decode_request(bytes(frame[:cut]))


def test_an_out_of_range_duration_is_a_protocol_error_not_a_crash() -> None:
    """Found by the mutation test above: an int64 duration past Python's timedelta range
    (CreateDelegationToken max_lifetime) raised OverflowError from the decoder."""
    import struct

    from protocol.build import build
    from protocol.errors import ProtocolError
    from protocol.registry import body_bytes, decode_body

    cls = REGISTRY.spec(38).request_type(2)
    raw = bytearray(body_bytes(build(cls, {"renewers": [], "max_lifetime": 0})))
    struct.pack_into(">q", raw, len(raw) - 9, 2**62)  # max_lifetime, before the tag byte
    with pytest.raises(ProtocolError, match="out of range"):
        decode_body(cls, raw, 0)
