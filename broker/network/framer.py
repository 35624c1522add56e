"""Frame splitting for `asyncio.BufferedProtocol`: the event loop reads straight into our memory.

Small frames are read into one reusable chunk and copied out (cheap, and the chunk can be reused).
A frame larger than half a chunk gets its own ``bytearray`` of exactly its size, and the rest of
it is read directly into that array, so a big Produce request or Fetch response is never copied
after the kernel hands it over. Every frame returned owns its memory: handlers may keep views into
it (record batches stay memoryviews into the request).

The size rules are `protocol.framing`'s (negative or above the maximum -> `FrameError`).
"""

import struct
from typing import Final

from protocol.framing import check_frame_size

DEFAULT_CHUNK: Final = 64 * 1024

_SIZE: Final = struct.Struct(">i")


class FrameReader:
    __slots__ = ("_big", "_big_filled", "_big_view", "_buf", "_end", "_max", "_start", "_view")

    def __init__(self, max_size: int, chunk: int = DEFAULT_CHUNK) -> None:
        self._max = max_size
        self._buf = bytearray(chunk)
        self._view = memoryview(self._buf)
        self._start = 0  # first unconsumed byte in _buf
        self._end = 0  # end of received bytes in _buf
        # A large frame being received into its own array (its size prefix already consumed).
        self._big: bytearray | None = None
        self._big_view = memoryview(b"")
        self._big_filled = 0

    @property
    def buffered(self) -> int:
        """Received bytes not yet returned as frames."""
        return self._end - self._start + self._big_filled

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        big = self._big
        if big is not None and self._big_filled < len(big):
            return self._big_view[self._big_filled :]
        # A complete big frame not yet taken (reading is being paused): later bytes go to the
        # chunk, which is empty while a big frame is pending, so the order is kept.
        if self._end == len(self._buf):
            self._make_room()
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        big = self._big
        if big is not None and self._big_filled < len(big):
            self._big_filled += nbytes
        else:
            self._end += nbytes

    def next_frame(self) -> memoryview | None:
        """The next complete frame's payload (size prefix stripped), or None if there is none yet.

        Raises `protocol.errors.FrameError` on a negative or oversize size prefix; the stream is
        unusable after that.
        """
        big = self._big
        if big is not None:
            if self._big_filled < len(big):
                return None
            frame = self._big_view
            self._big = None
            self._big_view = memoryview(b"")
            self._big_filled = 0
            return frame
        avail = self._end - self._start
        if avail < 4:
            if avail == 0:
                self._start = self._end = 0
            return None
        (size,) = _SIZE.unpack_from(self._buf, self._start)
        check_frame_size(size, self._max)
        body = self._start + 4
        if avail - 4 >= size:
            self._start = body + size
            return memoryview(bytes(self._view[body : body + size]))  # the chunk is reused
        if size > len(self._buf) // 2:
            # Give it its own array; what already arrived is the only copy made.
            have = avail - 4
            big = bytearray(size)
            big[:have] = self._view[body : self._end]
            self._big = big
            self._big_view = memoryview(big)
            self._big_filled = have
            self._start = self._end = 0
        elif self._start + 4 + size > len(self._buf):
            self._compact()
        return None

    def _compact(self) -> None:
        n = self._end - self._start
        if self._start:
            self._buf[:n] = self._view[self._start : self._end]
        self._start = 0
        self._end = n

    def _make_room(self) -> None:
        self._compact()
        if self._end == len(self._buf):
            # Full of complete frames nobody has taken yet (the owner is pausing reading). Rare:
            # grow rather than refuse bytes the loop already wants to hand over.
            grown = bytearray(2 * len(self._buf))
            grown[: self._end] = self._view[: self._end]
            self._buf = grown
            self._view = memoryview(grown)
