"""KIP-848 consumer groups of one `__consumer_offsets` shard: ConsumerGroupHeartbeat, the
session and revocation timers, the records that persist a group, and their replay.

Owned by `GroupShard` (which keeps the committed offsets and the classic groups); every public
method runs as (part of) one runtime operation. State is changed in place before the append: if
the append fails, the runtime rebuilds the shard from the log (no undo needed).
"""

import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace

from kio.schema.errors import ErrorCode

from broker.coordinator.group import consumer_records as crec
from broker.coordinator.group.assignors import ASSIGNORS
from broker.coordinator.group.config import GroupConfig
from broker.coordinator.group.consumer_describe import DescribedConsumerGroup, describe
from broker.coordinator.group.consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    InvalidRegex,
    TopicsView,
    can_downgrade,
    compile_regex,
    metadata_hash,
)
from broker.coordinator.group.consumer_offsets import ConsumerOffsetChecks
from broker.coordinator.group.consumer_replay import replay_record
from broker.coordinator.group.reconcile import (
    Assignment,
    MemberAssignment,
    MemberState,
    is_subset,
    reconcile,
)
from broker.coordinator.group.timers import Timers
from broker.coordinator.runtime import Record, WriteResult

LEAVE_EPOCH, STATIC_LEAVE_EPOCH = -1, -2


@dataclass(slots=True)
class HeartbeatParams:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topic_names: tuple[str, ...] | None = None
    topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Assignment | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


@dataclass(slots=True)
class HeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = -1
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


def _session_key(group_id: str, member_id: str) -> str:
    return f"cg-session-{group_id}-{member_id}"


def _revoke_key(group_id: str, member_id: str) -> str:
    return f"cg-revoke-{group_id}-{member_id}"


def join_key(group_id: str, member_id: str) -> str:
    """A classic member told to join again must do so within its rebalance timeout."""
    return f"cg-join-{group_id}-{member_id}"


def sync_key(group_id: str, member_id: str) -> str:
    """A classic member that joined must come to SyncGroup within its rebalance timeout."""
    return f"cg-sync-{group_id}-{member_id}"


def member_record(group_id: str, m: ConsumerMember) -> Record:
    value = crec.MemberMetadata(
        m.instance_id,
        m.rack_id,
        m.client_id,
        m.client_host,
        m.topic_names,
        m.topic_regex,
        m.rebalance_timeout_ms,
        m.server_assignor,
        m.classic,
    )
    return crec.member_metadata_key(group_id, m.member_id), crec.member_metadata_value(value)


def current_record(group_id: str, member_id: str, c: MemberAssignment) -> Record:
    value = crec.CurrentAssignment(
        c.epoch, c.previous_epoch, int(c.state), c.assigned, c.pending_revocation
    )
    return crec.current_member_key(group_id, member_id), crec.current_member_value(value)


class ConsumerGroups:
    def __init__(
        self,
        timers: "Timers[ConsumerGroups]",
        config: GroupConfig,
        topics: Callable[[], TopicsView],
        take_classic: Callable[[str, bool], str | list[Record]],
        downgrade: Callable[[ConsumerGroup, set[str], bool], list[Record]],
    ) -> None:
        self.timers = timers
        self.config = config
        self.topics = topics
        # converts a classic group of that id (True: may convert), or says why not (the
        # GROUP_ID_NOT_FOUND message)
        self.take_classic = take_classic
        # turns the group into a classic one without the leaving members (True: rebalance);
        # Kafka's online downgrade of a mixed group
        self.downgrade = downgrade
        self.groups: dict[str, ConsumerGroup] = {}
        self.offset_checks = ConsumerOffsetChecks(self.groups, topics)

    # -- ConsumerGroupHeartbeat ------------------------------------------------------------------

    def _invalid(self, p: HeartbeatParams) -> HeartbeatResult | None:
        def bad(code: ErrorCode, message: str) -> HeartbeatResult:
            return HeartbeatResult(code, message)

        if not p.group_id:
            return bad(ErrorCode.invalid_request, "GroupId can't be empty.")
        if p.instance_id == "":
            return bad(ErrorCode.invalid_request, "InstanceId can't be empty.")
        if p.rack_id == "":
            return bad(ErrorCode.invalid_request, "RackId can't be empty.")
        if p.member_epoch < STATIC_LEAVE_EPOCH:
            return bad(ErrorCode.invalid_request, f"MemberEpoch {p.member_epoch} is invalid.")
        if not p.member_id and not (p.api_version == 0 and p.member_epoch == 0):
            return bad(ErrorCode.invalid_request, "MemberId can't be empty.")
        if p.member_epoch == 0:
            if p.rebalance_timeout_ms == -1:
                return bad(ErrorCode.invalid_request, "RebalanceTimeoutMs must be provided.")
            if p.owned:
                return bad(ErrorCode.invalid_request, "TopicPartitions must be empty on join.")
            if p.topic_names is None and p.topic_regex is None:
                return bad(
                    ErrorCode.invalid_request,
                    "SubscribedTopicNames or SubscribedTopicRegex must be set on join.",
                )
        if (
            p.server_assignor is not None
            and p.server_assignor not in self.config.consumer_assignors
        ):
            return bad(ErrorCode.unsupported_assignor, f"{p.server_assignor} is not supported.")
        if p.topic_regex:  # librdkafka sends "" with topic names: no regex
            try:
                compile_regex(p.topic_regex)
            except InvalidRegex as exc:
                return bad(ErrorCode.invalid_regular_expression, str(exc))
        return None

    def heartbeat(self, p: HeartbeatParams) -> WriteResult[HeartbeatResult]:
        invalid = self._invalid(p)
        if invalid is not None:
            return WriteResult(invalid)
        if p.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
            return self._leave(p)
        records: list[Record] = []
        group = self.groups.get(p.group_id)
        if group is None:
            taken = self.take_classic(p.group_id, p.member_epoch == 0)
            if isinstance(taken, str):
                return WriteResult(HeartbeatResult(ErrorCode.group_id_not_found, taken))
            records += taken
            group = self.groups.get(p.group_id)  # a converted classic group, else a new one
            if group is None:
                group = ConsumerGroup(p.group_id, state_timestamp=self.timers.now_ms())
                self.groups[p.group_id] = group
        member_id = p.member_id or str(uuid.uuid4())
        member = group.members.get(member_id)
        if member is None and len(group.members) >= self.config.consumer_max_size:
            return WriteResult(
                HeartbeatResult(
                    ErrorCode.group_max_size_reached,
                    f"The consumer group has reached its maximum of "
                    f"{self.config.consumer_max_size} members.",
                )
            )
        if p.member_epoch == 0:
            joined = self._join(group, member_id, p, records)
            if isinstance(joined, HeartbeatResult):
                return WriteResult(joined)
            member, bump = joined
        else:
            if member is None or member.classic is not None:
                # (a member using the classic protocol heartbeats through Heartbeat)
                return WriteResult(
                    HeartbeatResult(ErrorCode.unknown_member_id, f"Member {member_id} unknown.")
                )
            if p.instance_id is not None and member.instance_id != p.instance_id:
                msg = f"Instance {p.instance_id} is not member {member_id}."
                return WriteResult(HeartbeatResult(ErrorCode.fenced_instance_id, msg))
            error = self._check_epoch(member, p)
            if error is not None:
                return WriteResult(error)
            bump = False
        bump |= self._update_member(group, member, p, records)
        return WriteResult(self.finish(group, member, p, records, bump), records)

    def _join(
        self, group: ConsumerGroup, member_id: str, p: HeartbeatParams, records: list[Record]
    ) -> tuple[ConsumerMember, bool] | HeartbeatResult:
        """The joining member, and whether the group epoch must move."""
        static = None
        if p.instance_id is not None:
            static = next(
                (m for m in group.members.values() if m.instance_id == p.instance_id), None
            )
        if static is not None and static.member_id != member_id:
            # a static member comes back under a new member id: it takes the place (and the
            # partitions) of its previous incarnation, once that one has left temporarily
            if static.current.epoch != STATIC_LEAVE_EPOCH and static.classic is None:
                msg = f"Instance {p.instance_id} is still in use by {static.member_id}."
                return HeartbeatResult(ErrorCode.unreleased_instance_id, msg)
            return self.replace_static(group, static, member_id, records), False
        if member_id in group.members:  # rejoining (after a fence): start over
            records += self._remove_records(group, member_id)
        member = ConsumerMember(member_id)
        group.members[member_id] = member
        return member, True

    def replace_static(
        self, group: ConsumerGroup, old: ConsumerMember, member_id: str, records: list[Record]
    ) -> ConsumerMember:
        gid = group.group_id
        target = group.targets.get(old.member_id)
        assigned = old.current.assigned
        records += self._remove_records(group, old.member_id)
        member = replace(
            old, member_id=member_id, current=MemberAssignment(0, 0, MemberState.STABLE)
        )
        group.members[member_id] = member
        if target is not None:
            group.targets[member_id] = target
            records.append(
                (crec.target_member_key(gid, member_id), crec.target_member_value(target))
            )
        group.set_current(member_id, MemberAssignment(0, 0, MemberState.STABLE, assigned))
        return member

    @staticmethod
    def _check_epoch(member: ConsumerMember, p: HeartbeatParams) -> HeartbeatResult | None:
        cur = member.current
        if p.member_epoch == cur.epoch:
            return None
        # A member that missed its last epoch bump may still use the previous epoch.
        if p.member_epoch == cur.previous_epoch and (
            p.owned is None or is_subset(p.owned, cur.assigned)
        ):
            return None
        return HeartbeatResult(
            ErrorCode.fenced_member_epoch,
            f"The member epoch {p.member_epoch} is fenced (current {cur.epoch}).",
        )

    def _update_member(
        self, group: ConsumerGroup, m: ConsumerMember, p: HeartbeatParams, records: list[Record]
    ) -> bool:
        """Apply the request's changed fields; True if the subscription changed."""
        before = replace(m, current=m.current)
        is_new = p.member_epoch == 0
        if p.topic_names is not None:
            m.topic_names = tuple(p.topic_names)
        if p.topic_regex is not None:
            m.topic_regex = p.topic_regex or None  # "" clears the regex
        if p.instance_id is not None:
            m.instance_id = p.instance_id
        if p.rack_id is not None:
            m.rack_id = p.rack_id
        if p.rebalance_timeout_ms > 0:
            m.rebalance_timeout_ms = p.rebalance_timeout_ms
        if p.server_assignor is not None:
            m.server_assignor = p.server_assignor
        m.client_id, m.client_host = p.client_id, p.client_host
        m.classic = None  # it speaks the consumer protocol (maybe replacing a classic static)
        if is_new or before != m:
            records.append(member_record(group.group_id, m))
        return (before.topic_names, before.topic_regex, before.server_assignor) != (
            m.topic_names,
            m.topic_regex,
            m.server_assignor,
        )

    def finish(
        self,
        group: ConsumerGroup,
        member: ConsumerMember,
        p: HeartbeatParams,
        records: list[Record],
        bump: bool,
    ) -> HeartbeatResult:
        gid, mid = group.group_id, member.member_id
        topics = self.topics()
        records += self._maybe_bump(group, topics, bump)
        records += self._maybe_assign(group, topics)
        before = member.current
        after = reconcile(
            before,
            group.assignment_epoch,
            group.targets.get(mid, {}),
            p.owned,
            group.held_by_other(mid),
        )
        if after != before:
            group.set_current(mid, after)
            records.append(current_record(gid, mid, after))
            if member.classic is not None:
                pass  # a classic member is bounded by its join and sync timers instead (Kafka)
            elif after.state is MemberState.UNREVOKED_PARTITIONS:
                self._schedule_revoke(gid, mid, after.epoch, member.rebalance_timeout_ms)
            else:
                self.timers.cancel(_revoke_key(gid, mid))
        self.schedule_session(gid, mid)
        # as Kafka: on joining, when the member reported what it owns, or when it changed
        send = p.member_epoch == 0 or p.owned is not None or after.assigned != before.assigned
        return HeartbeatResult(
            ErrorCode.none,
            member_id=mid,
            member_epoch=after.epoch,
            heartbeat_interval_ms=self.config.consumer_heartbeat_ms(gid),
            assignment=dict(after.assigned) if send else None,
        )

    def _maybe_bump(self, group: ConsumerGroup, topics: TopicsView, bump: bool) -> list[Record]:
        # Subscribed topics created, deleted or repartitioned change the hash: a new epoch.
        h = metadata_hash(group.subscribed_names(topics), topics) if group.members else 0
        if not bump and h == group.metadata_hash:
            return []
        group.epoch += 1
        group.metadata_hash = h
        return [
            (
                crec.group_metadata_key(group.group_id),
                crec.group_metadata_value(group.epoch, h),
            )
        ]

    def describe(self, group_id: str, is_classic: bool) -> DescribedConsumerGroup:
        group = self.groups.get(group_id)
        if group is None:
            message = (
                f"Group {group_id} is not a consumer group."
                if is_classic
                else f"Group {group_id} not found."
            )
            return DescribedConsumerGroup(group_id, ErrorCode.group_id_not_found, message)
        return describe(group, self.topics(), self._assignor_name(group))

    def _assignor_name(self, group: ConsumerGroup) -> str:
        votes = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
        if votes:
            return min(votes, key=lambda n: (-votes[n], n))
        return self.config.consumer_assignors[0]

    def _maybe_assign(self, group: ConsumerGroup, topics: TopicsView) -> list[Record]:
        if group.assignment_epoch >= group.epoch:
            return []
        gid = group.group_id
        names = group.subscribed_names(topics)
        partitions = {topics[n][0]: topics[n][1] for n in names}
        assignor = ASSIGNORS[self._assignor_name(group)]
        result = assignor.assign(group.specs(topics), partitions)
        records: list[Record] = []
        for mid in group.members:
            target = result.get(mid, {})
            if mid not in group.targets or group.targets[mid] != target:
                group.targets[mid] = target
                records.append((crec.target_member_key(gid, mid), crec.target_member_value(target)))
        group.assignment_epoch = group.epoch
        records.append((crec.target_metadata_key(gid), crec.target_metadata_value(group.epoch)))
        return records

    def delete_records(self, group_id: str) -> list[Record]:
        """Tombstones of an empty group (DeleteGroups, offset expiry)."""
        return [
            (crec.target_metadata_key(group_id), None),
            (crec.group_metadata_key(group_id), None),
        ]

    # -- leaving, fencing ----------------------------------------------------------------------

    def _remove_records(self, group: ConsumerGroup, member_id: str) -> list[Record]:
        gid = group.group_id
        for key in (_session_key, _revoke_key, join_key, sync_key):
            self.timers.cancel(key(gid, member_id))
        group.remove(member_id)
        if not group.members:
            group.state_timestamp = self.timers.now_ms()
        return [
            (crec.current_member_key(gid, member_id), None),
            (crec.target_member_key(gid, member_id), None),
            (crec.member_metadata_key(gid, member_id), None),
        ]

    def _fence(self, group: ConsumerGroup, member_id: str) -> list[Record]:
        return self.fence_many(group, [member_id])

    def to_classic(self, group: ConsumerGroup, leaving: set[str], rebalance: bool) -> list[Record]:
        """The records turning the group into a classic one without `leaving` (their timers
        and everyone else's go: the classic group keeps its own)."""
        for mid in group.members:
            for key in (_session_key, _revoke_key, join_key, sync_key):
                self.timers.cancel(key(group.group_id, mid))
        return self.downgrade(group, leaving, rebalance)

    def fence_many(self, group: ConsumerGroup, member_ids: list[str]) -> list[Record]:
        """Remove members; when only classic members would remain, the group may go back
        to the classic protocol instead (Kafka's online downgrade)."""
        if can_downgrade(
            group, set(member_ids), self.config.downgrade_enabled, self.config.max_group_size
        ):
            return self.to_classic(group, set(member_ids), rebalance=True)
        records: list[Record] = []
        for member_id in member_ids:
            records += self._remove_records(group, member_id)
        return records + self._maybe_bump(group, self.topics(), True)

    def _leave(self, p: HeartbeatParams) -> WriteResult[HeartbeatResult]:
        group = self.groups.get(p.group_id)
        if group is None:
            msg = f"Group {p.group_id} not found."
            return WriteResult(HeartbeatResult(ErrorCode.group_id_not_found, msg))
        if p.member_id not in group.members:
            msg = f"Member {p.member_id} unknown."
            return WriteResult(HeartbeatResult(ErrorCode.unknown_member_id, msg))
        member = group.members[p.member_id]
        if p.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
            # a static member leaving for a while keeps its partitions until its session ends
            gone = replace(member.current, epoch=STATIC_LEAVE_EPOCH)
            group.set_current(p.member_id, gone)
            self.timers.cancel(_revoke_key(group.group_id, p.member_id))
            return WriteResult(
                HeartbeatResult(ErrorCode.none, member_id=p.member_id, member_epoch=p.member_epoch),
                [current_record(group.group_id, p.member_id, gone)],
            )
        records = self._fence(group, p.member_id)
        return WriteResult(
            HeartbeatResult(ErrorCode.none, member_id=p.member_id, member_epoch=p.member_epoch),
            records,
        )

    def schedule_session(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        classic = member.classic if member is not None else None
        self.timers.schedule(
            _session_key(group_id, member_id),
            # a classic member keeps the session timeout of its JoinGroup
            classic.session_timeout_ms if classic else self.config.consumer_session_ms(group_id),
            lambda c: c.expire_member(group_id, member_id, None),
        )

    def _schedule_revoke(self, group_id: str, member_id: str, epoch: int, timeout: int) -> None:
        self.timers.schedule(
            _revoke_key(group_id, member_id),
            timeout,
            lambda c: c.expire_member(group_id, member_id, epoch),
        )

    def expire_member(self, group_id: str, member_id: str, epoch: int | None) -> WriteResult[None]:
        """Session timeout (epoch None), or a revocation not done within the rebalance
        timeout (the member still revoking at `epoch`): the member is fenced out."""
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return WriteResult(None)
        if epoch is not None and not (
            member.current.state is MemberState.UNREVOKED_PARTITIONS
            and member.current.epoch == epoch
        ):
            return WriteResult(None)
        return WriteResult(None, self._fence(group, member_id))

    # -- loading ---------------------------------------------------------------------------------

    def replay(self, key: crec.GroupKey | crec.MemberRecordKey, value: bytes | None) -> None:
        replay_record(self.groups, key, value, self.timers.now_ms())

    def on_loaded(self) -> None:
        # Reloaded members must heartbeat within a session; a revocation gets a fresh timeout.
        for group in self.groups.values():
            for member in group.members.values():
                self.schedule_session(group.group_id, member.member_id)
                revoking = member.current.state is MemberState.UNREVOKED_PARTITIONS
                if revoking and member.classic is None:
                    self._schedule_revoke(
                        group.group_id,
                        member.member_id,
                        member.current.epoch,
                        member.rebalance_timeout_ms,
                    )

    def on_unloaded(self) -> None:
        self.groups.clear()
