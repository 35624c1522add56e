"""The local side of the mirror fetchers: the hosted partitions they append to, found by name
(`Partition`: every cut and append goes through it), and the node log writer's back-pressure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from ..log.partition_log import PartitionLog
from ..replication.partition import Partition
from .fetch_state import FetchPartition


class LocalLogs:
    def __init__(self, get_partition: Callable[[str, int], Partition | None]) -> None:
        self.partition = get_partition

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        part = self.partition(topic, partition)
        return None if part is None else part.log

    def writer_room(self, parts: Iterable[FetchPartition]) -> asyncio.Future[None] | None:
        """Back-pressure from the node's log writer (``LogWriter.room``): None to go on."""
        for p in parts:
            part = self.partition(p.topic, p.partition)
            if part is not None:
                room = part.log.writer_room()
                if room is not None:
                    return room
        return None
