"""The state of one `__consumer_offsets` shard, and the few primitives its parts share.

`ShardState` holds the classic groups, the committed offsets of every group (and the
transactional ones still pending), and beside them the shard's consumer and share groups: it is
the directory of which type holds a group id. `GroupShard` creates it and hands it to each part
(the classic rebalance and RPCs, offsets, transactional offsets, retention, loading, and
DeleteGroups/describe/list).
"""

from kio.schema.errors import ErrorCode

from broker.coordinator.group import records as rec
from broker.coordinator.group.classic import ClassicGroup, GroupState
from broker.coordinator.group.consumer_shard import ConsumerGroups
from broker.coordinator.group.share_groups import ShareGroups
from broker.coordinator.group.timers import Clock
from broker.coordinator.group.txn_offsets import PendingTxnOffsets

TopicPartition = tuple[str, int]


# The keys of a classic group's timers: a member's session, the join phase, the sync phase.
def heartbeat_key(group_id: str, member_id: str) -> str:
    return f"heartbeat-{group_id}-{member_id}"


def join_key(group_id: str) -> str:
    return f"join-{group_id}"


def sync_key(group_id: str) -> str:
    return f"sync-{group_id}"


def validate_member(
    group: ClassicGroup, member_id: str, instance_id: str | None
) -> ErrorCode | None:
    """Whether a request's member (and static instance) is the group's: None if it is."""
    if instance_id is not None:
        existing = group.static_members.get(instance_id)
        if existing is None:
            return ErrorCode.unknown_member_id
        if existing != member_id:
            return ErrorCode.fenced_instance_id
    if member_id not in group.members:
        return ErrorCode.unknown_member_id
    return None


class ShardState:
    """What a shard holds. Its collections are created once and only changed in place, so the
    parts may keep references to them."""

    def __init__(self, clock: Clock, consumer: ConsumerGroups, share: ShareGroups) -> None:
        self.clock = clock
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets: dict[str, dict[TopicPartition, rec.OffsetValue]] = {}
        self.pending_txn = PendingTxnOffsets()
        self.consumer = consumer
        self.share = share

    def now(self) -> int:
        return self.clock.now_ms()

    def has_group(self, group_id: str) -> bool:
        """Whether a classic or a consumer group holds the id."""
        return group_id in self.groups or group_id in self.consumer.groups

    def ensure_group(self, group_id: str) -> None:
        """Offsets alone make a (simple, empty) classic group, as in Kafka."""
        if not self.has_group(group_id):
            self.groups[group_id] = ClassicGroup(group_id, self.now())

    def drop_offsets(self, group_id: str, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.pending_txn.drop_partition(group_id, tp)
        offsets = self.offsets.get(group_id)
        if offsets is None:
            return
        for tp in partitions:
            offsets.pop(tp, None)
        if not offsets:
            del self.offsets[group_id]

    def complete_transaction(self, producer_id: int, commit: bool) -> None:
        """The producer's COMMIT/ABORT marker is durable: its pending offsets become visible
        (commit) or are dropped."""
        for group_id, tp, value in self.pending_txn.complete(producer_id, commit):
            self.offsets.setdefault(group_id, {})[tp] = value
            self.ensure_group(group_id)

    def delete_group(self, group_id: str) -> None:
        self.consumer.groups.pop(group_id, None)
        self.share.forget(group_id)
        group = self.groups.pop(group_id, None)
        if group is not None:
            group.transition(GroupState.DEAD, self.now())
            self.clock.cancel(join_key(group_id))
            self.clock.cancel(sync_key(group_id))
        self.offsets.pop(group_id, None)
        self.pending_txn.drop_group(group_id)
