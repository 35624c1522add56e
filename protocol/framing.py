"""Size-prefixed framing: every Kafka request and response is an int32 length then that many bytes.

`FrameDecoder` is an incremental splitter for a byte stream; it never copies a complete frame that
arrived in one chunk and enforces the maximum frame size (Kafka's ``socket.request.max.bytes``).
"""

import struct
from collections.abc import Iterable
from typing import Final

from .errors import FrameError

DEFAULT_MAX_FRAME_BYTES: Final = 100 * 1024 * 1024  # socket.request.max.bytes default

_SIZE = struct.Struct(">i")


def check_frame_size(size: int, max_size: int) -> None:
    if size < 0:
        raise FrameError(f"negative frame size {size}")
    if size > max_size:
        raise FrameError(f"frame size {size} exceeds the maximum of {max_size} bytes")


def frame_size(parts: Iterable[bytes | bytearray | memoryview]) -> bytes:
    """The 4-byte size prefix for a payload made of ``parts``."""
    return _SIZE.pack(sum(len(p) for p in parts))


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    return _SIZE.pack(len(payload)) + bytes(payload)


class FrameDecoder:
    """Splits a stream into frames. Feed it chunks; it returns the complete payloads so far.

    A negative or oversize size raises `FrameError`; the stream is unusable after that (the caller
    closes the connection, as Kafka does).
    """

    __slots__ = ("_buf", "_max", "_need")

    def __init__(self, max_size: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        self._buf = bytearray()
        self._max = max_size
        self._need = 0  # total bytes (prefix included) the pending frame needs before a rescan

    @property
    def buffered(self) -> int:
        """Bytes held for frames that are not complete yet."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[memoryview]:
        frames: list[memoryview] = []
        if not self._buf:
            # Fast path: parse whole frames straight out of the chunk, keep only the remainder.
            view = memoryview(data)
            pos = self._split(view, frames)
            if pos < len(view):
                self._buf += view[pos:]
            return frames
        self._buf += data
        if len(self._buf) < self._need:
            return frames  # still inside a large frame: don't rescan (keeps feeding linear)
        view = memoryview(bytes(self._buf))  # one copy per completed frame
        pos = self._split(view, frames)
        del self._buf[:pos]
        return frames

    def _split(self, view: memoryview, out: list[memoryview]) -> int:
        pos = 0
        end = len(view)
        self._need = 0
        while end - pos >= 4:
            (size,) = _SIZE.unpack_from(view, pos)
            check_frame_size(size, self._max)
            if end - pos - 4 < size:
                self._need = 4 + size
                break
            out.append(view[pos + 4 : pos + 4 + size])
            pos += 4 + size
        return pos
