"""Which coordinator shards a node holds: those of the internal-topic partitions it leads.

A coordinator (groups on ``__consumer_offsets``, transactions on ``__transaction_state``,
mirror states on ``__mirror_state``) keeps one shard per partition of its topic. After every
metadata change the node calls `CoordinatorShards.sync`: a partition this node now leads (and
hosts) is loaded from its log, one it no longer leads is unloaded. Loading replays the log, so it
runs as a task (``spawn``) rather than in the metadata listener.

The loads and unloads of one partition run one after the other, in the order ``sync`` asked for
them: a leader change (leader, none, leader again: every node start replays one) spawns a load,
an unload and a load, and a load replaying a long log yields to the loop. Run side by side, an
unload could finish after the newer load, or an older load after the unload, and leave the shard
in the wrong hands (issue 32).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from ..metadata.image import MetadataImage
from ..replication.replica_manager import ReplicaManager
from .partition_record_log import PartitionRecordLog


class ShardedCoordinator(Protocol):
    async def load(self, partition: int, log: PartitionRecordLog, /) -> None: ...
    async def unload(self, partition: int, /) -> None: ...


class CoordinatorShards:
    def __init__(
        self,
        topic: str,
        coordinator: ShardedCoordinator,
        node_id: int,
        replicas: ReplicaManager,
        now_ms: Callable[[], int],
        spawn: Callable[[Coroutine[Any, Any, None]], None],
    ) -> None:
        self._topic = topic
        self._coordinator = coordinator
        self._node_id = node_id
        self._replicas = replicas
        self._now_ms = now_ms
        self._spawn = spawn
        self.loaded: set[int] = set()
        # partition -> resolved when its last queued load/unload has run
        self._tails: dict[int, asyncio.Future[None]] = {}

    def sync(self, image: MetadataImage) -> None:
        """Load the shards of the partitions this node leads, unload the others."""
        topic = image.topics.get(self._topic)
        wanted = set()
        if topic is not None:
            wanted = {p for p, part in topic.partitions.items() if part.leader == self._node_id}
        for p in sorted(wanted - self.loaded):
            hosted = self._replicas.get(self._topic, p)
            if hosted is None:
                continue
            self.loaded.add(p)
            rlog = PartitionRecordLog(hosted, self._now_ms)
            self._queue(p, self._coordinator.load(p, rlog))
        for p in sorted(self.loaded - wanted):
            self.loaded.discard(p)
            self._queue(p, self._coordinator.unload(p))

    def _queue(self, partition: int, op: Coroutine[Any, Any, None]) -> None:
        """Run `op` once the partition's earlier loads and unloads are done."""
        before = self._tails.get(partition)
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._tails[partition] = done

        async def run() -> None:
            try:
                if before is not None:
                    await before
                await op
            finally:
                done.set_result(None)
                if self._tails.get(partition) is done:
                    del self._tails[partition]

        self._spawn(run())
