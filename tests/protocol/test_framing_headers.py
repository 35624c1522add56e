import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.errors import DecodeError, FrameError, TruncatedError
from protocol.framing import FrameDecoder, frame
from protocol.headers import (
    RequestHeader,
    encode_request_header,
    encode_response_header,
    parse_request_header,
    parse_response_header,
)


@given(
    payloads=st.lists(st.binary(max_size=300), max_size=8),
    cuts=st.lists(st.integers(1, 97), min_size=1, max_size=20),
)
def test_frame_decoder_reassembles_any_chunking(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(frame(p) for p in payloads)
    dec = FrameDecoder(max_size=1000)
    got: list[bytes] = []
    pos = 0
    i = 0
    while pos < len(stream):
        step = cuts[i % len(cuts)]
        got.extend(bytes(f) for f in dec.feed(stream[pos : pos + step]))
        pos += step
        i += 1
    assert got == payloads
    assert dec.buffered == 0


def test_large_frame_fed_in_small_chunks_is_linear() -> None:
    payload = bytes(range(256)) * 4096  # 1 MiB
    stream = frame(payload)
    dec = FrameDecoder()
    out = []
    for i in range(0, len(stream), 1000):
        out += dec.feed(stream[i : i + 1000])
    assert [bytes(f) for f in out] == [payload]


@pytest.mark.parametrize("size", [-1, -(2**31), 1001])
def test_bad_frame_size_is_a_clear_error(size: int) -> None:
    dec = FrameDecoder(max_size=1000)
    with pytest.raises(FrameError, match="frame size"):
        dec.feed(struct.pack(">i", size) + b"x")


def test_frame_at_exactly_max_size_is_accepted() -> None:
    dec = FrameDecoder(max_size=10)
    assert [bytes(f) for f in dec.feed(frame(b"0123456789"))] == [b"0123456789"]


@given(
    key=st.integers(0, 200),
    version=st.integers(0, 30),
    corr=st.integers(-(2**31), 2**31 - 1),
    client=st.one_of(st.none(), st.text(max_size=40)),
    hv=st.sampled_from([1, 2]),
)
def test_request_header_round_trip(
    key: int, version: int, corr: int, client: str | None, hv: int
) -> None:
    raw = encode_request_header(key, version, corr, client, hv) + b"BODY"
    header, pos = parse_request_header(raw, lambda k, v: hv)
    assert header == RequestHeader(key, version, corr, client, hv)
    assert raw[pos:] == b"BODY"


def test_request_header_v2_skips_unknown_tagged_fields() -> None:
    base = encode_request_header(3, 12, 9, "c", 1)
    # two unknown tags: tag 5 (3 bytes) and tag 300 (0 bytes)
    tags = bytes([2, 5, 3, 1, 2, 3]) + bytes([0xAC, 0x02, 0])
    header, pos = parse_request_header(base + tags + b"B", lambda k, v: 2)
    assert header.client_id == "c" and header.header_version == 2
    assert pos == len(base) + len(tags)


def test_request_header_errors_name_the_problem() -> None:
    with pytest.raises(DecodeError, match="too short"):
        parse_request_header(b"\x00\x01", lambda k, v: 1)
    with pytest.raises(TruncatedError, match="client_id"):
        parse_request_header(b"\x00\x01\x00\x01\x00\x00\x00\x01\x00\x09ab", lambda k, v: 1)
    with pytest.raises(TruncatedError, match="tagged"):
        parse_request_header(encode_request_header(1, 1, 1, "x", 1) + b"\x01\x05", lambda k, v: 2)


@pytest.mark.parametrize("hv", [0, 1])
def test_response_header_round_trip(hv: int) -> None:
    raw = encode_response_header(42, hv) + b"B"
    corr, pos = parse_response_header(raw, hv)
    assert corr == 42 and raw[pos:] == b"B"
    assert len(raw) == 5 + hv
