"""The group coordinator service: routes each group to its shard and awaits long waits."""

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

from kio.schema.errors import ErrorCode

from broker.coordinator.group import group_stats
from broker.coordinator.group import share_state_partitions as ssp
from broker.coordinator.group.classic import JoinResult, SyncResult
from broker.coordinator.group.config import GroupConfig
from broker.coordinator.group.consumer_describe import DescribedConsumerGroup
from broker.coordinator.group.consumer_group import TopicsView
from broker.coordinator.group.consumer_shard import HeartbeatParams, HeartbeatResult
from broker.coordinator.group.shard import (
    CommitParams,
    DescribedGroup,
    FetchedOffset,
    GroupShard,
    JoinParams,
    ListedGroup,
    SyncParams,
    TopicPartition,
    TxnCommitParams,
)
from broker.coordinator.group.share_groups import (
    DescribedShareGroup,
    ShareHeartbeatParams,
    ShareHeartbeatResult,
)
from broker.coordinator.runtime import (
    CoordinatorError,
    CoordinatorRuntime,
    EndMarker,
    RecordLog,
    ShardContext,
)
from broker.coordinator.timer import LoopScheduler, Scheduler
from broker.metrics.group_metrics import GroupCounters, GroupSnapshot

T = TypeVar("T")

# drops one share-partition's state at the share coordinator: (group, topic id, partition);
# raises CoordinatorError
ShareStateDeleter = Callable[[str, uuid.UUID, int], Awaitable[None]]


class GroupCoordinator:
    def __init__(
        self,
        config: GroupConfig | None = None,
        scheduler: Scheduler | None = None,
        topics: Callable[[], TopicsView] = dict,
    ) -> None:
        """`topics`: the cluster's topics (name -> id, partition count), for consumer groups."""
        self.config = config or GroupConfig()
        cfg = self.config

        def factory(ctx: ShardContext[GroupShard]) -> GroupShard:
            return GroupShard(ctx, cfg, topics)

        self.runtime: CoordinatorRuntime[GroupShard] = CoordinatorRuntime(
            cfg.num_partitions, factory, scheduler or LoopScheduler()
        )
        # set by the node once the share persister exists: DeleteGroups of a share group
        # deletes its state in __share_group_state first (None: nothing to delete there)
        self.share_state_deleter: ShareStateDeleter | None = None
        # what the coordinator metrics count (group_stats)
        self.counters = GroupCounters()

    # -- shard ownership (driven by __consumer_offsets leadership) ----------------------------

    def partition_for(self, group_id: str) -> int:
        return self.runtime.partition_for(group_id)

    async def load(self, partition: int, log: RecordLog) -> None:
        await self.runtime.load(partition, group_stats.CountingLog(log, self.counters))

    async def unload(self, partition: int) -> None:
        await self.runtime.unload(partition)

    async def close(self) -> None:
        await self.runtime.close()

    async def settle(self) -> None:
        await self.runtime.settle()

    # -- waits ----------------------------------------------------------------------------------

    async def _await(self, fut: "asyncio.Future[T]", timeout_ms: int, fallback: T) -> T:
        """Wait for a rebalance outcome; the shard's timers answer first, the guard only
        makes sure a caller never waits forever."""
        guard = (max(timeout_ms, 0) + self.config.wait_guard_ms) / 1000.0
        try:
            return await asyncio.wait_for(asyncio.shield(fut), guard)
        except TimeoutError:
            return fallback

    async def _call(self, fn: Callable[[], Awaitable[T]], on_error: Callable[[ErrorCode], T]) -> T:
        try:
            return await fn()
        except CoordinatorError as exc:
            return on_error(exc.code)

    # -- group membership ----------------------------------------------------------------------

    async def join_group(self, p: JoinParams) -> JoinResult:
        partition = self.partition_for(p.group_id)
        try:
            fut = await self.runtime.write(partition, lambda s: s.join(p))
        except CoordinatorError as exc:
            return JoinResult(exc.code, member_id=p.member_id)
        return await self._await(
            fut,
            p.rebalance_timeout_ms,
            JoinResult(ErrorCode.rebalance_in_progress, member_id=p.member_id),
        )

    async def sync_group(self, p: SyncParams, rebalance_timeout_ms: int = 300_000) -> SyncResult:
        partition = self.partition_for(p.group_id)
        try:
            fut = await self.runtime.write(partition, lambda s: s.sync(p))
        except CoordinatorError as exc:
            return SyncResult(exc.code)
        return await self._await(
            fut, rebalance_timeout_ms, SyncResult(ErrorCode.rebalance_in_progress)
        )

    async def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None
    ) -> ErrorCode:
        partition = self.partition_for(group_id)
        return await self._call(
            lambda: self.runtime.write(
                partition, lambda s: s.heartbeat(group_id, generation_id, member_id, instance_id)
            ),
            lambda code: code,
        )

    async def leave_group(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        partition = self.partition_for(group_id)
        return await self._call(
            lambda: self.runtime.write(partition, lambda s: s.leave(group_id, members)),
            lambda code: (code, []),
        )

    # -- KIP-848 consumer groups ----------------------------------------------------------------

    async def consumer_group_heartbeat(self, p: HeartbeatParams) -> HeartbeatResult:
        partition = self.partition_for(p.group_id)
        return await self._call(
            lambda: self.runtime.write(partition, lambda s: s.consumer.heartbeat(p)),
            lambda code: HeartbeatResult(code),
        )

    async def consumer_group_describe(self, group_id: str) -> DescribedConsumerGroup:
        partition = self.partition_for(group_id)
        try:
            return await self.runtime.read(
                partition, lambda s: s.consumer.describe(group_id, group_id in s.groups)
            )
        except CoordinatorError as exc:
            return DescribedConsumerGroup(group_id, exc.code)

    # -- KIP-932 share groups -------------------------------------------------------------------

    async def share_group_heartbeat(self, p: ShareHeartbeatParams) -> ShareHeartbeatResult:
        partition = self.partition_for(p.group_id)
        return await self._call(
            lambda: self.runtime.write(partition, lambda s: s.share.heartbeat(p)),
            lambda code: ShareHeartbeatResult(code),
        )

    async def share_group_describe(self, group_id: str) -> DescribedShareGroup:
        partition = self.partition_for(group_id)
        try:
            return await self.runtime.read(partition, lambda s: s.share.describe(group_id))
        except CoordinatorError as exc:
            return DescribedShareGroup(group_id, exc.code)

    async def share_group_topics(self, group_id: str) -> tuple[ErrorCode, list[str]]:
        """The topics a share group subscribes to (GROUP_ID_NOT_FOUND: no such share group)."""
        partition = self.partition_for(group_id)
        try:
            names = await self.runtime.read(partition, lambda s: s.share.topic_names(group_id))
        except CoordinatorError as exc:
            return exc.code, []
        if names is None:
            return ErrorCode.group_id_not_found, []
        return ErrorCode.none, names

    async def share_group_offsets_change(
        self,
        group_id: str,
        create: bool,
        initializing: ssp.Parts | None = None,
        deleting: Mapping[uuid.UUID, str] | None = None,
    ) -> tuple[ErrorCode, str | None]:
        """See `ShareGroups.offsets_change`: (error, message) for the group."""
        partition = self.partition_for(group_id)
        error, message = await self._call(
            lambda: self.runtime.write(
                partition,
                lambda s: s.share.offsets_change(
                    group_id, create, initializing or {}, deleting or {}
                ),
            ),
            lambda code: (code, ""),
        )
        return error, message or None

    async def share_state_change_done(
        self, group_id: str, initialized: ssp.Parts, failed: ssp.Parts, deleted: list[uuid.UUID]
    ) -> ErrorCode:
        """See `ShareGroups.state_change_done`."""
        partition = self.partition_for(group_id)
        return await self._call(
            lambda: self.runtime.write(
                partition,
                lambda s: s.share.state_change_done(group_id, initialized, failed, deleted),
            ),
            lambda code: code,
        )

    async def share_group_initialized(
        self, group_id: str
    ) -> tuple[ErrorCode, dict[uuid.UUID, ssp.TopicParts]]:
        """A share group's share-partitions with initialized state (record 15)."""
        partition = self.partition_for(group_id)
        try:
            found = await self.runtime.read(partition, lambda s: s.share.initialized(group_id))
        except CoordinatorError as exc:
            return exc.code, {}
        if found is None:
            return ErrorCode.group_id_not_found, {}
        return ErrorCode.none, found

    # -- offsets ----------------------------------------------------------------------------------

    async def commit_offsets(self, p: CommitParams) -> list[ErrorCode]:
        partition = self.partition_for(p.group_id)
        return await self._call(
            lambda: self.runtime.write(partition, lambda s: s.commit_offsets(p)),
            lambda code: [code] * len(p.items),
        )

    async def fetch_offsets(
        self,
        group_id: str,
        topics: list[tuple[str, list[int]]] | None,
        require_stable: bool = False,
        member: tuple[str | None, int] | None = None,
    ) -> tuple[ErrorCode, list[tuple[str, list[FetchedOffset]]]]:
        """`member`: (member id, epoch) of a consumer-protocol member (OffsetFetch v9+), whose
        epoch must be current (STALE_MEMBER_EPOCH)."""
        partition = self.partition_for(group_id)

        def op(s: GroupShard) -> tuple[ErrorCode, list[tuple[str, list[FetchedOffset]]]]:
            if group_id in s.share.groups:  # share groups keep no offsets (as Kafka)
                return ErrorCode.group_id_not_found, []
            error = s.consumer.offset_checks.validate_fetch(group_id, *member) if member else None
            if error is not None:
                return error, []
            return ErrorCode.none, s.fetch_offsets(group_id, topics, require_stable)

        try:
            return await self.runtime.read(partition, op)
        except CoordinatorError as exc:
            return exc.code, []

    async def txn_commit_offsets(self, p: TxnCommitParams) -> list[ErrorCode]:
        """TxnOffsetCommit: offsets pending until the producer's transaction ends."""
        partition = self.partition_for(p.group_id)
        return await self._call(
            lambda: self.runtime.write(partition, lambda s: s.txn_commit_offsets(p)),
            lambda code: [code] * len(p.items),
        )

    async def complete_transaction(self, partition: int, marker: EndMarker) -> ErrorCode:
        """Write a transaction's marker on `__consumer_offsets` partition `partition` and apply
        it (the transaction coordinator's marker for this partition)."""
        return await self._call(
            lambda: self.runtime.write(partition, lambda s: s.complete_transaction(marker)),
            lambda code: code,
        )

    async def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        partition = self.partition_for(group_id)
        return await self._call(
            lambda: self.runtime.write(partition, lambda s: s.delete_offsets(group_id, partitions)),
            lambda code: (code, []),
        )

    # -- admin ------------------------------------------------------------------------------------

    async def describe_group(self, group_id: str) -> DescribedGroup:
        partition = self.partition_for(group_id)
        try:
            return await self.runtime.read(partition, lambda s: s.describe(group_id))
        except CoordinatorError as exc:
            return DescribedGroup(group_id, exc.code, "", "", "", [])

    async def list_groups(self) -> tuple[ErrorCode, list[ListedGroup]]:
        """Groups of every loaded shard; COORDINATOR_LOAD_IN_PROGRESS if one is loading."""
        error = ErrorCode.none
        groups: list[ListedGroup] = []
        for partition in range(self.runtime.num_partitions):
            if self.runtime.is_loading(partition):
                error = ErrorCode.coordinator_load_in_progress
        for partition in self.runtime.loaded_partitions():
            try:
                groups += await self.runtime.read(partition, lambda s: s.list_groups())
            except CoordinatorError:
                continue  # unloaded meanwhile
        return error, groups

    def metrics_snapshot(self) -> GroupSnapshot:
        """The groups of the loaded shards and the counters (on the event loop)."""
        listed = [g for s in self.runtime.loaded_states() for g in s.list_groups()]
        return group_stats.snapshot(listed, self.counters)

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        by_partition: dict[int, list[str]] = {}
        for gid in group_ids:
            by_partition.setdefault(self.partition_for(gid), []).append(gid)
        results: dict[str, ErrorCode] = {}
        for partition, gids in by_partition.items():
            failed = await self._delete_share_states(partition, gids)
            results.update(failed)
            rest = [g for g in gids if g not in failed]
            if rest:
                results.update(await self._delete_on(partition, rest))
        return results

    async def _delete_share_states(self, partition: int, gids: list[str]) -> dict[str, ErrorCode]:
        """As Kafka: the share groups among `gids` first have their share-partitions marked
        deleting (record 15) and their state deleted at the share coordinator; a group whose
        state could not all be deleted is not deleted (its error returned)."""
        prepared: dict[str, tuple[ErrorCode, list[tuple[uuid.UUID, int]]]] = await self._call(
            lambda: self.runtime.write(partition, lambda s: s.share.prepare_delete(gids)),
            lambda code: {g: (code, []) for g in gids},
        )
        failed: dict[str, ErrorCode] = {}
        for gid, (code, keys) in prepared.items():
            if code != ErrorCode.none:
                failed[gid] = code
                continue
            try:
                for topic_id, p in keys:
                    if self.share_state_deleter is not None:
                        await self.share_state_deleter(gid, topic_id, p)
            except CoordinatorError as exc:
                failed[gid] = exc.code
        return failed

    async def _delete_on(self, partition: int, gids: list[str]) -> dict[str, ErrorCode]:
        return await self._call(
            lambda: self.runtime.write(partition, lambda s: s.delete_groups(gids)),
            lambda code: dict.fromkeys(gids, code),
        )
