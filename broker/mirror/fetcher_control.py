"""The mirror manager's hold on a partition's fetcher: started (once the source passed the
KIP's cluster-id guard), stopped, restarted when the mirror's connection settings change; a
source that must not be mirrored fails the partition instead.
"""

import asyncio
import logging
from collections.abc import Awaitable, Callable

from ..controller import mirror_config
from ..metadata.image import MIRROR_RESOURCE, MetadataImage
from .core.states import PartitionInfo
from .manager_interfaces import Fetchers, Key
from .partition_book import PartitionBook

# The name the code logged under before manager.py was split: KMIRROR_LOG_LEVELS lines and the
# (logger) of log lines stay the same.
log = logging.getLogger("broker.mirror.manager")


class FetcherControl:
    """Start, stop and restart partitions' fetchers; which partitions are being fetched."""

    def __init__(
        self,
        image: Callable[[], MetadataImage],
        fetchers: Fetchers,
        book: PartitionBook,
        verify_source: Callable[[str], Awaitable[tuple[bool, str | None]]] | None,
    ) -> None:
        self._image = image
        self._fetchers = fetchers
        self._book = book
        self._verify = verify_source
        # per mirror: the connection settings whose source passed the identity check
        self._verified: dict[str, dict[str, str]] = {}
        self._verify_locks: dict[str, asyncio.Lock] = {}
        # per mirror, the connection settings its fetchers were started with: a change of
        # its bookkeeping keys alone (a failover remembers removed topics) restarts nothing
        self._started_with: dict[str, dict[str, str]] = {}
        self._fetching: set[Key] = set()

    def fetching(self, key: Key) -> bool:
        return key in self._fetching

    def settings_changed(self, image: MetadataImage, mirror: str) -> bool:
        """A mirror's config changed: True when its connection settings differ from those its
        fetchers were started with (never started, or bookkeeping keys only: False)."""
        settings = mirror_config.client_settings(image.config(MIRROR_RESOURCE, mirror))
        if self._started_with.get(mirror, settings) == settings:
            return False
        self._started_with[mirror] = settings
        return True

    async def start(self, key: Key, info: PartitionInfo) -> None:
        # internal bookkeeping keys (mirror_patterns) stripped: they change without reconnecting
        source = mirror_config.client_settings(self._image().config(MIRROR_RESOURCE, info.mirror))
        if not source:
            log.warning("mirror %s has no configuration; %s-%d not fetched", info.mirror, *key)
            return
        if not await self.source_ok(key, info):
            return
        now = mirror_config.client_settings(self._image().config(MIRROR_RESOURCE, info.mirror))
        if now != source:
            return  # the settings changed during the check: the change restarts this fetcher
        await self._fetchers.add(info.mirror, source, {key: info.topic_id})
        self._fetching.add(key)
        self._started_with[info.mirror] = source

    async def source_ok(self, key: Key, info: PartitionInfo) -> bool:
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
        await self._book.mark_failed(key, info, problem)
        return False

    async def stop(self, key: Key, mirror: str) -> None:
        if key in self._fetching:
            await self._fetchers.remove(mirror, [key])
            self._fetching.discard(key)

    async def restart(self, key: Key, info: PartitionInfo) -> None:
        async with self._book.lock(key):
            if key in self._fetching:
                await self.stop(key, info.mirror)
                await self.start(key, info)
