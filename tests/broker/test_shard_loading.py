"""CoordinatorShards runs the loads and unloads of one partition in the order it was asked for
them, never side by side (issue 32: a leader change as load, unload, load let the unload finish
after the newer load and take its shard away)."""

import asyncio
import uuid
from collections.abc import Coroutine
from types import SimpleNamespace
from typing import Any

from broker.coordinator.shard_loading import CoordinatorShards
from broker.metadata.image import MetadataImage, PartitionImage, TopicImage

from .group_support import async_test

TOPIC = "__transaction_state"
NODE = 1


def image(leader: int, epoch: int) -> MetadataImage:
    part = PartitionImage(0, (NODE,), (NODE,), leader, epoch, epoch)
    return MetadataImage(topics={TOPIC: TopicImage(TOPIC, uuid.uuid4(), {0: part})})


class SlowCoordinator:
    """A load replays a long log (yields many times); records what ran, and any overlap."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.running = 0
        self.overlapped = False

    async def _op(self, name: str, turns: int) -> None:
        self.running += 1
        self.overlapped |= self.running > 1
        self.calls.append(f"{name} start")
        for _ in range(turns):
            await asyncio.sleep(0)
        self.calls.append(f"{name} end")
        self.running -= 1

    async def load(self, partition: int, log: Any) -> None:
        await self._op(f"load {log.leader_epoch}", 20)

    async def unload(self, partition: int) -> None:
        await self._op("unload", 2)


@async_test
async def test_a_leader_change_loads_unloads_and_loads_in_order() -> None:
    coord = SlowCoordinator()
    tasks: list[asyncio.Task[None]] = []

    def spawn(coro: Coroutine[Any, Any, None]) -> None:
        tasks.append(asyncio.ensure_future(coro))

    epoch = {"now": 0}

    class Hosted:
        log = SimpleNamespace()

        @property
        def leader_epoch(self) -> int:
            return epoch["now"]

    replicas = SimpleNamespace(get=lambda _t, _p: Hosted())
    shards = CoordinatorShards(TOPIC, coord, NODE, replicas, lambda: 0, spawn)  # type: ignore[arg-type]
    epoch["now"] = 10
    shards.sync(image(NODE, 10))
    await asyncio.sleep(0)  # the first load is replaying
    shards.sync(image(-1, 11))
    epoch["now"] = 12
    shards.sync(image(NODE, 12))
    for _ in range(10):
        await asyncio.gather(*tasks)
    assert not coord.overlapped, coord.calls
    assert [c for c in coord.calls if c.endswith("start")] == [
        "load 10 start",
        "unload start",
        "load 12 start",
    ]
    assert shards.loaded == {0}
