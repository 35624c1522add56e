"""What the mirror manager knows of the partitions it leads: each one's `PartitionInfo` (its
state as last read from or written to the mirror coordinator, and what --describe shows), the
per-partition lock every transition runs under, and marking a partition FAILED. One object,
given to each of the manager's parts.
"""

import asyncio
import logging

from ..metadata.mirror_states import MirrorState
from .core.states import PartitionInfo
from .manager_interfaces import Key, StateStore

# The name the code logged under before manager.py was split: KMIRROR_LOG_LEVELS lines and the
# (logger) of log lines stay the same.
log = logging.getLogger("broker.mirror.manager")


class PartitionBook:
    def __init__(self, states: StateStore) -> None:
        self._states = states
        self.info: dict[Key, PartitionInfo] = {}
        self._locks: dict[Key, asyncio.Lock] = {}

    def lock(self, key: Key) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    async def mark_failed(self, key: Key, info: PartitionInfo, problem: str) -> None:
        log.error("mirror %s: %s-%d not mirrored: %s", info.mirror, *key, problem)
        await self._states.write_state(info.mirror, info.topic_id, key[1], MirrorState.FAILED)
        info.state = MirrorState.FAILED
        info.error = problem
