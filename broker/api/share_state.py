"""KIP-932 share coordinator RPCs between brokers: InitializeShareGroupState v0,
ReadShareGroupState v0, WriteShareGroupState v0, DeleteShareGroupState v0 and
ReadShareGroupStateSummary v0 (Kafka 4.1's versions), served by the
`ShareStateCoordinator` of the node leading the share-partition's `__share_group_state`
partition (NOT_COORDINATOR elsewhere, per partition).

A share-partition without stored state reads as start offset -1, state epoch 0 (Kafka's
uninitialized marker); the leader then starts from `share.auto.offset.reset`. With an
authorizer, the caller needs CLUSTER_ACTION on the cluster, as between Kafka brokers.
"""

from collections.abc import Awaitable, Callable
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i16, i32, i64

from protocol.limits import too_long_for_int16
from protocol.registry import REGISTRY

from ..coordinator.runtime import CoordinatorError
from ..coordinator.share.state_coordinator import ShareStateCoordinator
from ..coordinator.share.state_records import PersistedBatch, ShareKey, ShareSnapshot
from ..security.acls import AclOperation
from ..security.authorizer import Authorizer
from .authz import cluster_allowed
from .context import RequestContext
from .dispatcher import Api

INITIALIZE_SHARE_GROUP_STATE = 83
READ_SHARE_GROUP_STATE, WRITE_SHARE_GROUP_STATE, DELETE_SHARE_GROUP_STATE = 84, 85, 86
READ_SHARE_GROUP_STATE_SUMMARY = 87
UNINITIALIZED_START_OFFSET = -1


class ShareStateApi:
    def __init__(
        self, coordinator: ShareStateCoordinator, authorizer: Authorizer | None = None
    ) -> None:
        self.coordinator = coordinator
        self.authorizer = authorizer

    def apis(self) -> list[Api]:
        """The API keys and versions this module serves (the node's handler table)."""
        return [
            Api(INITIALIZE_SHARE_GROUP_STATE, self.handle_initialize, max_version=0),
            Api(READ_SHARE_GROUP_STATE, self.handle_read, max_version=0),
            Api(WRITE_SHARE_GROUP_STATE, self.handle_write, max_version=0),
            Api(DELETE_SHARE_GROUP_STATE, self.handle_delete, max_version=0),
            Api(READ_SHARE_GROUP_STATE_SUMMARY, self.handle_summary, max_version=0),
        ]

    def _denied(self, ctx: RequestContext) -> bool:
        return not cluster_allowed(self.authorizer, ctx, AclOperation.CLUSTER_ACTION)

    async def _per_partition(
        self,
        ctx: RequestContext,
        req: Any,
        api_key: int,
        result_type: str,
        act: Callable[[ShareKey, Any], Awaitable[Any]],
        answer: Callable[[Any, Any, ErrorCode, Any], Any],
    ) -> Any:
        """Every partition of the request: ``act(key, partition)`` at the coordinator (its
        CoordinatorError's code is the partition's error; CLUSTER_AUTHORIZATION_FAILED without
        the right), then ``answer(module, partition, error, value)`` is its result."""
        cls = REGISTRY.spec(api_key).response_type(0)
        mod = __import__(cls.__module__, fromlist=[result_type, "PartitionResult"])
        denied = self._denied(ctx)
        # A group id a state record cannot hold (an int16 length) is refused up front.
        invalid = ErrorCode.invalid_request if too_long_for_int16(req.group_id) else None
        results = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                error, value = ErrorCode.none, None
                if denied:
                    error = ErrorCode.cluster_authorization_failed
                elif invalid is not None:
                    error = invalid
                elif t.topic_id is None:  # the zero UUID: no topic has it
                    error = ErrorCode.unknown_topic_or_partition
                elif p.partition < 0:
                    error = ErrorCode.invalid_request
                else:
                    try:
                        value = await act(ShareKey(req.group_id, t.topic_id, int(p.partition)), p)
                    except CoordinatorError as exc:
                        error = exc.code
                parts.append(answer(mod, p, error, value))
            results.append(getattr(mod, result_type)(topic_id=t.topic_id, partitions=tuple(parts)))
        return cls(results=tuple(results))

    async def handle_read(self, ctx: RequestContext, req: Any) -> Any:
        def answer(mod: Any, p: Any, error: ErrorCode, found: ShareSnapshot | None) -> Any:
            return mod.PartitionResult(
                partition=p.partition,
                error_code=error,
                state_epoch=i32(found.state_epoch if found else 0),
                start_offset=i64(found.start_offset if found else UNINITIALIZED_START_OFFSET),
                state_batches=tuple(
                    mod.StateBatch(
                        first_offset=i64(b.first_offset),
                        last_offset=i64(b.last_offset),
                        delivery_state=i8(b.delivery_state),
                        delivery_count=i16(b.delivery_count),
                    )
                    for b in (found.batches if found else ())
                ),
            )

        return await self._per_partition(
            ctx, req, READ_SHARE_GROUP_STATE, "ReadStateResult",
            lambda key, _p: self.coordinator.read(key), answer,
        )  # fmt: skip

    async def handle_summary(self, ctx: RequestContext, req: Any) -> Any:
        """The start offset and epochs of each share-partition, without its batches."""

        def answer(mod: Any, p: Any, error: ErrorCode, found: ShareSnapshot | None) -> Any:
            return mod.PartitionResult(
                partition=p.partition,
                error_code=error,
                state_epoch=i32(found.state_epoch if found else 0),
                leader_epoch=i32(found.leader_epoch if found else -1),
                start_offset=i64(found.start_offset if found else UNINITIALIZED_START_OFFSET),
            )

        return await self._per_partition(
            ctx, req, READ_SHARE_GROUP_STATE_SUMMARY, "ReadStateSummaryResult",
            lambda key, _p: self.coordinator.read(key), answer,
        )  # fmt: skip

    async def handle_write(self, ctx: RequestContext, req: Any) -> Any:
        def write(key: ShareKey, p: Any) -> Awaitable[Any]:
            return self.coordinator.write(
                key,
                ShareSnapshot(
                    state_epoch=int(p.state_epoch),
                    leader_epoch=int(p.leader_epoch),
                    start_offset=int(p.start_offset),
                    batches=tuple(
                        PersistedBatch(
                            int(b.first_offset),
                            int(b.last_offset),
                            int(b.delivery_state),
                            int(b.delivery_count),
                        )
                        for b in p.state_batches
                    ),
                ),
            )

        return await self._per_partition(
            ctx, req, WRITE_SHARE_GROUP_STATE, "WriteStateResult", write, _error_only
        )

    async def handle_initialize(self, ctx: RequestContext, req: Any) -> Any:
        return await self._per_partition(
            ctx, req, INITIALIZE_SHARE_GROUP_STATE, "InitializeStateResult",
            lambda key, p: self.coordinator.initialize(
                key, int(p.state_epoch), int(p.start_offset)
            ),
            _error_only,
        )  # fmt: skip

    async def handle_delete(self, ctx: RequestContext, req: Any) -> Any:
        return await self._per_partition(
            ctx, req, DELETE_SHARE_GROUP_STATE, "DeleteStateResult",
            lambda key, _p: self.coordinator.delete(key), _error_only,
        )  # fmt: skip


def _error_only(mod: Any, p: Any, error: ErrorCode, _value: Any) -> Any:
    return mod.PartitionResult(partition=p.partition, error_code=error)
