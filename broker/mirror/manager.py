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
  batch, wait until it is committed, and write STOPPED, from which the partition is writable. Once every partition of the topic is
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

The manager is in parts, one job each: `manager_interfaces` (what it needs of the node),
`core` (the decisions, without I/O: the transition table, each transition's steps, the cuts),
`fetcher_control` (starting and stopping a partition's fetcher behind the source check),
`reconcile_scheduling` (when partitions are looked at) and `failover` (STOPPING and STOPPED).
`MirrorManager`, here, combines them and steps each partition through its transitions.
"""

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from ..metadata.image import TOPIC_RESOURCE, MetadataImage
from ..metadata.mirror_states import MIRROR_NAME_CONFIG, MirrorState
from .core import truncation_wait
from .core.states import PartitionInfo, Wanted, current, next_state, wanted_from_config
from .core.transitions import Step, plan
from .core.truncation_wait import Outcome
from .failover import EPOCH_APPLY_WAIT_S, EPOCH_RECHECK_S, Failover
from .fetcher_control import FetcherControl
from .manager_interfaces import Fetchers, Key, Replicas, SourceRefused, StateStore
from .reconcile_scheduling import FULL_SWEEP_S, ReconcileScheduling

__all__ = [
    "EPOCH_APPLY_WAIT_S",
    "EPOCH_RECHECK_S",
    "FULL_SWEEP_S",
    "TRUNCATION_WAIT_S",
    "UNCLEAN_CONFIG",
    "Failover",
    "FetcherControl",
    "Fetchers",
    "Key",
    "MirrorManager",
    "PartitionInfo",
    "ReconcileScheduling",
    "SourceRefused",
    "StateStore",
    "Wanted",
    "next_state",
    "wanted_from_config",
]

log = logging.getLogger(__name__)

UNCLEAN_CONFIG = "mirror.support.unclean.leader.election"
# How long one PREPARING attempt waits for the other replicas to truncate (the default of
# ``truncation_attempt_s``); a follower fetches at least every replica.fetch.wait.max.ms
# (500 ms), so this is several rounds.
TRUNCATION_WAIT_S = 5.0


class MirrorManager(ReconcileScheduling, Failover):
    def __init__(
        self,
        image: Callable[[], MetadataImage],
        replicas: Replicas,
        states: StateStore,
        fetchers: Fetchers,
        *,
        bump_leader_epoch: Callable[[str, int, int], Awaitable[None]],
        clear_mirror_name: Callable[[str], Awaitable[None]],
        source_cluster_id: Callable[[str], Awaitable[str | None]],
        align_with_source: Callable[[str, str, int, Any], Awaitable[str | None]] | None = None,
        verify_source: Callable[[str], Awaitable[tuple[bool, str | None]]] | None = None,
        now_ms: Callable[[], int],
        monotonic: Callable[[], float] = time.monotonic,
        truncation_timeout_ms: int = truncation_wait.DEFAULT_TIMEOUT_MS,
        truncation_attempt_s: float = TRUNCATION_WAIT_S,
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
        self._monotonic = monotonic
        self._info: dict[Key, PartitionInfo] = {}
        # PREPARING: when this leader's LME truncation ran (its replicas must fetch after it)
        self._aligned_ms: dict[Key, int] = {}
        # per mirror, the connection settings its fetchers were started with: a change of
        # its bookkeeping keys alone (a failover remembers removed topics) restarts nothing
        self._started_with: dict[str, dict[str, str]] = {}
        self._locks: dict[Key, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._fetching: set[Key] = set()
        # epoch bumps started on entering STOPPING, awaited before the marker is written
        self._bumping: dict[Key, asyncio.Task[None]] = {}
        # MIRROR_PID_RESET markers appended and not yet seen committed: (the leader epoch they
        # were appended in, one past their offset); STOPPED waits for them
        self._markers: dict[Key, tuple[int, int]] = {}
        # bumps waiting for this node to apply the new epoch, woken by `on_metadata`
        self._epoch_waiters: dict[Key, list[asyncio.Future[None]]] = {}
        self._closed = False
        self._last_error: dict[Key, str] = {}
        # partitions some work touched since the last retry (see reconcile_all)
        self._touched: set[Key] = set()
        self._last_sweep = float("-inf")  # the first retry looks at everything
        self._truncation_timeout_ms = truncation_timeout_ms
        self._truncation_attempt_s = truncation_attempt_s
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
                if info is None or not current(info, wanted.mirror, topic_id, hosted.leader_epoch):
                    state, lme = await self._states.read_state(wanted.mirror, topic_id, key[1])
                    fresh = PartitionInfo(wanted.mirror, topic_id, state, lme)
                    fresh.leader_epoch = hosted.leader_epoch
                    if info is not None and info.mirror == wanted.mirror:
                        fresh.note, fresh.error = info.note, info.error  # for --describe
                    info = self._info[key] = fresh
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
        """One transition: the steps `transitions.plan` gives, carried out in order. A step that
        cannot complete yet stops here, the partition staying where it was (retried later)."""
        hosted = self._replicas.get(*key)
        if hosted is None or not hosted.is_leader:
            return
        steps = plan(
            info.state,
            new,
            wanted.state,
            bump_started=key in self._bumping,
            marker_pending=self._marker_pending(key, hosted),
        )
        lme: int | None = None
        for step in steps:
            if step == Step.CHECK_SOURCE:
                # PREPARING is left only once aligned with the source: a failed attempt
                # (source unreachable) stays in PREPARING and is retried, also after a restart.
                if not await self._source_ok(key, info):
                    return
            elif step == Step.LME_TRUNCATE:
                if not await self._lme_truncate(key, info, hosted):
                    return
            elif step == Step.AWAIT_REPLICAS:
                # The second phase: the other replicas truncate too (they learn the cut from
                # their next fetch) before anything new is mirrored on top of it.
                if not await self._replicas_truncated(key, info, hosted, self._aligned_ms[key]):
                    return
            elif step == Step.STOP_FETCHER:
                await self._stop_fetcher(key, info.mirror)
            elif step == Step.AWAIT_LEADER_HW:
                if not await self._await_leader_hw(key, info, hosted):
                    return
            elif step == Step.LSO_TRUNCATE:
                self._truncate_to_lso(key, info, hosted)
            elif step == Step.START_BUMP:
                lme = self._start_bump(key, hosted)
            elif step == Step.RECORD_LME:
                await self._record_lme(key, info, hosted)
            elif step == Step.FINISH_BUMP:
                await self._finish_bump(key, info, hosted)
            elif step == Step.APPEND_MARKER:
                await self._append_marker(key, info, hosted)
            elif step == Step.AWAIT_MARKER:
                if not await self._await_marker(key, info, hosted):
                    return
            elif step == Step.WRITE_STATE:
                await self._write(key, info, new, lme)
                info.leader_epoch = hosted.leader_epoch  # ours, bumped or not: still current
            elif step == Step.START_FETCHER:
                await self._start_fetcher(key, info)
            elif step == Step.CLEAR_NAME:
                await self._maybe_clear(key[0], info.mirror)

    async def _lme_truncate(self, key: Key, info: PartitionInfo, hosted: Any) -> bool:
        """Failback's LME truncation through the injected align (it cuts through the partition,
        which brings the HW down with it). False: the source refused, the partition FAILED."""
        self._aligned_ms[key] = hosted.now_ms()
        if self._align is None:
            return True
        try:
            note = await self._align(info.mirror, key[0], key[1], hosted)
        except SourceRefused as e:  # who answered the align itself is not the source
            await self._mark_failed(key, info, str(e))
            return False
        info.note = note or info.note
        return True

    async def _write(
        self, key: Key, info: PartitionInfo, new: MirrorState, lme: int | None
    ) -> None:
        topic, partition = key
        if new == MirrorState.STOPPING:
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
        self._aligned_ms.pop(key, None)

    async def _replicas_truncated(
        self, key: Key, info: PartitionInfo, hosted: Any, since_ms: int
    ) -> bool:
        """KIP-1279's LME truncation, phase two: wait (one attempt, bounded) until every ISR
        member, or every replica with ``mirror.support.unclean.leader.election=true``, has
        fetched with a log consistent with the leader's cut one. False leaves the partition in
        PREPARING (tried again on the next reconcile) with the reason shown by ``--describe``,
        or, once ``mirror.truncation.timeout.ms`` has passed with enough ISR, FAILED
        (`core.truncation_wait` has the rule and why)."""
        topic_config = self._image().config(TOPIC_RESOURCE, key[0])
        all_replicas = topic_config.get(UNCLEAN_CONFIG, "false").lower() == "true"
        timeout_s = self._truncation_timeout_ms / 1000
        first = self._monotonic()
        deadline = first + self._truncation_attempt_s
        while True:
            behind = hosted.replicas_behind(since_ms, all_replicas=all_replicas)
            outcome, info.truncation_wait_since, waited = truncation_wait.attempt(
                info.truncation_wait_since,
                self._monotonic(),
                behind,
                under_min_isr=hosted.leader.under_min_isr,
                timeout_s=timeout_s,
            )
            if outcome == Outcome.TRUNCATED:
                return True
            if outcome == Outcome.RETRY:  # the clock stops until the ISR is back
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
            since = info.truncation_wait_since
            if self._monotonic() >= min(deadline, (since or first) + timeout_s):
                info.note = truncation_wait.waiting_note(behind, all_replicas, waited)
                log.info("mirror %s: %s-%d %s", info.mirror, *key, info.note)
                return False
            await asyncio.sleep(0.05)

    async def close(self) -> None:
        self._closed = True
        for task in [*self._tasks, *self._bumping.values()]:
            task.cancel()
        self._bumping.clear()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
