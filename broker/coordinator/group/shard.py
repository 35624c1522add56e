"""The group coordinator state machine of one `__consumer_offsets` partition.

Every public method is one runtime operation (run under the shard lock). Writes return a
`WriteResult`; JoinGroup and SyncGroup answer with a future that a later operation (another
member's request or a timer) completes.

`GroupShard` is composed of one object per job, each given the shared `ShardState` and the
collaborators it calls (the classic rebalance and RPCs, offsets, transactional offsets,
retention, loading, DeleteGroups/describe/list, and the consumer and share groups); a part that
sets timers gets them through `timers.Timers`, so no part imports the shard. What stays here is
moving a group id between the classic and the consumer type (KIP-848's online upgrade and
downgrade), which spans both. The request and result types are re-exported from here.
"""

import asyncio
from collections.abc import Callable

from kio.schema.errors import ErrorCode

from broker.coordinator.group import migration
from broker.coordinator.group import records as rec
from broker.coordinator.group.classic import (
    ClassicGroup,
    GroupState,
    JoinParams,
    JoinResult,
    SyncParams,
    SyncResult,
)
from broker.coordinator.group.classic_members import ClassicMembers
from broker.coordinator.group.classic_rebalance import ClassicRebalance, group_record
from broker.coordinator.group.classic_rpcs import ClassicGroupRpcs
from broker.coordinator.group.config import GroupConfig
from broker.coordinator.group.consumer_group import ConsumerGroup, TopicsView
from broker.coordinator.group.consumer_shard import ConsumerGroups
from broker.coordinator.group.group_admin import (
    DescribedGroup,
    DescribedMember,
    GroupAdmin,
    ListedGroup,
)
from broker.coordinator.group.offset_commits import (
    CommitItem,
    CommitParams,
    FetchedOffset,
    OffsetCommits,
)
from broker.coordinator.group.offset_retention import OffsetRetention
from broker.coordinator.group.shard_loading import ShardLoading
from broker.coordinator.group.shard_state import ShardState, TopicPartition
from broker.coordinator.group.share_groups import ShareGroups
from broker.coordinator.group.timers import PartTimers
from broker.coordinator.group.txn_offset_commits import TxnCommitParams, TxnOffsetCommits
from broker.coordinator.runtime import EndMarker, Record, ShardContext, WriteResult

__all__ = [
    "CommitItem",
    "CommitParams",
    "DescribedGroup",
    "DescribedMember",
    "FetchedOffset",
    "GroupShard",
    "JoinParams",
    "ListedGroup",
    "ShardFactory",
    "SyncParams",
    "TopicPartition",
    "TxnCommitParams",
]


class GroupShard:
    def __init__(
        self,
        ctx: "ShardContext[GroupShard]",
        config: GroupConfig,
        topics: Callable[[], TopicsView] = dict,
    ) -> None:
        self.config = config
        # the consumer and share groups reach the classic side only through these callbacks
        self.consumer = ConsumerGroups(
            PartTimers(ctx, lambda s: s.consumer),
            config,
            topics,
            self._take_classic,
            self._downgrade,
        )
        self.share = ShareGroups(
            PartTimers(ctx, lambda s: s.share), config, topics, self._has_group
        )
        self.state = ShardState(ctx, self.consumer, self.share)
        self.groups = self.state.groups  # the classic groups
        self.rebalance = ClassicRebalance(
            self.state.groups, config, PartTimers(ctx, lambda s: s.rebalance)
        )
        self.classic = ClassicGroupRpcs(
            self.state, self.rebalance, ClassicMembers(self.consumer), config
        )
        self.offset_commits = OffsetCommits(self.state, config)
        self.txn_offsets = TxnOffsetCommits(self.state, config)
        self.retention = OffsetRetention(self.state, config, PartTimers(ctx, lambda s: s.retention))
        self.loading = ShardLoading(self.state, self.rebalance, self.retention)
        self.admin = GroupAdmin(self.state)

    # -- the runtime's view: loading and replay -------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        self.loading.replay(key, value)

    def replay_transactional(self, key: bytes, value: bytes | None, producer_id: int) -> None:
        self.loading.replay_transactional(key, value, producer_id)

    def replay_marker(self, producer_id: int, commit: bool) -> None:
        self.loading.replay_marker(producer_id, commit)

    def on_loaded(self) -> None:
        self.loading.on_loaded()

    def on_unloaded(self) -> None:
        self.loading.on_unloaded()

    # -- classic group RPCs ---------------------------------------------------------------------

    def join(self, p: JoinParams) -> WriteResult["asyncio.Future[JoinResult]"]:
        return self.classic.join(p)

    def sync(self, p: SyncParams) -> WriteResult["asyncio.Future[SyncResult]"]:
        return self.classic.sync(p)

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None
    ) -> WriteResult[ErrorCode]:
        return self.classic.heartbeat(group_id, generation_id, member_id, instance_id)

    def leave(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> WriteResult[tuple[ErrorCode, list[ErrorCode]]]:
        return self.classic.leave(group_id, members)

    # -- offsets --------------------------------------------------------------------------------

    def commit_offsets(self, p: CommitParams) -> WriteResult[list[ErrorCode]]:
        return self.offset_commits.commit_offsets(p)

    def fetch_offsets(
        self,
        group_id: str,
        topics: list[tuple[str, list[int]]] | None,
        require_stable: bool = False,
    ) -> list[tuple[str, list[FetchedOffset]]]:
        return self.offset_commits.fetch_offsets(group_id, topics, require_stable)

    def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> WriteResult[tuple[ErrorCode, list[ErrorCode]]]:
        return self.offset_commits.delete_offsets(group_id, partitions)

    def txn_commit_offsets(self, p: TxnCommitParams) -> WriteResult[list[ErrorCode]]:
        return self.txn_offsets.txn_commit_offsets(p)

    def complete_transaction(self, marker: EndMarker) -> WriteResult[ErrorCode]:
        return self.txn_offsets.complete_transaction(marker)

    def expire_offsets(self) -> WriteResult[None]:
        return self.retention.expire_offsets()

    # -- DeleteGroups, DescribeGroups, ListGroups -----------------------------------------------

    def delete_groups(self, group_ids: list[str]) -> WriteResult[dict[str, ErrorCode]]:
        return self.admin.delete_groups(group_ids)

    def describe(self, group_id: str) -> DescribedGroup:
        return self.admin.describe(group_id)

    def list_groups(self) -> list[ListedGroup]:
        return self.admin.list_groups()

    # -- one group id, changing type (KIP-848 migration) ----------------------------------------

    def _has_group(self, group_id: str) -> bool:
        return self.state.has_group(group_id)

    def _take_classic(self, group_id: str, may_convert: bool) -> str | list[Record]:
        """Make way for a consumer group: an empty classic group (maybe just offsets) is
        converted, as Kafka does, and so is one with members when the migration policy allows
        (online upgrade); a share group keeps the id. A string says why not."""
        if group_id in self.share.groups:
            return f"Group {group_id} is a share group."
        group = self.state.groups.get(group_id)
        if group is None:
            return [] if may_convert else f"Group {group_id} not found."
        if not may_convert or (group.pending_join and group.is_in(GroupState.EMPTY)):
            return f"Group {group_id} is not a consumer group."
        if not group.is_in(GroupState.EMPTY):
            return self._upgrade(group)
        del self.state.groups[group_id]
        return [(rec.group_key(group_id), None)]

    def _upgrade(self, group: ClassicGroup) -> str | list[Record]:
        """A classic group with members becomes a consumer group (a consumer-protocol member
        joins it): its members stay, as classic members keeping their partitions."""
        cfg = self.config
        why = migration.upgrade_refusal(group, cfg.upgrade_enabled, cfg.consumer_max_size)
        if why is not None:
            return f"Cannot upgrade classic group {group.group_id} to consumer group: {why}."
        converted = migration.from_classic(group, self.consumer.topics(), self.state.now())
        if converted is None:
            return (
                f"Cannot upgrade classic group {group.group_id} to consumer group: a member's "
                "embedded consumer protocol is malformed or carries a custom assignor's user data."
            )
        gid = group.group_id
        # members waiting in a rebalance join again, now into the consumer group
        for member in group.members.values():
            member.complete_join(
                JoinResult(ErrorCode.rebalance_in_progress, member_id=member.member_id)
            )
            member.complete_sync(SyncResult(ErrorCode.rebalance_in_progress))
        self.rebalance.cancel_timers(group)
        group.transition(GroupState.DEAD, self.state.now())
        del self.state.groups[gid]
        self.consumer.groups[gid] = converted
        for mid in converted.members:
            self.consumer.schedule_session(gid, mid)
        return [(rec.group_key(gid), None), *migration.consumer_group_records(converted)]

    def _downgrade(self, cg: ConsumerGroup, leaving: set[str], rebalance: bool) -> list[Record]:
        """The consumer group's remaining (classic) members form a classic group (Kafka's
        online downgrade), which rebalances at once when a member left."""
        gid = cg.group_id
        records = migration.consumer_tombstones(cg)
        group = migration.to_classic(cg, leaving, self.consumer.topics(), self.state.now())
        del self.consumer.groups[gid]
        self.state.groups[gid] = group
        records.append(
            group_record(group, {m.member_id: m.assignment for m in group.members.values()})
        )
        for member in group.members.values():
            self.rebalance.reschedule_heartbeat(group, member)
        return records + (self.rebalance.prepare_rebalance(group) if rebalance else [])


ShardFactory = Callable[["ShardContext[GroupShard]"], GroupShard]
