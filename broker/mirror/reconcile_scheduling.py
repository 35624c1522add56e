"""When mirror partitions are looked at: metadata changes (a topic's ``mirror.name``, a mirror's
connection settings, a leader epoch applied), the periodic retry (only what some work touched,
plus a full sweep now and then), a step down and a failed fetch each start a task per partition
that needs one. The stepping itself is the `Stepper` it is given (`partition_steps`).
"""

import asyncio
import logging
import uuid
from collections.abc import Callable, Collection
from typing import Any

from ..metadata.image import MIRROR_RESOURCE, TOPIC_RESOURCE, Delta, MetadataImage
from ..metadata.mirror_states import MIRROR_NAME_CONFIG, MirrorState
from .core.states import Wanted, current, wanted_from_config
from .manager_interfaces import Key, Stepper
from .partition_parts import PartitionParts

# The name the code logged under before manager.py was split: KMIRROR_LOG_LEVELS lines and the
# (logger) of log lines stay the same.
log = logging.getLogger("broker.mirror.manager")

# reconcile_all looks at every mirrored topic this often (a backstop; work marks what it touched)
FULL_SWEEP_S = 30.0


class ReconcileScheduling:
    """Starts the reconcile, step-down and failure tasks, and keeps track of them."""

    def __init__(
        self,
        parts: PartitionParts,
        stepper: Stepper,
        monotonic: Callable[[], float],
    ) -> None:
        self._parts = parts
        self._info = parts.book.info
        self._stepper = stepper
        self._monotonic = monotonic
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self._last_error: dict[Key, str] = {}
        # partitions some work touched since the last retry (see reconcile_all)
        self._touched: set[Key] = set()
        self._last_sweep = float("-inf")  # the first retry looks at everything

    @property
    def running(self) -> int:
        """Reconcile tasks under way."""
        return len(self._tasks)

    @property
    def touched(self) -> frozenset[Key]:
        """The partitions the next per-second retry looks at (see `reconcile_all`)."""
        return frozenset(self._touched)

    async def drain(self) -> None:
        """Until the tasks under way now are done (their exceptions are raised here)."""
        if self._tasks:
            await asyncio.gather(*list(self._tasks))

    async def close(self) -> None:
        """No task is started any more; the ones under way are cancelled and awaited."""
        self._closed = True
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- reacting to metadata ----------------------------------------------------------------

    def on_metadata(self, image: MetadataImage, delta: Delta) -> None:
        topics: set[str] = set()  # every partition looked at: the wanted state may have moved
        mirrors_changed: set[str] = set()
        for rtype, name in delta.changed_configs:
            if rtype == TOPIC_RESOURCE:
                topics.add(name)
            elif rtype == MIRROR_RESOURCE:
                mirrors_changed.add(name)
        # only the partitions that changed (a failover's epoch bumps come in batches: looking
        # at all the topic's partitions for each was thousands of tasks per batch)
        changed: dict[str, list[int]] = {}
        for name, p in delta.changed_partitions:
            self._parts.failover.epoch_applied((name, p))
            if name not in topics:
                changed.setdefault(name, []).append(p)
        for gone in delta.deleted_topics:
            for p in gone.partitions:
                self._info.pop((gone.name, p), None)
        for m in list(mirrors_changed):
            if not self._parts.fetcher.settings_changed(image, m):
                mirrors_changed.discard(m)  # never started, or bookkeeping keys only
        if mirrors_changed:
            # a mirror's connection settings changed: restart its fetchers so they reconnect
            for key, info in list(self._info.items()):
                if info.mirror in mirrors_changed and self._parts.fetcher.fetching(key):
                    self._spawn(self._parts.fetcher.restart(key, info), key)
        for name in topics:
            self.reconcile_topic(image, name)
        for name, partitions in changed.items():
            self.reconcile_topic(image, name, partitions=partitions)

    def reconcile_all(self) -> None:
        """The periodic retry (every second). Only the partitions some work touched since the
        last call are looked at (``_touched``: a reconcile, a failure, a step down; metadata
        changes reach their topics through ``on_metadata``), and only those not yet where they
        are wanted get a task: stable mirrored partitions cost nothing per second. Every
        ``FULL_SWEEP_S`` every topic is looked at too, as a backstop."""
        img = self._parts.image()
        now = self._monotonic()
        if now - self._last_sweep >= FULL_SWEEP_S:
            self._last_sweep = now
            self._touched.clear()
            for name in list(img.topics):
                self.reconcile_topic(img, name, only_unsettled=True)
            return
        touched, self._touched = self._touched, set()
        by_topic: dict[str, set[int]] = {}
        for topic, partition in touched:
            by_topic.setdefault(topic, set()).add(partition)
        for name, partitions in by_topic.items():
            self.reconcile_topic(img, name, only_unsettled=True, partitions=partitions)

    def reconcile_topic(
        self,
        image: MetadataImage,
        name: str,
        *,
        only_unsettled: bool = False,
        partitions: Collection[int] | None = None,
    ) -> None:
        topic = image.topics.get(name)
        if topic is None:
            return
        wanted = wanted_from_config(image.config(TOPIC_RESOURCE, name).get(MIRROR_NAME_CONFIG))
        if wanted is None:
            return
        # STOPPED everywhere here and the suffix still set: one task retries clearing it
        clear_pending = wanted.state == MirrorState.STOPPED
        for p in topic.partitions if partitions is None else partitions:
            if p not in topic.partitions:
                continue
            key = (name, p)
            hosted = self._parts.replicas.get(name, p)
            if hosted is not None and hosted.is_leader:
                if only_unsettled and self._settled(
                    key, topic.topic_id, wanted, hosted.leader_epoch
                ):
                    if clear_pending and self._info[key].state == MirrorState.STOPPED:
                        clear_pending = False
                        self._spawn(self._reconcile(key, topic.topic_id), key)
                    continue
                self._spawn(self._reconcile(key, topic.topic_id), key)
            elif key in self._info:
                self._spawn(self._step_down(key), key)

    def _settled(self, key: Key, topic_id: uuid.UUID, wanted: "Wanted", leader_epoch: int) -> bool:
        info = self._info.get(key)
        if info is None or not current(info, wanted.mirror, topic_id, leader_epoch):
            return False
        if info.state == MirrorState.FAILED:
            return wanted.state != MirrorState.STOPPED  # stays FAILED until removed
        if info.state != wanted.state:
            return False
        return info.state != MirrorState.MIRRORING or self._parts.fetcher.fetching(key)

    async def _step_down(self, key: Key) -> None:
        """This node no longer leads ``key``: its fetcher stops, and the state stays with the
        coordinator for the new leader (nothing is written from here)."""
        async with self._parts.book.lock(key):
            hosted = self._parts.replicas.get(*key)
            if hosted is not None and hosted.is_leader:
                return  # leading again by the time the lock was free
            info = self._info.pop(key, None)
            self._last_error.pop(key, None)
            self._parts.failover.cancel_bump(key)  # the new leader bumps for itself
            if info is not None:
                await self._parts.fetcher.stop(key, info.mirror)
                log.info(
                    "mirror %s: %s-%d is led elsewhere now; fetcher stopped", info.mirror, *key
                )

    def on_fetch_failed(self, mirror: str, topic: str, partition: int, reason: str) -> None:
        info = self._info.get((topic, partition))
        log.error("mirror %s: %s-%d failed: %s", mirror, topic, partition, reason)
        if info is not None:
            info.error = reason
        self._spawn(self._fail((topic, partition), reason), (topic, partition))

    # -- the work ------------------------------------------------------------------------------

    def _spawn(self, coro: Any, key: Key | None = None) -> None:
        """Run ``coro``; once done, ``key``'s partition is looked at by the next retry."""
        if self._closed:
            coro.close()
            return
        task = asyncio.get_event_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        if key is not None:
            task.add_done_callback(lambda _t: self._touched.add(key))

    def _done(self, task: "asyncio.Task[None]") -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("mirror reconcile failed", exc_info=task.exception())

    async def _fail(self, key: Key, reason: str) -> None:
        async with self._parts.book.lock(key):
            info = self._info.get(key)
            if info is None or info.state == MirrorState.FAILED:
                return
            await self._parts.fetcher.stop(key, info.mirror)
            await self._parts.states.write_state(
                info.mirror, info.topic_id, key[1], MirrorState.FAILED
            )
            info.state = MirrorState.FAILED
            info.error = reason

    async def _reconcile(self, key: Key, topic_id: uuid.UUID) -> None:
        try:
            await self._stepper.step(key, topic_id)
        except Exception as e:
            code = getattr(e, "code", None)
            if code is not None:  # coordinator not loaded yet, source unreachable...: retried later
                why = f"{e} (code {code})"
                if self._last_error.get(key) != why:  # once per distinct reason, not every retry
                    self._last_error[key] = why
                    log.warning("mirror partition %s-%d waits: %s", *key, why)
            else:
                raise
