"""OffsetCommit, OffsetFetch and OffsetDelete against a shard's groups: the checks a commit
must pass, the offset records it writes, and what a fetch or a delete answers."""

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.coordinator.group import records as rec
from broker.coordinator.group.classic import CONSUMER_PROTOCOL_TYPE, ClassicGroup, GroupState
from broker.coordinator.group.config import GroupConfig
from broker.coordinator.group.shard_state import ShardState, TopicPartition, validate_member
from broker.coordinator.runtime import AppendError, Record, WriteResult, append_error_code


@dataclass(slots=True)
class CommitItem:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None


@dataclass(slots=True)
class CommitParams:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    retention_ms: int
    items: list[CommitItem]
    api_version: int


@dataclass(slots=True)
class FetchedOffset:
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    error: ErrorCode = ErrorCode.none


def commit_error(exc: BaseException) -> ErrorCode:
    # Offset commits report a too-large batch as INVALID_COMMIT_OFFSET_SIZE (as Kafka does).
    if isinstance(exc, AppendError) and exc.code in (
        ErrorCode.message_too_large,
        ErrorCode.record_list_too_large,
        ErrorCode.invalid_fetch_size,
    ):
        return ErrorCode.invalid_commit_offset_size
    return append_error_code(exc)


def validate_commit(
    group: ClassicGroup,
    generation_id: int,
    member_id: str,
    group_instance_id: str | None,
    *,
    transactional: bool = False,
) -> ErrorCode | None:
    """Kafka's checks of a commit to a classic group. A transactional one (TxnOffsetCommit) has
    its member validated when identified, but not the group's state (old clients send no member
    id or generation)."""
    if group.is_in(GroupState.DEAD):
        return ErrorCode.coordinator_not_available
    if generation_id < 0 and group.is_in(GroupState.EMPTY):
        return None  # a standalone (simple) commit
    if generation_id >= 0 or member_id or group_instance_id is not None:
        error = validate_member(group, member_id, group_instance_id)
        if error is not None:
            return error
        if generation_id != group.generation:
            return ErrorCode.illegal_generation
    elif not transactional and not group.is_in(GroupState.EMPTY):
        return ErrorCode.unknown_member_id
    if not transactional and group.is_in(GroupState.COMPLETING_REBALANCE):
        return ErrorCode.rebalance_in_progress
    return None


def offset_records(
    group_id: str, items: list[CommitItem], max_metadata: int, now: int, expire: int | None
) -> tuple[list[ErrorCode], list[Record], list[tuple[TopicPartition, rec.OffsetValue]]]:
    """A commit's items as the records to append: an error per item (too much metadata, or
    none), the records, and the offsets they set once committed."""
    errors: list[ErrorCode] = []
    records: list[Record] = []
    accepted: list[tuple[TopicPartition, rec.OffsetValue]] = []
    for item in items:
        metadata = item.metadata or ""
        if len(metadata) > max_metadata:
            errors.append(ErrorCode.offset_metadata_too_large)
            continue
        value = rec.OffsetValue(item.offset, item.leader_epoch, metadata, now, expire)
        records.append(
            (rec.offset_key(group_id, item.topic, item.partition), rec.offset_value(value))
        )
        accepted.append(((item.topic, item.partition), value))
        errors.append(ErrorCode.none)
    return errors, records, accepted


class OffsetCommits:
    """OffsetCommit, OffsetFetch and OffsetDelete over the shard's state."""

    def __init__(self, state: ShardState, config: GroupConfig) -> None:
        self.state = state
        self.groups = state.groups
        self.offsets = state.offsets
        self.consumer = state.consumer
        self.config = config

    def commit_offsets(self, p: CommitParams) -> WriteResult[list[ErrorCode]]:
        def all_error(code: ErrorCode) -> WriteResult[list[ErrorCode]]:
            return WriteResult([code] * len(p.items))

        if not p.group_id:
            return all_error(ErrorCode.invalid_group_id)
        if p.group_id in self.state.share.groups:  # share groups keep no offsets (as Kafka)
            return all_error(ErrorCode.group_id_not_found)
        consumer = p.group_id in self.consumer.groups
        group = self.groups.get(p.group_id)
        created = False
        if consumer:
            group = ClassicGroup(p.group_id, self.state.now())  # offsets only: never registered
        elif group is None:
            if p.generation_id >= 0:
                return all_error(
                    ErrorCode.group_id_not_found
                    if p.api_version >= 9
                    else ErrorCode.illegal_generation
                )
            group = ClassicGroup(p.group_id, self.state.now())
            created = True
        error = (
            self.consumer.offset_checks.validate_commit(
                p.group_id, p.member_id, p.generation_id, p.api_version
            )
            if consumer
            else validate_commit(group, p.generation_id, p.member_id, p.group_instance_id)
        )
        if error is not None:
            return all_error(error)
        now = self.state.now()
        expire = now + p.retention_ms if p.retention_ms >= 0 else None
        errors, records, accepted = offset_records(
            p.group_id, p.items, self.config.offset_metadata_max_bytes, now, expire
        )
        new_group = group

        def committed() -> None:
            if created:
                self.groups.setdefault(p.group_id, new_group)
            if accepted:
                self.offsets.setdefault(p.group_id, {}).update(accepted)
                for tp, _ in accepted:
                    self.state.pending_txn.on_plain_commit(p.group_id, tp)

        def failed(exc: BaseException) -> list[ErrorCode]:
            code = commit_error(exc)
            return [code if e == ErrorCode.none else e for e in errors]

        if created and not records:
            return WriteResult(errors)
        return WriteResult(errors, records, on_commit=committed, on_failure=failed)

    def fetch_offsets(
        self,
        group_id: str,
        topics: list[tuple[str, list[int]]] | None,
        require_stable: bool = False,
    ) -> list[tuple[str, list[FetchedOffset]]]:
        group = self.groups.get(group_id)
        offsets = (
            {}
            if (group is None or group.is_in(GroupState.DEAD))
            and group_id not in self.consumer.groups
            else self.offsets.get(group_id, {})
        )
        # KIP-447: a read_committed consumer must not start from an offset a pending
        # transaction may still replace; it retries on UNSTABLE_OFFSET_COMMIT.
        unstable = self.state.pending_txn.partitions(group_id) if require_stable else set()
        if topics is None:
            by_topic: dict[str, list[FetchedOffset]] = {}
            for (topic, partition), v in sorted(offsets.items()):
                by_topic.setdefault(topic, []).append(
                    FetchedOffset(partition, -1, -1, "", ErrorCode.unstable_offset_commit)
                    if (topic, partition) in unstable
                    else FetchedOffset(partition, v.offset, v.leader_epoch, v.metadata)
                )
            return list(by_topic.items())
        out: list[tuple[str, list[FetchedOffset]]] = []
        for topic, partitions in topics:
            fetched = []
            for partition in partitions:
                found = offsets.get((topic, partition))
                if (topic, partition) in unstable:
                    fetched.append(
                        FetchedOffset(partition, -1, -1, "", ErrorCode.unstable_offset_commit)
                    )
                elif found is None:
                    fetched.append(FetchedOffset(partition, -1, -1, ""))
                else:
                    fetched.append(
                        FetchedOffset(partition, found.offset, found.leader_epoch, found.metadata)
                    )
            out.append((topic, fetched))
        return out

    def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> WriteResult[tuple[ErrorCode, list[ErrorCode]]]:
        if group_id in self.state.share.groups:
            return WriteResult((ErrorCode.group_id_not_found, []))
        if group_id in self.consumer.groups:
            return self.consumer.offset_checks.delete_offsets(
                group_id, partitions, self.state.drop_offsets
            )
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return WriteResult((ErrorCode.group_id_not_found, []))
        if not group.is_in(GroupState.EMPTY) and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return WriteResult((ErrorCode.non_empty_group, []))
        offsets = self.offsets.get(group_id, {})
        errors: list[ErrorCode] = []
        doomed: list[TopicPartition] = []
        for tp in partitions:
            if not group.is_in(GroupState.EMPTY) and group.is_subscribed_to(tp[0]):
                errors.append(ErrorCode.group_subscribed_to_topic)
                continue
            errors.append(ErrorCode.none)
            if tp in offsets:
                doomed.append(tp)
        records: list[Record] = [(rec.offset_key(group_id, t, p), None) for t, p in doomed]

        def committed() -> None:
            self.state.drop_offsets(group_id, doomed)

        def failed(exc: BaseException) -> tuple[ErrorCode, list[ErrorCode]]:
            return (append_error_code(exc), [])

        return WriteResult((ErrorCode.none, errors), records, committed, failed)
