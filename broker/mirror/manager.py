"""Drives each local mirror partition through the KIP-1279 state machine.

The wanted state comes from the topic's ``mirror.name`` config (``<m>``: mirroring, ``<m>.paused``:
paused, ``<m>.removed``: failover); the current state from the mirror coordinator. A reconcile task
per partition steps the partition one valid transition at a time, doing each state's work:

- PREPARING: align the log with the source (truncate where the epoch histories diverge), then
  MIRRORING, which starts the fetcher (which resumes from the local log end offset).
- PAUSING: stop the fetcher, then PAUSED. Resume goes straight back to MIRRORING.
- STOPPING (failover): stop the fetcher, truncate to the last stable offset and persist STOPPING
  with the last mirrored epoch in one write, while the leader epoch is bumped above every
  mirrored epoch (the KIP bumps first; nothing is appended locally until STOPPED, so the log's
  latest epoch is still the mirrored one either way); then write the MIRROR_PID_RESET control
  batch and STOPPED, from which the partition is writable. Once every partition of the topic is
  STOPPED its ``mirror.name`` is cleared.
- FAILED stays FAILED until the operator removes the topic from the mirror. Besides errors
  (a corrupt batch, a refused source), PREPARING fails a partition whose replicas do not complete
  the LME truncation within ``mirror.truncation.timeout.ms`` (`truncation_wait` has the rule).

Only the node leading a destination partition drives it (and runs its fetcher); the other
replicas follow that leader like any partition's followers. A node that stops leading stops
its fetcher and forgets the partition's state without writing it; the new leader reads the
state from the coordinator and resumes from its own log end (after PREPARING's alignment when
the state says so).

Everything is injected (coordinator, fetchers, controller operations, source queries) so the
manager is tested without sockets, and so the seams for a multi-node cluster stay where the KIP
puts them.
"""

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from protocol.records import build_mirror_pid_reset

from ..controller import mirror_config
from ..log.validation import AppendOrigin
from ..metadata.image import MIRROR_RESOURCE, TOPIC_RESOURCE, Delta, MetadataImage
from ..metadata.mirror_states import (
    MIRROR_NAME_CONFIG,
    PAUSED_SUFFIX,
    REMOVED_SUFFIX,
    MirrorState,
)
from . import truncation_wait
from .truncation_wait import Outcome

log = logging.getLogger(__name__)

UNCLEAN_CONFIG = "mirror.support.unclean.leader.election"
# How long one PREPARING attempt waits for the other replicas to truncate; a follower fetches
# at least every replica.fetch.wait.max.ms (500 ms), so this is several rounds.
TRUNCATION_WAIT_S = 5.0
# reconcile_all looks at every mirrored topic this often (a backstop; work marks what it touched)
FULL_SWEEP_S = 30.0
# How long STOPPING waits for this node's metadata to show the bumped leader epoch.
EPOCH_APPLY_WAIT_S = 10.0
EPOCH_RECHECK_S = 0.25

Key = tuple[str, int]  # (topic, partition)


class SourceRefused(Exception):
    """The cluster that answered as a mirror's source must not be mirrored (this cluster, or
    not the one the mirror recorded): the partition fails rather than truncate or fetch."""


class StateStore(Protocol):
    async def read_state(
        self, mirror: str, topic_id: uuid.UUID, partition: int
    ) -> tuple[MirrorState, int | None]: ...
    async def write_state(
        self, mirror: str, topic_id: uuid.UUID, partition: int, new: MirrorState
    ) -> None: ...
    async def write_last_mirror_epoch(
        self, mirror: str, topic_id: uuid.UUID, partition: int, epoch: int
    ) -> None: ...
    async def write_partition(
        self,
        mirror: str,
        topic_id: uuid.UUID,
        partition: int,
        state: MirrorState | None,
        epoch: int | None,
    ) -> None:
        """A transition and an LME in one atomic write (None leaves either alone)."""
        ...


class Fetchers(Protocol):
    async def add(
        self,
        mirror: str,
        source_config: Mapping[str, str],
        partitions: Mapping[Key, uuid.UUID | None],
    ) -> None: ...
    async def remove(self, mirror: str, partitions: Any) -> None: ...


@dataclass(frozen=True, slots=True)
class Wanted:
    mirror: str
    state: MirrorState  # MIRRORING, PAUSED or STOPPED


def wanted_from_config(value: str | None) -> Wanted | None:
    """Parse a topic's ``mirror.name`` config."""
    if not value:
        return None
    if value.endswith(REMOVED_SUFFIX):
        return Wanted(value[: -len(REMOVED_SUFFIX)], MirrorState.STOPPED)
    if value.endswith(PAUSED_SUFFIX):
        return Wanted(value[: -len(PAUSED_SUFFIX)], MirrorState.PAUSED)
    return Wanted(value, MirrorState.MIRRORING)


# For a wanted state and a current one, the next state to move to (None: arrived or stuck).
def next_state(current: MirrorState, wanted: MirrorState) -> MirrorState | None:
    S = MirrorState
    if current == wanted or (current == S.FAILED and wanted != S.STOPPED):
        return None
    if wanted == S.MIRRORING:
        return {
            S.UNKNOWN: S.PREPARING,
            S.STOPPED: S.PREPARING,
            S.PREPARING: S.MIRRORING,
            S.PAUSED: S.MIRRORING,
            S.PAUSING: S.PAUSED,
            S.STOPPING: S.STOPPED,
        }.get(current)
    if wanted == S.PAUSED:
        return {
            S.UNKNOWN: S.PREPARING,
            S.PREPARING: S.MIRRORING,
            S.MIRRORING: S.PAUSING,
            S.PAUSING: S.PAUSED,
            S.STOPPING: S.STOPPED,
            S.STOPPED: S.PREPARING,
        }.get(current)
    # wanted STOPPED
    return {
        S.UNKNOWN: S.PREPARING,
        S.PREPARING: S.MIRRORING,
        S.MIRRORING: S.STOPPING,
        S.PAUSING: S.PAUSED,
        S.PAUSED: S.STOPPING,
        S.FAILED: S.STOPPING,
        S.STOPPING: S.STOPPED,
    }.get(current)


@dataclass(slots=True)
class PartitionInfo:
    mirror: str
    topic_id: uuid.UUID
    state: MirrorState
    last_mirror_epoch: int | None = None
    error: str | None = None  # why FAILED
    note: str | None = None  # what the last truncation removed, and why
    # PREPARING: when (time.monotonic()) the wait for the other replicas' truncation started
    # counting towards mirror.truncation.timeout.ms; None: not counting
    truncation_wait_since: float | None = None


class MirrorManager:
    def __init__(
        self,
        image: Callable[[], MetadataImage],
        replicas: Any,
        states: StateStore,
        fetchers: Fetchers,
        *,
        bump_leader_epoch: Callable[[str, int, int], Awaitable[None]],
        clear_mirror_name: Callable[[str], Awaitable[None]],
        source_cluster_id: Callable[[str], Awaitable[str | None]],
        align_with_source: Callable[[str, str, int, Any], Awaitable[str | None]] | None = None,
        verify_source: Callable[[str], Awaitable[tuple[bool, str | None]]] | None = None,
        now_ms: Callable[[], int],
        truncation_timeout_ms: int = truncation_wait.DEFAULT_TIMEOUT_MS,
    ) -> None:
        self._image = image
        self._replicas = replicas
        self._states = states
        self._fetchers = fetchers
        self._bump = bump_leader_epoch
        self._clear = clear_mirror_name
        self._source_cluster_id = source_cluster_id
        self._align = align_with_source
        self._verify = verify_source
        # per mirror: the connection settings whose source passed the identity check
        self._verified: dict[str, dict[str, str]] = {}
        self._verify_locks: dict[str, asyncio.Lock] = {}
        self._now_ms = now_ms
        self._info: dict[Key, PartitionInfo] = {}
        # per mirror, the connection settings its fetchers were started with: a change of
        # its bookkeeping keys alone (a failover remembers removed topics) restarts nothing
        self._started_with: dict[str, dict[str, str]] = {}
        self._locks: dict[Key, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._fetching: set[Key] = set()
        # epoch bumps started on entering STOPPING, awaited before the marker is written
        self._bumping: dict[Key, asyncio.Task[None]] = {}
        # bumps waiting for this node to apply the new epoch, woken by `on_metadata`
        self._epoch_waiters: dict[Key, list[asyncio.Future[None]]] = {}
        self._closed = False
        self._last_error: dict[Key, str] = {}
        # partitions some work touched since the last retry (see reconcile_all)
        self._touched: set[Key] = set()
        self._last_sweep = float("-inf")  # the first retry looks at everything
        self._truncation_timeout_ms = truncation_timeout_ms
        # per mirror: partitions failed because replicas did not truncate in time (a metric)
        self.truncation_timeouts: dict[str, int] = {}

    # -- queries ---------------------------------------------------------------------------

    def writable(self, topic: str, partition: int) -> bool:
        """Produce/DeleteRecords are allowed: not mirrored, or failed over (STOPPED)."""
        img = self._image()
        if not img.config(TOPIC_RESOURCE, topic).get(MIRROR_NAME_CONFIG):
            return True
        info = self._info.get((topic, partition))
        return info is not None and info.state == MirrorState.STOPPED

    def reason(self, topic: str, partition: int) -> str | None:
        """For --describe: why the partition FAILED, or the last truncation it went through."""
        info = self._info.get((topic, partition))
        return None if info is None else info.error or info.note

    def partitions(self, mirror: str | None = None) -> dict[Key, PartitionInfo]:
        return {k: v for k, v in self._info.items() if mirror is None or v.mirror == mirror}

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
            for woken in self._epoch_waiters.get((name, p), ()):
                if not woken.done():
                    woken.set_result(None)
            if name not in topics:
                changed.setdefault(name, []).append(p)
        for gone in delta.deleted_topics:
            for p in gone.partitions:
                self._info.pop((gone.name, p), None)
        for m in list(mirrors_changed):
            settings = mirror_config.client_settings(image.config(MIRROR_RESOURCE, m))
            if self._started_with.get(m, settings) == settings:
                mirrors_changed.discard(m)  # never started, or bookkeeping keys only
            else:
                self._started_with[m] = settings
        if mirrors_changed:
            # a mirror's connection settings changed: restart its fetchers so they reconnect
            for key, info in list(self._info.items()):
                if info.mirror in mirrors_changed and key in self._fetching:
                    self._spawn(self._restart_fetcher(key, info), key)
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
        img = self._image()
        now = time.monotonic()
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
            hosted = self._replicas.get(name, p)
            if hosted is not None and hosted.is_leader:
                if only_unsettled and self._settled(key, topic.topic_id, wanted):
                    if clear_pending and self._info[key].state == MirrorState.STOPPED:
                        clear_pending = False
                        self._spawn(self._reconcile(key, topic.topic_id), key)
                    continue
                self._spawn(self._reconcile(key, topic.topic_id), key)
            elif key in self._info:
                self._spawn(self._step_down(key), key)

    def _settled(self, key: Key, topic_id: uuid.UUID, wanted: "Wanted") -> bool:
        info = self._info.get(key)
        if info is None or info.mirror != wanted.mirror or info.topic_id != topic_id:
            return False
        if info.state == MirrorState.FAILED:
            return wanted.state != MirrorState.STOPPED  # stays FAILED until removed
        if info.state != wanted.state:
            return False
        return info.state != MirrorState.MIRRORING or key in self._fetching

    async def _step_down(self, key: Key) -> None:
        """This node no longer leads ``key``: its fetcher stops, and the state stays with the
        coordinator for the new leader (nothing is written from here)."""
        async with self._lock(key):
            hosted = self._replicas.get(*key)
            if hosted is not None and hosted.is_leader:
                return  # leading again by the time the lock was free
            info = self._info.pop(key, None)
            self._last_error.pop(key, None)
            bump = self._bumping.pop(key, None)
            if bump is not None:
                bump.cancel()  # the new leader bumps for itself
            if info is not None:
                await self._stop_fetcher(key, info.mirror)
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

    def _lock(self, key: Key) -> asyncio.Lock:
        lock = self._locks.get(key)
        if lock is None:
            lock = self._locks[key] = asyncio.Lock()
        return lock

    async def _fail(self, key: Key, reason: str) -> None:
        async with self._lock(key):
            info = self._info.get(key)
            if info is None or info.state == MirrorState.FAILED:
                return
            await self._stop_fetcher(key, info.mirror)
            await self._states.write_state(info.mirror, info.topic_id, key[1], MirrorState.FAILED)
            info.state = MirrorState.FAILED
            info.error = reason

    async def _reconcile(self, key: Key, topic_id: uuid.UUID) -> None:
        try:
            await self._reconcile_locked(key, topic_id)
        except Exception as e:
            code = getattr(e, "code", None)
            if code is not None:  # coordinator not loaded yet, source unreachable...: retried later
                why = f"{e} (code {code})"
                if self._last_error.get(key) != why:  # once per distinct reason, not every retry
                    self._last_error[key] = why
                    log.warning("mirror partition %s-%d waits: %s", *key, why)
            else:
                raise

    async def _reconcile_locked(self, key: Key, topic_id: uuid.UUID) -> None:
        async with self._lock(key):
            for _ in range(16):  # every chain of transitions is shorter than this
                wanted = wanted_from_config(
                    self._image().config(TOPIC_RESOURCE, key[0]).get(MIRROR_NAME_CONFIG)
                )
                if wanted is None or self._closed:
                    return
                hosted = self._replicas.get(*key)
                if hosted is None or not hosted.is_leader:
                    return  # led elsewhere: that node drives it
                info = self._info.get(key)
                if info is None or info.mirror != wanted.mirror or info.topic_id != topic_id:
                    state, lme = await self._states.read_state(wanted.mirror, topic_id, key[1])
                    info = self._info[key] = PartitionInfo(wanted.mirror, topic_id, state, lme)
                if info.state == wanted.state:
                    await self._settle(key, info, wanted)
                    return
                nxt = next_state(info.state, wanted.state)
                if nxt is None:
                    return
                before = info.state
                await self._enter(key, info, nxt, wanted)
                if info.state == before:
                    # no step (PREPARING still waits for the replicas): the next reconcile
                    # tries again, rather than this one holding the lock for 16 attempts
                    return

    async def _settle(self, key: Key, info: PartitionInfo, wanted: Wanted) -> None:
        """Make the side effects of a stable state true (e.g. after a restart)."""
        if info.state == MirrorState.MIRRORING and key not in self._fetching:
            await self._start_fetcher(key, info)
        elif info.state == MirrorState.STOPPED and wanted.state == MirrorState.STOPPED:
            await self._maybe_clear(key[0], info.mirror)

    async def _enter(self, key: Key, info: PartitionInfo, new: MirrorState, wanted: Wanted) -> None:
        topic, partition = key
        hosted = self._replicas.get(topic, partition)
        if hosted is None or not hosted.is_leader:
            return
        if new == MirrorState.STOPPED and info.state == MirrorState.STOPPING:
            await self._do_stopping(key, info, hosted)
        if info.state == MirrorState.PREPARING and new == MirrorState.MIRRORING:
            # PREPARING is left only once aligned with the source: a failed attempt (source
            # unreachable) stays in PREPARING and is retried, also after a restart.
            if not await self._source_ok(key, info):
                return
            aligned_ms = hosted.now_ms()
            if self._align is not None:
                try:
                    note = await self._align(info.mirror, topic, partition, hosted.log)
                except SourceRefused as e:  # who answered the align itself is not the source
                    await self._mark_failed(key, info, str(e))
                    return
                if note:
                    hosted.after_local_change()  # the log was cut: its HW comes down with it
                info.note = note or info.note
            # The second phase: the other replicas truncate too (they learn the cut from
            # their next fetch) before anything new is mirrored on top of it.
            if not await self._replicas_truncated(key, info, hosted, aligned_ms):
                return
        if new == MirrorState.STOPPING:
            lme = await self._enter_stopping(key, info, hosted)
            await self._states.write_partition(info.mirror, info.topic_id, partition, new, lme)
            info.last_mirror_epoch = lme if lme is not None else info.last_mirror_epoch
        else:
            await self._states.write_state(info.mirror, info.topic_id, partition, new)
        log.info(
            "mirror %s: %s-%d %s -> %s", info.mirror, topic, partition, info.state.name, new.name
        )
        info.state = new
        info.error = None
        info.truncation_wait_since = None  # a later PREPARING waits afresh
        if new == MirrorState.MIRRORING and wanted.state == MirrorState.MIRRORING:
            await self._start_fetcher(key, info)
        elif new in (MirrorState.PAUSED, MirrorState.STOPPING):
            await self._stop_fetcher(key, info.mirror)
        elif new == MirrorState.STOPPED:
            await self._maybe_clear(topic, info.mirror)

    async def _replicas_truncated(
        self, key: Key, info: PartitionInfo, hosted: Any, since_ms: int
    ) -> bool:
        """KIP-1279's LME truncation, phase two: wait (one attempt, bounded) until every ISR
        member, or every replica with ``mirror.support.unclean.leader.election=true``, has
        fetched with a log consistent with the leader's cut one. False leaves the partition in
        PREPARING (tried again on the next reconcile) with the reason shown by ``--describe``,
        or, once ``mirror.truncation.timeout.ms`` has passed with enough ISR, FAILED
        (`truncation_wait` has the rule and why)."""
        topic_config = self._image().config(TOPIC_RESOURCE, key[0])
        all_replicas = topic_config.get(UNCLEAN_CONFIG, "false").lower() == "true"
        timeout_s = self._truncation_timeout_ms / 1000
        now = time.monotonic()
        if info.truncation_wait_since is None:
            info.truncation_wait_since = now
        since = info.truncation_wait_since
        deadline = min(now + TRUNCATION_WAIT_S, since + timeout_s)
        while True:
            behind = hosted.replicas_behind(since_ms, all_replicas=all_replicas)
            waited = time.monotonic() - since
            outcome = truncation_wait.judge(
                behind,
                under_min_isr=hosted.leader.under_min_isr,
                waited_s=waited,
                timeout_s=timeout_s,
            )
            if outcome == Outcome.TRUNCATED:
                return True
            if outcome == Outcome.RETRY:  # the clock stops until the ISR is back
                info.truncation_wait_since = None
                info.note = (
                    f"waiting for min.insync.replicas ({hosted.leader.effective_min_isr}) in "
                    f"the ISR before leaving PREPARING (ISR {sorted(hosted.leader.isr)})"
                )
                return False
            if self._closed:
                return False
            if outcome == Outcome.FAILED:
                reason = truncation_wait.failure_reason(
                    behind, all_replicas, self._truncation_timeout_ms
                )
                await self._mark_failed(key, info, reason)
                # counted once written (a failed write is tried again, and counted then)
                self.truncation_timeouts[info.mirror] = (
                    self.truncation_timeouts.get(info.mirror, 0) + 1
                )
                return False
            if time.monotonic() >= deadline:
                info.note = truncation_wait.waiting_note(behind, all_replicas, waited)
                log.info("mirror %s: %s-%d %s", info.mirror, *key, info.note)
                return False
            await asyncio.sleep(0.05)

    async def _enter_stopping(self, key: Key, info: PartitionInfo, hosted: Any) -> int | None:
        """Failover's first half, before STOPPING is written: the fetcher stops, the log is cut
        to its last stable offset, and the epoch bump starts (awaited in `_do_stopping`). The
        last mirrored epoch returned is written with STOPPING, so a restart in STOPPING never
        takes the LME from a log that may already hold the local marker."""
        plog = hosted.log
        await self._stop_fetcher(key, info.mirror)
        self._truncate_to_lso(key, info, hosted)
        lme: int | None = plog.latest_epoch
        old = self._bumping.pop(key, None)
        if old is not None:
            old.cancel()
        self._bumping[key] = asyncio.get_running_loop().create_task(
            self._bump_above(key, hosted, lme)
        )
        return lme

    def _truncate_to_lso(self, key: Key, info: PartitionInfo, hosted: Any) -> None:
        topic, partition = key
        plog = hosted.log
        lso = self._last_stable_offset(plog)
        if lso < plog.log_end_offset:
            info.note = _warn_truncation(info.mirror, topic, partition, plog, lso)
            plog.truncate_to(lso)
            hosted.after_local_change()
            log.info("mirror %s: %s-%d truncated to LSO %d", info.mirror, topic, partition, lso)

    async def _bump_above(self, key: Key, hosted: Any, lme: int | None) -> None:
        """New local writes must carry an epoch above every mirrored one: through the
        controller, then until this node applied it (the marker carries it)."""
        target = max(lme if lme is not None else -1, hosted.leader_epoch) + 1
        await self._bump(key[0], key[1], target)
        deadline = time.monotonic() + EPOCH_APPLY_WAIT_S
        # Woken by the metadata change that names the partition (polling every 10 ms was
        # 100 wake-ups a second for each of a failover's thousands of partitions); the
        # timeout is a backstop for a change applied without passing through `on_metadata`.
        while hosted.leader_epoch < target and (left := deadline - time.monotonic()) > 0:
            changed = asyncio.get_running_loop().create_future()
            waiters = self._epoch_waiters.setdefault(key, [])
            waiters.append(changed)
            try:
                await asyncio.wait_for(changed, min(left, EPOCH_RECHECK_S))
            except TimeoutError:
                pass
            finally:
                if changed in waiters:
                    waiters.remove(changed)
                if not waiters:
                    self._epoch_waiters.pop(key, None)

    async def _do_stopping(self, key: Key, info: PartitionInfo, hosted: Any) -> None:
        """Failover's second half, from STOPPING to STOPPED (the KIP's order): the bump
        committed and applied, then the MIRROR_PID_RESET marker."""
        topic, partition = key
        t0 = time.monotonic()
        bump = self._bumping.pop(key, None)
        if bump is None:
            # STOPPING found at start-up or on a new leader: the first half again, except the
            # LME, which STOPPING's write carried (the log may hold a local marker by now).
            await self._stop_fetcher(key, info.mirror)
            self._truncate_to_lso(key, info, hosted)
            lme = info.last_mirror_epoch
            if lme is None:
                lme = hosted.log.latest_epoch
                if lme is not None:
                    await self._states.write_last_mirror_epoch(
                        info.mirror, info.topic_id, partition, lme
                    )
                    info.last_mirror_epoch = lme
            if lme is None or hosted.leader_epoch <= lme:
                await self._bump_above(key, hosted, lme)
        else:
            await bump
        t_bumped = time.monotonic()
        source_id = await self._source_cluster_id(info.mirror) or ""
        t_source = time.monotonic()
        marker = build_mirror_pid_reset(
            source_id,
            partition_leader_epoch=hosted.leader_epoch,
            timestamp=self._now_ms(),
        )
        hosted.append_records(marker, origin=AppendOrigin.COORDINATOR)
        log.debug(
            "mirror %s: %s-%d STOPPING to STOPPED took %.0f ms: bump %.0f, source id %.0f",
            info.mirror,
            topic,
            partition,
            (time.monotonic() - t0) * 1000,
            (t_bumped - t0) * 1000,
            (t_source - t_bumped) * 1000,
        )

    @staticmethod
    def truncation_point(
        epochs: list[tuple[int, int]], log_start: int, confirmed_epoch: int | None
    ) -> int:
        """Where PREPARING cuts the log: the start of the first local epoch beyond the last epoch
        the source confirms it mirrored (KIP-1279 "LME truncation"); none confirmed: everything."""
        if confirmed_epoch is None:
            return log_start
        for epoch, start in epochs:
            if epoch > confirmed_epoch:
                return max(start, log_start)
        return -1  # nothing to cut

    @staticmethod
    def _last_stable_offset(plog: Any) -> int:
        # The log's own LSO (mirrored markers included), the one Fetch and ListOffsets use.
        return int(plog.last_stable_offset)

    async def _maybe_clear(self, topic: str, mirror: str) -> None:
        img = self._image()
        t = img.topics.get(topic)
        if t is None or not img.config(TOPIC_RESOURCE, topic).get(MIRROR_NAME_CONFIG, "").endswith(
            REMOVED_SUFFIX
        ):
            return
        if all(
            (i := self._info.get((topic, p))) is not None and i.state == MirrorState.STOPPED
            for p in t.partitions
        ):
            await self._clear(topic)

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

    async def close(self) -> None:
        self._closed = True
        for task in [*self._tasks, *self._bumping.values()]:
            task.cancel()
        self._bumping.clear()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


def _warn_truncation(mirror: str, topic: str, partition: int, plog: Any, lso: int) -> str:
    """Failover is about to delete the records past the LSO: say which transaction holds it
    there (at WARN, and returned for --describe), so an operator can tell a transaction the
    source never ended from one whose marker could not be read."""
    psm = getattr(plog, "producer_state", None)
    ongoing = psm.ongoing_transactions() if psm is not None else []
    what = f"truncating {topic}-{partition} from {plog.log_end_offset} to LSO {lso}"
    if ongoing:
        oldest, more = ongoing[0], len(ongoing) - 1
        what += f": transaction of producer {oldest.producer_id} open since {oldest.first_offset}"
        if more:
            what += f" (and {more} more open transaction(s))"
    log.warning("mirror %s: %s", mirror, what)
    return f"failover: {what}"
