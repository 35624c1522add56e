"""The state of one `__consumer_offsets` shard, and the few primitives its operations share.

`GroupShard` is put together from mixins over `ShardState`, one per job (the classic rebalance,
the classic group RPCs, offsets, transactional offsets, retention, loading, DeleteGroups and
describe/list); each reads and changes the state declared here, which `GroupShard` creates.
"""

from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode

from broker.coordinator.group import records as rec
from broker.coordinator.group.classic import ClassicGroup, GroupState
from broker.coordinator.group.classic_members import ClassicMembers
from broker.coordinator.group.config import GroupConfig
from broker.coordinator.group.consumer_shard import ConsumerGroups
from broker.coordinator.group.share_groups import ShareGroups
from broker.coordinator.group.txn_offsets import PendingTxnOffsets
from broker.coordinator.runtime import ShardContext

if TYPE_CHECKING:
    from broker.coordinator.group.shard import GroupShard

TopicPartition = tuple[str, int]


# The keys of a classic group's timers: a member's session, the join phase, the sync phase.
def heartbeat_key(group_id: str, member_id: str) -> str:
    return f"heartbeat-{group_id}-{member_id}"


def join_key(group_id: str) -> str:
    return f"join-{group_id}"


def sync_key(group_id: str) -> str:
    return f"sync-{group_id}"


class ShardState:
    """What a shard holds: its classic groups, the committed offsets of every group (and the
    transactional ones still pending), and its consumer and share groups beside them."""

    ctx: "ShardContext[GroupShard]"
    config: GroupConfig
    groups: dict[str, ClassicGroup]
    offsets: dict[str, dict[TopicPartition, rec.OffsetValue]]
    pending_txn: PendingTxnOffsets
    consumer: ConsumerGroups
    classic_members: ClassicMembers
    share: ShareGroups

    def _now(self) -> int:
        return self.ctx.now_ms()

    def _has_group(self, group_id: str) -> bool:
        return group_id in self.groups or group_id in self.consumer.groups

    @staticmethod
    def _validate_member(
        group: ClassicGroup, member_id: str, instance_id: str | None
    ) -> ErrorCode | None:
        if instance_id is not None:
            existing = group.static_members.get(instance_id)
            if existing is None:
                return ErrorCode.unknown_member_id
            if existing != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in group.members:
            return ErrorCode.unknown_member_id
        return None

    def _drop_offsets(self, group_id: str, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.pending_txn.drop_partition(group_id, tp)
        offsets = self.offsets.get(group_id)
        if offsets is None:
            return
        for tp in partitions:
            offsets.pop(tp, None)
        if not offsets:
            del self.offsets[group_id]

    def _delete_group(self, group_id: str) -> None:
        self.consumer.groups.pop(group_id, None)
        self.share.forget(group_id)
        group = self.groups.pop(group_id, None)
        if group is not None:
            group.transition(GroupState.DEAD, self._now())
            self.ctx.cancel(join_key(group_id))
            self.ctx.cancel(sync_key(group_id))
        self.offsets.pop(group_id, None)
        self.pending_txn.drop_group(group_id)
