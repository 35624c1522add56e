"""What a part of a group shard needs from the shard's owner: the clock and keyed timers whose
operations run on that part.

A timer fires as a write on the shard *current* when it fires (the runtime may have rebuilt the
shard from its log since the timer was set), so an operation names no object: it receives the
part to act on. `PartTimers` gives each part that view of the shard's `ShardContext`; the parts
depend only on the `Timers` protocol here, never on the shard that holds them.
"""

from collections.abc import Callable
from typing import Generic, Protocol, TypeVar

from broker.coordinator.runtime import Shard, ShardContext, WriteResult

P = TypeVar("P")
P_co = TypeVar("P_co", covariant=True)
S = TypeVar("S", bound=Shard)


class Clock(Protocol):
    """The shard's clock, and cancelling its timers by key (which part set one does not matter)."""

    def now_ms(self) -> int: ...

    def cancel(self, key: str) -> None: ...

    def is_scheduled(self, key: str) -> bool: ...


class Timers(Clock, Protocol[P_co]):
    """`Clock`, and timers whose operation runs on the part `P` of the shard they fire on."""

    def schedule(
        self, key: str, delay_ms: int, op: Callable[[P_co], "WriteResult[None] | None"]
    ) -> None: ...


class PartTimers(Generic[S, P]):
    """The shard's timers as one part sees them: `part` picks that part out of a shard."""

    def __init__(self, ctx: ShardContext[S], part: Callable[[S], P]) -> None:
        self._ctx = ctx
        self._part = part

    def now_ms(self) -> int:
        return self._ctx.now_ms()

    def cancel(self, key: str) -> None:
        self._ctx.cancel(key)

    def is_scheduled(self, key: str) -> bool:
        return self._ctx.is_scheduled(key)

    def schedule(
        self, key: str, delay_ms: int, op: Callable[[P], "WriteResult[None] | None"]
    ) -> None:
        part = self._part
        self._ctx.schedule(key, delay_ms, lambda shard: op(part(shard)))
