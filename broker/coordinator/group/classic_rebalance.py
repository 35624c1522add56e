"""The rebalance of a classic group (Kafka's ClassicGroup flow): preparing it, completing the
join phase (with the initial delay), waiting for SyncGroup, and the timers that expire members.

Also the small helpers the classic group RPCs answer with (ready futures, join responses, the
group record a rebalance persists).
"""

import asyncio

from kio.schema.errors import ErrorCode

from broker.coordinator.group import records as rec
from broker.coordinator.group.classic import (
    ClassicGroup,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
)
from broker.coordinator.group.shard_state import ShardState, heartbeat_key, join_key, sync_key
from broker.coordinator.runtime import Record, WriteResult


class ClassicRebalance(ShardState):
    @staticmethod
    def _future(result: JoinResult | SyncResult | None = None) -> "asyncio.Future[object]":
        fut: asyncio.Future[object] = asyncio.get_running_loop().create_future()
        if result is not None:
            fut.set_result(result)
        return fut

    def _join_done(
        self, error: ErrorCode, member_id: str = ""
    ) -> WriteResult["asyncio.Future[JoinResult]"]:
        return WriteResult(self._future(JoinResult(error, member_id=member_id)))  # type: ignore[arg-type]

    def _sync_done(self, error: ErrorCode) -> WriteResult["asyncio.Future[SyncResult]"]:
        return WriteResult(self._future(SyncResult(error)))  # type: ignore[arg-type]

    def _group_record(self, group: ClassicGroup, assignments: dict[str, bytes]) -> Record:
        members = tuple(
            rec.MemberValue(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=m.rebalance_timeout_ms,
                session_timeout_ms=m.session_timeout_ms,
                subscription=m.metadata(group.protocol_name),
                assignment=assignments.get(m.member_id, b""),
            )
            for m in group.members.values()
        )
        value = rec.GroupValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation,
            protocol=group.protocol_name,
            leader=group.leader_id,
            current_state_timestamp=group.state_timestamp,
            members=members,
        )
        return rec.group_key(group.group_id), rec.group_value(value)

    def _reschedule_heartbeat(self, group: ClassicGroup, member: Member) -> None:
        gid, mid = group.group_id, member.member_id
        self.ctx.schedule(
            heartbeat_key(gid, mid),
            member.session_timeout_ms,
            lambda s: s._expire_heartbeat(gid, mid),
        )

    def _join_response(self, group: ClassicGroup, member: Member, skip: bool = False) -> JoinResult:
        is_leader = group.leader_id == member.member_id
        return JoinResult(
            ErrorCode.none,
            member_id=member.member_id,
            generation_id=group.generation,
            protocol_type=group.protocol_type,
            protocol_name=group.protocol_name,
            leader=group.leader_id or "",
            skip_assignment=skip and is_leader,
            members=group.leader_members() if is_leader else [],
        )

    # -- rebalance machinery (Kafka's ClassicGroup flow) ------------------------------------

    def _remove_member(self, group: ClassicGroup, member: Member) -> list[Record]:
        member.complete_join(JoinResult(ErrorCode.unknown_member_id, member_id=member.member_id))
        member.complete_sync(SyncResult(ErrorCode.unknown_member_id))
        self.ctx.cancel(heartbeat_key(group.group_id, member.member_id))
        group.remove(member.member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            return self._prepare_rebalance(group)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return self._maybe_complete_join(group)
        return []

    def _prepare_rebalance(self, group: ClassicGroup) -> list[Record]:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            for member in group.members.values():
                member.assignment = b""
                member.complete_sync(SyncResult(ErrorCode.rebalance_in_progress))
        self.ctx.cancel(sync_key(group.group_id))
        gid = group.group_id
        delay = self.config.initial_rebalance_delay_ms
        initial = group.is_in(GroupState.EMPTY) and delay > 0
        group.transition(GroupState.PREPARING_REBALANCE, self._now())
        if initial:
            group.initial_delay_pending = True
            group.new_member_added = False
            remaining = max(group.rebalance_timeout_ms - delay, 0)
            self.ctx.schedule(
                join_key(gid), delay, lambda s: s._initial_delayed_join(gid, delay, remaining)
            )
            return []
        self.ctx.schedule(
            join_key(gid), group.rebalance_timeout_ms, lambda s: s._complete_join_timer(gid)
        )
        return self._maybe_complete_join(group)

    def _initial_delayed_join(self, group_id: str, delay: int, remaining: int) -> WriteResult[None]:
        group = self.groups.get(group_id)
        if group is None or not group.is_in(GroupState.PREPARING_REBALANCE):
            return WriteResult(None)
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            step = min(delay, remaining)
            self.ctx.schedule(
                join_key(group_id),
                step,
                lambda s: s._initial_delayed_join(group_id, delay, max(remaining - delay, 0)),
            )
            return WriteResult(None)
        group.initial_delay_pending = False
        return WriteResult(None, self._complete_join(group))

    def _complete_join_timer(self, group_id: str) -> WriteResult[None]:
        group = self.groups.get(group_id)
        if group is None or not group.is_in(GroupState.PREPARING_REBALANCE):
            return WriteResult(None)
        return WriteResult(None, self._complete_join(group))

    def _maybe_complete_join(self, group: ClassicGroup) -> list[Record]:
        if (
            group.is_in(GroupState.PREPARING_REBALANCE)
            and not group.initial_delay_pending
            and group.all_joined()
        ):
            return self._complete_join(group)
        return []

    def _maybe_prepare_or_complete(self, group: ClassicGroup) -> list[Record]:
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            return self._prepare_rebalance(group)
        return self._maybe_complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> list[Record]:
        gid = group.group_id
        self.ctx.cancel(join_key(gid))
        for member in list(group.members.values()):
            if not member.awaiting_join and member.group_instance_id is None:
                self.ctx.cancel(heartbeat_key(gid, member.member_id))
                group.remove(member.member_id)
        if group.is_in(GroupState.DEAD):
            return []
        if not group.elect_joined_leader() and group.members:
            # nobody rejoined (only static members left): wait another round
            self.ctx.schedule(
                join_key(gid), group.rebalance_timeout_ms, lambda s: s._complete_join_timer(gid)
            )
            return []
        group.init_next_generation(self._now())
        if group.is_in(GroupState.EMPTY):
            return [self._group_record(group, {})]
        for member in group.members.values():
            member.complete_join(self._join_response(group, member))
            self._reschedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        generation = group.generation
        self.ctx.schedule(
            sync_key(gid),
            group.rebalance_timeout_ms,
            lambda s: s._expire_pending_sync(gid, generation),
        )
        return []

    def _expire_pending_sync(self, group_id: str, generation: int) -> WriteResult[None]:
        group = self.groups.get(group_id)
        if group is None or group.generation != generation:
            return WriteResult(None)
        if not group.is_in(GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return WriteResult(None)
        for member_id in list(group.pending_sync):
            member = group.members.get(member_id)
            if member is not None:
                member.complete_sync(SyncResult(ErrorCode.unknown_member_id))
            self.ctx.cancel(heartbeat_key(group_id, member_id))
            group.remove(member_id)
        return WriteResult(None, self._prepare_rebalance(group))

    def _expire_heartbeat(self, group_id: str, member_id: str) -> WriteResult[None]:
        group = self.groups.get(group_id)
        if group is None:
            return WriteResult(None)
        member = group.members.get(member_id)
        if member is None:
            return WriteResult(None)
        if member.awaiting_join or member.awaiting_sync:
            # the join/sync timers bound these waits
            self._reschedule_heartbeat(group, member)
            return WriteResult(None)
        return WriteResult(None, self._remove_member(group, member))

    def _expire_pending_member(self, group_id: str, member_id: str) -> WriteResult[None]:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.pending_join:
            return WriteResult(None)
        group.pending_join.discard(member_id)
        return WriteResult(None, self._maybe_complete_join(group))
