"""Shared fixtures for the group coordinator tests: a coordinator on a manual clock."""

import asyncio
import functools
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

from broker.coordinator.group import GroupConfig, GroupCoordinator
from broker.coordinator.group.classic import JoinResult
from broker.coordinator.group.shard import JoinParams
from broker.coordinator.runtime import InMemoryRecordLog
from broker.coordinator.timer import ManualScheduler

PARTITIONS = 3


@dataclass
class Env:
    coord: GroupCoordinator
    sched: ManualScheduler
    logs: dict[int, InMemoryRecordLog] = field(default_factory=dict)

    async def advance(self, ms: int) -> None:
        # let requests already started reach their wait before time moves
        for _ in range(20):
            await asyncio.sleep(0)
        await self.sched.advance(ms, self.coord.settle)

    def log_for(self, group_id: str) -> InMemoryRecordLog:
        return self.logs[self.coord.partition_for(group_id)]


def config(**overrides: Any) -> GroupConfig:
    base: dict[str, Any] = {
        "num_partitions": PARTITIONS,
        "initial_rebalance_delay_ms": 3000,
        "min_session_timeout_ms": 1000,
        "wait_guard_ms": 5000,
    }
    base.update(overrides)
    return GroupConfig(**base)


async def make_env(
    cfg: GroupConfig | None = None, logs: dict[int, InMemoryRecordLog] | None = None
) -> Env:
    sched = ManualScheduler()
    env = Env(GroupCoordinator(cfg or config(), sched), sched)
    for p in range(PARTITIONS):
        env.logs[p] = logs[p] if logs else InMemoryRecordLog()
        await env.coord.load(p, env.logs[p])
    return env


def join_params(
    group: str = "g",
    member_id: str = "",
    protocols: list[tuple[str, bytes]] | None = None,
    instance: str | None = None,
    session_ms: int = 10_000,
    rebalance_ms: int = 30_000,
    require_known: bool = False,
    client_id: str = "c",
) -> JoinParams:
    return JoinParams(
        group_id=group,
        member_id=member_id,
        group_instance_id=instance,
        client_id=client_id,
        client_host="/127.0.0.1",
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=rebalance_ms,
        protocol_type="consumer",
        protocols=protocols or [("range", b"meta")],
        require_known_member_id=require_known,
        supports_skip_assignment=True,
    )


def start_join(env: Env, params: JoinParams) -> "asyncio.Task[JoinResult]":
    return asyncio.ensure_future(env.coord.join_group(params))


def async_test(fn: Callable[[], Coroutine[Any, Any, None]]) -> Callable[[], None]:
    """Run an async test on a fresh loop, failing instead of hanging."""

    @functools.wraps(fn)
    def wrapper() -> None:
        asyncio.run(asyncio.wait_for(fn(), 10))

    return wrapper
