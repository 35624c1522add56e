"""Frame splitting for `asyncio.BufferedProtocol`: the event loop reads straight into our memory.

Small frames are read into one reusable chunk and copied out (cheap, and the chunk can be reused).
A frame larger than half a chunk gets its own ``bytearray`` and the rest of it is read directly
into that array, so a big Produce request or Fetch response is never copied after the kernel hands
it over. Memory follows the bytes that actually arrive, not the size prefix: a peer that sends a
100 MB prefix and nothing else must not make us allocate 100 MB, nor 1 MB. A large frame stays in
the chunk until half a chunk of it has arrived; only then does it get its own array, of
min(size, ``BIG_START``) bytes, which doubles as more bytes arrive (frames up to ``BIG_START`` are
read with no copy but the first half chunk's; larger ones pay a few copies, amortized under one
frame's size). So a connection holds at most its chunk plus max(``BIG_START``, twice what it has
sent of its frame). Every frame returned owns its memory: handlers may keep views into it (record
batches stay memoryviews into the request).

``pending_size`` is the announced size of a frame being received into its own array (the
listener reserves it against ``queued.max.request.bytes``). ``set_max_size`` changes the limit
between frames (e.g. ``sasl.server.max.receive.size`` until a SASL client has authenticated).
``release`` drops the buffers of a closed connection at once.

The size rules are `protocol.framing`'s (negative or above the maximum -> `FrameError`).
"""

import struct
from typing import Final

from protocol.framing import check_frame_size

DEFAULT_CHUNK: Final = 64 * 1024
BIG_START: Final = 1024 * 1024  # a frame's array starts at most this big, then doubles

_SIZE: Final = struct.Struct(">i")


class FrameReader:
    __slots__ = (
        "_alone_at",
        "_big",
        "_big_filled",
        "_big_size",
        "_big_view",
        "_buf",
        "_end",
        "_max",
        "_start",
        "_view",
    )

    def __init__(self, max_size: int, chunk: int = DEFAULT_CHUNK) -> None:
        self._max = max_size
        self._buf = bytearray(chunk)
        # A large frame moves to its own array once this many of its bytes are in the chunk.
        self._alone_at = chunk // 2
        self._view = memoryview(self._buf)
        self._start = 0  # first unconsumed byte in _buf
        self._end = 0  # end of received bytes in _buf
        # A large frame being received into its own array (its size prefix already consumed).
        self._big: bytearray | None = None
        self._big_view = memoryview(b"")
        self._big_filled = 0
        self._big_size = 0  # the big frame's full size (its array may still be smaller)

    @property
    def max_size(self) -> int:
        return self._max

    def set_max_size(self, max_size: int) -> None:
        """The limit for size prefixes read from now on."""
        self._max = max_size

    def release(self) -> None:
        """Drop every buffer (the connection is gone); the reader is unusable afterwards."""
        self._buf = bytearray()
        self._view = memoryview(self._buf)
        self._big = None
        self._big_view = memoryview(b"")
        self._start = self._end = self._big_filled = self._big_size = 0

    @property
    def pending_size(self) -> int:
        """The announced size of the frame being received into its own array (complete or not,
        until `next_frame` returns it); 0 when there is none."""
        return self._big_size

    @property
    def buffered(self) -> int:
        """Received bytes not yet returned as frames."""
        return self._end - self._start + self._big_filled

    def get_buffer(self, sizehint: int = -1) -> memoryview:
        big = self._big
        if big is not None and self._big_filled < self._big_size:
            if self._big_filled == len(big):
                big = self._grow_big()
            return self._big_view[self._big_filled :]
        # A complete big frame not yet taken (reading is being paused): later bytes go to the
        # chunk, which is empty while a big frame is pending, so the order is kept.
        if self._end == len(self._buf):
            self._make_room()
        return self._view[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        big = self._big
        if big is not None and self._big_filled < self._big_size:
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
            if self._big_filled < self._big_size:
                return None
            frame = self._big_view
            self._big = None
            self._big_view = memoryview(b"")
            self._big_filled = self._big_size = 0
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
        have = avail - 4
        if size > len(self._buf) // 2 and have >= self._alone_at:
            # Give it its own array; what already arrived is the only copy made.
            big = bytearray(max(have, min(size, BIG_START)))
            big[:have] = self._view[body : self._end]
            self._big = big
            self._big_view = memoryview(big)
            self._big_filled = have
            self._big_size = size
            self._start = self._end = 0
        elif self._start + 4 + min(size, self._alone_at) > len(self._buf):
            # Room in the chunk for the whole frame, or for the first bytes of a large one (a
            # bare size prefix costs nothing until its frame's bytes come).
            self._compact()
        return None

    def _grow_big(self) -> bytearray:
        """Double the big frame's array (capped at its size): memory follows the bytes that
        actually arrived, not the size prefix."""
        old = self._big
        assert old is not None
        grown = bytearray(min(self._big_size, 2 * len(old)))
        grown[: self._big_filled] = self._big_view[: self._big_filled]
        self._big = grown
        self._big_view = memoryview(grown)
        return grown

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
