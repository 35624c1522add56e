"""The rebalance of a classic group (Kafka's ClassicGroup flow): preparing it, completing the
join phase (with the initial delay), waiting for SyncGroup, and the timers that expire members.

Also the small helpers the classic group RPCs answer with (ready futures, join responses, the
group record a rebalance persists).
"""

import asyncio
from typing import TypeVar

from kio.schema.errors import ErrorCode

from broker.coordinator.group import records as rec
from broker.coordinator.group.classic import (
    ClassicGroup,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
)
from broker.coordinator.group.config import GroupConfig
from broker.coordinator.group.shard_state import heartbeat_key, join_key, sync_key
from broker.coordinator.group.timers import Timers
from broker.coordinator.runtime import Record, WriteResult

R = TypeVar("R", JoinResult, SyncResult)


def ready(result: R) -> "asyncio.Future[R]":
    """A future answered at once."""
    fut: asyncio.Future[R] = asyncio.get_running_loop().create_future()
    fut.set_result(result)
    return fut


def join_done(error: ErrorCode, member_id: str = "") -> WriteResult["asyncio.Future[JoinResult]"]:
    return WriteResult(ready(JoinResult(error, member_id=member_id)))


def sync_done(error: ErrorCode) -> WriteResult["asyncio.Future[SyncResult]"]:
    return WriteResult(ready(SyncResult(error)))


def group_record(group: ClassicGroup, assignments: dict[str, bytes]) -> Record:
    """The group's record: its generation, and each member with its assignment."""
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


def join_response(group: ClassicGroup, member: Member, skip: bool = False) -> JoinResult:
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


class ClassicRebalance:
    """Kafka's ClassicGroup flow over the shard's classic groups; its timers run on it."""

    def __init__(
        self,
        groups: dict[str, ClassicGroup],
        config: GroupConfig,
        timers: "Timers[ClassicRebalance]",
    ) -> None:
        self.groups = groups
        self.config = config
        self.timers = timers

    def _now(self) -> int:
        return self.timers.now_ms()

    def reschedule_heartbeat(self, group: ClassicGroup, member: Member) -> None:
        gid, mid = group.group_id, member.member_id
        self.timers.schedule(
            heartbeat_key(gid, mid),
            member.session_timeout_ms,
            lambda r: r._expire_heartbeat(gid, mid),
        )

    def expect_rejoin(self, group: ClassicGroup, member_id: str, session_timeout_ms: int) -> None:
        """A new member told its id (MEMBER_ID_REQUIRED) must join with it within its session
        timeout; the join phase waits for it until then."""
        gid = group.group_id
        group.pending_join.add(member_id)
        self.timers.schedule(
            heartbeat_key(gid, member_id),
            session_timeout_ms,
            lambda r: r._expire_pending_member(gid, member_id),
        )

    def cancel_heartbeat(self, group_id: str, member_id: str) -> None:
        self.timers.cancel(heartbeat_key(group_id, member_id))

    def cancel_sync(self, group_id: str) -> None:
        self.timers.cancel(sync_key(group_id))

    def cancel_timers(self, group: ClassicGroup) -> None:
        """Every timer of the group: its members' sessions and its join and sync phases."""
        gid = group.group_id
        for mid in list(group.members) + list(group.pending_join):
            self.timers.cancel(heartbeat_key(gid, mid))
        self.timers.cancel(join_key(gid))
        self.timers.cancel(sync_key(gid))

    # -- rebalance machinery (Kafka's ClassicGroup flow) ------------------------------------

    def remove_member(self, group: ClassicGroup, member: Member) -> list[Record]:
        member.complete_join(JoinResult(ErrorCode.unknown_member_id, member_id=member.member_id))
        member.complete_sync(SyncResult(ErrorCode.unknown_member_id))
        self.timers.cancel(heartbeat_key(group.group_id, member.member_id))
        group.remove(member.member_id)
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            return self.prepare_rebalance(group)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return self.maybe_complete_join(group)
        return []

    def prepare_rebalance(self, group: ClassicGroup) -> list[Record]:
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            for member in group.members.values():
                member.assignment = b""
                member.complete_sync(SyncResult(ErrorCode.rebalance_in_progress))
        self.timers.cancel(sync_key(group.group_id))
        gid = group.group_id
        delay = self.config.initial_rebalance_delay_ms
        initial = group.is_in(GroupState.EMPTY) and delay > 0
        group.transition(GroupState.PREPARING_REBALANCE, self._now())
        if initial:
            group.initial_delay_pending = True
            group.new_member_added = False
            remaining = max(group.rebalance_timeout_ms - delay, 0)
            self.timers.schedule(
                join_key(gid), delay, lambda r: r._initial_delayed_join(gid, delay, remaining)
            )
            return []
        self.timers.schedule(
            join_key(gid), group.rebalance_timeout_ms, lambda r: r._complete_join_timer(gid)
        )
        return self.maybe_complete_join(group)

    def _initial_delayed_join(self, group_id: str, delay: int, remaining: int) -> WriteResult[None]:
        group = self.groups.get(group_id)
        if group is None or not group.is_in(GroupState.PREPARING_REBALANCE):
            return WriteResult(None)
        if group.new_member_added and remaining > 0:
            group.new_member_added = False
            step = min(delay, remaining)
            self.timers.schedule(
                join_key(group_id),
                step,
                lambda r: r._initial_delayed_join(group_id, delay, max(remaining - delay, 0)),
            )
            return WriteResult(None)
        group.initial_delay_pending = False
        return WriteResult(None, self._complete_join(group))

    def _complete_join_timer(self, group_id: str) -> WriteResult[None]:
        group = self.groups.get(group_id)
        if group is None or not group.is_in(GroupState.PREPARING_REBALANCE):
            return WriteResult(None)
        return WriteResult(None, self._complete_join(group))

    def maybe_complete_join(self, group: ClassicGroup) -> list[Record]:
        if (
            group.is_in(GroupState.PREPARING_REBALANCE)
            and not group.initial_delay_pending
            and group.all_joined()
        ):
            return self._complete_join(group)
        return []

    def maybe_prepare_or_complete(self, group: ClassicGroup) -> list[Record]:
        if group.is_in(GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            return self.prepare_rebalance(group)
        return self.maybe_complete_join(group)

    def _complete_join(self, group: ClassicGroup) -> list[Record]:
        gid = group.group_id
        self.timers.cancel(join_key(gid))
        for member in list(group.members.values()):
            if not member.awaiting_join and member.group_instance_id is None:
                self.timers.cancel(heartbeat_key(gid, member.member_id))
                group.remove(member.member_id)
        if group.is_in(GroupState.DEAD):
            return []
        if not group.elect_joined_leader() and group.members:
            # nobody rejoined (only static members left): wait another round
            self.timers.schedule(
                join_key(gid), group.rebalance_timeout_ms, lambda r: r._complete_join_timer(gid)
            )
            return []
        group.init_next_generation(self._now())
        if group.is_in(GroupState.EMPTY):
            return [group_record(group, {})]
        for member in group.members.values():
            member.complete_join(join_response(group, member))
            self.reschedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        generation = group.generation
        self.timers.schedule(
            sync_key(gid),
            group.rebalance_timeout_ms,
            lambda r: r._expire_pending_sync(gid, generation),
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
            self.timers.cancel(heartbeat_key(group_id, member_id))
            group.remove(member_id)
        return WriteResult(None, self.prepare_rebalance(group))

    def _expire_heartbeat(self, group_id: str, member_id: str) -> WriteResult[None]:
        group = self.groups.get(group_id)
        if group is None:
            return WriteResult(None)
        member = group.members.get(member_id)
        if member is None:
            return WriteResult(None)
        if member.awaiting_join or member.awaiting_sync:
            # the join/sync timers bound these waits
            self.reschedule_heartbeat(group, member)
            return WriteResult(None)
        return WriteResult(None, self.remove_member(group, member))

    def _expire_pending_member(self, group_id: str, member_id: str) -> WriteResult[None]:
        group = self.groups.get(group_id)
        if group is None or member_id not in group.pending_join:
            return WriteResult(None)
        group.pending_join.discard(member_id)
        return WriteResult(None, self.maybe_complete_join(group))
