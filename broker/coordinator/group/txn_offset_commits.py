"""TxnOffsetCommit and the end of a transaction: a producer's offsets are appended as part of
its transaction and stay pending (`txn_offsets`) until its COMMIT/ABORT marker lands here."""

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.coordinator.group.classic import ClassicGroup
from broker.coordinator.group.config import GroupConfig
from broker.coordinator.group.offset_commits import (
    CommitItem,
    commit_error,
    offset_records,
    validate_commit,
)
from broker.coordinator.group.shard_state import ShardState
from broker.coordinator.runtime import EndMarker, WriteResult, append_error_code


@dataclass(slots=True)
class TxnCommitParams:
    """A TxnOffsetCommit: offsets pending until the producer's transaction ends."""

    group_id: str
    producer_id: int
    producer_epoch: int
    generation_id: int
    member_id: str
    group_instance_id: str | None
    items: list[CommitItem]


class TxnOffsetCommits:
    """TxnOffsetCommit and the end of a transaction over the shard's state."""

    def __init__(self, state: ShardState, config: GroupConfig) -> None:
        self.state = state
        self.groups = state.groups
        self.consumer = state.consumer
        self.config = config

    def txn_commit_offsets(self, p: TxnCommitParams) -> WriteResult[list[ErrorCode]]:
        """Append the offsets as a transactional batch of the producer; they stay pending
        until the producer's COMMIT/ABORT marker reaches this partition."""

        def all_error(code: ErrorCode) -> WriteResult[list[ErrorCode]]:
            return WriteResult([code] * len(p.items))

        if not p.group_id:
            return all_error(ErrorCode.invalid_group_id)
        if p.group_id in self.state.share.groups:
            return all_error(ErrorCode.group_id_not_found)
        group = self.groups.get(p.group_id)
        created = False
        consumer = p.group_id in self.consumer.groups
        if consumer:
            group = ClassicGroup(p.group_id, self.state.now())  # offsets only: never registered
        elif group is None:
            if p.generation_id >= 0:
                return all_error(ErrorCode.illegal_generation)
            group = ClassicGroup(p.group_id, self.state.now())
            created = True
        error = (
            self.consumer.offset_checks.validate_txn_commit(
                p.group_id, p.member_id, p.generation_id
            )
            if consumer
            else validate_commit(
                group, p.generation_id, p.member_id, p.group_instance_id, transactional=True
            )
        )
        if error is not None:
            return all_error(error)
        errors, records, accepted = offset_records(
            p.group_id, p.items, self.config.offset_metadata_max_bytes, self.state.now(), None
        )
        if not records:
            return WriteResult(errors)
        new_group = group

        def committed() -> None:
            if created:
                self.groups.setdefault(p.group_id, new_group)
            for tp, value in accepted:
                self.state.pending_txn.add(p.producer_id, p.group_id, tp, value)

        def failed(exc: BaseException) -> list[ErrorCode]:
            code = commit_error(exc)
            return [code if e == ErrorCode.none else e for e in errors]

        return WriteResult(
            errors, records, committed, failed, producer=(p.producer_id, p.producer_epoch)
        )

    def complete_transaction(self, marker: EndMarker) -> WriteResult[ErrorCode]:
        """Write the producer's COMMIT/ABORT marker here; once durable its offsets become
        visible (COMMIT) or are dropped (ABORT)."""

        def committed() -> None:  # applied as its replay is
            self.state.complete_transaction(marker.producer_id, marker.commit)

        def failed(exc: BaseException) -> ErrorCode:
            return ErrorCode(int(append_error_code(exc)))

        return WriteResult(ErrorCode.none, [], committed, failed, marker=marker)
