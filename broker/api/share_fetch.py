"""KIP-932 ShareFetch v1 and ShareAcknowledge v1 on the partition leader (the versions Kafka 4.1
serves and librdkafka 2.16's ShareConsumer sends).

A share fetch acquires records for the member: first records waiting for redelivery, then new
ones from the share-partition's next offset up to the high watermark, by whole record batches
(only batch headers are read) up to MaxRecords (exceeded to end on a batch boundary) and
MaxBytes. The response carries the batches and the AcquiredRecords ranges with their delivery
counts; the client delivers only those offsets. Acknowledgements ride on ShareFetch or come in
ShareAcknowledge: ACCEPT, RELEASE, REJECT (and GAP) per offset run; acknowledging what the member
does not hold gives INVALID_RECORD_STATE in the partition's (acknowledge) error code.
MaxWaitMs/MinBytes long-poll until records can be acquired: new data, a release, or a lock
expiring. Share sessions: see `broker.coordinator.share.sessions`; ending one (epoch -1)
releases what the member still holds.

The share-partitions' state (`LeaderShareStates`) is kept on the leader and persisted at the
share coordinator (`__share_group_state`): loaded when the leader first serves one in its leader
epoch (none stored: a new one at `share.auto.offset.reset`, a broker-wide stand-in for Kafka's
group config), written after every acknowledgement before the answer, and after releases.
Acquired records are persisted as available, so a new (or restarted) leader redelivers what was
in flight.

With an authorizer (as Kafka): READ on the group (GROUP_AUTHORIZATION_FAILED) and READ on each
topic (TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

import asyncio
import contextlib
import datetime
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32, i32Timedelta, i64

from protocol.records.scan import scan_batches
from protocol.registry import REGISTRY

from ..coordinator.runtime import CoordinatorError
from ..coordinator.share.leader_states import LeaderShareStates
from ..coordinator.share.partition import Acquired, ShareConfig, SharePartition
from ..coordinator.share.persister import NoStateTopic, SharePersister
from ..coordinator.share.sessions import FINAL_EPOCH, INITIAL_EPOCH, ShareSession, ShareSessions
from ..log.errors import OffsetOutOfRange
from ..security.acls import AclOperation, ResourceType
from .authz import allowed
from .context import RequestContext
from .dispatcher import Api
from .services import Services

log = logging.getLogger(__name__)

SHARE_FETCH, SHARE_ACKNOWLEDGE = 78, 79
VERSION = 1

_NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))

TopicPartitionId = tuple[uuid.UUID, int]
_COORDINATOR_MOVING = frozenset(
    {
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
    }
)


@dataclass(slots=True)
class _Row:
    """One partition of a response being built."""

    partition: int
    error: ErrorCode = ErrorCode.none
    ack_error: ErrorCode | None = None
    leader: tuple[int, int] = (-1, -1)
    chunks: list[Any] = field(default_factory=list)
    acquired: list[Acquired] = field(default_factory=list)


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


def _ms(value: Any) -> int:
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    return int(value)


class ShareFetchApi:
    def __init__(
        self,
        services: Services,
        config: ShareConfig | None = None,
        auto_offset_reset: str = "latest",
        sessions: ShareSessions | None = None,
        persister: SharePersister | None = None,
        clock: Callable[[], int] = _monotonic_ms,
        group_overrides: Callable[[str], Mapping[str, str]] | None = None,
    ) -> None:
        self.s = services
        self.config = config or ShareConfig()
        self.sessions = sessions or ShareSessions()
        self.clock = clock
        # the share-partitions this node serves as leader (persister None: in memory only)
        self.states = LeaderShareStates(self.config, auto_offset_reset, persister, group_overrides)
        # long-polling fetches, woken when records may be acquirable again
        self._waiters: set[asyncio.Future[None]] = set()

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [
            Api(SHARE_FETCH, self.handle_fetch, min_version=VERSION, max_version=VERSION),
            Api(
                SHARE_ACKNOWLEDGE, self.handle_acknowledge, min_version=VERSION, max_version=VERSION
            ),
        ]

    # -- ShareFetch ----------------------------------------------------------------------------

    async def handle_fetch(self, ctx: RequestContext, req: Any) -> Any:
        now = self.clock()
        group, member, epoch = req.group_id, req.member_id, int(req.share_session_epoch)
        acks = {
            (t.topic_id, int(p.partition_index)): p.acknowledgement_batches
            for t in req.topics
            for p in t.partitions
            if p.acknowledgement_batches
        }
        error = self._check_request(ctx, group, member)
        if error is None and epoch == INITIAL_EPOCH and acks:
            error = ErrorCode.invalid_request  # a new session has nothing to acknowledge yet
        session: ShareSession | ErrorCode | None = None
        if error is None:
            session = await self._session(group, member, epoch, now)
            if isinstance(session, ErrorCode):
                error = session
        if error is not None or not isinstance(session, ShareSession):
            return self._fetch_response(error or ErrorCode.unknown_server_error, [], group)
        requested = [(t.topic_id, int(p.partition_index)) for t in req.topics for p in t.partitions]
        session.partitions.update(requested)
        for ft in req.forgotten_topics_data:
            session.partitions.difference_update((ft.topic_id, int(p)) for p in ft.partitions)
        denied = self._denied(ctx, set(session.partitions) | set(acks))
        ack_results = await self._acknowledge(group, member, acks, denied)
        if epoch == FINAL_EPOCH:
            await self._close(group, member)
            rows = {k: _Row(k[1], ack_error=code) for k, code in ack_results.items()}
            return self._fetch_response(ErrorCode.none, list(rows.items()), group)
        full = epoch == INITIAL_EPOCH
        deadline = time.monotonic() + max(0, _ms(req.max_wait)) / 1000
        max_records = int(getattr(req, "max_records", 0)) or 500
        load_errors = await self._load_states(group, sorted(session.partitions), denied, full)
        while True:
            rows = self._acquire(
                group,
                member,
                sorted(session.partitions),
                denied,
                int(req.max_bytes),
                max_records,
                load_errors,
            )
            got = any(r.acquired for r in rows.values())
            remaining = deadline - time.monotonic()
            if got or remaining <= 0 or any(r.error for r in rows.values()):
                break
            await self._wait(group, sorted(session.partitions), remaining)
        for key, code in ack_results.items():
            rows.setdefault(key, _Row(key[1])).ack_error = code
        shown = [
            (k, r)
            for k, r in rows.items()
            if full or r.acquired or r.error or r.ack_error is not None
        ]
        return self._fetch_response(ErrorCode.none, shown, group)

    def _fetch_response(
        self, error: ErrorCode, rows: list[tuple[TopicPartitionId, _Row]], group: str
    ) -> Any:
        cls = REGISTRY.spec(SHARE_FETCH).response_type(VERSION)
        mod = __import__(
            cls.__module__,
            fromlist=["PartitionData", "ShareFetchableTopicResponse", "LeaderIdAndEpoch"],
        )
        topics: dict[uuid.UUID, list[Any]] = {}
        for (topic_id, _p), r in rows:
            topics.setdefault(topic_id, []).append(
                mod.PartitionData(
                    partition_index=i32(r.partition),
                    error_code=r.error,
                    acknowledge_error_code=i16(int(r.ack_error or ErrorCode.none)),
                    current_leader=mod.LeaderIdAndEpoch(
                        leader_id=i32(r.leader[0]), leader_epoch=i32(r.leader[1])
                    ),
                    records=b"".join(bytes(c) for c in r.chunks),
                    acquired_records=tuple(
                        mod.AcquiredRecords(
                            first_offset=i64(a.first),
                            last_offset=i64(a.last),
                            delivery_count=i16(a.delivery_count),
                        )
                        for a in r.acquired
                    ),
                )
            )
        return cls(
            throttle_time=_NO_THROTTLE,
            error_code=error,
            acquisition_lock_timeout=i32Timedelta.parse(
                datetime.timedelta(milliseconds=self.states.config_for(group).lock_duration_ms)
            ),
            responses=tuple(
                mod.ShareFetchableTopicResponse(topic_id=t, partitions=tuple(ps))
                for t, ps in topics.items()
            ),
            node_endpoints=(),
        )

    def _acquire(
        self,
        group: str,
        member: str,
        wanted: list[TopicPartitionId],
        denied: set[uuid.UUID],
        max_bytes: int,
        max_records: int,
        load_errors: dict[TopicPartitionId, ErrorCode],
    ) -> dict[TopicPartitionId, _Row]:
        rows: dict[TopicPartitionId, _Row] = {}
        budget, left = max(max_bytes, 1), max_records
        for key in wanted:
            row = rows[key] = _Row(key[1])
            hosted = self._leader(key, row, denied)
            if hosted is not None and key in load_errors:
                row.error = load_errors[key]
                continue
            sp = self.states.current((group, *key), hosted) if hosted is not None else None
            if sp is None or left <= 0 or budget <= 0:
                continue
            if sp.expire_locks(self.clock()):
                self._wake()
            try:
                size, count = self._take(sp, member, hosted.log, row, budget, left)
            except Exception:
                log.exception("share fetch of %s-%d failed", hosted.topic, key[1])
                row.error = ErrorCode.unknown_server_error
                continue
            budget -= size
            left -= count
        return rows

    def _take(
        self, sp: SharePartition, member: str, plog: Any, row: _Row, budget: int, left: int
    ) -> tuple[int, int]:
        """Acquire whole batches for `member` into `row`: redeliveries first, then new records.
        Returns (bytes, records) taken."""
        hw = plog.high_watermark
        targets = sp.available()
        if sp.can_acquire_new() and sp.next_offset < hw:
            targets.append((sp.next_offset, hw - 1))
        size = count = 0
        for lo, hi in targets:
            if count >= left or size >= budget:
                break
            try:
                result = plog.read(lo, max(budget - size, 1), upper_bound=hw, min_one_batch=True)
            except OffsetOutOfRange:
                continue
            for data in result.records:
                end, last = 0, -1
                for b in scan_batches(data, verify_crc=False, allow_partial_tail=True):
                    if b.base_offset > hi:
                        break
                    end += b.size
                    last = b.last_offset
                    count += last - max(b.base_offset, lo) + 1
                    if count >= left:
                        break
                if last < 0:
                    break
                row.chunks.append(data[:end])
                size += end
                row.acquired += sp.acquire(member, lo, min(hi, last), self.clock())
                if count >= left or last >= hi:
                    break
                lo = last + 1
        return size, count

    # -- ShareAcknowledge ----------------------------------------------------------------------

    async def handle_acknowledge(self, ctx: RequestContext, req: Any) -> Any:
        group, member, epoch = req.group_id, req.member_id, int(req.share_session_epoch)
        acks = {
            (t.topic_id, int(p.partition_index)): p.acknowledgement_batches
            for t in req.topics
            for p in t.partitions
        }
        error = self._check_request(ctx, group, member)
        if error is None and epoch == INITIAL_EPOCH:
            error = ErrorCode.invalid_share_session_epoch  # acknowledging needs a session
        if error is None:
            session = await self._session(group, member, epoch, self.clock())
            if isinstance(session, ErrorCode):
                error = session
        results: dict[TopicPartitionId, ErrorCode] = {}
        if error is None:
            results = await self._acknowledge(group, member, acks, self._denied(ctx, set(acks)))
            if epoch == FINAL_EPOCH:
                await self._close(group, member)
        cls = REGISTRY.spec(SHARE_ACKNOWLEDGE).response_type(VERSION)
        mod = __import__(
            cls.__module__,
            fromlist=["PartitionData", "ShareAcknowledgeTopicResponse", "LeaderIdAndEpoch"],
        )
        topics: dict[uuid.UUID, list[Any]] = {}
        for (topic_id, p), code in results.items():
            leader = self._leader_of(topic_id, p)
            topics.setdefault(topic_id, []).append(
                mod.PartitionData(
                    partition_index=i32(p),
                    error_code=code,
                    current_leader=mod.LeaderIdAndEpoch(
                        leader_id=i32(leader[0]), leader_epoch=i32(leader[1])
                    ),
                )
            )
        return cls(
            throttle_time=_NO_THROTTLE,
            error_code=error or ErrorCode.none,
            responses=tuple(
                mod.ShareAcknowledgeTopicResponse(topic_id=t, partitions=tuple(ps))
                for t, ps in topics.items()
            ),
            node_endpoints=(),
        )

    # -- shared --------------------------------------------------------------------------------

    def _check_request(
        self, ctx: RequestContext, group: str | None, member: str | None
    ) -> ErrorCode | None:
        if not group or not member:
            return ErrorCode.invalid_request
        if not allowed(self.s.authorizer, ctx, AclOperation.READ, ResourceType.GROUP, group):
            return ErrorCode.group_authorization_failed
        return None

    async def _session(
        self, group: str, member: str, epoch: int, now: int
    ) -> ShareSession | ErrorCode:
        if epoch == INITIAL_EPOCH:
            # a member opening a new session gives back what its old one held
            if self.sessions.close(group, member) is not None:
                await self._release(group, member)
            return self.sessions.open(group, member, now)
        return self.sessions.use(group, member, epoch, now)

    async def _close(self, group: str, member: str) -> None:
        self.sessions.close(group, member)
        await self._release(group, member)

    async def _release(self, group: str, member: str) -> None:
        released = [skey for skey, sp in self.states.of_group(group) if sp.release_member(member)]
        if released:
            self._wake()
        for skey in released:
            # released records are available here anyway; a failed write only loses counts
            with contextlib.suppress(CoordinatorError):
                await self.states.persist(skey)

    def _denied(self, ctx: RequestContext, keys: Iterable[TopicPartitionId]) -> set[uuid.UUID]:
        """Topic ids of known topics the principal may not READ."""
        if self.s.authorizer is None:
            return set()
        img = self.s.image()
        out: set[uuid.UUID] = set()
        for topic_id in {t for t, _p in keys}:
            topic = img.topic_by_id(topic_id)
            if topic is not None and not allowed(
                self.s.authorizer, ctx, AclOperation.READ, ResourceType.TOPIC, topic.name
            ):
                out.add(topic_id)
        return out

    async def _acknowledge(
        self,
        group: str,
        member: str,
        acks: dict[TopicPartitionId, Any],
        denied: set[uuid.UUID],
    ) -> dict[TopicPartitionId, ErrorCode]:
        results: dict[TopicPartitionId, ErrorCode] = {}
        for key, batches in acks.items():
            row = _Row(key[1])
            hosted = self._leader(key, row, denied)
            if hosted is None:
                results[key] = row.error
                continue
            sp = self.states.current((group, *key), hosted)
            if sp is None:
                results[key] = ErrorCode.invalid_record_state  # nothing acquired here
                continue
            sp.expire_locks(self.clock())
            code = ErrorCode.none
            for b in batches:
                c = sp.acknowledge(
                    member,
                    int(b.first_offset),
                    int(b.last_offset),
                    [int(t) for t in b.acknowledge_types],
                )
                if code == ErrorCode.none:
                    code = c
            self._wake()  # a release or a moved start may let a waiting fetch acquire
            try:  # acknowledged state must survive the leader before the answer says so
                await self.states.persist((group, *key))
            except CoordinatorError as exc:
                code = exc.code if code == ErrorCode.none else code
                if exc.code == ErrorCode.fenced_state_epoch:
                    self.states.forget((group, *key))  # re-initialized: read it again
            results[key] = code
        return results

    def _leader(self, key: TopicPartitionId, row: _Row, denied: set[uuid.UUID]) -> Any:
        """The partition if this node leads it, else None with the row's error set."""
        topic_id, partition = key
        if topic_id in denied:
            row.error = ErrorCode.topic_authorization_failed
            return None
        topic = self.s.image().topic_by_id(topic_id)
        if topic is None:
            row.error = ErrorCode.unknown_topic_id
            return None
        hosted = self.s.replicas.get(topic.name, partition)
        if hosted is None:
            row.error = self.s.not_hosted_error(topic.name, partition)
            return None
        row.leader = (hosted.leader_id, hosted.leader_epoch)
        if not hosted.is_leader:
            row.error = ErrorCode.not_leader_or_follower
            return None
        return hosted

    def _leader_of(self, topic_id: uuid.UUID, partition: int) -> tuple[int, int]:
        topic = self.s.image().topic_by_id(topic_id)
        hosted = self.s.replicas.get(topic.name, partition) if topic is not None else None
        return (hosted.leader_id, hosted.leader_epoch) if hosted is not None else (-1, -1)

    async def _load_states(
        self,
        group: str,
        wanted: list[TopicPartitionId],
        denied: set[uuid.UUID],
        new_session: bool = False,
    ) -> dict[TopicPartitionId, ErrorCode]:
        """Each led partition's share-partition for its leader epoch (see `LeaderShareStates`);
        returns the partitions whose state could not be loaded, with the error (but for a
        share coordinator moving or loading: such a partition is just not served this time).
        A new session first checks that cached states are still the coordinator's (offsets
        altered or deleted while the group was empty)."""
        errors: dict[TopicPartitionId, ErrorCode] = {}
        for key in wanted:
            hosted = self._leader(key, _Row(key[1]), denied)
            if hosted is None:
                continue
            try:
                if new_session:
                    await self.states.revalidate((group, *key))
                await self.states.load((group, *key), hosted)
            except CoordinatorError as exc:
                # a share coordinator moving or loading: the partition sits this fetch out
                # (the client's next one tries again) rather than failing the consumer
                if exc.code not in _COORDINATOR_MOVING or isinstance(exc, NoStateTopic):
                    errors[key] = exc.code
        return errors

    # -- long poll -----------------------------------------------------------------------------

    async def _wait(self, group: str, wanted: list[TopicPartitionId], timeout_s: float) -> None:
        """Until a wanted partition's log moves, records are released somewhere, or the next
        lock of these partitions expires."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        img = self.s.image()
        hosted = []
        now = self.clock()
        for topic_id, partition in wanted:
            topic = img.topic_by_id(topic_id)
            p = self.s.replicas.get(topic.name, partition) if topic is not None else None
            if p is not None:
                p.add_waiter(fut)
                hosted.append(p)
            sp = self.states.peek((group, topic_id, partition))
            deadline = sp.next_deadline() if sp is not None else None
            if deadline is not None:
                timeout_s = min(timeout_s, max(deadline - now, 0) / 1000 + 0.001)
        self._waiters.add(fut)
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(fut, timeout_s)
        finally:
            self._waiters.discard(fut)
            for p in hosted:
                p.remove_waiter(fut)

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, set()
        for fut in waiters:
            if not fut.done():
                fut.set_result(None)
