"""The classic group RPCs (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) against a classic
group; a consumer group's classic members are answered by `classic_members` instead.

JoinGroup and SyncGroup answer with a future that a later operation (another member's request or
a timer) completes.
"""

import asyncio
import uuid

from kio.schema.errors import ErrorCode

from broker.coordinator.group.classic import (
    ClassicGroup,
    GroupState,
    JoinParams,
    JoinResult,
    Member,
    SyncParams,
    SyncResult,
)
from broker.coordinator.group.classic_members import ClassicMembers
from broker.coordinator.group.classic_rebalance import (
    ClassicRebalance,
    group_record,
    join_done,
    join_response,
    ready,
    sync_done,
)
from broker.coordinator.group.config import GroupConfig
from broker.coordinator.group.shard_state import ShardState, validate_member
from broker.coordinator.runtime import Record, WriteResult, append_error_code

__all__ = ["ClassicGroupRpcs", "JoinParams", "SyncParams"]


class ClassicGroupRpcs:
    """Answers the classic RPCs; a consumer group's classic members go to `classic_members`."""

    def __init__(
        self,
        state: ShardState,
        rebalance: ClassicRebalance,
        classic_members: ClassicMembers,
        config: GroupConfig,
    ) -> None:
        self.state = state
        self.groups = state.groups
        self.consumer = state.consumer
        self.rebalance = rebalance
        self.classic_members = classic_members
        self.config = config

    # -- JoinGroup ----------------------------------------------------------------------------

    def join(self, p: JoinParams) -> WriteResult["asyncio.Future[JoinResult]"]:
        if not p.group_id:
            return join_done(ErrorCode.invalid_group_id, p.member_id)
        if not (
            self.config.min_session_timeout_ms
            <= p.session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            return join_done(ErrorCode.invalid_session_timeout, p.member_id)
        if not p.protocol_type or not p.protocols:
            return join_done(ErrorCode.inconsistent_group_protocol, p.member_id)
        if p.group_id in self.state.share.groups:  # a share group keeps its id
            return join_done(ErrorCode.inconsistent_group_protocol, p.member_id)
        if p.group_id in self.consumer.groups:
            # a KIP-848 group: a classic member joins one with members as a classic member
            # (mixed group), and takes over an empty one (converted back, as Kafka does)
            cg = self.consumer.groups[p.group_id]
            if cg.members:
                return self.classic_members.join(cg, p)
            converted = self.consumer.delete_records(p.group_id)
            del self.consumer.groups[p.group_id]
            self.groups[p.group_id] = ClassicGroup(
                p.group_id, self.state.now()
            )  # keeps its offsets
            result = self.join(p)
            result.records[:0] = converted
            return result
        group = self.groups.get(p.group_id)
        created = group is None
        if group is None:
            if p.member_id:
                return join_done(ErrorCode.unknown_member_id, p.member_id)
            group = ClassicGroup(p.group_id, self.state.now())
            self.groups[p.group_id] = group
        if len(group.members) >= self.config.max_group_size and p.member_id not in group.members:
            return join_done(ErrorCode.group_max_size_reached, p.member_id)
        result = self._join_existing(group, p) if p.member_id else self._join_unknown(group, p)
        if (
            created
            and group.is_empty
            and not group.pending_join
            and p.group_id not in self.state.offsets
        ):
            self.groups.pop(p.group_id, None)  # the join failed; leave no trace
        return result

    def _join_unknown(
        self, group: ClassicGroup, p: JoinParams
    ) -> WriteResult["asyncio.Future[JoinResult]"]:
        if group.is_in(GroupState.DEAD):
            return join_done(ErrorCode.coordinator_not_available)
        if not group.supports_protocols(p.protocol_type, [n for n, _ in p.protocols]):
            return join_done(ErrorCode.inconsistent_group_protocol)
        new_id = f"{p.client_id}-{uuid.uuid4()}"
        if p.group_instance_id is not None:
            old_id = group.static_members.get(p.group_instance_id)
            if old_id is not None:
                return self._update_static_member(group, p, old_id, new_id)
            return self._add_member(group, p, new_id)
        if p.require_known_member_id:
            self.rebalance.expect_rejoin(group, new_id, p.session_timeout_ms)
            return join_done(ErrorCode.member_id_required, new_id)
        return self._add_member(group, p, new_id)

    def _join_existing(
        self, group: ClassicGroup, p: JoinParams
    ) -> WriteResult["asyncio.Future[JoinResult]"]:
        if group.is_in(GroupState.DEAD):
            return join_done(ErrorCode.coordinator_not_available, p.member_id)
        if not group.supports_protocols(p.protocol_type, [n for n, _ in p.protocols]):
            return join_done(ErrorCode.inconsistent_group_protocol, p.member_id)
        if p.member_id in group.pending_join:
            return self._add_member(group, p, p.member_id)
        error = validate_member(group, p.member_id, p.group_instance_id)
        if error is not None:
            return join_done(error, p.member_id)
        member = group.members[p.member_id]
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return self._update_member(group, member, p)
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            if member.matches(p.protocols):
                # a retried join: answer with the generation it is already part of
                return WriteResult(ready(join_response(group, member)))
            return self._update_member(group, member, p)
        if group.is_in(GroupState.STABLE):
            if group.leader_id == member.member_id or not member.matches(p.protocols):
                return self._update_member(group, member, p)
            return WriteResult(ready(join_response(group, member)))
        return join_done(ErrorCode.unknown_member_id, p.member_id)

    def _new_join_future(self) -> "asyncio.Future[JoinResult]":
        return asyncio.get_running_loop().create_future()

    def _add_member(
        self, group: ClassicGroup, p: JoinParams, member_id: str
    ) -> WriteResult["asyncio.Future[JoinResult]"]:
        fut = self._new_join_future()
        member = Member(
            member_id=member_id,
            group_instance_id=p.group_instance_id,
            client_id=p.client_id,
            client_host=p.client_host,
            rebalance_timeout_ms=p.rebalance_timeout_ms,
            session_timeout_ms=p.session_timeout_ms,
            protocols=list(p.protocols),
            join_future=fut,
            is_new=True,
        )
        group.add(member, p.protocol_type)
        if group.initial_delay_pending:
            group.new_member_added = True
        self.rebalance.reschedule_heartbeat(group, member)
        records = self.rebalance.maybe_prepare_or_complete(group)
        return WriteResult(fut, records)

    def _update_member(
        self, group: ClassicGroup, member: Member, p: JoinParams
    ) -> WriteResult["asyncio.Future[JoinResult]"]:
        fut = self._new_join_future()
        member.complete_join(
            JoinResult(ErrorCode.rebalance_in_progress, member_id=member.member_id)
        )
        member.protocols = list(p.protocols)
        member.rebalance_timeout_ms = p.rebalance_timeout_ms
        member.session_timeout_ms = p.session_timeout_ms
        member.join_future = fut
        records = self.rebalance.maybe_prepare_or_complete(group)
        return WriteResult(fut, records)

    def _update_static_member(
        self, group: ClassicGroup, p: JoinParams, old_id: str, new_id: str
    ) -> WriteResult["asyncio.Future[JoinResult]"]:
        assert p.group_instance_id is not None
        instance = p.group_instance_id
        self.rebalance.cancel_heartbeat(group.group_id, old_id)
        member = group.replace_static_member(instance, old_id, new_id)
        self.rebalance.reschedule_heartbeat(group, member)
        if group.is_in(GroupState.STABLE):
            old = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
            member.protocols = list(p.protocols)
            member.rebalance_timeout_ms = p.rebalance_timeout_ms
            member.session_timeout_ms = p.session_timeout_ms
            if group.select_protocol() != group.protocol_name:
                fut = self._new_join_future()
                member.join_future = fut
                return WriteResult(fut, self.rebalance.prepare_rebalance(group))
            # Same protocol: persist the new member id and hand back the current generation.
            fut = self._new_join_future()
            assignments = {m.member_id: m.assignment for m in group.members.values()}
            record = group_record(group, assignments)
            leader_before = group.leader_id

            def committed() -> None:
                if not fut.done():
                    fut.set_result(join_response(group, member, p.supports_skip_assignment))

            def failed(exc: BaseException) -> "asyncio.Future[JoinResult]":
                member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms = old
                self.rebalance.cancel_heartbeat(group.group_id, new_id)
                restored = group.replace_static_member(instance, new_id, old_id)
                self.rebalance.reschedule_heartbeat(group, restored)
                fut.set_result(
                    JoinResult(
                        append_error_code(exc),
                        member_id="",
                        generation_id=group.generation,
                        protocol_type=group.protocol_type,
                        protocol_name=group.protocol_name,
                        leader=leader_before or "",
                    )
                )
                return fut

            return WriteResult(fut, [record], on_commit=committed, on_failure=failed)
        fut = self._new_join_future()
        member.protocols = list(p.protocols)
        member.rebalance_timeout_ms = p.rebalance_timeout_ms
        member.session_timeout_ms = p.session_timeout_ms
        member.join_future = fut
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            # the leader may already hold the old id in its member list: rebalance again
            return WriteResult(fut, self.rebalance.prepare_rebalance(group))
        return WriteResult(fut, self.rebalance.maybe_complete_join(group))

    # -- SyncGroup ----------------------------------------------------------------------------

    def sync(self, p: SyncParams) -> WriteResult["asyncio.Future[SyncResult]"]:
        cg = self.consumer.groups.get(p.group_id)
        if cg is not None:
            return self.classic_members.sync(cg, p)
        group = self.groups.get(p.group_id)
        if group is None:
            return sync_done(ErrorCode.unknown_member_id)
        if group.is_in(GroupState.DEAD):
            return sync_done(ErrorCode.coordinator_not_available)
        error = validate_member(group, p.member_id, p.group_instance_id)
        if error is not None:
            return sync_done(error)
        if p.generation_id != group.generation:
            return sync_done(ErrorCode.illegal_generation)
        if (p.protocol_type is not None and p.protocol_type != group.protocol_type) or (
            p.protocol_name is not None and p.protocol_name != group.protocol_name
        ):
            return sync_done(ErrorCode.inconsistent_group_protocol)
        if group.is_in(GroupState.EMPTY):
            return sync_done(ErrorCode.unknown_member_id)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return sync_done(ErrorCode.rebalance_in_progress)
        member = group.members[p.member_id]
        self.rebalance.reschedule_heartbeat(group, member)
        group.pending_sync.discard(member.member_id)
        if not group.pending_sync:
            self.rebalance.cancel_sync(group.group_id)
        if group.is_in(GroupState.STABLE):
            return WriteResult(
                ready(
                    SyncResult(
                        ErrorCode.none, group.protocol_type, group.protocol_name, member.assignment
                    )
                )
            )
        # CompletingRebalance: wait for the leader's assignment to be written.
        fut: asyncio.Future[SyncResult] = asyncio.get_running_loop().create_future()
        member.complete_sync(SyncResult(ErrorCode.rebalance_in_progress))
        member.sync_future = fut
        if group.leader_id != member.member_id:
            return WriteResult(fut)
        assignments = {mid: p.assignments.get(mid, b"") for mid in group.members}
        generation = group.generation

        def current() -> bool:
            return group.is_in(GroupState.COMPLETING_REBALANCE) and group.generation == generation

        def committed() -> None:
            if not current():
                return
            for m in group.members.values():
                m.assignment = assignments.get(m.member_id, b"")
                m.complete_sync(
                    SyncResult(
                        ErrorCode.none, group.protocol_type, group.protocol_name, m.assignment
                    )
                )
            group.transition(GroupState.STABLE, self.state.now())

        def failed(exc: BaseException) -> "asyncio.Future[SyncResult]":
            error = append_error_code(exc)
            if current():
                for m in group.members.values():
                    m.assignment = b""
                    m.complete_sync(SyncResult(error))
                self.rebalance.prepare_rebalance(group)
            if not fut.done():
                fut.set_result(SyncResult(error))
            return fut

        return WriteResult(
            fut, [group_record(group, assignments)], on_commit=committed, on_failure=failed
        )

    # -- Heartbeat / LeaveGroup ----------------------------------------------------------------

    def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None
    ) -> WriteResult[ErrorCode]:
        cg = self.consumer.groups.get(group_id)
        if cg is not None:
            return self.classic_members.heartbeat(cg, generation_id, member_id, instance_id)
        group = self.groups.get(group_id)
        if group is None:
            return WriteResult(ErrorCode.unknown_member_id)
        if group.is_in(GroupState.DEAD):
            return WriteResult(ErrorCode.coordinator_not_available)
        error = validate_member(group, member_id, instance_id)
        if error is not None:
            return WriteResult(error)
        if generation_id != group.generation:
            return WriteResult(ErrorCode.illegal_generation)
        if group.is_in(GroupState.EMPTY):
            return WriteResult(ErrorCode.unknown_member_id)
        self.rebalance.reschedule_heartbeat(group, group.members[member_id])
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return WriteResult(ErrorCode.rebalance_in_progress)
        return WriteResult(ErrorCode.none)

    def leave(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> WriteResult[tuple[ErrorCode, list[ErrorCode]]]:
        cg = self.consumer.groups.get(group_id)
        if cg is not None:
            return self.classic_members.leave(cg, members)
        group = self.groups.get(group_id)
        if group is None:
            return WriteResult((ErrorCode.unknown_member_id, []))
        if group.is_in(GroupState.DEAD):
            return WriteResult((ErrorCode.coordinator_not_available, []))
        errors: list[ErrorCode] = []
        records: list[Record] = []
        for member_id, instance_id in members:
            if instance_id is not None:
                existing = group.static_members.get(instance_id)
                if existing is None:
                    errors.append(ErrorCode.unknown_member_id)
                    continue
                if member_id and member_id != existing:
                    errors.append(ErrorCode.fenced_instance_id)
                    continue
                member_id = existing
            if member_id in group.pending_join:
                group.pending_join.discard(member_id)
                self.rebalance.cancel_heartbeat(group_id, member_id)
                records += self.rebalance.maybe_complete_join(group)
                errors.append(ErrorCode.none)
                continue
            member = group.members.get(member_id)
            if member is None:
                errors.append(ErrorCode.unknown_member_id)
                continue
            records += self.rebalance.remove_member(group, member)
            errors.append(ErrorCode.none)
        return WriteResult((ErrorCode.none, errors), records)
