"""KIP-932 share groups of one `__consumer_offsets` shard: ShareGroupHeartbeat membership,
session timeouts, the `simple` server assignment and what ShareGroupDescribe reports.

Owned by `GroupShard`, beside the classic and consumer groups (one group id, one type). A
group is persisted in `__consumer_offsets` (`share_records`: its epoch, each member's metadata
and current epoch and assignment), so it survives a restart or a coordinator move; as in
`consumer_shard`, state changes in place before the append and the runtime rebuilds the shard
from the log if the append fails. Members share partitions, so there is no revocation: a
member moves to the group's target assignment at once and its epoch follows the group epoch.
Which share-partitions have state is kept per group too (`share_partition_states`, record 15):
what an empty group's offsets are described from and what DeleteGroups deletes.
"""

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from broker.coordinator.group import share_records as srec
from broker.coordinator.group import share_state_partitions as ssp
from broker.coordinator.group.config import GroupConfig
from broker.coordinator.group.consumer_describe import NamedPartitions
from broker.coordinator.group.consumer_group import TopicsView
from broker.coordinator.group.share_partition_states import SharePartitionStates
from broker.coordinator.group.timers import Timers
from broker.coordinator.runtime import Record, WriteResult

LEAVE_EPOCH = -1
ASSIGNOR = "simple"
SHARE_PROTOCOL_TYPE = "share"

Assignment = dict[uuid.UUID, frozenset[int]]


@dataclass(slots=True)
class ShareHeartbeatParams:
    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""


@dataclass(slots=True)
class ShareHeartbeatResult:
    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


@dataclass(slots=True)
class ShareMember:
    member_id: str
    epoch: int = 0
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    topic_names: tuple[str, ...] = ()
    assignment: Assignment = field(default_factory=dict)


@dataclass(slots=True)
class ShareGroup:
    group_id: str
    epoch: int = 0
    assignment_epoch: int = 0
    # the subscribed topics as last assigned: (name, id, partition count), sorted
    topology: tuple[tuple[str, uuid.UUID, int], ...] = ()
    members: dict[str, ShareMember] = field(default_factory=dict)

    def state(self) -> str:
        return "Stable" if self.members else "Empty"

    def subscribed(self, topics: TopicsView) -> tuple[tuple[str, uuid.UUID, int], ...]:
        names = {n for m in self.members.values() for n in m.topic_names}
        return tuple(sorted((n, *topics[n]) for n in names if n in topics))


@dataclass(slots=True)
class DescribedShareMember:
    member_id: str
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    topic_names: list[str]
    assignment: NamedPartitions


@dataclass(slots=True)
class DescribedShareGroup:
    group_id: str
    error: ErrorCode
    message: str | None = None
    state: str = ""
    epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = ASSIGNOR
    members: list[DescribedShareMember] = field(default_factory=list)


def simple_assign(
    members: Mapping[str, tuple[str, ...]], topology: tuple[tuple[str, uuid.UUID, int], ...]
) -> dict[str, Assignment]:
    """Kafka's `SimpleAssignor` idea, deterministically: per topic, its subscribers sorted by
    member id; with at least as many partitions as subscribers each partition goes to one
    member round-robin, with fewer each member gets one partition round-robin (a partition is
    then shared). Every subscriber gets something and every partition is consumed."""
    out: dict[str, dict[uuid.UUID, set[int]]] = {m: {} for m in members}
    for name, topic_id, count in topology:
        subs = sorted(m for m, names in members.items() if name in names)
        if not subs or count <= 0:
            continue
        if count >= len(subs):
            pairs = [(subs[p % len(subs)], p) for p in range(count)]
        else:
            pairs = [(m, i % count) for i, m in enumerate(subs)]
        for m, p in pairs:
            out[m].setdefault(topic_id, set()).add(p)
    return {m: {t: frozenset(ps) for t, ps in a.items()} for m, a in out.items()}


def _session_key(group_id: str, member_id: str) -> str:
    return f"sg-session-{group_id}-{member_id}"


def _member_record(group_id: str, m: ShareMember) -> Record:
    value = srec.MemberMetadata(m.rack_id, m.client_id, m.client_host, m.topic_names)
    return srec.member_metadata_key(group_id, m.member_id), srec.member_metadata_value(value)


def _current_record(group_id: str, m: ShareMember) -> Record:
    key = srec.current_member_key(group_id, m.member_id)
    return key, srec.current_member_value(m.epoch, m.assignment)


class ShareGroups:
    def __init__(
        self,
        timers: "Timers[ShareGroups]",
        config: GroupConfig,
        topics: Callable[[], TopicsView],
        other_type: Callable[[str], bool],
    ) -> None:
        self.timers = timers
        self.config = config
        self.topics = topics
        # whether a classic or consumer group holds the id (a share group cannot take it)
        self.other_type = other_type
        self.groups: dict[str, ShareGroup] = {}
        self.states = SharePartitionStates(timers.now_ms, topics)

    # -- ShareGroupHeartbeat ---------------------------------------------------------------------

    @staticmethod
    def _invalid(p: ShareHeartbeatParams) -> ShareHeartbeatResult | None:
        def bad(message: str) -> ShareHeartbeatResult:
            return ShareHeartbeatResult(ErrorCode.invalid_request, message)

        if not p.group_id:
            return bad("GroupId can't be empty.")
        if not p.member_id:
            return bad("MemberId can't be empty.")
        if p.rack_id == "":
            return bad("RackId can't be empty.")
        if p.member_epoch < LEAVE_EPOCH:
            return bad(f"MemberEpoch {p.member_epoch} is invalid.")
        if p.member_epoch == 0 and not p.topic_names:
            return bad("SubscribedTopicNames must be set in first request.")
        return None

    def heartbeat(self, p: ShareHeartbeatParams) -> WriteResult[ShareHeartbeatResult]:
        invalid = self._invalid(p)
        if invalid is not None:
            return WriteResult(invalid)
        group = self.groups.get(p.group_id)
        if group is None and self.other_type(p.group_id):
            msg = f"Group {p.group_id} is not a share group."
            return WriteResult(ShareHeartbeatResult(ErrorCode.group_id_not_found, msg))
        if p.member_epoch == LEAVE_EPOCH:
            return self._leave(group, p)
        if group is None:
            if p.member_epoch != 0:
                msg = f"Group {p.group_id} not found."
                return WriteResult(ShareHeartbeatResult(ErrorCode.group_id_not_found, msg))
            group = self.groups[p.group_id] = ShareGroup(p.group_id)
        member = group.members.get(p.member_id)
        records: list[Record] = []
        bump = False
        if member is None:
            if p.member_epoch != 0:
                msg = f"Member {p.member_id} is not a member of group {p.group_id}."
                return WriteResult(ShareHeartbeatResult(ErrorCode.unknown_member_id, msg))
            if len(group.members) >= self.config.share_max_size:
                msg = f"The share group has reached its maximum of {self.config.share_max_size}."
                return WriteResult(ShareHeartbeatResult(ErrorCode.group_max_size_reached, msg))
            member = group.members[p.member_id] = ShareMember(p.member_id)
            bump = True
        elif p.member_epoch not in (0, member.epoch):
            msg = f"The member epoch {p.member_epoch} is fenced (current {member.epoch})."
            return WriteResult(ShareHeartbeatResult(ErrorCode.fenced_member_epoch, msg))
        metadata = (member.rack_id, member.client_id, member.client_host, member.topic_names)
        if p.topic_names is not None and tuple(p.topic_names) != member.topic_names:
            member.topic_names = tuple(p.topic_names)
            bump = True
        if p.rack_id is not None:
            member.rack_id = p.rack_id
        member.client_id, member.client_host = p.client_id, p.client_host
        if bump or metadata != (
            member.rack_id,
            member.client_id,
            member.client_host,
            member.topic_names,
        ):
            records.append(_member_record(group.group_id, member))
        records += self._maybe_assign(group, bump)
        before = (member.epoch, member.assignment)
        member.assignment = self._target(group, member.member_id)
        member.epoch = group.assignment_epoch
        if (member.epoch, member.assignment) != before:
            records.append(_current_record(group.group_id, member))
        self._schedule_session(group.group_id, member.member_id)
        send = p.member_epoch == 0 or member.assignment != before[1]
        return WriteResult(
            ShareHeartbeatResult(
                ErrorCode.none,
                member_id=member.member_id,
                member_epoch=member.epoch,
                heartbeat_interval_ms=self.config.share_heartbeat_ms(p.group_id),
                assignment=dict(member.assignment) if send else None,
            ),
            records,
        )

    def _target(self, group: ShareGroup, member_id: str) -> Assignment:
        members = {m.member_id: m.topic_names for m in group.members.values()}
        return simple_assign(members, group.topology).get(member_id, {})

    def _maybe_assign(self, group: ShareGroup, bump: bool) -> list[Record]:
        """A new group epoch (and target) when members or their topics' metadata changed."""
        topology = group.subscribed(self.topics())
        if not bump and topology == group.topology:
            return []
        group.epoch += 1
        group.topology = topology
        group.assignment_epoch = group.epoch
        return [
            (srec.group_metadata_key(group.group_id), srec.group_metadata_value(group.epoch)),
            *self.states.assigned(group.group_id, topology),
        ]

    def _leave(
        self, group: ShareGroup | None, p: ShareHeartbeatParams
    ) -> WriteResult[ShareHeartbeatResult]:
        if group is None:
            msg = f"Group {p.group_id} not found."
            return WriteResult(ShareHeartbeatResult(ErrorCode.group_id_not_found, msg))
        if p.member_id not in group.members:
            msg = f"Member {p.member_id} is not a member of group {p.group_id}."
            return WriteResult(ShareHeartbeatResult(ErrorCode.unknown_member_id, msg))
        records = self._remove(group, p.member_id)
        return WriteResult(
            ShareHeartbeatResult(ErrorCode.none, member_id=p.member_id, member_epoch=LEAVE_EPOCH),
            records,
        )

    def _remove(self, group: ShareGroup, member_id: str) -> list[Record]:
        self.timers.cancel(_session_key(group.group_id, member_id))
        del group.members[member_id]
        gid = group.group_id
        return [
            (srec.current_member_key(gid, member_id), None),
            (srec.member_metadata_key(gid, member_id), None),
            *self._maybe_assign(group, True),
        ]

    def _schedule_session(self, group_id: str, member_id: str) -> None:
        self.timers.schedule(
            _session_key(group_id, member_id),
            self.config.share_session_ms(group_id),
            lambda sg: sg.expire_member(group_id, member_id),
        )

    def expire_member(self, group_id: str, member_id: str) -> WriteResult[None]:
        """No heartbeat within the session timeout: the member is removed."""
        group = self.groups.get(group_id)
        if group is None or member_id not in group.members:
            return WriteResult(None)
        return WriteResult(None, self._remove(group, member_id))

    # -- describe, list, delete ----------------------------------------------------------------

    def describe(self, group_id: str) -> DescribedShareGroup:
        group = self.groups.get(group_id)
        if group is None:
            message = (
                f"Group {group_id} is not a share group."
                if self.other_type(group_id)
                else f"Group {group_id} not found."
            )
            return DescribedShareGroup(group_id, ErrorCode.group_id_not_found, message)
        names = {topic_id: name for name, (topic_id, _) in self.topics().items()}
        members = [
            DescribedShareMember(
                member_id=m.member_id,
                rack_id=m.rack_id,
                member_epoch=m.epoch,
                client_id=m.client_id,
                client_host=m.client_host,
                topic_names=list(m.topic_names),
                assignment=[
                    (t, names[t], sorted(ps))
                    for t, ps in sorted(m.assignment.items())
                    if t in names and ps
                ],
            )
            for m in group.members.values()
        ]
        return DescribedShareGroup(
            group_id,
            ErrorCode.none,
            state=group.state(),
            epoch=group.epoch,
            assignment_epoch=group.assignment_epoch,
            members=members,
        )

    def topic_names(self, group_id: str) -> list[str] | None:
        """The topics the group's members subscribe to; None when it is no share group."""
        group = self.groups.get(group_id)
        if group is None:
            return None
        return sorted({n for m in group.members.values() for n in m.topic_names})

    def delete(self, group_id: str) -> tuple[ErrorCode, list[Record]]:
        """DeleteGroups: only an empty share group goes (NON_EMPTY_GROUP otherwise); the
        tombstone of its record (the caller drops it from memory once committed)."""
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found, []
        if group.members:
            return ErrorCode.non_empty_group, []
        records = [(srec.group_metadata_key(group_id), None), *self.states.tombstones(group_id)]
        return ErrorCode.none, records

    def forget(self, group_id: str) -> None:
        """A deleted group leaves nothing behind (its tombstones are committed)."""
        self.groups.pop(group_id, None)
        self.states.parts.pop(group_id, None)

    def prepare_delete(
        self, group_ids: list[str]
    ) -> WriteResult[dict[str, tuple[ErrorCode, list[tuple[uuid.UUID, int]]]]]:
        """DeleteGroups, first step for the share groups among `group_ids` (others are left
        out): an empty one's known share-partitions move to deleting (record 15), and are
        returned for the share coordinator to drop; NON_EMPTY_GROUP for one with members."""
        out: dict[str, tuple[ErrorCode, list[tuple[uuid.UUID, int]]]] = {}
        records: list[Record] = []
        for gid in group_ids:
            group = self.groups.get(gid)
            if group is None:
                continue
            if group.members:
                out[gid] = (ErrorCode.non_empty_group, [])
                continue
            keys, marked = self.states.prepare_delete(gid)
            records += marked
            out[gid] = (ErrorCode.none, keys)
        return WriteResult(out, records)

    def initialized(self, group_id: str) -> dict[uuid.UUID, ssp.TopicParts] | None:
        """The share-partitions with initialized state; None when it is no share group."""
        if group_id not in self.groups:
            return None
        return self.states.initialized(group_id)

    def state_change_done(
        self,
        group_id: str,
        initialized: ssp.Parts,
        failed: ssp.Parts,
        deleted: list[uuid.UUID],
    ) -> WriteResult[ErrorCode]:
        """After the share coordinator answered an alter or delete of offsets (see
        `SharePartitionStates.done`)."""
        if group_id not in self.groups:
            return WriteResult(ErrorCode.group_id_not_found)
        return WriteResult(ErrorCode.none, self.states.done(group_id, initialized, failed, deleted))

    def offsets_change(
        self,
        group_id: str,
        create: bool,
        initializing: ssp.Parts,
        deleting: Mapping[uuid.UUID, str],
    ) -> WriteResult[tuple[ErrorCode, str]]:
        """Whether AlterShareGroupOffsets (`create`: a group not there yet is made, empty, as
        Kafka) or DeleteShareGroupOffsets may go ahead: only without members. If so, the
        partitions to initialize or topics to delete are marked so in record 15 (the caller
        calls `state_change_done` once the share coordinator answered)."""
        result = self._offsets_change(group_id, create)
        if result.response[0] == ErrorCode.none:
            marked = self.states.mark(group_id, initializing, deleting)
            result.records = [*result.records, *marked]
        return result

    def _offsets_change(self, group_id: str, create: bool) -> WriteResult[tuple[ErrorCode, str]]:
        group = self.groups.get(group_id)
        if group is None:
            if self.other_type(group_id):
                return WriteResult(
                    (ErrorCode.group_id_not_found, f"Group {group_id} is not a share group.")
                )
            if not create:
                return WriteResult((ErrorCode.group_id_not_found, f"Group {group_id} not found."))
            self.groups[group_id] = ShareGroup(group_id)
            record = (srec.group_metadata_key(group_id), srec.group_metadata_value(0))
            return WriteResult((ErrorCode.none, ""), [record])
        if group.members:
            return WriteResult((ErrorCode.non_empty_group, f"The group {group_id} is not empty."))
        return WriteResult((ErrorCode.none, ""))

    # -- loading ---------------------------------------------------------------------------------

    def replay(self, k: srec.ShareRecordKey, value: bytes | None) -> None:
        if k.record_type == srec.STATE_PARTITIONS:
            self.states.replay(k.group, value)
            return
        if k.record_type == srec.GROUP_METADATA:
            if value is None:
                self.groups.pop(k.group, None)
                return
            group = self.groups.setdefault(k.group, ShareGroup(k.group))
            group.epoch = group.assignment_epoch = srec.decode_group_metadata(value)
            return
        if value is None:
            known = self.groups.get(k.group)
            if known is not None:
                known.members.pop(k.member_id, None)
            return
        owner = self.groups.setdefault(k.group, ShareGroup(k.group))
        member = owner.members.setdefault(k.member_id, ShareMember(k.member_id))
        if k.record_type == srec.MEMBER_METADATA:
            m = srec.decode_member_metadata(value)
            member.rack_id, member.client_id, member.client_host = (
                m.rack_id,
                m.client_id,
                m.client_host,
            )
            member.topic_names = m.topic_names
        else:
            member.epoch, member.assignment = srec.decode_current_member(value)

    def on_loaded(self) -> None:
        # the topics as assigned (so a reload starts no new epoch), and a fresh session each
        topics = self.topics()
        for group in self.groups.values():
            group.topology = group.subscribed(topics)
            for member_id in group.members:
                self._schedule_session(group.group_id, member_id)

    def on_unloaded(self) -> None:
        self.groups.clear()
        self.states.parts.clear()
