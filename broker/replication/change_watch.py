"""What a long-polling Fetch over many partitions waits on: every partition it reads registers
the watch once, and each one that moves (log end, high watermark, role) while the Fetch waits is
noted by its key, so the Fetch reads those again rather than every partition of its session (a
follower's session holds every partition the two nodes share: thousands)."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any


class ChangeWatch:
    __slots__ = ("_fut", "_moved")

    def __init__(self) -> None:
        self._fut: asyncio.Future[None] | None = None
        self._moved: dict[Any, None] = {}  # keys in the order they moved

    def notify(self, key: Any) -> None:
        self._moved[key] = None
        fut = self._fut
        if fut is not None and not fut.done():
            fut.set_result(None)

    async def wait(self, timeout_s: float) -> list[Any]:
        """The keys that moved since the last call, waiting up to ``timeout_s`` for one."""
        if not self._moved and timeout_s > 0:
            self._fut = asyncio.get_running_loop().create_future()
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._fut, timeout_s)
            finally:
                self._fut = None
        moved, self._moved = list(self._moved), {}
        return moved
