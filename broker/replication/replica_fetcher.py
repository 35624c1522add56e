"""Replica fetchers: the follower's I/O (Kafka's ReplicaFetcherManager and ReplicaFetcherThread).

Each leader broker gets ``num.replica.fetchers`` fetchers; a partition goes to one of them by a
stable hash. A fetcher sends one Fetch at a time to the leader's inter-broker listener with our
replica id and, from v15, our broker epoch (ReplicaState), for every partition its sans-IO
follower state wants to fetch, in an incremental fetch session (KIP-227: after the first full
request only partitions whose fetch position moved are named, and the leader answers only
partitions with news), and hands each answer back to it: the state appends the leader's
batches byte for byte (they stay memoryviews of the response frame until the log writes them),
truncates on a diverging epoch, and takes the leader's high watermark and log start.
OFFSET_OUT_OF_RANGE is resolved with ListOffsets (the leader's earliest and latest offsets).
A partition whose answer is an error sits out ``replica.fetch.backoff.ms`` while the others go
on; a failed request backs off the whole fetcher as long, so a dead leader costs one failed
connection attempt per back-off. A Fetch not answered within ``fetch_timeout_ms`` of its wait
(2.5 s by default, not the 30 s request timeout) closes its connection: the next one reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from protocol.fetch_codec import (
    FETCH,
    FIRST_TOPIC_ID_VERSION,
    FetchPartitionRequest,
    encode_fetch_request,
    parse_fetch_response,
)
from protocol.fetch_session import SESSION_ERRORS, FetchSessionBuilder

from ..log.file_cache import is_fd_exhaustion, note_fd_exhaustion
from ..network.broker_clients import BrokerClients
from ..network.fetch_timeout import fetch_timeout_ms
from ..network.peer_refusals import REFUSALS, PeerRefusals
from .follower_state import (
    FetchPartition,
    FetchResponsePartition,
    FollowerStatus,
    ReplicationStateError,
)
from .leader_epochs import EpochEndOffset
from .partition import Partition

log = logging.getLogger(__name__)

LIST_OFFSETS = 2
EARLIEST, LATEST = -2, -1
_MIN_VERSION = 12  # DivergingEpoch in Fetch responses (KIP-595)
_WRITE_WAIT_S = 30.0  # a follower waits this long for its log writer before backing off
_FULL_REFRESH_S = 1.0  # every entry is rebuilt this often (see ReplicaFetcher._refresh)
# entry placeholders of a partition whose offsets must be reset before it is fetched again
_RESET = FetchPartition(-1, -1, -1, -1)
_NO_ENTRY = FetchPartitionRequest("", None, -1, -1, -1, -1, -1, 0)


@dataclass(frozen=True, slots=True)
class FetcherConfig:
    """The ``replica.fetch.*`` and ``num.replica.fetchers`` broker configs."""

    num_fetchers: int = 1
    max_bytes: int = 1_048_576
    response_max_bytes: int = 10_485_760
    wait_max_ms: int = 500
    min_bytes: int = 1
    backoff_ms: int = 1000


class ReplicaFetchers:
    """``clients()`` makes a fresh set of connections: each fetcher has its own (as Kafka's
    fetcher threads have their own network clients), so a Fetch never queues behind another
    request to the same broker, such as a coordinator write that itself waits for this very
    fetch to commit it."""

    def __init__(
        self,
        local_id: int,
        clients: Callable[[], BrokerClients],
        config: FetcherConfig,
        broker_epoch: Callable[[], int],
    ) -> None:
        self._local_id = local_id
        self._clients = clients
        self._config = config
        self._broker_epoch = broker_epoch
        self._fetchers: dict[tuple[int, int], ReplicaFetcher] = {}
        self._owner: dict[tuple[str, int], ReplicaFetcher] = {}

    def assign(self, partition: Partition) -> None:
        """Fetch ``partition`` from the leader its state names (moving it if that changed)."""
        key = (partition.topic, partition.partition)
        n = max(1, self._config.num_fetchers)
        index = (zlib.crc32(partition.topic.encode()) + partition.partition) % n
        fkey = (partition.leader_id, index)
        current = self._owner.get(key)
        if current is not None and current.key != fkey:
            self.unassign(partition)
            current = None
        fetcher = self._fetchers.get(fkey)
        if fetcher is None:
            fetcher = ReplicaFetcher(
                fkey, self._local_id, self._clients(), self._config, self._broker_epoch
            )
            self._fetchers[fkey] = fetcher
            fetcher.start()
        fetcher.add(partition)
        self._owner[key] = fetcher

    def unassign(self, partition: Partition) -> None:
        fetcher = self._owner.pop((partition.topic, partition.partition), None)
        if fetcher is None:
            return
        fetcher.remove(partition)
        if not fetcher.partitions:
            self._fetchers.pop(fetcher.key, None)
            fetcher.stop()

    async def close(self) -> None:
        fetchers = list(self._fetchers.values())
        self._fetchers.clear()
        self._owner.clear()
        for f in fetchers:
            f.stop()
        for f in fetchers:
            await f.wait_stopped()


class ReplicaFetcher:
    def __init__(
        self,
        key: tuple[int, int],
        local_id: int,
        clients: BrokerClients,
        config: FetcherConfig,
        broker_epoch: Callable[[], int],
    ) -> None:
        self.key = key
        self.leader_id = key[0]
        self._local_id = local_id
        self._clients = clients
        self._config = config
        self._broker_epoch = broker_epoch
        self.partitions: dict[tuple[str, int], Partition] = {}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.session = FetchSessionBuilder()
        self._session_by_id: bool | None = None
        # partitions whose last answer was an error sit out until then (monotonic seconds),
        # as Kafka delays only the failing partition, not the whole fetcher
        self._delayed: dict[tuple[str, int], float] = {}
        # per partition fetched, its request entry and what it was built from (``_refresh``)
        self._entries: dict[
            tuple[str, int], tuple[Partition, FetchPartition, FetchPartitionRequest]
        ] = {}
        self._dirty: set[tuple[str, int]] = set()  # entries to look at again
        self._refusals = PeerRefusals(f"replica fetcher {key[1]}")
        self._full_refresh_at = 0.0

    def __repr__(self) -> str:
        return f"ReplicaFetcher(leader={self.leader_id}, index={self.key[1]})"

    def add(self, partition: Partition) -> None:
        key = (partition.topic, partition.partition)
        self.partitions[key] = partition
        self._delayed.pop(key, None)  # a new leader or epoch: try at once
        self._dirty.add(key)
        self._wakeup.set()

    def remove(self, partition: Partition) -> None:
        key = (partition.topic, partition.partition)
        self.partitions.pop(key, None)
        self._delayed.pop(key, None)
        self._entries.pop(key, None)
        self._dirty.discard(key)

    def start(self) -> None:
        self._task = asyncio.get_event_loop().create_task(self._run())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    async def wait_stopped(self) -> None:
        if self._task is not None:
            with contextlib.suppress(BaseException):
                await self._task

    async def _run(self) -> None:
        try:
            await self._loop()
        finally:  # this fetcher's own connections go with it
            with contextlib.suppress(Exception):
                await self._clients.close()

    async def _loop(self) -> None:
        backoff_s = self._config.backoff_ms / 1000
        while self.partitions:
            started = time.monotonic()
            try:
                if not await self._round():
                    await asyncio.sleep(backoff_s)
            except asyncio.CancelledError:
                raise
            except Exception as e:
                log.info("%s: %s", self, e)
                self.session.on_failure()
                # the back-off counts from the attempt: one that already waited out a timeout
                # (a cut link) tries again at once, so a healed link is found within a bound
                await asyncio.sleep(max(0.0, backoff_s - (time.monotonic() - started)))

    async def _round(self) -> bool:
        """One Fetch (or offset reset); False asks for a back-off of the whole fetcher."""
        now = time.monotonic()
        self._refresh(now)
        if not self._entries:
            self._wakeup.clear()
            wait = self._config.backoff_ms / 1000
            if self._delayed:
                wait = max(0.0, min(wait, min(self._delayed.values()) - now))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), wait)
            return True
        # offset resets (after OFFSET_OUT_OF_RANGE), then those partitions' entries again
        resets = [p for p, r, _ in self._entries.values() if r is _RESET]
        for p in resets:
            await self._reset_offsets(p)
            self._dirty.add((p.topic, p.partition))
        if resets:
            self._refresh(time.monotonic())
        version = await self._clients.version_for(self.leader_id, FETCH)
        if version < _MIN_VERSION:
            raise RuntimeError(f"broker {self.leader_id} serves Fetch only up to v{version}")
        by_id = version >= FIRST_TOPIC_ID_VERSION
        if by_id != self._session_by_id:
            self.session.reset()  # the leader keys the session by name or by id, not both
            self._session_by_id = by_id
        cfg = self._config
        entries: list[FetchPartitionRequest] = []
        sent: dict[tuple[Any, int], tuple[Partition, FetchPartition]] = {}
        for p, r, fpr in self._entries.values():
            if r is _RESET:
                continue
            entries.append(fpr)
            sent[((p.topic_id if by_id else p.topic), p.partition)] = (p, r)
        if not entries:
            return False  # only offset resets, which failed: back off before trying again
        fetch = self.session.build(entries)
        body = encode_fetch_request(
            version,
            max_wait_ms=cfg.wait_max_ms,
            min_bytes=cfg.min_bytes,
            max_bytes=cfg.response_max_bytes,
            session_id=fetch.session_id,
            session_epoch=fetch.session_epoch,
            partitions=fetch.partitions,
            forgotten=fetch.forgotten,
            by_topic_id=by_id,
            isolation_level=0,
            replica_id=self._local_id,
            replica_epoch=self._broker_epoch(),
        )
        # no answer well after the wait: the link was cut or the answer is stuck; give up and
        # reconnect rather than wait out the request timeout (30 s) after the link heals
        bound = fetch_timeout_ms(cfg.wait_max_ms, self._clients.request_timeout_ms(self.leader_id))
        raw = await self._clients.send_raw(self.leader_id, FETCH, version, body, timeout_ms=bound)
        resp = parse_fetch_response(raw, version)
        self.session.on_response(resp.error_code, resp.session_id)
        if resp.error_code in SESSION_ERRORS:
            log.info("%s: Fetch answered %s; a new session", self, _name(resp.error_code))
            return True
        # a leader that refuses this follower (no CLUSTER_ACTION there) is logged once
        refusal = resp.error_code if resp.error_code in REFUSALS else 0
        refusal = refusal or next(
            (d.error_code for _t, d in resp.partitions if d.error_code in REFUSALS), 0
        )
        self._refusals.note(f"leader {self.leader_id}", "Fetch (as a follower)", refusal)
        if resp.error_code != 0:
            log.info("%s: Fetch answered %s", self, _name(resp.error_code))
            return False
        backoff_s = self._config.backoff_ms / 1000
        appended: list[Partition] = []
        for tkey, data in resp.partitions:
            entry = sent.get((tkey, data.partition))
            if entry is None:
                continue
            p, req = entry
            if self.partitions.get((p.topic, p.partition)) is not p:
                continue  # moved away while the Fetch was in flight
            self._dirty.add((p.topic, p.partition))  # its fetch fields may move now
            diverging = None
            if data.diverging_epoch >= 0 or data.diverging_end_offset >= 0:
                diverging = EpochEndOffset(data.diverging_epoch, data.diverging_end_offset)
            try:
                code = ErrorCode(data.error_code)
            except ValueError:
                code = ErrorCode.unknown_server_error
            records = data.records if len(data.records) else None
            try:
                step = p.on_fetch_response(
                    req,
                    FetchResponsePartition(
                        code,
                        data.high_watermark,
                        data.log_start_offset,
                        diverging,
                        records,
                        data.mirror_leader_epoch,
                    ),
                )
            except ReplicationStateError as e:
                log.error("%s: %s", p, e)
                self._delayed[(p.topic, p.partition)] = time.monotonic() + backoff_s
                continue
            except OSError as e:
                if is_fd_exhaustion(e):
                    note_fd_exhaustion("follower append", str(p), e)
                else:
                    log.exception("%s: follower append failed", p)
                self._delayed[(p.topic, p.partition)] = time.monotonic() + backoff_s
                continue
            if step.appended:
                appended.append(p)
            if step.beyond_epoch:
                log.warning(
                    "%s: the leader sent a batch of an epoch above %d; it is fetched again",
                    p,
                    data.mirror_leader_epoch
                    if data.mirror_leader_epoch >= 0
                    else req.current_leader_epoch,
                )
            if step.backoff:
                log.debug("%s: fetch error %s", p, code.name)
                self._delayed[(p.topic, p.partition)] = time.monotonic() + backoff_s
            if step.truncated_to >= 0:
                log.info("%s: truncated to %d", p, step.truncated_to)
        await self._wait_written(appended)
        return True

    def _refresh(self, now: float) -> None:
        """Bring the request entries of the partitions marked dirty up to date (their fetch
        fields may have moved: an answer, a new epoch, a delay ending), not of every partition:
        a fetcher holds every partition this node follows from one leader (thousands), and a
        busy leader answers many times a second. Everything is looked at again every
        ``_FULL_REFRESH_S`` for what changes without an event (a follower's log start)."""
        if now >= self._full_refresh_at:
            self._dirty.update(self.partitions)
            self._full_refresh_at = now + _FULL_REFRESH_S
        if self._delayed:
            for key, until in list(self._delayed.items()):
                if until <= now:
                    del self._delayed[key]
                    self._dirty.add(key)
        if not self._dirty:
            return
        dirty, self._dirty = self._dirty, set()
        cfg = self._config
        entries = self._entries
        for key in dirty:
            p = self.partitions.get(key)
            if p is None or key in self._delayed:
                entries.pop(key, None)  # gone, or sitting out: the session forgets it
                continue
            if p.follower.status is FollowerStatus.NEEDS_OFFSETS and not p.is_leader:
                entries[key] = (p, _RESET, _NO_ENTRY)
                continue
            r = p.fetch_request()
            if r is None:
                entries.pop(key, None)
                continue
            old = entries.get(key)
            if old is not None and old[0] is p and old[1] == r:
                continue  # the same entry again: the session builder finds it unchanged
            entries[key] = (
                p,
                r,
                FetchPartitionRequest(
                    p.topic,
                    p.topic_id,
                    p.partition,
                    r.fetch_offset,
                    r.current_leader_epoch,
                    r.last_fetched_epoch,
                    r.log_start_offset,
                    cfg.max_bytes,
                    r.mirror_leader_epoch,
                ),
            )

    async def _wait_written(self, appended: list[Partition]) -> None:
        """The next Fetch reports our log end to the leader, which counts it toward the high
        watermark: it goes only once the log writer has put these appends in the file."""
        for p in appended:
            code = await p.wait_written(p.log.log_end_offset, _WRITE_WAIT_S)
            if code != ErrorCode.none:
                log.warning("%s: appends not written (%s); fetching later", p, code.name)
                self._delayed[(p.topic, p.partition)] = time.monotonic() + _WRITE_WAIT_S
                self._dirty.add((p.topic, p.partition))

    async def _reset_offsets(self, p: Partition) -> None:
        """After OFFSET_OUT_OF_RANGE: the leader's log start and end (ListOffsets as a replica,
        which answers the log end offset for LATEST), then truncate or restart the log."""
        earliest = await self._list_offset(p, EARLIEST)
        latest = await self._list_offset(p, LATEST)
        if earliest < 0 or latest < 0:
            return
        step = p.on_leader_offsets(earliest, latest)
        if step.truncated_to >= 0:
            log.info("%s: reset to the leader's offsets, truncated to %d", p, step.truncated_to)

    async def _list_offset(self, p: Partition, timestamp: int) -> int:
        resp = await self._clients.request(
            self.leader_id,
            LIST_OFFSETS,
            {
                "replica_id": self._local_id,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": p.topic,
                        "partitions": [
                            {
                                "partition_index": p.partition,
                                "current_leader_epoch": p.follower.leader_epoch,
                                "timestamp": timestamp,
                            }
                        ],
                    }
                ],
            },
        )
        for t in resp.topics:
            for part in t.partitions:
                if part.error_code == ErrorCode.none:
                    return int(part.offset)
                log.info("%s: ListOffsets answered %s", p, ErrorCode(part.error_code).name)
        return -1


def _name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)
