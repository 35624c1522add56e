"""The group coordinator state machine of one `__consumer_offsets` partition.

Every public method is one runtime operation (run under the shard lock). Writes return a
`WriteResult`; JoinGroup and SyncGroup answer with a future that a later operation (another
member's request or a timer) completes.

`GroupShard` is put together from one mixin per job (see `shard_state`); what stays here is the
shard's state and moving a group id between the classic and the consumer type (KIP-848's online
upgrade and downgrade). The request and result types are re-exported from here.
"""

from collections.abc import Callable

from kio.schema.errors import ErrorCode

from broker.coordinator.group import migration
from broker.coordinator.group import records as rec
from broker.coordinator.group.classic import ClassicGroup, GroupState, JoinResult, SyncResult
from broker.coordinator.group.classic_members import ClassicMembers
from broker.coordinator.group.classic_rpcs import ClassicGroupRpcs, JoinParams, SyncParams
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
from broker.coordinator.group.shard_state import (
    TopicPartition,
    heartbeat_key,
    join_key,
    sync_key,
)
from broker.coordinator.group.share_groups import ShareGroups
from broker.coordinator.group.txn_offset_commits import TxnCommitParams, TxnOffsetCommits
from broker.coordinator.group.txn_offsets import PendingTxnOffsets
from broker.coordinator.runtime import Record, ShardContext

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


class GroupShard(ClassicGroupRpcs, TxnOffsetCommits, OffsetCommits, GroupAdmin):
    def __init__(
        self,
        ctx: "ShardContext[GroupShard]",
        config: GroupConfig,
        topics: Callable[[], TopicsView] = dict,
    ) -> None:
        self.ctx = ctx
        self.config = config
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets: dict[str, dict[TopicPartition, rec.OffsetValue]] = {}
        self.pending_txn = PendingTxnOffsets()
        self.consumer = ConsumerGroups(ctx, config, topics, self._take_classic, self._downgrade)
        self.classic_members = ClassicMembers(self.consumer)
        self.share = ShareGroups(ctx, config, topics, self._has_group)

    def _take_classic(self, group_id: str, may_convert: bool) -> str | list[Record]:
        """Make way for a consumer group: an empty classic group (maybe just offsets) is
        converted, as Kafka does, and so is one with members when the migration policy allows
        (online upgrade); a share group keeps the id. A string says why not."""
        if group_id in self.share.groups:
            return f"Group {group_id} is a share group."
        group = self.groups.get(group_id)
        if group is None:
            return [] if may_convert else f"Group {group_id} not found."
        if not may_convert or (group.pending_join and group.is_in(GroupState.EMPTY)):
            return f"Group {group_id} is not a consumer group."
        if not group.is_in(GroupState.EMPTY):
            return self._upgrade(group)
        del self.groups[group_id]
        return [(rec.group_key(group_id), None)]

    def _upgrade(self, group: ClassicGroup) -> str | list[Record]:
        """A classic group with members becomes a consumer group (a consumer-protocol member
        joins it): its members stay, as classic members keeping their partitions."""
        cfg = self.config
        why = migration.upgrade_refusal(group, cfg.upgrade_enabled, cfg.consumer_max_size)
        if why is not None:
            return f"Cannot upgrade classic group {group.group_id} to consumer group: {why}."
        converted = migration.from_classic(group, self.consumer.topics(), self._now())
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
        for mid in list(group.members) + list(group.pending_join):
            self.ctx.cancel(heartbeat_key(gid, mid))
        self.ctx.cancel(join_key(gid))
        self.ctx.cancel(sync_key(gid))
        group.transition(GroupState.DEAD, self._now())
        del self.groups[gid]
        self.consumer.groups[gid] = converted
        for mid in converted.members:
            self.consumer.schedule_session(gid, mid)
        return [(rec.group_key(gid), None), *migration.consumer_group_records(converted)]

    def _downgrade(self, cg: ConsumerGroup, leaving: set[str], rebalance: bool) -> list[Record]:
        """The consumer group's remaining (classic) members form a classic group (Kafka's
        online downgrade), which rebalances at once when a member left."""
        gid = cg.group_id
        records = migration.consumer_tombstones(cg)
        group = migration.to_classic(cg, leaving, self.consumer.topics(), self._now())
        del self.consumer.groups[gid]
        self.groups[gid] = group
        records.append(
            self._group_record(group, {m.member_id: m.assignment for m in group.members.values()})
        )
        for member in group.members.values():
            self._reschedule_heartbeat(group, member)
        return records + (self._prepare_rebalance(group) if rebalance else [])


ShardFactory = Callable[["ShardContext[GroupShard]"], GroupShard]
