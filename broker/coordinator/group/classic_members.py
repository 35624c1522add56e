"""The classic group RPCs (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) from members of a
KIP-848 consumer group that use the classic protocol (mixed groups, Kafka 4.x's rules; sans-IO).

A classic member is a `ConsumerMember` with `classic` set (its session timeout and JoinGroup
protocols, persisted as ClassicMemberMetadata). It reconciles like any member: its JoinGroup
reports what it still owns (the subscription's owned partitions) and is answered at its member
epoch, with no leader and no member list (the node assigns); its SyncGroup returns its assigned
partitions; its Heartbeat says REBALANCE_IN_PROGRESS whenever it must join again to revoke or to
receive partitions.
"""

import asyncio
import uuid
from typing import TypeVar

from kio.schema.errors import ErrorCode

from broker.coordinator.group import consumer_records as crec
from broker.coordinator.group.classic import (
    CONSUMER_PROTOCOL_TYPE,
    JoinParams,
    JoinResult,
    SyncParams,
    SyncResult,
)
from broker.coordinator.group.consumer_group import ConsumerGroup, ConsumerMember, can_downgrade
from broker.coordinator.group.consumer_shard import (
    ConsumerGroups,
    HeartbeatParams,
    join_key,
    member_record,
    sync_key,
)
from broker.coordinator.group.migration import (
    Subscription,
    decode_subscription,
    encode_assignment,
    to_ids,
)
from broker.coordinator.group.reconcile import MemberState
from broker.coordinator.group.timers import Timers
from broker.coordinator.runtime import Record, WriteResult

T = TypeVar("T")


def _done(result: T) -> "asyncio.Future[T]":
    """An answer ready at once: the node answers classic members itself, nobody to wait for."""
    fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
    fut.set_result(result)
    return fut


class ClassicMembers:
    """The classic group RPCs against a consumer group (Kafka's classicGroup*ToConsumerGroup)."""

    def __init__(self, consumer: ConsumerGroups) -> None:
        self.consumer = consumer

    @property
    def _timers(self) -> Timers[ConsumerGroups]:
        # a classic member's timers fence it out of the consumer group, as a consumer's do
        return self.consumer.timers

    def _member(
        self, cg: ConsumerGroup, member_id: str, instance_id: str | None
    ) -> ConsumerMember | ErrorCode:
        """Kafka's validateConsumerGroupMember plus "it uses the classic protocol"."""
        if instance_id is not None:
            member = next((m for m in cg.members.values() if m.instance_id == instance_id), None)
            if member is None:
                return ErrorCode.unknown_member_id
            if member.member_id != member_id:
                return ErrorCode.fenced_instance_id
        else:
            found = cg.members.get(member_id)
            if found is None:
                return ErrorCode.unknown_member_id
            member = found
        return member if member.classic is not None else ErrorCode.unknown_member_id

    @staticmethod
    def _supports(cg: ConsumerGroup, protocol_type: str, names: list[str]) -> bool:
        # Kafka's supportsClassicProtocols: the consumer protocol type, and one protocol every
        # classic member of the group also supports
        if protocol_type != CONSUMER_PROTOCOL_TYPE or not names:
            return False
        for m in cg.members.values():
            if m.classic is not None:
                theirs = {n for n, _ in m.classic.protocols}
                names = [n for n in names if n in theirs]
        return bool(names)

    # -- JoinGroup ------------------------------------------------------------------------------

    def join(self, cg: ConsumerGroup, p: JoinParams) -> WriteResult["asyncio.Future[JoinResult]"]:
        def fail(
            code: ErrorCode, member_id: str = p.member_id
        ) -> WriteResult["asyncio.Future[JoinResult]"]:
            return WriteResult(_done(JoinResult(code, member_id=member_id)))

        consumer = self.consumer
        unknown = not p.member_id
        member_id = p.member_id or str(uuid.uuid4())
        if member_id not in cg.members and len(cg.members) >= consumer.config.consumer_max_size:
            return fail(ErrorCode.group_max_size_reached)
        if not self._supports(cg, p.protocol_type, [n for n, _ in p.protocols]):
            return fail(ErrorCode.inconsistent_group_protocol)
        if unknown and p.require_known_member_id and p.group_instance_id is None:
            # the member comes back with this id; nothing is kept until then
            return fail(ErrorCode.member_id_required, member_id)
        sub = decode_subscription(p.protocols[0][1])
        if sub is None:
            return fail(ErrorCode.inconsistent_group_protocol)
        records: list[Record] = []
        static = self._static(cg, p.group_instance_id)
        # a restarted static instance that used the consumer protocol comes back classic
        replacing = (
            static is not None and unknown and static.member_id != member_id and not static.classic
        )
        is_new = member_id not in cg.members and static is None
        member = self._join_member(cg, p, member_id, unknown, static, records)
        if isinstance(member, ErrorCode):
            return fail(member)
        bump = self._update(cg, member, p, sub, is_new, records)
        topics = consumer.topics()
        owned = to_ids(dict(sub.owned), topics)
        hb = HeartbeatParams(cg.group_id, member.member_id, -1, owned=owned)
        result = consumer.finish(cg, member, hb, records, bump)
        gid, mid = cg.group_id, member.member_id
        self._timers.cancel(join_key(gid, mid))
        cfg = consumer.config
        if replacing and can_downgrade(cg, set(), cfg.downgrade_enabled, cfg.max_group_size):
            # it was the last consumer-protocol member: the group goes back to classic, and
            # rebalances only if the subscription changed (Kafka's downgrade on replacement)
            records += consumer.to_classic(cg, set(), rebalance=bump)
        else:
            # the member must come to SyncGroup within its rebalance timeout
            self._timers.schedule(
                sync_key(gid, mid),
                p.rebalance_timeout_ms,
                lambda c: c.expire_member(gid, mid, None),
            )
        response = JoinResult(
            ErrorCode.none,
            member_id=mid,
            generation_id=result.member_epoch,
            protocol_type=CONSUMER_PROTOCOL_TYPE,
            protocol_name=p.protocols[0][0],
        )
        return WriteResult(_done(response), records)

    @staticmethod
    def _static(cg: ConsumerGroup, instance_id: str | None) -> ConsumerMember | None:
        if instance_id is None:
            return None
        return next((m for m in cg.members.values() if m.instance_id == instance_id), None)

    def _join_member(
        self,
        cg: ConsumerGroup,
        p: JoinParams,
        member_id: str,
        unknown: bool,
        static: ConsumerMember | None,
        records: list[Record],
    ) -> ConsumerMember | ErrorCode:
        if static is not None:
            if static.member_id == member_id:
                return static
            if not unknown:
                return ErrorCode.fenced_instance_id
            # the instance restarted: the new member id takes its place and partitions
            return self.consumer.replace_static(cg, static, member_id, records)
        if p.group_instance_id is not None and not unknown:
            return ErrorCode.unknown_member_id
        existing = cg.members.get(member_id)
        if existing is not None:
            return existing if existing.classic is not None else ErrorCode.unknown_member_id
        member = ConsumerMember(member_id)
        cg.members[member_id] = member
        return member

    def _update(
        self,
        cg: ConsumerGroup,
        m: ConsumerMember,
        p: JoinParams,
        sub: Subscription,
        is_new: bool,
        records: list[Record],
    ) -> bool:
        """Take the JoinGroup's fields; True when the group epoch must move."""
        before = (m.topic_names, m.topic_regex, m.server_assignor)
        old = (
            m.instance_id,
            m.rack_id,
            m.client_id,
            m.client_host,
            m.rebalance_timeout_ms,
            m.classic,
        )
        m.instance_id = p.group_instance_id
        m.rack_id = sub.rack_id
        m.topic_names = tuple(sorted(set(sub.topics)))
        m.topic_regex = None
        m.server_assignor = None
        m.rebalance_timeout_ms = p.rebalance_timeout_ms
        m.client_id, m.client_host = p.client_id, p.client_host
        m.classic = crec.ClassicMeta(p.session_timeout_ms, tuple(p.protocols))
        changed = before != (m.topic_names, m.topic_regex, m.server_assignor)
        if (
            is_new
            or changed
            or old
            != (
                m.instance_id,
                m.rack_id,
                m.client_id,
                m.client_host,
                m.rebalance_timeout_ms,
                m.classic,
            )
        ):
            records.append(member_record(cg.group_id, m))
        return is_new or changed

    # -- SyncGroup ------------------------------------------------------------------------------

    def sync(self, cg: ConsumerGroup, p: SyncParams) -> WriteResult["asyncio.Future[SyncResult]"]:
        def fail(code: ErrorCode) -> WriteResult["asyncio.Future[SyncResult]"]:
            return WriteResult(_done(SyncResult(code)))

        member = self._member(cg, p.member_id, p.group_instance_id)
        if isinstance(member, ErrorCode):
            return fail(member)
        assert member.classic is not None
        if p.generation_id != member.current.epoch:
            return fail(ErrorCode.illegal_generation)
        name = member.classic.protocols[0][0] if member.classic.protocols else ""
        if (p.protocol_type is not None and p.protocol_type != CONSUMER_PROTOCOL_TYPE) or (
            p.protocol_name is not None and p.protocol_name != name
        ):
            return fail(ErrorCode.inconsistent_group_protocol)
        if self._must_rejoin_at_sync(cg, member):
            return fail(ErrorCode.rebalance_in_progress)
        gid, mid = cg.group_id, member.member_id
        self._timers.cancel(sync_key(gid, mid))
        self.consumer.schedule_session(gid, mid)
        metadata = member.classic.protocols[0][1] if member.classic.protocols else b""
        assignment = encode_assignment(member.current.assigned, self.consumer.topics(), metadata)
        return WriteResult(
            _done(SyncResult(ErrorCode.none, CONSUMER_PROTOCOL_TYPE, name, assignment))
        )

    def _must_rejoin_at_sync(self, cg: ConsumerGroup, member: ConsumerMember) -> bool:
        # a newer group epoch means another join; but a member still revoking has just joined
        # and must first take the partitions it keeps (its next join follows the revocation)
        if (
            cg.epoch > member.current.epoch
            and member.current.state is not MemberState.UNREVOKED_PARTITIONS
        ):
            self._schedule_join_timeout(cg.group_id, member)
            return True
        return False

    def _schedule_join_timeout(self, gid: str, member: ConsumerMember) -> None:
        mid = member.member_id
        key = join_key(gid, mid)
        if not self._timers.is_scheduled(key):
            self._timers.schedule(
                key, member.rebalance_timeout_ms, lambda c: c.expire_member(gid, mid, None)
            )

    # -- Heartbeat ------------------------------------------------------------------------------

    def heartbeat(
        self, cg: ConsumerGroup, generation_id: int, member_id: str, instance_id: str | None
    ) -> WriteResult[ErrorCode]:
        member = self._member(cg, member_id, instance_id)
        if isinstance(member, ErrorCode):
            return WriteResult(member)
        if generation_id != member.current.epoch:
            return WriteResult(ErrorCode.illegal_generation)
        self.consumer.schedule_session(cg.group_id, member.member_id)
        # join again: to catch up with a new group epoch, to revoke, or to take partitions
        # that other members have released meanwhile
        state = member.current.state
        if (
            member.current.epoch < cg.epoch
            or state is MemberState.UNREVOKED_PARTITIONS
            or (state is MemberState.UNRELEASED_PARTITIONS and not self._waiting(cg, member))
        ):
            self._schedule_join_timeout(cg.group_id, member)
            return WriteResult(ErrorCode.rebalance_in_progress)
        return WriteResult(ErrorCode.none)

    @staticmethod
    def _waiting(cg: ConsumerGroup, member: ConsumerMember) -> bool:
        held = cg.held_by_other(member.member_id)
        target = cg.targets.get(member.member_id, {})
        return any(
            held(t, p)
            for t, ps in target.items()
            for p in ps - member.current.assigned.get(t, frozenset())
        )

    # -- LeaveGroup -----------------------------------------------------------------------------

    def leave(
        self, cg: ConsumerGroup, members: list[tuple[str, str | None]]
    ) -> WriteResult[tuple[ErrorCode, list[ErrorCode]]]:
        errors: list[ErrorCode] = []
        leaving: list[str] = []
        for member_id, instance_id in members:
            if instance_id is not None and not member_id:
                # an admin removes a static member by instance id alone
                static = next(
                    (m for m in cg.members.values() if m.instance_id == instance_id), None
                )
                member_id = static.member_id if static is not None else ""
            found = self._member(cg, member_id, instance_id)
            if isinstance(found, ErrorCode):
                errors.append(found)
                continue
            if found.member_id not in leaving:
                leaving.append(found.member_id)
            errors.append(ErrorCode.none)
        records = self.consumer.fence_many(cg, leaving) if leaving else []
        return WriteResult((ErrorCode.none, errors), records)
