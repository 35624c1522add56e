"""What the mirror fetchers' parts need of each other, as narrow interfaces: parking or failing
a partition (`Parking`), applying one partition of a Fetch answer (`Appender`), realigning a log
that diverged (`Reconciler`), and the bundle a fetch loop is built with (`FetcherServices`).
`fetcher.MirrorFetcherManager` makes the objects behind them and passes them in.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from protocol.fetch_codec import FetchPartitionData

from .fetch_logs import LocalLogs
from .fetch_state import FetchPartition, SentFetch
from .fetch_throttle import TokenBucket


class Parking(Protocol):
    def park(self, p: FetchPartition, error: str | None, *, backoff: bool = True) -> None:
        """Take a partition off its fetcher until Metadata names its (new) leader."""
        ...

    def fail(self, p: FetchPartition, reason: str) -> None:
        """The partition cannot be mirrored: not fetched again, the owner is told."""
        ...


class Applied(NamedTuple):
    """What applying one partition of a Fetch answer came to."""

    appended: int  # record bytes appended to the local log
    reconcile: bool = False  # the local log must be realigned with the source first
    diverged: tuple[int, int] | None = None  # (epoch, end offset) the source said we part at


class Appender(Protocol):
    def apply(self, p: FetchPartition, sent: SentFetch, data: FetchPartitionData) -> Applied: ...


class Reconciler(Protocol):
    async def reconcile(self, p: FetchPartition, diverged: tuple[int, int] | None) -> None: ...


@dataclass(frozen=True, slots=True)
class FetcherServices:
    """What every fetch loop of a node shares."""

    node_id: int
    cluster_id: str  # names our mirrors to a kmirror source (synchronous mirroring)
    logs: LocalLogs
    parking: Parking
    appender: Appender
    reconciler: Reconciler
    throttle: TokenBucket  # the destination's mirror replication throttle
    now_ms: Callable[[], int]
    rng: random.Random
