"""Stepping one mirror partition through the KIP-1279 state machine (see `manager`): under the
partition's lock, the state is read from the coordinator when this leader has no current copy,
then one valid transition after another is taken, each carrying out the steps
`core.transitions.plan` gives (the fetcher through `FetcherControl`, STOPPING's work through
`Failover`, PREPARING's LME truncation through the injected align and its wait for the replicas
here), until the partition is where its ``mirror.name`` wants it or a step cannot complete yet.
"""

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from ..metadata.image import TOPIC_RESOURCE
from ..metadata.mirror_states import MIRROR_NAME_CONFIG, MirrorState
from .core import truncation_wait
from .core.states import PartitionInfo, Wanted, current, next_state, wanted_from_config
from .core.transitions import Step, plan
from .core.truncation_wait import Outcome
from .manager_interfaces import Key, SourceRefused
from .partition_parts import PartitionParts

# The name the code logged under before manager.py was split: KMIRROR_LOG_LEVELS lines and the
# (logger) of log lines stay the same.
log = logging.getLogger("broker.mirror.manager")

UNCLEAN_CONFIG = "mirror.support.unclean.leader.election"
# How long one PREPARING attempt waits for the other replicas to truncate (the default of
# ``truncation_attempt_s``); a follower fetches at least every replica.fetch.wait.max.ms
# (500 ms), so this is several rounds.
TRUNCATION_WAIT_S = 5.0


class PartitionStepper:
    """Takes a partition this node leads through its transitions (`step`)."""

    def __init__(
        self,
        parts: PartitionParts,
        *,
        align_with_source: Callable[[str, str, int, Any], Awaitable[str | None]] | None,
        monotonic: Callable[[], float],
        truncation_timeout_ms: int,
        truncation_attempt_s: float,
    ) -> None:
        self._parts = parts
        self._align = align_with_source
        self._monotonic = monotonic
        self._truncation_timeout_ms = truncation_timeout_ms
        self._truncation_attempt_s = truncation_attempt_s
        # PREPARING: when this leader's LME truncation ran (its replicas must fetch after it)
        self._aligned_ms: dict[Key, int] = {}
        self._closed = False
        # per mirror: partitions failed because replicas did not truncate in time (a metric)
        self.truncation_timeouts: dict[str, int] = {}

    def close(self) -> None:
        self._closed = True

    async def step(self, key: Key, topic_id: uuid.UUID) -> None:
        async with self._parts.book.lock(key):
            for _ in range(16):  # every chain of transitions is shorter than this
                wanted = wanted_from_config(
                    self._parts.image().config(TOPIC_RESOURCE, key[0]).get(MIRROR_NAME_CONFIG)
                )
                if wanted is None or self._closed:
                    return
                hosted = self._parts.replicas.get(*key)
                if hosted is None or not hosted.is_leader:
                    return  # led elsewhere: that node drives it
                info = self._parts.book.info.get(key)
                if info is None or not current(info, wanted.mirror, topic_id, hosted.leader_epoch):
                    state, lme = await self._parts.states.read_state(
                        wanted.mirror, topic_id, key[1]
                    )
                    fresh = PartitionInfo(wanted.mirror, topic_id, state, lme)
                    fresh.leader_epoch = hosted.leader_epoch
                    if info is not None and info.mirror == wanted.mirror:
                        fresh.note, fresh.error = info.note, info.error  # for --describe
                    info = self._parts.book.info[key] = fresh
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
        if info.state == MirrorState.MIRRORING and not self._parts.fetcher.fetching(key):
            await self._parts.fetcher.start(key, info)
        elif info.state == MirrorState.STOPPED and wanted.state == MirrorState.STOPPED:
            await self._parts.failover.maybe_clear(key[0], info.mirror)

    async def _enter(self, key: Key, info: PartitionInfo, new: MirrorState, wanted: Wanted) -> None:
        """One transition: the steps `transitions.plan` gives, carried out in order. A step that
        cannot complete yet stops here, the partition staying where it was (retried later)."""
        hosted = self._parts.replicas.get(*key)
        if hosted is None or not hosted.is_leader:
            return
        failover = self._parts.failover
        steps = plan(
            info.state,
            new,
            wanted.state,
            bump_started=failover.bump_started(key),
            marker_pending=failover.marker_pending(key, hosted),
        )
        lme: int | None = None
        for step in steps:
            if step == Step.CHECK_SOURCE:
                # PREPARING is left only once aligned with the source: a failed attempt
                # (source unreachable) stays in PREPARING and is retried, also after a restart.
                if not await self._parts.fetcher.source_ok(key, info):
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
                await self._parts.fetcher.stop(key, info.mirror)
            elif step == Step.AWAIT_LEADER_HW:
                if not await failover.await_leader_hw(key, info, hosted):
                    return
            elif step == Step.LSO_TRUNCATE:
                failover.truncate_to_lso(key, info, hosted)
            elif step == Step.START_BUMP:
                lme = failover.start_bump(key, hosted)
            elif step == Step.RECORD_LME:
                await failover.record_lme(key, info, hosted)
            elif step == Step.FINISH_BUMP:
                await failover.finish_bump(key, info, hosted)
            elif step == Step.APPEND_MARKER:
                await failover.append_marker(key, info, hosted)
            elif step == Step.AWAIT_MARKER:
                if not await failover.await_marker(key, info, hosted):
                    return
            elif step == Step.WRITE_STATE:
                await self._write(key, info, new, lme)
                info.leader_epoch = hosted.leader_epoch  # ours, bumped or not: still current
            elif step == Step.START_FETCHER:
                await self._parts.fetcher.start(key, info)
            elif step == Step.CLEAR_NAME:
                await failover.maybe_clear(key[0], info.mirror)

    async def _lme_truncate(self, key: Key, info: PartitionInfo, hosted: Any) -> bool:
        """Failback's LME truncation through the injected align (it cuts through the partition,
        which brings the HW down with it). False: the source refused, the partition FAILED."""
        self._aligned_ms[key] = hosted.now_ms()
        if self._align is None:
            return True
        try:
            note = await self._align(info.mirror, key[0], key[1], hosted)
        except SourceRefused as e:  # who answered the align itself is not the source
            await self._parts.book.mark_failed(key, info, str(e))
            return False
        info.note = note or info.note
        return True

    async def _write(
        self, key: Key, info: PartitionInfo, new: MirrorState, lme: int | None
    ) -> None:
        topic, partition = key
        if new == MirrorState.STOPPING:
            await self._parts.states.write_partition(
                info.mirror, info.topic_id, partition, new, lme
            )
            info.last_mirror_epoch = lme if lme is not None else info.last_mirror_epoch
        else:
            await self._parts.states.write_state(info.mirror, info.topic_id, partition, new)
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
        topic_config = self._parts.image().config(TOPIC_RESOURCE, key[0])
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
                await self._parts.book.mark_failed(key, info, reason)
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
