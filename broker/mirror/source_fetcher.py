"""One mirror fetcher: the task that fetches a mirror's partitions led by one source broker.

It sends consumer Fetch requests in an incremental fetch session (KIP-227), by topic id when
every partition has one, waits out the node's log writer, the source's throttle_time_ms and the
destination's throttle, and hands each partition of the answer to the `Appender` it was given,
then has the `Reconciler` realign the partitions the answer said to. What it needs of the rest
comes in one `FetcherServices` bundle.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Mapping
from typing import Final

from protocol.errors import ProtocolError
from protocol.fetch_codec import (
    FETCH,
    FIRST_TOPIC_ID_VERSION,
    FetchPartitionRequest,
    encode_fetch_request,
    parse_fetch_response,
)
from protocol.fetch_session import SESSION_ERRORS, FetchSessionBuilder

from ..network.client import ReconnectingClient, backoff_ms
from ..network.errors import NetworkError
from ..network.fetch_timeout import fetch_timeout_ms
from .fetch_interfaces import FetcherServices
from .fetch_state import (
    NONE,
    RETRY_BACKOFF_MAX_MS,
    RETRY_BACKOFF_MS,
    FetcherCounters,
    FetchMirror,
    FetchPartition,
    Key,
    SentFetch,
)
from .source import SourceError

# The name the code logged under before fetcher.py was split: KMIRROR_LOG_LEVELS lines and the
# (logger) of log lines stay the same.
log = logging.getLogger("broker.mirror.fetcher")

# The longest a Fetch waits at the source while our high watermark is behind our log end
# (synchronous mirroring: the source's acks=all waits for the commit the next Fetch reports).
COMMIT_POLL_MS: Final = 10


class SourceFetcher:
    """One task fetching a mirror's partitions led by one source broker."""

    def __init__(
        self,
        services: FetcherServices,
        m: FetchMirror,
        fetcher_id: int,
        node: int,
        counters: FetcherCounters,
    ) -> None:
        self.services = services
        self.mirror = m
        self.fetcher_id = fetcher_id
        self.node = node
        self.client_id = f"broker-{services.node_id}-fetcher-{fetcher_id}-mirror-{m.name}"
        # synchronous mirroring: who we are to a kmirror source, which waits for our commits
        self.sync_id = f"{services.cluster_id}/{m.name}"
        self.parts: dict[Key, FetchPartition] = {}
        self.wake = asyncio.Event()
        self.session = FetchSessionBuilder()
        self.session_by_id: bool | None = None
        # per partition: (its state, the fields its entry was built from, SentFetch, entry)
        self._entries: dict[
            Key,
            tuple[FetchPartition, tuple[int, int, int, int, int], SentFetch, FetchPartitionRequest],
        ] = {}
        self.reconcile: set[FetchPartition] = set()
        self.diverged: dict[FetchPartition, tuple[int, int]] = {}
        self.failures = 0
        # time.monotonic() until which the source broker asked this fetcher to wait
        # (a Fetch response's throttle_time_ms, KIP-219: the client holds back, not the broker)
        self.source_throttle_until = 0.0
        self.counters = counters  # the manager's: they outlive this fetcher
        self.task: asyncio.Task[None] | None = asyncio.create_task(
            self._run(), name=self.client_id + f"-node-{node}"
        )

    def assign(self, p: FetchPartition) -> None:
        p.fetcher = self
        self.parts[p.key] = p
        self.wake.set()

    def drop(self, p: FetchPartition) -> None:
        if self.parts.get(p.key) is p:
            del self.parts[p.key]
        if p.fetcher is self:
            p.fetcher = None
        self.reconcile.discard(p)
        self.diverged.pop(p, None)

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()

    def _reset_session(self) -> None:
        self.session.reset()

    async def _run(self) -> None:
        while True:
            try:
                await self._step()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("%s: fetch loop error", self.client_id)
                self._reset_session()
                await asyncio.sleep(1.0)

    async def _backoff(self, error: str) -> None:
        self.failures += 1
        self.counters.errors += 1
        for p in list(self.parts.values()):
            p.error = error
        await asyncio.sleep(
            backoff_ms(self.failures, RETRY_BACKOFF_MS, RETRY_BACKOFF_MAX_MS, self.services.rng)
            / 1000
        )

    async def _step(self) -> None:
        if not self.parts:
            self._reset_session()
            self.wake.clear()
            await self.wake.wait()
            return
        room = self.services.logs.writer_room(self.parts.values())
        if room is not None:  # the node's log writer is behind: fetch once it caught up
            await room
            return  # and look again (``room`` wakes every waiter at once)
        wait = self.source_throttle_until - time.monotonic()
        if wait > 0:  # the source throttled us: no Fetch to it until the time is up
            await asyncio.sleep(wait)
            self.counters.source_throttled_seconds += wait
            return
        # Over the rate: throttled partitions sit out (Kafka's follower quota does the same);
        # the others are fetched as usual.
        delay = self.services.throttle.delay()
        if delay > 0 and all(p.throttled for p in self.parts.values()):
            await asyncio.sleep(min(delay, 1.0))
            self.counters.throttled_seconds += min(delay, 1.0)
            return
        m = self.mirror
        try:
            client: ReconnectingClient = m.source.connection_for(
                self.node, self.client_id, self.counters.network
            )
            conn = await client.connection()
            version = conn.version_for(FETCH)
        except (NetworkError, SourceError) as e:
            await self._lost(f"source broker {self.node}: {e}")
            return
        if version >= FIRST_TOPIC_ID_VERSION and any(
            p.topic_id is None for p in self.parts.values()
        ):
            version = FIRST_TOPIC_ID_VERSION - 1  # some topic has no id: fetch by name
        by_id = version >= FIRST_TOPIC_ID_VERSION
        sessions = version >= 7
        if (self.session_by_id is not None and by_id != self.session_by_id) or (
            sessions != self.session.enabled
        ):
            self._reset_session()
        self.session_by_id = by_id
        self.session.enabled = sessions
        body, sent, id_map = self._build(version, by_id, delay)
        try:
            # no answer well after the wait: a cut link or a stuck connection; reconnect
            bound = fetch_timeout_ms(m.max_wait_ms, conn.request_timeout_ms)
            raw = await conn.send_raw(FETCH, version, body, timeout_ms=bound)
            self.counters.requests += 1
            self.counters.response_bytes += len(raw)
            resp = parse_fetch_response(raw, version)
        except NetworkError as e:
            await self._lost(f"fetch from source broker {self.node}: {e}")
            return
        except ProtocolError as e:
            self._reset_session()
            await self._backoff(f"bad Fetch response from source broker {self.node}: {e}")
            return
        if resp.throttle_time_ms > 0:
            self.source_throttle_until = time.monotonic() + resp.throttle_time_ms / 1000
        self.session.on_response(resp.error_code, resp.session_id)
        if resp.error_code in SESSION_ERRORS:
            return
        if resp.error_code != NONE:
            await self._backoff(f"source broker {self.node}: Fetch error {resp.error_code}")
            return
        self.failures = 0
        throttled_bytes = appended_bytes = 0
        for tkey, data in resp.partitions:
            name = id_map.get(tkey)
            if name is None:
                continue
            s = sent.get((name, data.partition))
            if s is None:
                continue
            p = s.state
            if p.removed or p.failed or self.parts.get(p.key) is not p:
                continue
            appended, reconcile, diverged = self.services.appender.apply(p, s, data)
            if reconcile:
                if diverged is not None:
                    self.diverged[p] = diverged
                self.reconcile.add(p)
            appended_bytes += appended
            if p.throttled:
                throttled_bytes += appended
        self.services.throttle.consume(throttled_bytes)
        self._confirm(sent)
        self.counters.appended_bytes += appended_bytes
        self.counters.throttled_bytes += throttled_bytes
        if self.reconcile:
            todo = list(self.reconcile)
            self.reconcile.clear()
            for p in todo:
                diverged = self.diverged.pop(p, None)
                if self.parts.get(p.key) is p:
                    await self.services.reconciler.reconcile(p, diverged)

    def _confirm(self, sent: Mapping[Key, SentFetch]) -> None:
        """A good answer confirms the source offset of every partition it was asked about: an
        incremental session leaves the unchanged ones out (status bookkeeping for --describe)."""
        now = self.services.now_ms()
        for s in sent.values():
            p = s.state
            if p.src_hw >= 0 and p.error is None and not p.removed and not p.failed:
                p.hw_ms = now

    async def _lost(self, error: str) -> None:
        """The source broker is unreachable: find the partitions' leaders again."""
        self._reset_session()
        self.failures += 1
        self.counters.errors += 1
        log.info("mirror %s: %s", self.mirror.name, error)
        for p in list(self.parts.values()):
            self.services.parking.park(p, error)
        self.parts.clear()

    def _build(
        self, version: int, by_id: bool, throttle_delay: float = 0.0
    ) -> tuple[bytes, dict[Key, SentFetch], dict[uuid.UUID | str, str]]:
        """The Fetch request. Throttled partitions ask for at most the throttle's burst, and are
        left out (forgotten by the session) while ``throttle_delay`` > 0; the wait for data is
        then cut to that delay so they are back in time."""
        m = self.mirror
        cap = self.services.throttle.request_cap()
        held = throttle_delay > 0
        max_wait_ms = m.max_wait_ms if not held else min(m.max_wait_ms, int(throttle_delay * 1000))
        only_throttled = all(p.throttled for p in self.parts.values())
        max_bytes = m.max_bytes if cap is None or not only_throttled else min(m.max_bytes, cap)
        sent: dict[Key, SentFetch] = {}
        wanted: list[FetchPartitionRequest] = []
        id_map: dict[uuid.UUID | str, str] = {}
        # Each partition's entry is reused while its fields stay the same: a fetcher of
        # thousands of idle partitions rebuilt all of them twice a second.
        cache = self._entries
        committing = False
        for key, p in self.parts.items():
            if p.throttled and held:
                continue
            part_max = m.partition_max_bytes
            if p.throttled and cap is not None:
                part_max = min(part_max, cap)
            plog = self.services.logs.get_log(p.topic, p.partition)
            if plog is None:
                continue
            if p.topic_id is not None:
                id_map[p.topic_id] = p.topic
            id_map[p.source_topic] = p.topic  # by name: the source's name (a prefix differs)
            epoch = plog.latest_epoch
            last_epoch = -1 if epoch is None else epoch
            leo = plog.log_end_offset
            # what this cluster committed, for a kmirror source's synchronous mirroring
            hw = plog.high_watermark
            committing = committing or hw < leo
            hit = cache.get(key)
            if (
                hit is not None
                and hit[0] is p
                and hit[1] == (leo, p.leader_epoch, last_epoch, part_max, hw)
            ):
                s, fpr = hit[2], hit[3]  # unchanged: the session builder sees the same entry
            else:
                s = SentFetch(p, leo, p.leader_epoch, last_epoch, part_max)
                fpr = FetchPartitionRequest(
                    p.source_topic,
                    p.topic_id,
                    p.partition,
                    leo,
                    s.leader_epoch,
                    last_epoch,
                    -1,
                    part_max,
                    mirror_committed_offset=hw,
                )
                cache[key] = (p, (leo, p.leader_epoch, last_epoch, part_max, hw), s, fpr)
            sent[key] = s
            wanted.append(fpr)
        if len(cache) > len(sent):  # partitions gone or left out: their entries go
            for key in [k for k in cache if k not in sent]:
                del cache[key]
        if committing:
            # appended records wait for this cluster's high watermark (the log writer, the
            # followers): ask again soon, so a source waiting for our commit hears of it
            max_wait_ms = min(max_wait_ms, COMMIT_POLL_MS)
        fetch = self.session.build(wanted)
        body = encode_fetch_request(
            version,
            max_wait_ms=max_wait_ms,
            min_bytes=m.min_bytes,
            max_bytes=max_bytes,
            session_id=fetch.session_id,
            session_epoch=fetch.session_epoch,
            partitions=fetch.partitions,
            forgotten=fetch.forgotten,
            by_topic_id=by_id,
            mirror_sync_id=self.sync_id,
        )
        return body, sent, id_map
