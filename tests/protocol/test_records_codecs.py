"""Compression codecs: round trips, the xerial snappy framing, bombs and bad input."""

from __future__ import annotations

import contextlib
import gzip
import struct

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from protocol.errors import CorruptRecordError
from protocol.records import Compression, compress, decompress
from protocol.records.codecs import XERIAL_MAGIC

payloads = st.binary(max_size=3000) | st.binary(min_size=1, max_size=8).map(lambda b: b * 5000)


@settings(max_examples=80, deadline=None)
@given(codec=st.sampled_from(list(Compression)), data=payloads, xerial=st.booleans())
def test_round_trip(codec: Compression, data: bytes, xerial: bool) -> None:
    packed = compress(codec, data, xerial=xerial)
    assert decompress(codec, packed) == data
    assert decompress(codec, packed, max_size=len(data)) == data
    if data:
        with pytest.raises(CorruptRecordError, match="more than"):
            decompress(codec, packed, max_size=len(data) - 1)


def _xerial(blocks: list[bytes]) -> bytes:
    out = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
    for block in blocks:
        raw = bytes(cramjam.snappy.compress_raw(block))
        out += struct.pack(">i", len(raw)) + raw
    return out


@given(st.lists(st.binary(max_size=500), max_size=5))
def test_xerial_snappy_decode(blocks: list[bytes]) -> None:
    framed = _xerial(blocks)
    assert decompress(Compression.SNAPPY, framed) == b"".join(blocks)


def test_snappy_raw_is_the_default_and_xerial_on_request() -> None:
    data = b"hello world " * 10_000
    raw = compress(Compression.SNAPPY, data)
    assert not raw.startswith(XERIAL_MAGIC)
    assert bytes(cramjam.snappy.decompress_raw(raw)) == data
    framed = compress(Compression.SNAPPY, data, xerial=True)
    assert framed.startswith(XERIAL_MAGIC + b"\0\0\0\x01\0\0\0\x01")
    assert decompress(Compression.SNAPPY, framed) == data


def test_xerial_bad_block_lengths() -> None:
    framed = _xerial([b"abc" * 100])
    with pytest.raises(CorruptRecordError, match="overruns"):
        decompress(Compression.SNAPPY, framed[:-1])
    with pytest.raises(CorruptRecordError, match="cut short"):
        decompress(Compression.SNAPPY, framed + b"\0\0")
    bad = bytearray(framed)
    struct.pack_into(">i", bad, 16, -1)
    with pytest.raises(CorruptRecordError):
        decompress(Compression.SNAPPY, bytes(bad))


def test_lz4_frame_flags_match_the_java_writer() -> None:
    data = bytes(range(256)) * 1000
    packed = compress(Compression.LZ4, data)
    assert packed[:4] == b"\x04\x22\x4d\x18"  # frame magic
    flg, bd = packed[4], packed[5]
    assert flg >> 6 == 1  # version 01
    assert flg & 0x20  # independent blocks: Java's reader refuses linked ones
    assert not flg & 0x10  # no block checksum
    assert not flg & 0x08  # no content size
    assert not flg & 0x04  # no content checksum
    assert (bd >> 4) & 7 == 4  # 64 KiB max block size
    assert lz4.frame.decompress(packed) == data


def test_lz4_reads_other_frame_variants() -> None:
    data = b"abcdefgh" * 50_000
    for kwargs in (
        {"block_linked": True, "content_checksum": True, "store_size": True},
        {"block_size": lz4.frame.BLOCKSIZE_MAX4MB, "block_checksum": True},
    ):
        assert decompress(Compression.LZ4, lz4.frame.compress(data, **kwargs)) == data


def test_zstd_without_content_size_and_multi_frame() -> None:
    data = b"zstd data " * 20_000
    cobj = zstandard.ZstdCompressor(write_checksum=True).compressobj()
    streamed = cobj.compress(data) + cobj.flush()
    params = zstandard.get_frame_parameters(streamed)
    assert params.content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert decompress(Compression.ZSTD, streamed) == data
    assert decompress(Compression.ZSTD, streamed + streamed) == data + data
    with pytest.raises(CorruptRecordError, match="more than"):
        decompress(Compression.ZSTD, streamed, max_size=1000)


def test_gzip_multi_member_and_java_style() -> None:
    a = gzip.compress(b"first " * 100, mtime=0)
    b = gzip.compress(b"second", compresslevel=1)
    assert decompress(Compression.GZIP, a + b) == b"first " * 100 + b"second"


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_truncated_payload_is_an_error(codec: Compression) -> None:
    packed = compress(codec, bytes(range(256)) * 200)
    for cut in range(0, len(packed), max(1, len(packed) // 40)):
        with pytest.raises(CorruptRecordError):
            decompress(codec, packed[:cut])


def test_bomb_is_refused_before_inflating() -> None:
    zeros = b"\0" * (64 * 1024 * 1024)
    for codec in (Compression.GZIP, Compression.LZ4, Compression.ZSTD, Compression.SNAPPY):
        packed = compress(codec, zeros)
        assert len(packed) < 4 * 1024 * 1024
        with pytest.raises(CorruptRecordError, match="more than 1048576 bytes"):
            decompress(codec, packed, max_size=1 << 20)


@pytest.mark.parametrize("codec", [5, 6, 7, -1])
def test_unknown_codec_ids(codec: int) -> None:
    with pytest.raises(CorruptRecordError, match=f"unknown compression codec id {codec}"):
        decompress(codec, b"xx")
    with pytest.raises(CorruptRecordError):
        compress(codec, b"xx")


@settings(max_examples=150, deadline=None)
@given(codec=st.sampled_from(list(Compression)[1:]), data=st.binary(max_size=300))
def test_garbage_only_raises_corrupt_record_error(codec: Compression, data: bytes) -> None:
    with contextlib.suppress(CorruptRecordError):
        decompress(codec, data, max_size=1 << 20)
