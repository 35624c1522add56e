"""What offsets requests must satisfy against a KIP-848 consumer group (as Kafka checks them);
`ConsumerGroups` holds one over its groups (`ConsumerGroups.offset_checks`)."""

from collections.abc import Callable

from kio.schema.errors import ErrorCode

from broker.coordinator.group.consumer_group import ConsumerGroup, TopicsView
from broker.coordinator.group.records import offset_key as rec_offset_key
from broker.coordinator.runtime import Record, WriteResult


class ConsumerOffsetChecks:
    def __init__(self, groups: dict[str, ConsumerGroup], topics: Callable[[], TopicsView]) -> None:
        self.groups = groups
        self.topics = topics

    def validate_commit(
        self, group_id: str, member_id: str, member_epoch: int, api_version: int
    ) -> ErrorCode | None:
        """Kafka's checks of an OffsetCommit against a consumer group."""
        group = self.groups[group_id]
        if member_epoch < 0 and not member_id:
            # an admin or a consumer without group management: only while nobody is in
            return None if not group.members else ErrorCode.unknown_member_id
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if member.classic is not None:
            # a classic member commits with the generation its JoinGroup gave: its epoch
            return None if member_epoch == member.current.epoch else ErrorCode.illegal_generation
        if api_version < 9:
            return ErrorCode.unsupported_version
        if member_epoch != member.current.epoch:
            return ErrorCode.stale_member_epoch
        return None

    def validate_txn_commit(
        self, group_id: str, member_id: str, member_epoch: int
    ) -> ErrorCode | None:
        """A transactional commit checks the member and its epoch (ILLEGAL_GENERATION)."""
        group = self.groups[group_id]
        if member_epoch < 0 and not member_id:
            return None
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if member_epoch != member.current.epoch:
            return ErrorCode.illegal_generation
        return None

    def delete_offsets(
        self,
        group_id: str,
        partitions: list[tuple[str, int]],
        drop: Callable[[str, list[tuple[str, int]]], None],
    ) -> WriteResult[tuple[ErrorCode, list[ErrorCode]]]:
        """OffsetDelete: not for topics the group is subscribed to while it has members."""
        group = self.groups[group_id]
        subscribed = group.subscribed_names(self.topics()) if group.members else set()
        errors = [
            ErrorCode.group_subscribed_to_topic if t in subscribed else ErrorCode.none
            for t, _ in partitions
        ]
        doomed = [tp for tp, e in zip(partitions, errors, strict=True) if e == ErrorCode.none]
        records: list[Record] = [(rec_offset_key(group_id, t, p), None) for t, p in doomed]
        return WriteResult(
            (ErrorCode.none, errors), records, on_commit=lambda: drop(group_id, doomed)
        )

    def validate_fetch(
        self, group_id: str, member_id: str | None, member_epoch: int
    ) -> ErrorCode | None:
        group = self.groups.get(group_id)
        if group is None or member_id is None or member_epoch < 0:
            return None
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if member_epoch != member.current.epoch:
            # a classic member's epoch is its generation
            return ErrorCode.illegal_generation if member.classic else ErrorCode.stale_member_epoch
        return None
