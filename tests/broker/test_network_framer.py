"""FrameReader without sockets: the loop's get_buffer/buffer_updated calls, simulated."""

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.network.framer import FrameReader
from protocol.errors import FrameError


def feed(reader: FrameReader, data: bytes, max_read: int) -> None:
    """What the event loop does: ask for a buffer, copy at most that much in, report it."""
    pos = 0
    while pos < len(data):
        buf = reader.get_buffer(-1)
        assert len(buf) > 0
        n = min(len(buf), max_read, len(data) - pos)
        buf[:n] = data[pos : pos + n]
        reader.buffer_updated(n)
        pos += n


def drain(reader: FrameReader) -> list[bytes]:
    out = []
    while (frame := reader.next_frame()) is not None:
        out.append(bytes(frame))
    return out


def stream(payloads: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(p)) + p for p in payloads)


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.sampled_from([0, 1, 3, 100, 1000, 20_000, 40_000, 200_000]), max_size=12),
    max_read=st.sampled_from([97, 4096, 65536, 1 << 20]),
    take_every_read=st.booleans(),
)
def test_frames_survive_any_chunking(
    sizes: list[int], max_read: int, take_every_read: bool
) -> None:
    payloads = [bytes([i % 251]) * n for i, n in enumerate(sizes)]
    data = stream(payloads)
    reader = FrameReader(max_size=1 << 20, chunk=64 * 1024)
    got: list[bytes] = []
    pos = 0
    while pos < len(data):
        n = min(max_read, len(data) - pos)
        feed(reader, data[pos : pos + n], max_read)
        pos += n
        if take_every_read:  # otherwise frames pile up as when reading is paused
            got += drain(reader)
    got += drain(reader)
    assert got == payloads
    assert reader.buffered == 0


def test_one_byte_reads() -> None:
    payloads = [b"", b"x", b"hello" * 20, b"z" * 40_000]
    reader = FrameReader(max_size=1 << 20, chunk=1024)
    feed(reader, stream(payloads), 1)
    assert drain(reader) == payloads


def test_frames_own_their_memory() -> None:
    reader = FrameReader(max_size=1 << 20, chunk=1024)
    feed(reader, stream([b"a" * 10]), 1 << 20)
    first = reader.next_frame()
    feed(reader, stream([b"b" * 10] * 50), 1 << 20)  # reuses (and outgrows) the chunk
    assert first is not None and bytes(first) == b"a" * 10
    assert drain(reader) == [b"b" * 10] * 50


@pytest.mark.parametrize("size", [-1, -(2**31), 1025])
def test_bad_sizes_raise(size: int) -> None:
    reader = FrameReader(max_size=1024)
    feed(reader, struct.pack(">i", size) + b"x" * 8, 100)
    with pytest.raises(FrameError):
        reader.next_frame()
