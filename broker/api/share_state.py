"""KIP-932 share coordinator RPCs between brokers: InitializeShareGroupState v0,
ReadShareGroupState v0, WriteShareGroupState v0, DeleteShareGroupState v0 and
ReadShareGroupStateSummary v0 (Kafka 4.1's versions), served by the
`ShareStateCoordinator` of the node leading the share-partition's `__share_group_state`
partition (NOT_COORDINATOR elsewhere, per partition).

A share-partition without stored state reads as start offset -1, state epoch 0 (Kafka's
uninitialized marker); the leader then starts from `share.auto.offset.reset`. With an
authorizer, the caller needs CLUSTER_ACTION on the cluster, as between Kafka brokers.
"""

import datetime
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i16, i32, i64

from protocol.registry import REGISTRY

from ..coordinator.runtime import CoordinatorError
from ..coordinator.share.state_coordinator import ShareStateCoordinator
from ..coordinator.share.state_records import PersistedBatch, ShareKey, ShareSnapshot
from ..security.acls import AclOperation
from ..security.authorizer import Authorizer
from .authz import allowed_on_cluster
from .context import RequestContext
from .dispatcher import Api

INITIALIZE_SHARE_GROUP_STATE = 83
READ_SHARE_GROUP_STATE, WRITE_SHARE_GROUP_STATE, DELETE_SHARE_GROUP_STATE = 84, 85, 86
READ_SHARE_GROUP_STATE_SUMMARY = 87
UNINITIALIZED_START_OFFSET = -1

_NO_THROTTLE = datetime.timedelta(0)


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
        return not allowed_on_cluster(self.authorizer, ctx, AclOperation.CLUSTER_ACTION)

    async def handle_read(self, ctx: RequestContext, req: Any) -> Any:
        cls = REGISTRY.spec(READ_SHARE_GROUP_STATE).response_type(0)
        mod = __import__(cls.__module__, fromlist=["ReadStateResult"])
        results = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                key = ShareKey(req.group_id, t.topic_id, int(p.partition))
                error, found = ErrorCode.none, None
                if self._denied(ctx):
                    error = ErrorCode.cluster_authorization_failed
                else:
                    try:
                        found = await self.coordinator.read(key)
                    except CoordinatorError as exc:
                        error = exc.code
                parts.append(
                    mod.PartitionResult(
                        partition=p.partition,
                        error_code=error,
                        state_epoch=i32(found.state_epoch if found else 0),
                        start_offset=i64(
                            found.start_offset if found else UNINITIALIZED_START_OFFSET
                        ),
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
                )
            results.append(mod.ReadStateResult(topic_id=t.topic_id, partitions=tuple(parts)))
        return cls(results=tuple(results))

    async def handle_summary(self, ctx: RequestContext, req: Any) -> Any:
        """The start offset and epochs of each share-partition, without its batches."""
        cls = REGISTRY.spec(READ_SHARE_GROUP_STATE_SUMMARY).response_type(0)
        mod = __import__(cls.__module__, fromlist=["ReadStateSummaryResult"])
        results = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                error, found = ErrorCode.none, None
                if self._denied(ctx):
                    error = ErrorCode.cluster_authorization_failed
                else:
                    try:
                        found = await self.coordinator.read(
                            ShareKey(req.group_id, t.topic_id, int(p.partition))
                        )
                    except CoordinatorError as exc:
                        error = exc.code
                parts.append(
                    mod.PartitionResult(
                        partition=p.partition,
                        error_code=error,
                        state_epoch=i32(found.state_epoch if found else 0),
                        leader_epoch=i32(found.leader_epoch if found else -1),
                        start_offset=i64(
                            found.start_offset if found else UNINITIALIZED_START_OFFSET
                        ),
                    )
                )
            results.append(mod.ReadStateSummaryResult(topic_id=t.topic_id, partitions=tuple(parts)))
        return cls(results=tuple(results))

    async def handle_write(self, ctx: RequestContext, req: Any) -> Any:
        cls = REGISTRY.spec(WRITE_SHARE_GROUP_STATE).response_type(0)
        mod = __import__(cls.__module__, fromlist=["WriteStateResult"])
        results = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                key = ShareKey(req.group_id, t.topic_id, int(p.partition))
                error = ErrorCode.none
                if self._denied(ctx):
                    error = ErrorCode.cluster_authorization_failed
                else:
                    snapshot = ShareSnapshot(
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
                    )
                    try:
                        await self.coordinator.write(key, snapshot)
                    except CoordinatorError as exc:
                        error = exc.code
                parts.append(mod.PartitionResult(partition=p.partition, error_code=error))
            results.append(mod.WriteStateResult(topic_id=t.topic_id, partitions=tuple(parts)))
        return cls(results=tuple(results))

    async def handle_initialize(self, ctx: RequestContext, req: Any) -> Any:
        cls = REGISTRY.spec(INITIALIZE_SHARE_GROUP_STATE).response_type(0)
        mod = __import__(cls.__module__, fromlist=["InitializeStateResult"])
        results = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                error = ErrorCode.none
                if self._denied(ctx):
                    error = ErrorCode.cluster_authorization_failed
                else:
                    key = ShareKey(req.group_id, t.topic_id, int(p.partition))
                    try:
                        await self.coordinator.initialize(
                            key, int(p.state_epoch), int(p.start_offset)
                        )
                    except CoordinatorError as exc:
                        error = exc.code
                parts.append(mod.PartitionResult(partition=p.partition, error_code=error))
            results.append(mod.InitializeStateResult(topic_id=t.topic_id, partitions=tuple(parts)))
        return cls(results=tuple(results))

    async def handle_delete(self, ctx: RequestContext, req: Any) -> Any:
        cls = REGISTRY.spec(DELETE_SHARE_GROUP_STATE).response_type(0)
        mod = __import__(cls.__module__, fromlist=["DeleteStateResult"])
        results = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                error = ErrorCode.none
                if self._denied(ctx):
                    error = ErrorCode.cluster_authorization_failed
                else:
                    try:
                        await self.coordinator.delete(
                            ShareKey(req.group_id, t.topic_id, int(p.partition))
                        )
                    except CoordinatorError as exc:
                        error = exc.code
                parts.append(mod.PartitionResult(partition=p.partition, error_code=error))
            results.append(mod.DeleteStateResult(topic_id=t.topic_id, partitions=tuple(parts)))
        return cls(results=tuple(results))
