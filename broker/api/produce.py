"""Produce v3-v13 (hot path): records are appended as the bytes the client sent.

The request is parsed by `protocol.encoders.produce.parse_produce_request` (records stay views into
the frame) and the response written by the hand encoder. acks=0 gets no response. Errors per
partition follow Kafka: UNKNOWN_TOPIC_OR_PARTITION (UNKNOWN_TOPIC_ID from v13), NOT_LEADER_OR_FOLLOWER,
CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, INVALID_REQUIRED_ACKS, NOT_ENOUGH_REPLICAS, and the producer-
state errors (OUT_OF_ORDER_SEQUENCE_NUMBER, INVALID_PRODUCER_EPOCH). When records break a
per-record rule (INVALID_RECORD: no key on a compacted topic; INVALID_TIMESTAMP: outside
message.timestamp.before/after.max.ms) the batch is refused whole, as in Kafka, and v8+ lists
each offending record's index in the batch in ``record_errors`` (KIP-467), with the partition's
``error_message``; librdkafka then fails those records with INVALID_RECORD and the rest with
_INVALID_DIFFERENT_RECORD. With an authorizer, a topic
the principal may not WRITE gets TOPIC_AUTHORIZATION_FAILED (before any existence check, so
existence is not disclosed), and every partition of a transactional request whose id it may not
WRITE gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED.

KIP-890 part 1 (transaction.partition.verification.enable, on by default as in Kafka): a
transactional batch that would open a transaction on a partition is appended only once the
transaction coordinator confirms the partition is in that producer's transaction, so a late or
stray write cannot leave a transaction hanging (and the LSO stuck) after its marker. Not in the
transaction: INVALID_TXN_STATE; coordinator busy or moving, or a marker landed meanwhile:
NOT_ENOUGH_REPLICAS (retriable for every client); another epoch: INVALID_PRODUCER_EPOCH.

Appends go through the partition (`broker.replication.partition`): acks=all is refused with
NOT_ENOUGH_REPLICAS while the ISR is under min.insync.replicas, and once appended waits (within
the request's timeout) until every ISR member holds the records. acks=1 is answered once the
log writer (broker/log/log_writer) has put the records in the file, never before. On a topic with
``mirror.sync.enable=true``, acks=all then waits for the destination mirrors to commit the records
as well (synchronous mirroring: `_wait_for_mirrors`, docs/mirroring.md).
"""

import logging
import time
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from protocol.build import error_code
from protocol.encoders.produce import encode_produce_rows, parse_produce_request
from protocol.errors import MirrorErrorCode, ProtocolError, RequestBodyError
from protocol.readers import Buffer
from protocol.records import BatchView
from protocol.records.batch import HEADER_SIZE

from ..log.file_cache import is_fd_exhaustion, note_fd_exhaustion
from ..metadata.image import TOPIC_RESOURCE
from ..mirror.core.sync_acks_state import SyncPolicy, policy_of
from ..mirror.sync_acks import SyncAcks
from ..security.acls import AclOperation, ResourceType
from .authz import allowed
from .client_throttle import (
    PRODUCE_CLIENT_THROTTLES,
    ClientThrottle,
    throttle,
    wait_while_muted,
)
from .context import RequestContext
from .dispatcher import Api
from .services import Services

log = logging.getLogger(__name__)

API_KEY = 0
VERSIONS = (3, 13)


class ProduceApi:
    def __init__(
        self, services: Services, on_bytes_in: Any = None, quotas: ClientThrottle | None = None
    ) -> None:
        self.s = services
        self._on_bytes_in = on_bytes_in
        self.quotas = quotas  # client quotas (producer_byte_rate); None: not enforced

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [
            Api(0, raw=self.handle_raw, min_version=3, max_version=13, advertised_min_version=0),
        ]

    async def handle_raw(
        self, ctx: RequestContext, frame: memoryview, pos: int
    ) -> list[Buffer] | None:
        version = ctx.api_version
        try:
            req = parse_produce_request(frame, pos, version)
        except ProtocolError as e:
            h = ctx.header
            raise RequestBodyError(
                str(e), h.api_key, version, h.correlation_id, h.client_id
            ) from None
        s = self.s
        img = s.image()
        acks = req.acks
        topics_out: list[dict[str, Any]] = []
        waits: list[tuple[dict[str, Any], Any, int]] = []  # acks=all: (row, partition, offset)
        writes: list[tuple[dict[str, Any], Any, int]] = []  # acks=1: the same, until written
        authz = s.authorizer
        txn_denied = (
            authz is not None
            and req.transactional_id is not None
            and not allowed(
                authz, ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id
            )
        )
        sync = s.mirror_sync
        started_ms = sync.now_ms() if sync is not None else 0
        # acks=all on mirror.sync.enable topics (`_wait_for_mirrors`): row, partition, end, policy
        syncs: list[tuple[dict[str, Any], Any, int, SyncPolicy]] = []
        verified: dict[tuple[str, int], ErrorCode] = {}
        if req.transactional_id is not None and s.verify_txn is not None and not txn_denied:
            verified = await self._verify_txn(req, img)
        for t in req.topics:
            name: str | None
            if t.name is not None:
                name = t.name
                topic = img.topics.get(name)
                missing = ErrorCode.unknown_topic_or_partition
            else:
                topic = img.topic_by_id(t.topic_id) if t.topic_id else None
                name = topic.name if topic else None
                missing = ErrorCode.unknown_topic_id
            denied: ErrorCode | None = None
            if txn_denied:
                denied = ErrorCode.transactional_id_authorization_failed
            elif (
                authz is not None
                and name is not None
                and not allowed(authz, ctx, AclOperation.WRITE, ResourceType.TOPIC, name)
            ):
                denied = ErrorCode.topic_authorization_failed
            parts_out: list[dict[str, Any]] = []
            for p in t.partitions:
                row: dict[str, Any] = {
                    "index": p.index,
                    "base_offset": -1,
                    "log_append_time": -1,
                    "log_start_offset": -1,
                }
                parts_out.append(row)
                if acks not in (-1, 0, 1):
                    row["error_code"] = ErrorCode.invalid_required_acks
                    continue
                if denied is not None:
                    row["error_code"] = denied
                    continue
                hosted = s.replicas.get(name, p.index) if name is not None else None
                # The log writer is behind and this log has much queued: wait, then look again
                # (waiters resume together; each looks again, so they go in under the bound).
                while hosted is not None and (room := hosted.log.writer_room()) is not None:
                    await room
                    hosted = s.replicas.get(name, p.index) if name is not None else None
                if topic is None or hosted is None:
                    row["error_code"] = (
                        missing
                        if topic is None or name is None
                        else s.not_hosted_error(name, p.index)
                    )
                    continue
                assert name is not None
                if not hosted.is_leader:
                    row["error_code"] = ErrorCode.not_leader_or_follower
                    continue
                if not s.writable(name, p.index):
                    row["error_code"] = MirrorErrorCode.READ_ONLY_TOPIC
                    row["error_message"] = f"Topic {name} is a mirror topic and read-only"
                    continue
                if p.records is None or len(p.records) == 0:
                    row["error_code"] = ErrorCode.corrupt_message
                    row["error_message"] = "Produce request contained no records"
                    continue
                unverified = verified.get((name, p.index), ErrorCode.none)
                if unverified != ErrorCode.none:
                    row["error_code"] = unverified
                    continue
                try:
                    result = hosted.append_records(p.records, acks=acks)
                except Exception as e:  # LogAppendError carries a Kafka error code
                    code = getattr(e, "error_code", None)
                    if is_fd_exhaustion(e):
                        assert isinstance(e, OSError)
                        note_fd_exhaustion("produce", f"{name}-{p.index}", e)
                        code = ErrorCode.kafka_storage_error
                    elif code is None:
                        log.exception("append to %s-%d failed", name, p.index)
                        code = ErrorCode.unknown_server_error
                    row["error_code"] = error_code(int(code))
                    row["error_message"] = str(e)
                    # KIP-467: the records that failed the batch (RecordValidationError)
                    row["record_errors"] = getattr(e, "record_errors", ())
                    continue
                if acks == -1 and result.last_offset >= 0:
                    waits.append((row, hosted, result.last_offset + 1))
                    if sync is not None and (policy := policy_of(img.config(TOPIC_RESOURCE, name))):
                        syncs.append((row, hosted, result.last_offset + 1, policy))
                elif acks == 1 and result.last_offset >= 0:
                    writes.append((row, hosted, result.last_offset + 1))
                row["base_offset"] = result.first_offset
                row["log_append_time"] = result.log_append_time_ms
                row["log_start_offset"] = result.log_start_offset
                if self._on_bytes_in is not None:
                    self._on_bytes_in(name, len(p.records))
            topics_out.append({"name": name, "topic_id": t.topic_id, "partitions": parts_out})
        if waits:
            await _wait_for_isr(waits, req.timeout_ms / 1000)
        if syncs and sync is not None:
            await _wait_for_mirrors(sync, syncs, started_ms, started_ms + max(0, req.timeout_ms))
        if writes:
            await _wait_written(writes, req.timeout_ms / 1000)
        throttle_ms = 0
        quotas = self.quotas
        if quotas is not None and quotas.active() and quotas.produce.enabled:
            await wait_while_muted(ctx)
            throttle_ms = quotas.produce_throttle_ms(ctx, len(frame))
            if throttle_ms:
                # acks=0 has no response: the mute alone slows the producer down
                await throttle(ctx, throttle_ms, acks == 0 or version >= PRODUCE_CLIENT_THROTTLES)
        if acks == 0:
            return None
        return [encode_produce_rows(topics_out, throttle_ms, version)]

    async def _verify_txn(self, req: Any, img: Any) -> dict[tuple[str, int], ErrorCode]:
        """The partitions this request would open the producer's transaction on, each with the
        coordinator's answer mapped for Produce (see the module docstring)."""
        s = self.s
        pending: dict[tuple[str, int], tuple[Any, int]] = {}  # -> (producer state, markers seen)
        pid = epoch = -1
        for t in req.topics:
            topic = img.topics.get(t.name) if t.name is not None else None
            if topic is None and t.name is None and t.topic_id:
                topic = img.topic_by_id(t.topic_id)
            if topic is None:
                continue
            for p in t.partitions:
                records = p.records
                if records is None or len(records) < HEADER_SIZE:
                    continue
                hosted = s.replicas.get(topic.name, p.index)
                psm = hosted.log.producer_state if hosted is not None else None
                if psm is None:
                    continue
                view = BatchView(records, 0)
                if view.magic != 2 or not view.is_transactional:
                    continue
                pid, epoch = view.producer_id, view.producer_epoch
                if not psm.in_transaction(pid, epoch):
                    pending[(topic.name, p.index)] = (psm, psm.markers_applied)
        if not pending or s.verify_txn is None:
            return {}
        found = await s.verify_txn(req.transactional_id, pid, epoch, frozenset(pending))
        out: dict[tuple[str, int], ErrorCode] = {}
        for tp, (psm, markers_before) in pending.items():
            code = _for_produce(found.get(tp, ErrorCode.invalid_txn_state))
            if code == ErrorCode.none and psm.markers_applied != markers_before:
                code = ErrorCode.not_enough_replicas  # the transaction may have ended: retry
            out[tp] = code
        return out


async def _wait_for_isr(waits: list[tuple[dict[str, Any], Any, int]], timeout_s: float) -> None:
    """acks=all: each appended partition waits until its ISR holds the records (the high
    watermark passes them), all within the request's timeout. A partition that cannot
    answers REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER (leadership moved) or
    NOT_ENOUGH_REPLICAS_AFTER_APPEND (committed, but the ISR shrank under the minimum)."""
    deadline = time.monotonic() + max(0.0, timeout_s)
    for row, partition, required in waits:
        code = await partition.wait_committed(required, max(0.0, deadline - time.monotonic()))
        if code != ErrorCode.none:
            row["error_code"] = code
            row["base_offset"] = -1
            row["log_append_time"] = -1


async def _wait_for_mirrors(
    sync: SyncAcks,
    syncs: list[tuple[dict[str, Any], Any, int, SyncPolicy]],
    appended_ms: int,
    deadline_ms: int,
) -> None:
    """acks=all of a ``mirror.sync.enable`` topic, once its ISR holds the records: until the
    in-sync destination mirrors committed them too (synchronous mirroring, `SyncAcks.wait`);
    NOT_ENOUGH_REPLICAS_AFTER_APPEND after ``mirror.sync.timeout.ms`` with the ``refuse``
    policy, success without them with ``async``."""
    for row, partition, required, policy in syncs:
        if row.get("error_code", ErrorCode.none) != ErrorCode.none:
            continue  # the ISR wait already failed it
        outcome = await sync.wait(
            partition.topic,
            partition.partition,
            required,
            partition.leader.high_watermark,
            policy,
            appended_ms,
            deadline_ms,
            partition_leads(partition),
        )
        if outcome.error != ErrorCode.none:
            row["error_code"] = outcome.error
            if outcome.message is not None:
                row["error_message"] = outcome.message
            row["base_offset"] = -1
            row["log_append_time"] = -1


def partition_leads(partition: Any) -> Callable[[], bool]:
    return lambda: bool(partition.is_leader)


# acks=1 waits for the log writer at least this long, whatever the request's timeout (Kafka
# answers acks=1 once the leader wrote, never REQUEST_TIMED_OUT): only a stuck disk hits it.
_MIN_WRITE_WAIT_S = 30.0


async def _wait_written(writes: list[tuple[dict[str, Any], Any, int]], timeout_s: float) -> None:
    """acks=1: answered once the leader's log writer has put the records in the file (the
    page cache, which survives a kill -9), as Kafka's leader has when it answers."""
    deadline = time.monotonic() + max(timeout_s, _MIN_WRITE_WAIT_S)
    for row, partition, required in writes:
        code = await partition.wait_written(required, max(0.0, deadline - time.monotonic()))
        if code != ErrorCode.none:
            row["error_code"] = code
            row["base_offset"] = -1
            row["log_append_time"] = -1


_RETRIABLE_VERIFICATION = frozenset(
    {
        ErrorCode.concurrent_transactions,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
        ErrorCode.not_coordinator,
    }
)


def _for_produce(code: ErrorCode) -> ErrorCode:
    """A verification answer as a Produce error every client version knows."""
    if code == ErrorCode.none:
        return code
    if code in _RETRIABLE_VERIFICATION:
        return ErrorCode.not_enough_replicas
    if code in (ErrorCode.producer_fenced, ErrorCode.invalid_producer_epoch):
        return ErrorCode.invalid_producer_epoch
    return ErrorCode.invalid_txn_state
