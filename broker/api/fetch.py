"""Fetch v4-v19 (consumers, and followers: a replica id >= 0, see `_read`; a Fetch of
``__cluster_metadata-0`` goes to the KRaft quorum): long-poll reads. v18 adds a partition's
high watermark for KRaft fetchers (ignored here); v19 (KIP-1279) MirrorLeaderEpoch: a follower
of a mirror partition learns the latest epoch in the leader's log, the bound its appends are
checked against, since the batches carry the source cluster's epochs, not ours.

Reads return the log's byte ranges untouched; the hand encoder puts them on the wire without
copying. ``max_wait``/``min_bytes`` long-poll on the replica manager's append signal; ``max_bytes``
and each partition's ``partition_max_bytes`` bound the response, except that the first batch is
always returned whole (KIP-74). READ_COMMITTED reads stop at the last stable offset and carry the
aborted transactions overlapping the returned data (the log's .txnindex); every response carries
the real LSO. With an authorizer, partitions of a topic
the principal may not READ get TOPIC_AUTHORIZATION_FAILED (a topic id this node does not know
stays UNKNOWN_TOPIC_ID). Sessions: see `fetch_sessions`. A kmirror mirror's Fetch reports what its
destination committed (synchronous mirroring, tag 1279): see `fetch_sync`.

KIP-392 (v11+, which carries the consumer's ``rack_id``): a consumer may read from a follower,
which serves up to its own high watermark (as it last heard it from the leader), never
beyond; below v11 only the leader serves consumers. With ``replica.selector.class`` set, the
leader names the replica a consumer should read from in ``preferred_read_replica`` and then
reads nothing for it (the offsets only, at once), as Kafka's ReplicaManager does; the leader
epoch check (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH) comes first on every replica.
"""

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.errors import ErrorCode

from protocol.encoders.fetch import encode_fetch_rows
from protocol.encoders.fetch_request import FetchRequestView, parse_fetch_request
from protocol.errors import ProtocolError, RequestBodyError
from protocol.readers import Buffer
from protocol.registry import REGISTRY, body_bytes, decode_body

from ..log.file_cache import is_fd_exhaustion, note_fd_exhaustion
from ..replication.change_watch import ChangeWatch
from ..replication.leader_epochs import diverging_epoch
from ..replication.replica_manager import leader_epoch_error
from ..security.acls import AclOperation, ResourceType
from .authz import allowed, cluster_allowed
from .client_throttle import (
    FETCH_CLIENT_THROTTLES,
    ClientThrottle,
    throttle,
    wait_while_muted,
)
from .context import RequestContext
from .dispatcher import Api
from .fetch_sessions import FetchSessionCache, SessionError, SessionPartition
from .fetch_sync import note_foreign_mirror, report_commits
from .follower_reads import preferred_replica_for
from .services import Services

log = logging.getLogger(__name__)

API_KEY = 1
VERSIONS = (4, 19)  # served; 19 is KIP-1279's
READ_COMMITTED = 1
CLIENT_METADATA_VERSION = 11  # rack_id, preferred_read_replica: consumers may read followers
FOLLOWER_READ = "served_as_follower"  # a row's mark (the encoder ignores it): for the metrics
# What `FetchApi.fetch` answers: throttle ms, error code, session id, the topic rows
FetchAnswer = tuple[int, int, int, list[dict[str, Any]]]


class FetchApi:
    def __init__(
        self,
        services: Services,
        on_bytes_out: Any = None,
        quotas: ClientThrottle | None = None,
        *,
        metadata_fetch: Callable[[RequestContext, Any], Awaitable[Any]] | None = None,
        controller_listener: Callable[[RequestContext], bool] | None = None,
        on_follower_read: Callable[[int], None] | None = None,
        on_preferred_replica: Callable[[], None] | None = None,
    ) -> None:
        self.s = services
        self.sessions = FetchSessionCache()
        self._on_bytes_out = on_bytes_out
        self.quotas = quotas  # client quotas (consumer_byte_rate); None: not enforced
        # KRaft's Fetch of __cluster_metadata-0 (QuorumApi.fetch, which checks CLUSTER_ACTION)
        self.metadata_fetch = metadata_fetch
        # A Fetch on a controller listener is the quorum's, as in Kafka's ControllerApis (there
        # it reads the metadata log or is INVALID_REQUEST); on a broker listener the metadata
        # log is no topic of the node's (UNKNOWN_TOPIC_OR_PARTITION).
        self.controller_listener: Callable[[RequestContext], bool] = controller_listener or (
            lambda ctx: False
        )
        # KIP-392 counters (the node's metrics): bytes a consumer Fetch read from partitions
        # this node follows, and preferred_read_replica answers given as leader
        self.on_follower_read: Callable[[int], None] = on_follower_read or (lambda n: None)
        self.on_preferred_replica: Callable[[], None] = on_preferred_replica or (lambda: None)

    @property
    def replica_selector(self) -> str | None:
        """``replica.selector.class`` (checked at start-up), None: consumers read leaders."""
        return getattr(self.s.config, "replica_selector_class", None) or None

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [
            Api(API_KEY, raw=self.handle_raw, min_version=VERSIONS[0], max_version=VERSIONS[1]),
        ]

    async def handle_raw(
        self, ctx: RequestContext, frame: memoryview, pos: int
    ) -> list[Buffer] | None:
        version = ctx.api_version
        try:
            req = parse_fetch_request(frame, pos, version)
        except ProtocolError as e:
            h = ctx.header
            raise RequestBodyError(
                str(e), h.api_key, version, h.correlation_id, h.client_id
            ) from None
        if self.metadata_fetch is not None and self.controller_listener(ctx):
            # a voter or observer fetching __cluster_metadata-0: the quorum answers it
            body = decode_body(REGISTRY.spec(API_KEY).request_type(version), frame, pos)
            return [body_bytes(await self.metadata_fetch(ctx, body))]
        answer = await self.fetch(ctx, req)
        return encode_fetch_rows(*answer, version)

    async def fetch(self, ctx: RequestContext, req: FetchRequestView) -> FetchAnswer:
        """(throttle ms, error code, session id, topic rows): encoded by `encode_fetch_rows`."""
        version = ctx.api_version
        by_id = version >= 13
        try:
            session, full = self.sessions.resolve(req.session_id, req.session_epoch, by_id)
        except SessionError as e:
            return 0, int(e.code), req.session_id, []
        wanted: dict[tuple[Any, int], SessionPartition] = session.partitions if session else {}  # type: ignore[assignment]
        if full:
            wanted.clear()
        for t in req.topics:
            tkey: Any = t.topic_id if by_id else t.topic
            for p in t.partitions:
                wanted[(tkey, p.partition)] = SessionPartition(
                    p.fetch_offset,
                    p.partition_max_bytes,
                    p.current_leader_epoch,
                    p.last_fetched_epoch,
                    p.log_start_offset,
                )
        for ft in req.forgotten_topics_data:
            fkey: Any = ft.topic_id if by_id else ft.topic
            for part in ft.partitions:
                wanted.pop((fkey, part), None)
        sync = self.s.mirror_sync
        if sync is not None and req.replica_id < 0:
            if req.mirror_sync_id is not None:
                report_commits(self.s, sync, req, by_id)
            elif "-mirror-" in ctx.client_id:
                note_foreign_mirror(self.s, sync, ctx.client_id, wanted, by_id)

        deadline = time.monotonic() + max(0, req.max_wait_ms) / 1000
        committed = req.isolation_level == READ_COMMITTED
        follower = (req.replica_id, req.replica_epoch) if req.replica_id >= 0 else None
        denied = None
        if self.s.authorizer is not None:
            denied = (
                self._denied_follower(ctx, wanted)
                if follower is not None
                else self._denied(ctx, wanted, by_id)
            )
        quotas = self.quotas
        if follower is not None or (quotas is not None and not quotas.active()):
            quotas = None
        max_bytes = req.max_bytes if quotas is None else quotas.fetch_max_bytes(ctx, req.max_bytes)
        # a v11+ consumer's (rack, listener): it may read followers, and be sent to one
        client = (
            (req.rack_id, ctx.listener)
            if follower is None and version >= CLIENT_METADATA_VERSION
            else None
        )
        rows, total = self._read(
            wanted, max_bytes, committed, by_id, full, denied, follower, version >= 19,
            client=client,
        )  # fmt: skip
        if total < req.min_bytes and deadline > time.monotonic() and not _answers_now(rows):
            rows, total = await self._long_poll(
                wanted, rows, total, req.min_bytes, deadline,
                (max_bytes, committed, by_id, full, denied, follower, version >= 19, client),
            )  # fmt: skip
        if quotas is not None and quotas.fetch.enabled:
            await wait_while_muted(ctx)
            throttle_ms = quotas.fetch_throttle_ms(ctx, total)
            if throttle_ms:
                # KIP-219: an empty answer now; the consumer fetches the same offsets again
                await throttle(ctx, throttle_ms, version >= FETCH_CLIENT_THROTTLES)
                return throttle_ms, 0, session.id if session else 0, []
        if session is not None:
            for key, row in rows:
                sp = wanted.get(key)
                if sp is not None:
                    sp.last_hw, sp.last_lso, sp.last_log_start = (
                        row["high_watermark"],
                        row["last_stable_offset"],
                        row["log_start_offset"],
                    )
        topics: dict[Any, list[dict[str, Any]]] = {}
        for (tkey, _p), row in rows:
            topics.setdefault(tkey, []).append(row)
        responses = [
            {("topic_id" if by_id else "topic"): tkey, "partitions": parts}
            for tkey, parts in topics.items()
        ]
        if self._on_bytes_out is not None and total:
            # as Kafka's BytesOut: consumers only; followers' bytes count as replication
            self._on_bytes_out(total, replication=follower is not None)
        if client is not None:
            served = sum(_size(r) for _k, r in rows if FOLLOWER_READ in r)
            if served:
                self.on_follower_read(served)
        return 0, 0, session.id if session else 0, responses

    async def _long_poll(
        self,
        wanted: dict[tuple[Any, int], SessionPartition],
        rows: list[tuple[tuple[Any, int], dict[str, Any]]],
        total: int,
        min_bytes: int,
        deadline: float,
        read_args: tuple[Any, ...],
    ) -> tuple[list[tuple[tuple[Any, int], dict[str, Any]]], int]:
        """Until ``min_bytes`` are there, an error or DivergingEpoch is to be answered, or the
        deadline: each time partitions move (log end, high watermark, role) only those are
        read again, their rows replacing what the last read had for them."""
        max_bytes, committed, by_id, full, denied, follower, mirror_epochs, client = read_args
        img = self.s.image()
        watch = ChangeWatch()
        hosted = []
        for key, sp in wanted.items():
            if sp.quiet is not None:  # the partition its quiet entry was read from
                p = sp.quiet[0]
            else:
                tkey, partition = key
                topic = img.topic_by_id(tkey) if by_id else img.topics.get(tkey)
                p = self.s.replicas.get(topic.name, partition) if topic is not None else None
            if p is not None:
                p.add_watch(watch, key)
                hosted.append(p)
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return rows, total
                moved = {k: wanted[k] for k in await watch.wait(remaining) if k in wanted}
                if not moved:
                    continue
                kept = [(k, r) for k, r in rows if k not in moved]
                kept_total = total - sum(_size(r) for k, r in rows if k in moved)
                fresh, total = self._read(
                    moved, max_bytes, committed, by_id, full, denied, follower,
                    mirror_epochs, kept_total, client=client,
                )  # fmt: skip
                rows = kept + fresh
                if total >= min_bytes or _answers_now(fresh):
                    return rows, total
        finally:
            for p in hosted:
                p.remove_watch(watch)

    def _denied_follower(
        self, ctx: RequestContext, wanted: dict[tuple[Any, int], SessionPartition]
    ) -> set[Any]:
        """A follower's Fetch needs CLUSTER_ACTION on the cluster (Kafka's rule)."""
        if cluster_allowed(self.s.authorizer, ctx, AclOperation.CLUSTER_ACTION):
            return set()
        return {k for k, _p in wanted}

    def _denied(
        self, ctx: RequestContext, wanted: dict[tuple[Any, int], SessionPartition], by_id: bool
    ) -> set[Any]:
        """Topic keys (names, or ids from v13) of known topics the principal may not READ."""
        img = self.s.image()
        out: set[Any] = set()
        for tkey in {k for k, _p in wanted}:
            if by_id:
                topic = img.topic_by_id(tkey)
                if topic is None:
                    continue  # UNKNOWN_TOPIC_ID, as without an authorizer
                name = topic.name
            else:
                name = tkey
            if not allowed(self.s.authorizer, ctx, AclOperation.READ, ResourceType.TOPIC, name):
                out.add(tkey)
        return out

    def _read(
        self,
        wanted: dict[tuple[Any, int], SessionPartition],
        max_bytes: int,
        committed: bool,
        by_id: bool,
        full: bool,
        denied: set[Any] | None = None,
        follower: tuple[int, int] | None = None,
        mirror_epochs: bool = False,
        total: int = 0,
        client: tuple[str, str] | None = None,
    ) -> tuple[list[tuple[tuple[Any, int], dict[str, Any]]], int]:
        """Rows for ``wanted`` (those an incremental session answers: changed ones) and the
        bytes in all, counting from ``total`` (rows already read, within ``max_bytes``).
        ``client``: a v11+ consumer's (rack id, listener), None for older ones and followers."""
        img = self.s.image()
        selector = self.replica_selector if client is not None else None
        rows: list[tuple[tuple[Any, int], dict[str, Any]]] = []
        budget = max_bytes - total
        # An incremental Fetch: a partition the fetcher had caught up on, unchanged since, has
        # nothing to answer (a follower's fetch is still noted). Sessions hold thousands of
        # partitions (every one two nodes share; every one a mirror copies), and reading each
        # on every Fetch was most of a failover's CPU and of idle mirroring's at the source.
        skip_quiet = not full
        for key, sp in wanted.items():
            quiet = sp.quiet
            if quiet is not None:
                if (
                    skip_quiet
                    and quiet[0].change_seq == quiet[1]
                    and quiet[0].log.log_start_offset == sp.last_log_start
                ):
                    if follower is not None:
                        quiet[0].on_idle_follower_fetch(follower[0])
                    continue
                sp.quiet = None
            tkey, partition = key
            topic = img.topic_by_id(tkey) if by_id else img.topics.get(tkey)
            row: dict[str, Any] = {
                "partition_index": partition,
                "error_code": ErrorCode.none,
                "high_watermark": -1,
                "last_stable_offset": -1,
                "log_start_offset": -1,
                "aborted_transactions": [] if committed else None,
                "preferred_read_replica": -1,
                "records": b"",
            }
            if denied and tkey in denied:
                row["error_code"] = ErrorCode.topic_authorization_failed
                rows.append((key, row))
                continue
            hosted = self.s.replicas.get(topic.name, partition) if topic is not None else None
            if hosted is None:
                if topic is None and by_id:
                    row["error_code"] = ErrorCode.unknown_topic_id
                elif topic is None:
                    row["error_code"] = ErrorCode.unknown_topic_or_partition
                else:
                    row["error_code"] = self.s.not_hosted_error(topic.name, partition)
                rows.append((key, row))
                continue
            plog = hosted.log
            if follower is not None:
                served = hosted.on_follower_fetch(
                    follower[0],
                    sp.fetch_offset,
                    last_fetched_epoch=sp.last_fetched_epoch,
                    current_leader_epoch=sp.current_leader_epoch,
                    broker_epoch=follower[1],
                    log_start_offset=sp.log_start_offset,
                )
                if served.error != ErrorCode.none or served.diverging is not None:
                    row["error_code"] = served.error
                    if served.diverging is not None:
                        _diverging(
                            row, served.diverging, served.high_watermark, served.log_start_offset
                        )
                    rows.append((key, row))
                    continue
                hw = served.high_watermark
                lso = self._lso(plog)
                upper = served.log_end_offset  # followers read everything the leader has
            else:
                epoch_error = leader_epoch_error(
                    hosted, sp.current_leader_epoch, require_leader=client is None
                )
                if epoch_error is not None:
                    row["error_code"] = epoch_error
                    rows.append((key, row))
                    continue
                if selector is not None and client is not None and client[0]:
                    preferred = preferred_replica_for(
                        hosted, selector, client[0], sp.fetch_offset, img, client[1],
                        self.s.now_ms(),
                    )  # fmt: skip
                    if preferred >= 0:
                        # KIP-392: no read here; the offsets, and where to read from
                        row["high_watermark"] = plog.high_watermark
                        row["last_stable_offset"] = self._lso(plog)
                        row["log_start_offset"] = plog.log_start_offset
                        row["preferred_read_replica"] = preferred
                        rows.append((key, row))
                        self.on_preferred_replica()
                        continue
                # LastFetchedEpoch is checked for every Fetch that carries it, as Kafka's
                # Partition.readRecords does, not only followers': a KIP-1279 mirror fetcher
                # (a consumer Fetch) sends its log's latest epoch, and failback relies on the
                # DivergingEpoch answer to drop what the old source wrote after the failover
                # within the last mirrored epoch (without it the source answered from the
                # fetch offset: the fetcher cut its own batch there and left a gap).
                check = diverging_epoch(
                    plog, sp.last_fetched_epoch, sp.fetch_offset, plog.log_start_offset
                )
                if check.out_of_range or check.diverging is not None:
                    if check.diverging is None:
                        row["error_code"] = ErrorCode.offset_out_of_range
                    else:
                        _diverging(row, check.diverging, plog.high_watermark, plog.log_start_offset)
                    rows.append((key, row))
                    continue
                hw = plog.high_watermark
                lso = self._lso(plog)
                upper = lso if committed else hw
            row["high_watermark"] = hw
            row["last_stable_offset"] = lso
            row["log_start_offset"] = plog.log_start_offset
            limit = min(sp.max_bytes, budget)
            records: list[Buffer] = []
            if limit > 0 or total == 0:
                try:
                    result = plog.read(
                        sp.fetch_offset,
                        max(limit, 1),
                        upper_bound=upper,
                        min_one_batch=total == 0,
                        aborted=committed,
                    )
                    records = list(result.records)
                    if result.aborted_transactions:
                        # Consumers drop these transactions' records themselves.
                        row["aborted_transactions"] = [
                            {"producer_id": t.producer_id, "first_offset": t.first_offset}
                            for t in result.aborted_transactions
                        ]
                except Exception as e:
                    code = getattr(e, "error_code", None)
                    if type(e).__name__ == "OffsetOutOfRange":
                        code = ErrorCode.offset_out_of_range
                    if is_fd_exhaustion(e):
                        assert isinstance(e, OSError)
                        note_fd_exhaustion(
                            "fetch", f"{topic.name if topic else tkey}-{partition}", e
                        )
                        code = ErrorCode.kafka_storage_error
                    elif code is None:
                        log.exception(
                            "read of %s-%d failed", topic.name if topic else tkey, partition
                        )
                        code = ErrorCode.unknown_server_error
                    row["error_code"] = code
            size = sum(len(b) for b in records)
            if follower is not None and mirror_epochs:
                row["mirror_leader_epoch"] = hosted.mirror_leader_epoch
            if size:
                row["records"] = records
                budget -= size
                total += size
                if follower is None and not hosted.is_leader:
                    row[FOLLOWER_READ] = True  # counted once the answer is final
            changed = (
                full
                or size > 0
                or row["error_code"] != ErrorCode.none
                or hw != sp.last_hw
                or lso != sp.last_lso
                or plog.log_start_offset != sp.last_log_start
            )
            if changed:
                rows.append((key, row))
            if (
                size == 0
                and row["error_code"] == ErrorCode.none
                and sp.fetch_offset >= upper
                # a follower out of the ISR: each of its fetches may bring it back in
                and (follower is None or follower[0] in hosted.leader.isr)
            ):
                sp.quiet = (hosted, hosted.change_seq)
        return rows, total

    @staticmethod
    def _lso(plog: Any) -> int:
        lso = getattr(plog, "last_stable_offset", None)
        return int(lso) if lso is not None else int(plog.high_watermark)


def _answers_now(rows: list[tuple[tuple[Any, int], dict[str, Any]]]) -> bool:
    """An error, a DivergingEpoch or a preferred read replica is answered at once, not held
    back for min_bytes."""
    return any(
        r["error_code"] or "diverging_epoch" in r or r["preferred_read_replica"] >= 0
        for _, r in rows
    )


def _size(row: dict[str, Any]) -> int:
    records = row["records"]
    return sum(len(b) for b in records) if isinstance(records, list) else len(records)


def _diverging(row: dict[str, Any], diverging: Any, high_watermark: int, log_start: int) -> None:
    """A DivergingEpoch answer: where the fetcher's epoch ends in our log (KIP-320)."""
    row["high_watermark"] = high_watermark
    row["log_start_offset"] = log_start
    row["diverging_epoch"] = {"epoch": diverging.epoch, "end_offset": diverging.end_offset}
