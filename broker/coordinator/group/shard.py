"""The group coordinator state machine of one `__consumer_offsets` partition.

Every public method is one runtime operation (run under the shard lock). Writes return a
`WriteResult`; JoinGroup and SyncGroup answer with a future that a later operation (another
member's request or a timer) completes.
"""

import asyncio
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from broker.coordinator.group import consumer_records as crec
from broker.coordinator.group import migration
from broker.coordinator.group import records as rec
from broker.coordinator.group import share_records as srec
from broker.coordinator.group.classic import (
    CONSUMER_PROTOCOL_TYPE,
    ClassicGroup,
    GroupState,
    JoinResult,
    Member,
    SyncResult,
)
from broker.coordinator.group.classic_members import ClassicMembers
from broker.coordinator.group.config import GroupConfig
from broker.coordinator.group.consumer_describe import classic_bytes
from broker.coordinator.group.consumer_group import ConsumerGroup, TopicsView
from broker.coordinator.group.consumer_shard import ConsumerGroups
from broker.coordinator.group.share_groups import SHARE_PROTOCOL_TYPE, ShareGroups
from broker.coordinator.group.txn_offsets import PendingTxnOffsets
from broker.coordinator.runtime import (
    AppendError,
    EndMarker,
    Record,
    ShardContext,
    WriteResult,
    append_error_code,
)

_EXPIRE_OFFSETS_KEY = "expire-offsets"
TopicPartition = tuple[str, int]


def _heartbeat_key(group_id: str, member_id: str) -> str:
    return f"heartbeat-{group_id}-{member_id}"


def _join_key(group_id: str) -> str:
    return f"join-{group_id}"


def _sync_key(group_id: str) -> str:
    return f"sync-{group_id}"


@dataclass(slots=True)
class JoinParams:
    group_id: str
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    require_known_member_id: bool
    supports_skip_assignment: bool


@dataclass(slots=True)
class SyncParams:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    assignments: dict[str, bytes]


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
class TxnCommitParams:
    """A TxnOffsetCommit: offsets pending until the producer's transaction ends."""

    group_id: str
    producer_id: int
    producer_epoch: int
    generation_id: int
    member_id: str
    group_instance_id: str | None
    items: list[CommitItem]


@dataclass(slots=True)
class FetchedOffset:
    partition: int
    offset: int
    leader_epoch: int
    metadata: str
    error: ErrorCode = ErrorCode.none


@dataclass(slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(slots=True)
class DescribedGroup:
    group_id: str
    error: ErrorCode
    state: str
    protocol_type: str
    protocol_data: str
    members: list[DescribedMember]


@dataclass(slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


def _commit_error(exc: BaseException) -> ErrorCode:
    # Offset commits report a too-large batch as INVALID_COMMIT_OFFSET_SIZE (as Kafka does).
    if isinstance(exc, AppendError) and exc.code in (
        ErrorCode.message_too_large,
        ErrorCode.record_list_too_large,
        ErrorCode.invalid_fetch_size,
    ):
        return ErrorCode.invalid_commit_offset_size
    return append_error_code(exc)


class GroupShard:
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
            self.ctx.cancel(_heartbeat_key(gid, mid))
        self.ctx.cancel(_join_key(gid))
        self.ctx.cancel(_sync_key(gid))
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

    def _has_group(self, group_id: str) -> bool:
        return group_id in self.groups or group_id in self.consumer.groups

    # -- loading -----------------------------------------------------------------------------

    def replay(self, key: bytes, value: bytes | None) -> None:
        k = rec.decode_key(key)
        if k is None:
            ck = crec.decode_key(key)
            if ck is not None:
                self.consumer.replay(ck, value)
                classic = self.groups.get(ck.group)
                if ck.group in self.consumer.groups and classic and classic.is_in(GroupState.EMPTY):
                    del self.groups[ck.group]  # the placeholder its offsets made
                return
            sk = srec.decode_key(key)
            if sk is not None:
                self.share.replay(sk, value)
            return
        if isinstance(k, rec.OffsetKey):
            tp = (k.topic, k.partition)
            if value is None:
                self.pending_txn.drop_partition(k.group, tp)
                group_offsets = self.offsets.get(k.group)
                if group_offsets is not None:
                    group_offsets.pop(tp, None)
                    if not group_offsets:
                        del self.offsets[k.group]
            else:
                self.offsets.setdefault(k.group, {})[tp] = rec.decode_offset_value(value)
                self.pending_txn.on_plain_commit(k.group, tp)
                # offsets alone make a (simple, empty) group, as in Kafka
                if not self._has_group(k.group):
                    self.groups[k.group] = ClassicGroup(k.group, self.ctx.now_ms())
        elif isinstance(k, rec.GroupKey):
            if value is None:
                self.groups.pop(k.group, None)
            else:
                self.groups[k.group] = self._group_from_record(
                    k.group, rec.decode_group_value(value)
                )

    def replay_transactional(self, key: bytes, value: bytes | None, producer_id: int) -> None:
        """A record of a TxnOffsetCommit batch: pending until the producer's marker."""
        k = rec.decode_key(key)
        if not isinstance(k, rec.OffsetKey) or value is None:
            self.replay(key, value)
            return
        self.pending_txn.add(
            producer_id, k.group, (k.topic, k.partition), rec.decode_offset_value(value)
        )
        if not self._has_group(k.group):
            self.groups[k.group] = ClassicGroup(k.group, self.ctx.now_ms())

    def replay_marker(self, producer_id: int, commit: bool) -> None:
        for group_id, tp, value in self.pending_txn.complete(producer_id, commit):
            self.offsets.setdefault(group_id, {})[tp] = value
            if not self._has_group(group_id):
                self.groups[group_id] = ClassicGroup(group_id, self.ctx.now_ms())

    def _group_from_record(self, group_id: str, v: rec.GroupValue) -> ClassicGroup:
        ts = v.current_state_timestamp if v.current_state_timestamp >= 0 else self.ctx.now_ms()
        group = ClassicGroup(group_id, ts)
        group.generation = v.generation
        group.protocol_type = v.protocol_type or None
        group.protocol_name = v.protocol
        for m in v.members:
            member = Member(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout_ms=(
                    m.rebalance_timeout_ms if m.rebalance_timeout_ms >= 0 else m.session_timeout_ms
                ),
                session_timeout_ms=m.session_timeout_ms,
                protocols=[(v.protocol or "", m.subscription)],
                assignment=m.assignment,
            )
            group.add(member, v.protocol_type)
        group.leader_id = v.leader if v.leader in group.members else group.leader_id
        group.state = GroupState.STABLE if group.members else GroupState.EMPTY
        return group

    def on_loaded(self) -> None:
        # Reloaded members keep their generation but must heartbeat within their session.
        for group in self.groups.values():
            for member in group.members.values():
                self._reschedule_heartbeat(group, member)
        self.consumer.on_loaded()
        self.share.on_loaded()
        self._schedule_offset_expiry()

    def on_unloaded(self) -> None:
        for group in self.groups.values():
            for member in group.members.values():
                member.complete_join(
                    JoinResult(ErrorCode.not_coordinator, member_id=member.member_id)
                )
                member.complete_sync(SyncResult(ErrorCode.not_coordinator))
        self.groups.clear()
        self.consumer.on_unloaded()
        self.share.on_unloaded()
        self.offsets.clear()
        self.pending_txn.clear()

    # -- helpers ----------------------------------------------------------------------------

    def _now(self) -> int:
        return self.ctx.now_ms()

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
            _heartbeat_key(gid, mid),
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
        self.ctx.cancel(_heartbeat_key(group.group_id, member.member_id))
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
        self.ctx.cancel(_sync_key(group.group_id))
        gid = group.group_id
        delay = self.config.initial_rebalance_delay_ms
        initial = group.is_in(GroupState.EMPTY) and delay > 0
        group.transition(GroupState.PREPARING_REBALANCE, self._now())
        if initial:
            group.initial_delay_pending = True
            group.new_member_added = False
            remaining = max(group.rebalance_timeout_ms - delay, 0)
            self.ctx.schedule(
                _join_key(gid), delay, lambda s: s._initial_delayed_join(gid, delay, remaining)
            )
            return []
        self.ctx.schedule(
            _join_key(gid), group.rebalance_timeout_ms, lambda s: s._complete_join_timer(gid)
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
                _join_key(group_id),
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
        self.ctx.cancel(_join_key(gid))
        for member in list(group.members.values()):
            if not member.awaiting_join and member.group_instance_id is None:
                self.ctx.cancel(_heartbeat_key(gid, member.member_id))
                group.remove(member.member_id)
        if group.is_in(GroupState.DEAD):
            return []
        if not group.elect_joined_leader() and group.members:
            # nobody rejoined (only static members left): wait another round
            self.ctx.schedule(
                _join_key(gid), group.rebalance_timeout_ms, lambda s: s._complete_join_timer(gid)
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
            _sync_key(gid),
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
            self.ctx.cancel(_heartbeat_key(group_id, member_id))
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

    # -- JoinGroup ----------------------------------------------------------------------------

    def join(self, p: JoinParams) -> WriteResult["asyncio.Future[JoinResult]"]:
        if not p.group_id:
            return self._join_done(ErrorCode.invalid_group_id, p.member_id)
        if not (
            self.config.min_session_timeout_ms
            <= p.session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            return self._join_done(ErrorCode.invalid_session_timeout, p.member_id)
        if not p.protocol_type or not p.protocols:
            return self._join_done(ErrorCode.inconsistent_group_protocol, p.member_id)
        if p.group_id in self.share.groups:  # a share group keeps its id
            return self._join_done(ErrorCode.inconsistent_group_protocol, p.member_id)
        if p.group_id in self.consumer.groups:
            # a KIP-848 group: a classic member joins one with members as a classic member
            # (mixed group), and takes over an empty one (converted back, as Kafka does)
            cg = self.consumer.groups[p.group_id]
            if cg.members:
                return self.classic_members.join(cg, p)
            converted = self.consumer.delete_records(p.group_id)
            del self.consumer.groups[p.group_id]
            self.groups[p.group_id] = ClassicGroup(p.group_id, self._now())  # keeps its offsets
            result = self.join(p)
            result.records[:0] = converted
            return result
        group = self.groups.get(p.group_id)
        created = group is None
        if group is None:
            if p.member_id:
                return self._join_done(ErrorCode.unknown_member_id, p.member_id)
            group = ClassicGroup(p.group_id, self._now())
            self.groups[p.group_id] = group
        if len(group.members) >= self.config.max_group_size and p.member_id not in group.members:
            return self._join_done(ErrorCode.group_max_size_reached, p.member_id)
        result = self._join_existing(group, p) if p.member_id else self._join_unknown(group, p)
        if created and group.is_empty and not group.pending_join and p.group_id not in self.offsets:
            self.groups.pop(p.group_id, None)  # the join failed; leave no trace
        return result

    def _join_unknown(
        self, group: ClassicGroup, p: JoinParams
    ) -> WriteResult["asyncio.Future[JoinResult]"]:
        if group.is_in(GroupState.DEAD):
            return self._join_done(ErrorCode.coordinator_not_available)
        if not group.supports_protocols(p.protocol_type, [n for n, _ in p.protocols]):
            return self._join_done(ErrorCode.inconsistent_group_protocol)
        new_id = f"{p.client_id}-{uuid.uuid4()}"
        if p.group_instance_id is not None:
            old_id = group.static_members.get(p.group_instance_id)
            if old_id is not None:
                return self._update_static_member(group, p, old_id, new_id)
            return self._add_member(group, p, new_id)
        if p.require_known_member_id:
            group.pending_join.add(new_id)
            gid = group.group_id
            self.ctx.schedule(
                _heartbeat_key(gid, new_id),
                p.session_timeout_ms,
                lambda s: s._expire_pending_member(gid, new_id),
            )
            return self._join_done(ErrorCode.member_id_required, new_id)
        return self._add_member(group, p, new_id)

    def _join_existing(
        self, group: ClassicGroup, p: JoinParams
    ) -> WriteResult["asyncio.Future[JoinResult]"]:
        if group.is_in(GroupState.DEAD):
            return self._join_done(ErrorCode.coordinator_not_available, p.member_id)
        if not group.supports_protocols(p.protocol_type, [n for n, _ in p.protocols]):
            return self._join_done(ErrorCode.inconsistent_group_protocol, p.member_id)
        if p.member_id in group.pending_join:
            return self._add_member(group, p, p.member_id)
        error = self._validate_member(group, p.member_id, p.group_instance_id)
        if error is not None:
            return self._join_done(error, p.member_id)
        member = group.members[p.member_id]
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return self._update_member(group, member, p)
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            if member.matches(p.protocols):
                # a retried join: answer with the generation it is already part of
                return WriteResult(self._future(self._join_response(group, member)))  # type: ignore[arg-type]
            return self._update_member(group, member, p)
        if group.is_in(GroupState.STABLE):
            if group.leader_id == member.member_id or not member.matches(p.protocols):
                return self._update_member(group, member, p)
            return WriteResult(self._future(self._join_response(group, member)))  # type: ignore[arg-type]
        return self._join_done(ErrorCode.unknown_member_id, p.member_id)

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
        self._reschedule_heartbeat(group, member)
        records = self._maybe_prepare_or_complete(group)
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
        records = self._maybe_prepare_or_complete(group)
        return WriteResult(fut, records)

    def _update_static_member(
        self, group: ClassicGroup, p: JoinParams, old_id: str, new_id: str
    ) -> WriteResult["asyncio.Future[JoinResult]"]:
        assert p.group_instance_id is not None
        instance = p.group_instance_id
        self.ctx.cancel(_heartbeat_key(group.group_id, old_id))
        member = group.replace_static_member(instance, old_id, new_id)
        self._reschedule_heartbeat(group, member)
        if group.is_in(GroupState.STABLE):
            old = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
            member.protocols = list(p.protocols)
            member.rebalance_timeout_ms = p.rebalance_timeout_ms
            member.session_timeout_ms = p.session_timeout_ms
            if group.select_protocol() != group.protocol_name:
                fut = self._new_join_future()
                member.join_future = fut
                return WriteResult(fut, self._prepare_rebalance(group))
            # Same protocol: persist the new member id and hand back the current generation.
            fut = self._new_join_future()
            assignments = {m.member_id: m.assignment for m in group.members.values()}
            record = self._group_record(group, assignments)
            leader_before = group.leader_id

            def committed() -> None:
                if not fut.done():
                    fut.set_result(self._join_response(group, member, p.supports_skip_assignment))

            def failed(exc: BaseException) -> "asyncio.Future[JoinResult]":
                member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms = old
                self.ctx.cancel(_heartbeat_key(group.group_id, new_id))
                restored = group.replace_static_member(instance, new_id, old_id)
                self._reschedule_heartbeat(group, restored)
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
            return WriteResult(fut, self._prepare_rebalance(group))
        return WriteResult(fut, self._maybe_complete_join(group))

    # -- SyncGroup ----------------------------------------------------------------------------

    def sync(self, p: SyncParams) -> WriteResult["asyncio.Future[SyncResult]"]:
        cg = self.consumer.groups.get(p.group_id)
        if cg is not None:
            return self.classic_members.sync(cg, p)
        group = self.groups.get(p.group_id)
        if group is None:
            return self._sync_done(ErrorCode.unknown_member_id)
        if group.is_in(GroupState.DEAD):
            return self._sync_done(ErrorCode.coordinator_not_available)
        error = self._validate_member(group, p.member_id, p.group_instance_id)
        if error is not None:
            return self._sync_done(error)
        if p.generation_id != group.generation:
            return self._sync_done(ErrorCode.illegal_generation)
        if (p.protocol_type is not None and p.protocol_type != group.protocol_type) or (
            p.protocol_name is not None and p.protocol_name != group.protocol_name
        ):
            return self._sync_done(ErrorCode.inconsistent_group_protocol)
        if group.is_in(GroupState.EMPTY):
            return self._sync_done(ErrorCode.unknown_member_id)
        if group.is_in(GroupState.PREPARING_REBALANCE):
            return self._sync_done(ErrorCode.rebalance_in_progress)
        member = group.members[p.member_id]
        self._reschedule_heartbeat(group, member)
        group.pending_sync.discard(member.member_id)
        if not group.pending_sync:
            self.ctx.cancel(_sync_key(group.group_id))
        if group.is_in(GroupState.STABLE):
            return WriteResult(
                self._future(  # type: ignore[arg-type]
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
            group.transition(GroupState.STABLE, self._now())

        def failed(exc: BaseException) -> "asyncio.Future[SyncResult]":
            error = append_error_code(exc)
            if current():
                for m in group.members.values():
                    m.assignment = b""
                    m.complete_sync(SyncResult(error))
                self._prepare_rebalance(group)
            if not fut.done():
                fut.set_result(SyncResult(error))
            return fut

        return WriteResult(
            fut, [self._group_record(group, assignments)], on_commit=committed, on_failure=failed
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
        error = self._validate_member(group, member_id, instance_id)
        if error is not None:
            return WriteResult(error)
        if generation_id != group.generation:
            return WriteResult(ErrorCode.illegal_generation)
        if group.is_in(GroupState.EMPTY):
            return WriteResult(ErrorCode.unknown_member_id)
        self._reschedule_heartbeat(group, group.members[member_id])
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
                self.ctx.cancel(_heartbeat_key(group_id, member_id))
                records += self._maybe_complete_join(group)
                errors.append(ErrorCode.none)
                continue
            member = group.members.get(member_id)
            if member is None:
                errors.append(ErrorCode.unknown_member_id)
                continue
            records += self._remove_member(group, member)
            errors.append(ErrorCode.none)
        return WriteResult((ErrorCode.none, errors), records)

    # -- offsets --------------------------------------------------------------------------------

    @staticmethod
    def _validate_commit(group: ClassicGroup, p: CommitParams) -> ErrorCode | None:
        if group.is_in(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        if p.generation_id < 0 and group.is_in(GroupState.EMPTY):
            return None  # a standalone (simple) commit
        if p.generation_id >= 0 or p.member_id or p.group_instance_id is not None:
            error = GroupShard._validate_member(group, p.member_id, p.group_instance_id)
            if error is not None:
                return error
            if p.generation_id != group.generation:
                return ErrorCode.illegal_generation
        elif not group.is_in(GroupState.EMPTY):
            return ErrorCode.unknown_member_id
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.rebalance_in_progress
        return None

    def commit_offsets(self, p: CommitParams) -> WriteResult[list[ErrorCode]]:
        def all_error(code: ErrorCode) -> WriteResult[list[ErrorCode]]:
            return WriteResult([code] * len(p.items))

        if not p.group_id:
            return all_error(ErrorCode.invalid_group_id)
        if p.group_id in self.share.groups:  # share groups keep no offsets (as Kafka)
            return all_error(ErrorCode.group_id_not_found)
        consumer = p.group_id in self.consumer.groups
        group = self.groups.get(p.group_id)
        created = False
        if consumer:
            group = ClassicGroup(p.group_id, self._now())  # offsets only: never registered
        elif group is None:
            if p.generation_id >= 0:
                return all_error(
                    ErrorCode.group_id_not_found
                    if p.api_version >= 9
                    else ErrorCode.illegal_generation
                )
            group = ClassicGroup(p.group_id, self._now())
            created = True
        error = (
            self.consumer.validate_commit(p.group_id, p.member_id, p.generation_id, p.api_version)
            if consumer
            else self._validate_commit(group, p)
        )
        if error is not None:
            return all_error(error)
        now = self._now()
        expire = now + p.retention_ms if p.retention_ms >= 0 else None
        errors: list[ErrorCode] = []
        records: list[Record] = []
        accepted: list[tuple[TopicPartition, rec.OffsetValue]] = []
        for item in p.items:
            metadata = item.metadata or ""
            if len(metadata) > self.config.offset_metadata_max_bytes:
                errors.append(ErrorCode.offset_metadata_too_large)
                continue
            value = rec.OffsetValue(item.offset, item.leader_epoch, metadata, now, expire)
            records.append(
                (rec.offset_key(p.group_id, item.topic, item.partition), rec.offset_value(value))
            )
            accepted.append(((item.topic, item.partition), value))
            errors.append(ErrorCode.none)
        new_group = group

        def committed() -> None:
            if created:
                self.groups.setdefault(p.group_id, new_group)
            if accepted:
                self.offsets.setdefault(p.group_id, {}).update(accepted)
                for tp, _ in accepted:
                    self.pending_txn.on_plain_commit(p.group_id, tp)

        def failed(exc: BaseException) -> list[ErrorCode]:
            code = _commit_error(exc)
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
        unstable = self.pending_txn.partitions(group_id) if require_stable else set()
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
        if group_id in self.share.groups:
            return WriteResult((ErrorCode.group_id_not_found, []))
        if group_id in self.consumer.groups:
            return self.consumer.delete_offsets(group_id, partitions, self._drop_offsets)
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
            self._drop_offsets(group_id, doomed)

        def failed(exc: BaseException) -> tuple[ErrorCode, list[ErrorCode]]:
            return (append_error_code(exc), [])

        return WriteResult((ErrorCode.none, errors), records, committed, failed)

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

    # -- transactional offsets (TxnOffsetCommit) -----------------------------------------------

    @staticmethod
    def _validate_txn_commit(group: ClassicGroup, p: TxnCommitParams) -> ErrorCode | None:
        # Kafka's checks for a transactional commit: members are validated when identified,
        # but the group state is not (old clients send no member id or generation).
        if group.is_in(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        if p.generation_id < 0 and group.is_in(GroupState.EMPTY):
            return None
        if p.generation_id >= 0 or p.member_id or p.group_instance_id is not None:
            error = GroupShard._validate_member(group, p.member_id, p.group_instance_id)
            if error is not None:
                return error
            if p.generation_id != group.generation:
                return ErrorCode.illegal_generation
        return None

    def txn_commit_offsets(self, p: TxnCommitParams) -> WriteResult[list[ErrorCode]]:
        """Append the offsets as a transactional batch of the producer; they stay pending
        until the producer's COMMIT/ABORT marker reaches this partition."""

        def all_error(code: ErrorCode) -> WriteResult[list[ErrorCode]]:
            return WriteResult([code] * len(p.items))

        if not p.group_id:
            return all_error(ErrorCode.invalid_group_id)
        if p.group_id in self.share.groups:
            return all_error(ErrorCode.group_id_not_found)
        group = self.groups.get(p.group_id)
        created = False
        consumer = p.group_id in self.consumer.groups
        if consumer:
            group = ClassicGroup(p.group_id, self._now())  # offsets only: never registered
        elif group is None:
            if p.generation_id >= 0:
                return all_error(ErrorCode.illegal_generation)
            group = ClassicGroup(p.group_id, self._now())
            created = True
        error = (
            self.consumer.validate_txn_commit(p.group_id, p.member_id, p.generation_id)
            if consumer
            else self._validate_txn_commit(group, p)
        )
        if error is not None:
            return all_error(error)
        now = self._now()
        errors: list[ErrorCode] = []
        records: list[Record] = []
        accepted: list[tuple[TopicPartition, rec.OffsetValue]] = []
        for item in p.items:
            metadata = item.metadata or ""
            if len(metadata) > self.config.offset_metadata_max_bytes:
                errors.append(ErrorCode.offset_metadata_too_large)
                continue
            value = rec.OffsetValue(item.offset, item.leader_epoch, metadata, now)
            records.append(
                (rec.offset_key(p.group_id, item.topic, item.partition), rec.offset_value(value))
            )
            accepted.append(((item.topic, item.partition), value))
            errors.append(ErrorCode.none)
        if not records:
            return WriteResult(errors)
        new_group = group

        def committed() -> None:
            if created:
                self.groups.setdefault(p.group_id, new_group)
            for tp, value in accepted:
                self.pending_txn.add(p.producer_id, p.group_id, tp, value)

        def failed(exc: BaseException) -> list[ErrorCode]:
            code = _commit_error(exc)
            return [code if e == ErrorCode.none else e for e in errors]

        return WriteResult(
            errors, records, committed, failed, producer=(p.producer_id, p.producer_epoch)
        )

    def complete_transaction(self, marker: EndMarker) -> WriteResult[ErrorCode]:
        """Write the producer's COMMIT/ABORT marker here; once durable its offsets become
        visible (COMMIT) or are dropped (ABORT)."""

        def committed() -> None:
            self.replay_marker(marker.producer_id, marker.commit)

        def failed(exc: BaseException) -> ErrorCode:
            return ErrorCode(int(append_error_code(exc)))

        return WriteResult(ErrorCode.none, [], committed, failed, marker=marker)

    # -- DeleteGroups / Describe / List ---------------------------------------------------------

    def delete_groups(self, group_ids: list[str]) -> WriteResult[dict[str, ErrorCode]]:
        results: dict[str, ErrorCode] = {}
        records: list[Record] = []
        doomed: list[str] = []
        for gid in group_ids:
            if gid in self.share.groups:
                code, share_records = self.share.delete(gid)
                results[gid] = code
                if code == ErrorCode.none:
                    records += share_records
                    doomed.append(gid)
                continue
            group = self.groups.get(gid)
            consumer = self.consumer.groups.get(gid)
            if consumer is None and (group is None or group.is_in(GroupState.DEAD)):
                results[gid] = ErrorCode.group_id_not_found
                continue
            live = (
                bool(consumer.members)
                if consumer
                else not (group and group.is_in(GroupState.EMPTY))
            )
            if live:
                results[gid] = ErrorCode.non_empty_group
                continue
            doomed_offsets = set(self.offsets.get(gid, {})) | self.pending_txn.partitions(gid)
            for topic, partition in sorted(doomed_offsets):
                records.append((rec.offset_key(gid, topic, partition), None))
            records += [(rec.group_key(gid), None)] if consumer is None else []
            records += self.consumer.delete_records(gid) if consumer else []
            doomed.append(gid)
            results[gid] = ErrorCode.none

        def committed() -> None:
            for gid in doomed:
                self._delete_group(gid)

        def failed(exc: BaseException) -> dict[str, ErrorCode]:
            code = append_error_code(exc)
            return {g: (code if g in doomed else e) for g, e in results.items()}

        return WriteResult(results, records, committed, failed)

    def _delete_group(self, group_id: str) -> None:
        self.consumer.groups.pop(group_id, None)
        self.share.forget(group_id)
        group = self.groups.pop(group_id, None)
        if group is not None:
            group.transition(GroupState.DEAD, self._now())
            self.ctx.cancel(_join_key(group_id))
            self.ctx.cancel(_sync_key(group_id))
        self.offsets.pop(group_id, None)
        self.pending_txn.drop_group(group_id)

    def describe(self, group_id: str) -> DescribedGroup:
        cg = self.consumer.groups.get(group_id)
        if cg is not None:
            topics = self.consumer.topics()
            members = [
                DescribedMember(
                    m.member_id,
                    m.instance_id,
                    m.client_id,
                    m.client_host,
                    *classic_bytes(m, topics),
                )
                for m in cg.members.values()
            ]
            return DescribedGroup(
                group_id, ErrorCode.none, cg.state(), CONSUMER_PROTOCOL_TYPE, "", members
            )
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return DescribedGroup(
                group_id, ErrorCode.group_id_not_found, GroupState.DEAD.value, "", "", []
            )
        stable = group.is_in(GroupState.STABLE)
        members = [
            DescribedMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(group.protocol_name) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in group.members.values()
        ]
        return DescribedGroup(
            group_id,
            ErrorCode.none,
            group.state.value,
            group.protocol_type or "",
            (group.protocol_name or "") if stable else "",
            members,
        )

    def list_groups(self) -> list[ListedGroup]:
        return (
            [
                ListedGroup(g.group_id, g.protocol_type or "", g.state.value)
                for g in self.groups.values()
                if not g.is_in(GroupState.DEAD)
            ]
            + [
                ListedGroup(gid, CONSUMER_PROTOCOL_TYPE, cg.state(), "consumer")
                for gid, cg in self.consumer.groups.items()
            ]
            + [
                ListedGroup(gid, SHARE_PROTOCOL_TYPE, sg.state(), "share")
                for gid, sg in self.share.groups.items()
            ]
        )

    # -- offset retention -------------------------------------------------------------------------

    def _schedule_offset_expiry(self) -> None:
        self.ctx.schedule(
            _EXPIRE_OFFSETS_KEY,
            self.config.offsets_retention_check_interval_ms,
            lambda s: s.expire_offsets(),
        )

    def _expired(
        self, group: ClassicGroup | None, tp: TopicPartition, v: rec.OffsetValue, now: int
    ) -> bool:
        if v.expire_timestamp is not None:
            return now >= v.expire_timestamp
        retention = self.config.offsets_retention_ms
        if group is None or group.protocol_type is None:
            return now - v.commit_timestamp >= retention  # simple group
        if group.is_in(GroupState.EMPTY):
            base = group.state_timestamp if group.state_timestamp >= 0 else v.commit_timestamp
            return now - base >= retention
        if group.protocol_type == CONSUMER_PROTOCOL_TYPE:
            topics = group.subscribed_topics()
            if topics is not None and tp[0] not in topics:
                return now - v.commit_timestamp >= retention
        return False

    def expire_offsets(self) -> WriteResult[None]:
        """Drop expired offsets, then empty groups left without offsets (Kafka's cleanup)."""
        self._schedule_offset_expiry()
        now = self._now()
        expired: dict[str, list[TopicPartition]] = {}
        records: list[Record] = []
        for gid, offsets in self.offsets.items():
            group = self.groups.get(gid)
            cg = self.consumer.groups.get(gid)
            if cg is not None and cg.members:
                continue  # a live consumer group keeps its offsets
            if cg is not None:  # an empty one keeps them for the retention after emptying
                group = ClassicGroup(gid, cg.state_timestamp)
                group.protocol_type = CONSUMER_PROTOCOL_TYPE
            for tp, v in offsets.items():
                # an offset a pending transaction may still replace does not expire yet
                if self._expired(group, tp, v, now) and not self.pending_txn.has_pending(gid, tp):
                    expired.setdefault(gid, []).append(tp)
                    records.append((rec.offset_key(gid, tp[0], tp[1]), None))
        dead_groups = [
            gid
            for gid, g in self.groups.items()
            if g.is_in(GroupState.EMPTY)
            and len(expired.get(gid, [])) == len(self.offsets.get(gid, {}))
            and not self.pending_txn.has_group(gid)
        ]
        records += [(rec.group_key(gid), None) for gid in dead_groups]
        dead_consumer = [
            gid
            for gid, cg in self.consumer.groups.items()
            if not cg.members
            and len(expired.get(gid, [])) == len(self.offsets.get(gid, {}))
            and not self.pending_txn.has_group(gid)
        ]
        for gid in dead_consumer:
            records += self.consumer.delete_records(gid)

        def committed() -> None:
            for gid, tps in expired.items():
                self._drop_offsets(gid, tps)
            for gid in dead_groups:
                group = self.groups.get(gid)
                if group is not None and group.is_in(GroupState.EMPTY) and gid not in self.offsets:
                    self._delete_group(gid)
            for gid in dead_consumer:
                cg = self.consumer.groups.get(gid)
                if cg is not None and not cg.members and gid not in self.offsets:
                    self._delete_group(gid)

        return WriteResult(None, records, on_commit=committed, on_failure=lambda exc: None)


ShardFactory = Callable[["ShardContext[GroupShard]"], GroupShard]
