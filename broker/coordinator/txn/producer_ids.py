"""Producer ids for InitProducerId, taken from blocks the controller allocates.

A block (Kafka's AllocateProducerIds, a ProducerIdsRecord in the metadata log) is durable
before any id in it is handed out, so ids never repeat across restarts; a restart abandons the
rest of the current block, as in Kafka.
"""

import asyncio
from collections.abc import Awaitable, Callable

AllocateBlock = Callable[[], Awaitable[tuple[int, int]]]


class ProducerIdManager:
    def __init__(self, allocate_block: AllocateBlock) -> None:
        self._allocate = allocate_block
        self._next = 0
        self._end = 0
        self._lock = asyncio.Lock()

    async def next_id(self) -> int:
        async with self._lock:
            if self._next >= self._end:
                start, size = await self._allocate()
                if size <= 0:
                    raise RuntimeError(f"the controller allocated an empty block at {start}")
                self._next, self._end = start, start + size
            pid = self._next
            self._next += 1
            return pid
