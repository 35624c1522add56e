"""The mirror manager's hold on a partition's fetcher: started (once the source passed the
KIP's cluster-id guard), stopped, restarted when the mirror's connection settings change; a
source that must not be mirrored fails the partition instead. Also the per-partition lock
every transition runs under.

`FetcherControl` is the base of `MirrorManager` and of its other parts (mixins: the state is
the manager's, set up by `MirrorManager.__init__`).
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable

from ..controller import mirror_config
from ..metadata.image import MIRROR_RESOURCE, MetadataImage
from ..metadata.mirror_states import MirrorState
from .core.states import PartitionInfo
from .manager_interfaces import Fetchers, Key, Replicas, StateStore

# The name the code logged under before manager.py was split: KMIRROR_LOG_LEVELS lines and the
# (logger) of log lines stay the same.
log = logging.getLogger("broker.mirror.manager")


class FetcherControl:
    """Start, stop and restart partitions' fetchers; the state shared by the manager's parts."""

    _image: Callable[[], MetadataImage]
    _replicas: Replicas
    _states: StateStore
    _fetchers: Fetchers
    _bump: Callable[[str, int, int], Awaitable[None]]
    _clear: Callable[[str], Awaitable[None]]
    _source_cluster_id: Callable[[str], Awaitable[str | None]]
    _verify: Callable[[str], Awaitable[tuple[bool, str | None]]] | None
    _verified: dict[str, dict[str, str]]
    _verify_locks: dict[str, asyncio.Lock]
    _now_ms: Callable[[], int]
    _monotonic: Callable[[], float]
    _info: dict[Key, PartitionInfo]
    _started_with: dict[str, dict[str, str]]
    _locks: dict[Key, asyncio.Lock]
    _tasks: set["asyncio.Task[None]"]
    _fetching: set[Key]
    _bumping: dict[Key, "asyncio.Task[None]"]
    _markers: dict[Key, tuple[int, int]]
    _epoch_waiters: dict[Key, list["asyncio.Future[None]"]]
    _closed: bool
    _last_error: dict[Key, str]
    _touched: set[Key]
    _last_sweep: float

    def _lock(self, key: Key) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    async def _start_fetcher(self, key: Key, info: PartitionInfo) -> None:
        # internal bookkeeping keys (mirror_patterns) stripped: they change without reconnecting
        source = mirror_config.client_settings(self._image().config(MIRROR_RESOURCE, info.mirror))
        if not source:
            log.warning("mirror %s has no configuration; %s-%d not fetched", info.mirror, *key)
            return
        if not await self._source_ok(key, info):
            return
        now = mirror_config.client_settings(self._image().config(MIRROR_RESOURCE, info.mirror))
        if now != source:
            return  # the settings changed during the check: the change restarts this fetcher
        await self._fetchers.add(info.mirror, source, {key: info.topic_id})
        self._fetching.add(key)
        self._started_with[info.mirror] = source

    async def _source_ok(self, key: Key, info: PartitionInfo) -> bool:
        """The KIP's cluster-id guard before anything is truncated or fetched: once per mirror
        and connection settings (a config change reconnects, so it is checked again). A source
        that is this cluster, or not the recorded one, fails the partition (FAILED) instead.
        An unreachable source passes unchecked (and is checked at the next start)."""
        if self._verify is None:
            return True
        mirror = info.mirror
        settings = mirror_config.client_settings(self._image().config(MIRROR_RESOURCE, mirror))
        if self._verified.get(mirror) == settings:
            return True  # checked already: thousands of partitions starting must not queue
        problem: str | None = None
        async with self._verify_locks.setdefault(mirror, asyncio.Lock()):  # one check per mirror
            if self._verified.get(mirror) != settings:
                checked, problem = await self._verify(mirror)
                if checked and problem is None:
                    self._verified[mirror] = settings
        if problem is None:
            return True
        await self._mark_failed(key, info, problem)
        return False

    async def _mark_failed(self, key: Key, info: PartitionInfo, problem: str) -> None:
        log.error("mirror %s: %s-%d not mirrored: %s", info.mirror, *key, problem)
        await self._states.write_state(info.mirror, info.topic_id, key[1], MirrorState.FAILED)
        info.state = MirrorState.FAILED
        info.error = problem

    async def _stop_fetcher(self, key: Key, mirror: str) -> None:
        if key in self._fetching:
            await self._fetchers.remove(mirror, [key])
            self._fetching.discard(key)

    async def _restart_fetcher(self, key: Key, info: PartitionInfo) -> None:
        async with self._lock(key):
            if key in self._fetching:
                await self._stop_fetcher(key, info.mirror)
                await self._start_fetcher(key, info)
