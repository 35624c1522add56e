"""The source side of synchronous mirroring (issue 30 item 1; docs/mirroring.md, "Synchronous
mirroring"): the Fetch handler reports what each kmirror destination committed, acks=all
produces of ``mirror.sync.enable`` topics wait here, after their own ISR, until the in-sync
mirrors committed their records (`core.sync_acks_state` decides; this shell keeps the waiters,
the clock, the logs and the metrics).

A wait that runs out of ``mirror.sync.timeout.ms`` answers by the topic's policy: ``refuse``
gives NOT_ENOUGH_REPLICAS_AFTER_APPEND (the records stay in the log, as after Kafka's own acks=all
timeout); ``async`` answers success and the partition stops waiting (a WARN once per episode,
``kmirror_mirror_sync_degraded`` 1) until the mirrors hold what was acknowledged meanwhile.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from kio.schema.errors import ErrorCode

from ..metrics.mirror_sync_metrics import WAIT_BUCKETS, SyncPartitionRow, SyncSnapshot
from .core.sync_acks_state import Event, PartitionSync, SyncPolicy

log = logging.getLogger(__name__)

# A KIP-1279 mirror fetcher's client id (ours and the KIP's): ...-mirror-<mirror name>
_MIRROR_CLIENT: Final = re.compile(r"-mirror-(?P<mirror>[A-Za-z0-9._-]+)$")

Key = tuple[str, int]


@dataclass(frozen=True, slots=True)
class SyncOutcome:
    error: ErrorCode
    message: str | None = None


_DONE: Final = SyncOutcome(ErrorCode.none)


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class SyncAcks:
    def __init__(
        self,
        now_ms: Callable[[], int] = _monotonic_ms,
        active: Callable[[str, int], bool] = lambda _topic, _partition: True,
    ) -> None:
        """``active``: whether this node still leads the partition of a sync topic; the state
        of one that is not is dropped (a former leader must not report it degraded forever)."""
        self._now_ms = now_ms
        self._active = active
        self._parts: dict[Key, PartitionSync] = {}
        self._timeouts: dict[Key, int] = {}  # the last policy's timeout, for expiry on report
        self._waiters: dict[Key, set[asyncio.Future[None]]] = {}
        self._wait_buckets = [0] * (len(WAIT_BUCKETS) + 1)
        self._wait_sum = 0.0
        self._foreign: set[tuple[str, str]] = set()
        self._seen: dict[str, int] = {}  # mirror id -> its last Fetch (ms)

    def now_ms(self) -> int:
        return self._now_ms()

    # -- the Fetch handler's side --------------------------------------------------------------
    def seen(self, mirror: str) -> None:
        """A Fetch from ``mirror``: it is alive for every partition it reported before."""
        self._seen[mirror] = self._now_ms()

    def drop(self, topic: str, partition: int, mirror: str) -> None:
        """``mirror``'s session forgot the partition: it no longer reports it."""
        st = self._parts.get((topic, partition))
        if st is not None and st.mirrors.pop(mirror, None) is not None:
            log.info("mirror.sync: mirror %s stopped fetching %s-%d", mirror, topic, partition)

    def report(
        self, topic: str, partition: int, mirror: str, committed: int, hw: int, policy: SyncPolicy
    ) -> None:
        """Mirror ``mirror`` committed the records of topic-partition below ``committed``;
        ``hw``: this leader's high watermark (where a new partition state starts)."""
        key = (topic, partition)
        st = self._state(key, hw, policy)
        now = self._now_ms()
        for gone in st.expire(now, policy.timeout_ms, self._seen):
            log.warning(
                "mirror.sync: mirror %s of %s-%d silent for over %d ms: no longer waited for",
                gone, topic, partition, policy.timeout_ms,
            )  # fmt: skip
        for event in st.report(mirror, committed, now):
            if event is Event.JOINED:
                log.info(
                    "mirror.sync: mirror %s of %s-%d is in sync (committed %d)",
                    mirror, topic, partition, committed,
                )  # fmt: skip
            elif event is Event.RECOVERED:
                log.warning(
                    "mirror.sync: %s-%d back to synchronous mirroring (the mirrors committed "
                    "offset %d; degraded %.1f s in total)",
                    topic, partition, committed, st.degraded_seconds(now),
                )  # fmt: skip
        waiters = self._waiters.pop(key, None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    def note_foreign(self, client_id: str | None, topic: str) -> None:
        """A consumer Fetch of sync topic ``topic`` without the sync signal: from a mirror of
        a destination that is not kmirror (its client id says it is a mirror), whose copy acks
        cannot wait for. Logged once per (mirror, topic)."""
        m = _MIRROR_CLIENT.search(client_id or "")
        if m is None:
            return  # a consumer
        pair = (m.group("mirror"), topic)
        if pair in self._foreign:
            return
        self._foreign.add(pair)
        log.warning(
            "mirror.sync: mirror %s (client id %s) fetches %s, which has mirror.sync.enable=true, "
            "but does not send the synchronous mirroring signal (its destination is not kmirror): "
            "produces to %s never wait for that copy; only kmirror mirrors can be synchronous",
            pair[0], client_id, topic, topic,
        )  # fmt: skip

    # -- the Produce handler's side ------------------------------------------------------------
    def acks_without_wait(self, topic: str, partition: int, required: int) -> bool:
        """True when a degraded (``async``) partition answers at once; the records below
        ``required`` count as acknowledged without the mirrors."""
        st = self._parts.get((topic, partition))
        if st is None or not st.degraded:
            return False
        st.acked_async(required)
        return True

    async def wait(
        self,
        topic: str,
        partition: int,
        required: int,
        hw: int,
        policy: SyncPolicy,
        appended_ms: int,
        request_deadline_ms: int,
        is_leader: Callable[[], bool],
    ) -> SyncOutcome:
        """Until the in-sync mirrors committed the records below ``required``, the topic's
        ``mirror.sync.timeout.ms`` after ``appended_ms`` (policy), or the request's deadline
        (REQUEST_TIMED_OUT), all in this object's milliseconds."""
        key = (topic, partition)
        st = self._state(key, hw, policy)
        if self.acks_without_wait(topic, partition, required):
            return _DONE
        start = self._now_ms()
        sync_deadline = appended_ms + policy.timeout_ms
        loop = asyncio.get_running_loop()
        while True:
            now = self._now_ms()
            # a silent member may be all that holds us back
            st.expire(now, policy.timeout_ms, self._seen)
            if st.covered(required):
                self._observe((now - start) / 1000)
                return _DONE
            if not is_leader():
                return SyncOutcome(ErrorCode.not_leader_or_follower)
            if now >= request_deadline_ms and request_deadline_ms < sync_deadline:
                return SyncOutcome(ErrorCode.request_timed_out)
            if now >= sync_deadline:
                return self._timed_out(st, key, required, policy, now)
            wake_at = min(sync_deadline, request_deadline_ms)
            for m, p in st.mirrors.items():  # its expiry may let the others' progress count
                if p.in_sync:
                    wake_at = min(wake_at, st.last_seen_ms(m, self._seen) + policy.timeout_ms + 1)
            fut: asyncio.Future[None] = loop.create_future()
            self._waiters.setdefault(key, set()).add(fut)
            timer = loop.call_later(max(0, wake_at - now) / 1000, _resolve, fut)
            try:
                await fut
            finally:
                timer.cancel()
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(fut)
                    if not waiters:
                        del self._waiters[key]

    def _timed_out(
        self, st: PartitionSync, key: Key, required: int, policy: SyncPolicy, now: int
    ) -> SyncOutcome:
        topic, partition = key
        members = st.members()
        what = (
            f"in-sync mirrors committed up to offset {min(p.committed for p in members)}"
            if members
            else "no destination mirror is in sync"
        )
        if policy.degrade:
            if st.degrade(required, now) is Event.DEGRADED:
                log.warning(
                    "mirror.sync: %s-%d degraded to asynchronous mirroring (mirror.sync.on.timeout"
                    "=async): offset %d not committed by the destination mirrors within %d ms "
                    "(%s); acks=all answers without them until they catch up",
                    topic, partition, required - 1, policy.timeout_ms, what,
                )  # fmt: skip
            return _DONE
        return SyncOutcome(
            ErrorCode.not_enough_replicas_after_append,
            f"mirror.sync: offset {required - 1} of {topic}-{partition} was appended but not "
            f"committed by the destination mirrors within mirror.sync.timeout.ms="
            f"{policy.timeout_ms} ({what})",
        )

    # -- state and metrics ---------------------------------------------------------------------
    def _state(self, key: Key, hw: int, policy: SyncPolicy) -> PartitionSync:
        st = self._parts.get(key)
        if st is None:
            st = self._parts[key] = PartitionSync(synced_end=max(0, hw))
        self._timeouts[key] = policy.timeout_ms
        return st

    def _observe(self, seconds: float) -> None:
        self._wait_buckets[bisect.bisect_left(WAIT_BUCKETS, seconds)] += 1
        self._wait_sum += seconds

    def metrics_snapshot(self) -> SyncSnapshot:
        now = self._now_ms()
        rows = []
        for (topic, partition), st in sorted(self._parts.items()):
            if not self._active(topic, partition) and (topic, partition) not in self._waiters:
                del self._parts[(topic, partition)]  # led elsewhere now, or no longer sync
                self._timeouts.pop((topic, partition), None)
                continue
            st.expire(now, self._timeouts.get((topic, partition), 0) or 1, self._seen)
            rows.append(
                SyncPartitionRow(
                    topic, partition, st.degraded, st.degraded_seconds(now), len(st.members())
                )
            )
        return SyncSnapshot(
            tuple(rows), tuple(self._wait_buckets), self._wait_sum, len(self._foreign)
        )


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)
