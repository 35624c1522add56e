"""Transactions: InitProducerId v0-5, AddPartitionsToTxn v0-5, AddOffsetsToTxn v0-4, EndTxn v0-4,
WriteTxnMarkers v1-2, TxnOffsetCommit v0-4, DescribeTransactions v0, ListTransactions v0-2.

Served by the `TransactionCoordinator` (transactional ids in ``__transaction_state``) and, for
TxnOffsetCommit, the group coordinator. InitProducerId without a transactional id hands out a
fresh producer id at epoch 0 (idempotent producers). AddPartitionsToTxn v0-3 is the client
path (one transaction; an unknown partition fails the whole request with OPERATION_NOT_ATTEMPTED
for the others; internal topics are refused, and so are read-only mirror topics, READ_ONLY_TOPIC); v4+ is the broker path (batched transactions, and
`verify_only` answers whether the partitions are in the transaction, KIP-890). TxnOffsetCommit
first verifies that the group's offsets partition is in the transaction (AddOffsetsToTxn), as
Kafka does with transaction.partition.verification.enable; the offsets stay pending until the
transaction's marker reaches that partition. Versions before PRODUCER_FENCED existed get
INVALID_PRODUCER_EPOCH instead, as in Kafka.

With an authorizer (as Kafka): InitProducerId, AddPartitionsToTxn v0-3, AddOffsetsToTxn, EndTxn
and TxnOffsetCommit need WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED);
an idempotent InitProducerId needs IDEMPOTENT_WRITE on the cluster or WRITE on some topic
(CLUSTER_AUTHORIZATION_FAILED); partitions added need WRITE on their topic and offsets READ on the
group and on each topic (TOPIC_/GROUP_AUTHORIZATION_FAILED); AddPartitionsToTxn v4+ and
WriteTxnMarkers are broker-to-broker and need CLUSTER_ACTION; Describe/ListTransactions show
only transactional ids the principal may DESCRIBE.

Not served: EndTxn v5 and TxnOffsetCommit v5 belong to transaction.version 2 (KIP-890 part 2:
an epoch bump per transaction, partitions added implicitly); this node finalizes
transaction.version 0, so clients do not send them.
"""

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from protocol.build import build
from protocol.errors import MirrorErrorCode
from protocol.registry import REGISTRY

from ..coordinator.group import GroupCoordinator
from ..coordinator.group.shard import CommitItem, TxnCommitParams
from ..coordinator.runtime import EndMarker
from ..coordinator.txn import TransactionCoordinator
from ..coordinator.txn.markers import MarkerWriter
from ..coordinator.txn.metadata import TopicPartition
from ..coordinator.txn.remote import TxnVerification
from ..security.acls import AclOperation, ResourceType
from .authz import allowed, allowed_on_any, allowed_on_cluster, cluster_allowed
from .context import RequestContext
from .dispatcher import Api
from .services import Services

INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN = 22, 24, 25, 26
WRITE_TXN_MARKERS, TXN_OFFSET_COMMIT = 27, 28
DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 65, 66

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _ms(value: Any) -> int:
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)


def _timestamp(ms: int) -> datetime.datetime:
    """A millisecond timestamp as kio's datetime field wants it (-1 stays -1 on the wire)."""
    return _EPOCH + datetime.timedelta(milliseconds=ms)


def _failed_state(transactional_id: str, code: ErrorCode) -> dict[str, Any]:
    """A DescribeTransactions entry with an error: Kafka sets only the id and the error, the
    rest keeps the schema's defaults (start time 0, not -1: kio refuses a negative one)."""
    return {
        "error_code": code,
        "transactional_id": transactional_id,
        "transaction_state": "",
        "transaction_timeout": 0,
        "transaction_start_time": _EPOCH,
        "producer_id": 0,
        "producer_epoch": 0,
        "topics": [],
    }


def _fenced_for(version: int, first_with_fenced: int, code: ErrorCode) -> ErrorCode:
    """Clients older than PRODUCER_FENCED (KIP-588) know it as INVALID_PRODUCER_EPOCH."""
    if version < first_with_fenced and code == ErrorCode.producer_fenced:
        return ErrorCode.invalid_producer_epoch
    return code


def _response(api_key: int, ctx: RequestContext, data: dict[str, Any]) -> Any:
    return build(REGISTRY.spec(api_key).response_type(ctx.api_version), data)


def _topic_results(errors: dict[TopicPartition, ErrorCode]) -> list[dict[str, Any]]:
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), code in errors.items():
        by_topic.setdefault(topic, []).append(
            {"partition_index": partition, "partition_error_code": code}
        )
    return [{"name": t, "results_by_partition": parts} for t, parts in by_topic.items()]


class TxnApi:
    def __init__(
        self,
        services: Services,
        txns: TransactionCoordinator | TxnVerification,  # verification reaches other nodes
        groups: GroupCoordinator,
        markers: MarkerWriter,
    ) -> None:
        self.s = services
        self.txns = txns
        self.groups = groups
        self.markers = markers

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [
            Api(22, self.init_producer_id, max_version=5),
            Api(24, self.add_partitions_to_txn, max_version=5),
            Api(25, self.add_offsets_to_txn, max_version=4),
            Api(26, self.end_txn, max_version=4),
            Api(27, self.write_txn_markers, min_version=1, max_version=2),
            Api(28, self.txn_offset_commit, max_version=4),
            Api(65, self.describe_transactions, max_version=0),
            Api(66, self.list_transactions, max_version=2),
        ]

    def _may(self, ctx: RequestContext, op: AclOperation, kind: ResourceType, name: str) -> bool:
        return allowed(self.s.authorizer, ctx, op, kind, name)

    def _may_write_txn(self, ctx: RequestContext, tid: str) -> bool:
        return self._may(ctx, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid)

    def _exists(self, topic: str, partition: int) -> bool:
        t = self.s.image().topics.get(topic)
        return t is not None and partition in t.partitions

    # -- InitProducerId ------------------------------------------------------------------------

    async def init_producer_id(self, ctx: RequestContext, req: Any) -> Any:
        pid = int(getattr(req, "producer_id", -1))
        epoch = int(getattr(req, "producer_epoch", -1))
        expected: tuple[int, int] | None = None
        if pid != -1 and epoch != -1:
            expected = (pid, epoch)
        elif pid != -1 or epoch != -1:
            return _response(
                INIT_PRODUCER_ID,
                ctx,
                {"error_code": ErrorCode.invalid_request, "producer_id": -1, "producer_epoch": -1},
            )
        denied = self._init_denied(ctx, req.transactional_id)
        if denied is not None:
            return _response(
                INIT_PRODUCER_ID,
                ctx,
                {"error_code": denied, "producer_id": -1, "producer_epoch": -1},
            )
        outcome = await self.txns.init_producer_id(
            req.transactional_id, _ms(req.transaction_timeout), expected
        )
        return _response(
            INIT_PRODUCER_ID,
            ctx,
            {
                "throttle_time": 0,
                "error_code": _fenced_for(ctx.api_version, 4, outcome.error),
                "producer_id": outcome.producer_id,
                "producer_epoch": outcome.producer_epoch,
            },
        )

    def _init_denied(self, ctx: RequestContext, tid: str | None) -> ErrorCode | None:
        authz = self.s.authorizer
        if authz is None:
            return None
        if tid is not None:
            return (
                None
                if self._may_write_txn(ctx, tid)
                else ErrorCode.transactional_id_authorization_failed
            )
        if allowed_on_cluster(authz, ctx, AclOperation.IDEMPOTENT_WRITE) or allowed_on_any(
            authz, ctx, AclOperation.WRITE, ResourceType.TOPIC
        ):
            return None
        return ErrorCode.cluster_authorization_failed

    # -- AddPartitionsToTxn --------------------------------------------------------------------

    async def add_partitions_to_txn(self, ctx: RequestContext, req: Any) -> Any:
        version = ctx.api_version
        if version < 4:
            tid = req.v3_and_below_transactional_id
            topics = [(t.name, list(t.partitions)) for t in req.v3_and_below_topics]
            if not self._may_write_txn(ctx, tid):
                code = ErrorCode.transactional_id_authorization_failed
                errors = {(n, int(p)): code for n, parts in topics for p in parts}
            else:
                errors = await self._add_one(
                    tid,
                    int(req.v3_and_below_producer_id),
                    int(req.v3_and_below_producer_epoch),
                    topics,
                    verify_only=False,
                    version=version,
                    ctx=ctx,
                )
            return _response(
                ADD_PARTITIONS_TO_TXN,
                ctx,
                {"throttle_time": 0, "results_by_topic_v3_and_below": _topic_results(errors)},
            )
        if not cluster_allowed(self.s.authorizer, ctx, AclOperation.CLUSTER_ACTION):
            return _response(
                ADD_PARTITIONS_TO_TXN,
                ctx,
                {
                    "throttle_time": 0,
                    "error_code": ErrorCode.cluster_authorization_failed,
                    "results_by_transaction": [],
                },
            )
        results = []
        for t in req.transactions:
            errors = await self._add_one(
                t.transactional_id,
                int(t.producer_id),
                int(t.producer_epoch),
                [(topic.name, list(topic.partitions)) for topic in t.topics],
                verify_only=bool(t.verify_only),
                version=version,
                ctx=ctx,
            )
            results.append(
                {"transactional_id": t.transactional_id, "topic_results": _topic_results(errors)}
            )
        return _response(
            ADD_PARTITIONS_TO_TXN,
            ctx,
            {"throttle_time": 0, "error_code": ErrorCode.none, "results_by_transaction": results},
        )

    async def _add_one(
        self,
        tid: str,
        pid: int,
        epoch: int,
        topics: list[tuple[str, list[int]]],
        *,
        verify_only: bool,
        version: int,
        ctx: RequestContext,
    ) -> dict[TopicPartition, ErrorCode]:
        wanted = [(name, int(p)) for name, parts in topics for p in parts]
        refused: dict[TopicPartition, ErrorCode] = {}
        for topic, partition in wanted:
            if version < 4 and not self._may(ctx, AclOperation.WRITE, ResourceType.TOPIC, topic):
                refused[(topic, partition)] = ErrorCode.topic_authorization_failed
            elif version < 4 and topic in INTERNAL_TOPICS:
                # Kafka never authorizes a client to add an internal topic itself.
                refused[(topic, partition)] = ErrorCode.topic_authorization_failed
            elif not self._exists(topic, partition):
                refused[(topic, partition)] = ErrorCode.unknown_topic_or_partition
            elif version < 4 and not self.s.writable(topic, partition):
                refused[(topic, partition)] = MirrorErrorCode.READ_ONLY_TOPIC  # type: ignore[assignment]
        if refused:
            # One bad partition fails the request; the others were not attempted.
            return {tp: refused.get(tp, ErrorCode.operation_not_attempted) for tp in wanted}
        partitions = frozenset(wanted)
        if verify_only:
            return await self.txns.verify_partitions(tid, pid, epoch, partitions)
        code = await self.txns.add_partitions(tid, pid, epoch, partitions)
        return dict.fromkeys(wanted, _fenced_for(version, 2, code))

    # -- AddOffsetsToTxn / EndTxn --------------------------------------------------------------

    async def add_offsets_to_txn(self, ctx: RequestContext, req: Any) -> Any:
        if not self._may_write_txn(ctx, req.transactional_id):
            code = ErrorCode.transactional_id_authorization_failed
        elif not self._may(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
            code = ErrorCode.group_authorization_failed
        else:
            code = await self.txns.add_offsets(
                req.transactional_id, int(req.producer_id), int(req.producer_epoch), req.group_id
            )
        return _response(
            ADD_OFFSETS_TO_TXN,
            ctx,
            {"throttle_time": 0, "error_code": _fenced_for(ctx.api_version, 2, code)},
        )

    async def end_txn(self, ctx: RequestContext, req: Any) -> Any:
        if not self._may_write_txn(ctx, req.transactional_id):
            code = ErrorCode.transactional_id_authorization_failed
        else:
            code = await self.txns.end_txn(
                req.transactional_id, int(req.producer_id), int(req.producer_epoch), req.committed
            )
        return _response(
            END_TXN,
            ctx,
            {"throttle_time": 0, "error_code": _fenced_for(ctx.api_version, 2, code)},
        )

    # -- WriteTxnMarkers -----------------------------------------------------------------------

    async def write_txn_markers(self, ctx: RequestContext, req: Any) -> Any:
        """Markers from a transaction coordinator (another node's, once there are several)."""
        if not cluster_allowed(self.s.authorizer, ctx, AclOperation.CLUSTER_ACTION):
            no = ErrorCode.cluster_authorization_failed
            return _response(
                WRITE_TXN_MARKERS,
                ctx,
                {
                    "markers": [
                        {
                            "producer_id": m.producer_id,
                            "topics": [
                                {
                                    "name": t.name,
                                    "partitions": [
                                        {"partition_index": p, "error_code": no}
                                        for p in t.partition_indexes
                                    ],
                                }
                                for t in m.topics
                            ],
                        }
                        for m in req.markers
                    ]
                },
            )
        results = []
        for m in req.markers:
            marker = EndMarker(
                int(m.producer_id),
                int(m.producer_epoch),
                int(m.coordinator_epoch),
                bool(m.transaction_result),
            )
            topics = []
            for t in m.topics:
                parts = []
                for p in t.partition_indexes:
                    code = await self.markers.write_marker(t.name, int(p), marker)
                    parts.append({"partition_index": p, "error_code": code})
                topics.append({"name": t.name, "partitions": parts})
            results.append({"producer_id": m.producer_id, "topics": topics})
        return _response(WRITE_TXN_MARKERS, ctx, {"markers": results})

    # -- TxnOffsetCommit -----------------------------------------------------------------------

    async def txn_offset_commit(self, ctx: RequestContext, req: Any) -> Any:
        version = ctx.api_version
        items: list[CommitItem] = []
        # (topic, partition, error or None = ask the group coordinator), in request order
        slots: list[tuple[str, int, ErrorCode | None]] = []
        whole: ErrorCode | None = None  # the request is refused as a whole
        if not self._may_write_txn(ctx, req.transactional_id):
            whole = ErrorCode.transactional_id_authorization_failed
        elif not self._may(ctx, AclOperation.READ, ResourceType.GROUP, req.group_id):
            whole = ErrorCode.group_authorization_failed
        for topic in req.topics:
            may_read = whole is None and self._may(
                ctx, AclOperation.READ, ResourceType.TOPIC, topic.name
            )
            for p in topic.partitions:
                index = int(p.partition_index)
                if whole is not None:
                    slots.append((topic.name, index, whole))
                elif not may_read:
                    slots.append((topic.name, index, ErrorCode.topic_authorization_failed))
                elif not self._exists(topic.name, index):
                    slots.append((topic.name, index, ErrorCode.unknown_topic_or_partition))
                    continue
                items.append(
                    CommitItem(
                        topic.name,
                        index,
                        int(p.committed_offset),
                        int(getattr(p, "committed_leader_epoch", -1)),
                        p.committed_metadata,
                    )
                )
                slots.append((topic.name, index, None))
        errors: list[ErrorCode] = []
        if items:
            pid, epoch = int(req.producer_id), int(req.producer_epoch)
            verified = await self.txns.verify_offsets(
                req.transactional_id, pid, epoch, req.group_id
            )
            if verified != ErrorCode.none:
                if verified == ErrorCode.transaction_abortable and version < 4:
                    verified = ErrorCode.invalid_txn_state  # TRANSACTION_ABORTABLE is v4+
                errors = [verified] * len(items)
            else:
                errors = await self.groups.txn_commit_offsets(
                    TxnCommitParams(
                        group_id=req.group_id,
                        producer_id=pid,
                        producer_epoch=epoch,
                        generation_id=int(getattr(req, "generation_id", -1)),
                        member_id=getattr(req, "member_id", ""),
                        group_instance_id=getattr(req, "group_instance_id", None),
                        items=items,
                    )
                )
        found = iter(errors)
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for name, partition, error in slots:
            code = error if error is not None else next(found)
            if version < 2 and code == ErrorCode.coordinator_load_in_progress:
                code = ErrorCode.coordinator_not_available  # pre-2.0 clients crash on it
            by_topic.setdefault(name, []).append({"partition_index": partition, "error_code": code})
        return _response(
            TXN_OFFSET_COMMIT,
            ctx,
            {
                "throttle_time": 0,
                "topics": [{"name": n, "partitions": parts} for n, parts in by_topic.items()],
            },
        )

    # -- DescribeTransactions / ListTransactions -----------------------------------------------

    async def describe_transactions(self, ctx: RequestContext, req: Any) -> Any:
        states = []
        for tid in req.transactional_ids:
            if not self._may(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
                states.append(_failed_state(tid, ErrorCode.transactional_id_authorization_failed))
                continue
            d = await self.txns.describe(tid)
            if d.error != ErrorCode.none:
                states.append(_failed_state(tid, d.error))
                continue
            states.append(
                {
                    "error_code": d.error,
                    "transactional_id": tid,
                    "transaction_state": d.state,
                    "transaction_timeout": d.timeout_ms,
                    "transaction_start_time": _timestamp(d.start_ms),
                    "producer_id": d.producer_id,
                    "producer_epoch": d.producer_epoch,
                    "topics": [
                        {"topic": t, "partitions": parts}
                        for t, parts in d.partitions
                        if self._may(ctx, AclOperation.DESCRIBE, ResourceType.TOPIC, t)
                    ],
                }
            )
        return _response(
            DESCRIBE_TRANSACTIONS, ctx, {"throttle_time": 0, "transaction_states": states}
        )

    async def list_transactions(self, ctx: RequestContext, req: Any) -> Any:
        error, unknown, listed = await self.txns.list_transactions(
            list(req.state_filters),
            frozenset(int(p) for p in req.producer_id_filters),
            int(getattr(req, "duration_filter", -1)),
            getattr(req, "transactional_id_pattern", None),
        )
        return _response(
            LIST_TRANSACTIONS,
            ctx,
            {
                "throttle_time": 0,
                "error_code": error,
                "unknown_state_filters": unknown,
                "transaction_states": [
                    {
                        "transactional_id": t.transactional_id,
                        "producer_id": t.producer_id,
                        "transaction_state": t.state,
                    }
                    for t in listed
                    if self._may(
                        ctx,
                        AclOperation.DESCRIBE,
                        ResourceType.TRANSACTIONAL_ID,
                        t.transactional_id,
                    )
                ],
            },
        )
