"""Record-batch compression codecs, with decompression-bomb limits.

Wire formats, as Kafka clients write them:
- gzip: a gzip member (RFC 1952).
- snappy: librdkafka writes one raw snappy block; the Java client writes xerial framing
  (``\\x82SNAPPY\\x00``, int32 version, int32 compatible version, then repeated
  [int32 length, raw block]). Both are accepted on decompress; we write raw by default.
- lz4: the LZ4 frame format. Java's reader rejects linked blocks, so we write independent
  64 KiB blocks without checksums or content size, exactly like the Java producer.
- zstd: a zstd frame, usually without a content size (streamed), so decoding streams.
"""

from __future__ import annotations

import struct
import zlib
from enum import IntEnum
from typing import Final

import cramjam
import lz4.frame
import zstandard

from protocol.errors import CorruptRecordError

from .batch import Buffer


class Compression(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


# Default cap on decompressed output: the broker's default message.max.bytes is ~1 MiB, but
# a well-compressed batch can legitimately inflate far beyond that; 256 MiB bounds memory.
DEFAULT_MAX_DECOMPRESSED: Final = 256 * 1024 * 1024

XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_BLOCK_LEN = struct.Struct(">i")
# Block size the xerial library uses by default (uncompressed bytes per block).
XERIAL_BLOCK_SIZE: Final = 32 * 1024

_CHUNK: Final = 64 * 1024


def _codec(codec: int) -> Compression:
    try:
        return Compression(codec)
    except ValueError:
        raise CorruptRecordError(f"unknown compression codec id {codec}") from None


def compress(codec: int, data: Buffer, *, xerial: bool = False) -> bytes:
    """Compress ``data`` the way Kafka clients do; ``xerial`` frames snappy like Java does."""
    c = _codec(codec)
    if c is Compression.NONE:
        return bytes(data)
    if c is Compression.GZIP:
        # mtime=0 keeps output deterministic; level 6 is zlib's (and Java's) default.
        co = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return co.compress(data) + co.flush()
    if c is Compression.SNAPPY:
        return _xerial_encode(data) if xerial else bytes(cramjam.snappy.compress_raw(data))
    if c is Compression.LZ4:
        out: bytes = lz4.frame.compress(
            data,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            block_checksum=False,
            store_size=False,
        )
        return out
    out = zstandard.ZstdCompressor(level=3).compress(data)
    return bytes(out)


def decompress(codec: int, data: Buffer, *, max_size: int = DEFAULT_MAX_DECOMPRESSED) -> bytes:
    """Decompress a batch payload; raise ``CorruptRecordError`` on bad data or > max_size."""
    c = _codec(codec)
    if c is Compression.NONE:
        out = bytes(data)
    else:
        try:
            if c is Compression.GZIP:
                out = _gunzip(data, max_size)
            elif c is Compression.SNAPPY:
                out = _unsnappy(data, max_size)
            elif c is Compression.LZ4:
                out = _unlz4(data, max_size)
            else:
                out = _unzstd(data, max_size)
        except CorruptRecordError:
            raise
        except Exception as exc:  # codec libraries raise assorted types on bad input
            raise CorruptRecordError(f"{c.name} payload does not decompress: {exc}") from exc
    if len(out) > max_size:
        raise _too_big(c, max_size)
    return out


def _too_big(c: Compression, max_size: int) -> CorruptRecordError:
    return CorruptRecordError(f"{c.name} payload decompresses to more than {max_size} bytes")


def _gunzip(data: Buffer, max_size: int) -> bytes:
    # Concatenated gzip members are legal; decode each, bounded by what is left of max_size.
    out = bytearray()
    rest = bytes(data)
    while True:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        chunk = rest
        while chunk:
            out += d.decompress(chunk, max_size + 1 - len(out))
            if len(out) > max_size:
                raise _too_big(Compression.GZIP, max_size)
            chunk = d.unconsumed_tail
        if not d.eof:
            raise CorruptRecordError("GZIP payload is truncated")
        rest = d.unused_data
        if not rest:
            return bytes(out)


def _raw_snappy_len(block: Buffer, already: int, max_size: int) -> None:
    # The raw format starts with the uncompressed length; check it before allocating.
    n = int(cramjam.snappy.decompress_raw_len(block))
    if already + n > max_size:
        raise _too_big(Compression.SNAPPY, max_size)


def _unsnappy(data: Buffer, max_size: int) -> bytes:
    mv = memoryview(data)
    if mv.nbytes < _XERIAL_HEADER.size or bytes(mv[:8]) != XERIAL_MAGIC:
        _raw_snappy_len(mv, 0, max_size)
        return bytes(cramjam.snappy.decompress_raw(mv))
    out = bytearray()
    pos = _XERIAL_HEADER.size
    end = mv.nbytes
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError(f"xerial snappy block length cut short at byte {pos}")
        (n,) = _XERIAL_BLOCK_LEN.unpack_from(mv, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise CorruptRecordError(f"xerial snappy block of {n} bytes at byte {pos} overruns")
        block = mv[pos : pos + n]
        _raw_snappy_len(block, len(out), max_size)
        out += cramjam.snappy.decompress_raw(block)
        pos += n
    return bytes(out)


def _xerial_encode(data: Buffer) -> bytes:
    mv = memoryview(data)
    out = bytearray(_XERIAL_HEADER.pack(XERIAL_MAGIC, 1, 1))
    for i in range(0, mv.nbytes, XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(mv[i : i + XERIAL_BLOCK_SIZE]))
        out += _XERIAL_BLOCK_LEN.pack(len(block))
        out += block
    return bytes(out)


def _unlz4(data: Buffer, max_size: int) -> bytes:
    out = bytearray()
    rest = bytes(data)
    while True:
        d = lz4.frame.LZ4FrameDecompressor()
        chunk = rest
        while True:
            out += d.decompress(chunk, max_length=max_size + 1 - len(out))
            if len(out) > max_size:
                raise _too_big(Compression.LZ4, max_size)
            if d.eof or not d.needs_input:
                if d.eof:
                    break
                chunk = b""
                continue
            raise CorruptRecordError("LZ4 payload is truncated")
        rest = d.unused_data
        if not rest:
            return bytes(out)


_ZSTD_MAGIC: Final = 0xFD2FB528
_U32LE = struct.Struct("<I")


def _check_zstd_frames(mv: memoryview) -> None:
    """Walk frame and block headers so a truncated frame is an error, not a short read.

    The streaming reader silently returns a prefix when the input ends mid-frame.
    """
    pos = 0
    end = mv.nbytes
    if end == 0:
        raise CorruptRecordError("ZSTD payload is empty")
    while pos < end:
        if end - pos < 4:
            raise CorruptRecordError("ZSTD payload is truncated (frame magic)")
        (magic,) = _U32LE.unpack_from(mv, pos)
        pos += 4
        if magic & 0xFFFFFFF0 == 0x184D2A50:  # skippable frame: 4-byte size, then data
            if end - pos < 4:
                raise CorruptRecordError("ZSTD payload is truncated (skippable frame)")
            pos += 4 + _U32LE.unpack_from(mv, pos)[0]
            continue
        if magic != _ZSTD_MAGIC:
            raise CorruptRecordError(f"ZSTD payload has a bad frame magic {magic:#010x}")
        if pos >= end:
            raise CorruptRecordError("ZSTD payload is truncated (frame header)")
        fhd = mv[pos]
        fcs_flag = fhd >> 6
        single_segment = (fhd >> 5) & 1
        has_checksum = (fhd >> 2) & 1
        dict_id_size = (0, 1, 2, 4)[fhd & 3]
        fcs_size = (1 if single_segment else 0, 2, 4, 8)[fcs_flag]
        pos += 1 + (0 if single_segment else 1) + dict_id_size + fcs_size
        while True:
            if end - pos < 3:
                raise CorruptRecordError("ZSTD payload is truncated (block header)")
            header = mv[pos] | (mv[pos + 1] << 8) | (mv[pos + 2] << 16)
            pos += 3
            block_type = (header >> 1) & 3
            if block_type == 3:
                raise CorruptRecordError("ZSTD payload has a reserved block type")
            pos += 1 if block_type == 1 else header >> 3
            if header & 1:
                break
        pos += 4 if has_checksum else 0
    if pos > end:
        raise CorruptRecordError("ZSTD payload is truncated")


def _unzstd(data: Buffer, max_size: int) -> bytes:
    _check_zstd_frames(memoryview(data))
    # Streaming copes with frames that omit the content size, and stops at max_size + 1.
    reader = zstandard.ZstdDecompressor().stream_reader(
        bytes(data), read_across_frames=True, closefd=False
    )
    out = bytearray()
    while True:
        chunk = reader.read(min(_CHUNK, max_size + 1 - len(out)))
        if not chunk:
            break
        out += chunk
        if len(out) > max_size:
            raise _too_big(Compression.ZSTD, max_size)
    return bytes(out)
