"""KIP-848 mixed groups (sans-IO): converting a classic group with members into a consumer
group and back (`group.consumer.migration.policy`, Kafka 4.x's online upgrade and downgrade),
and the consumer protocol's embedded subscription and assignment they go through. The classic
RPCs of members inside a consumer group are in `classic_members`.
"""

import struct
from dataclasses import dataclass

from kio.schema.consumer_protocol_assignment.v0.data import (
    ConsumerProtocolAssignment as AssignmentV0,
)
from kio.schema.consumer_protocol_assignment.v1.data import (
    ConsumerProtocolAssignment as AssignmentV1,
)
from kio.schema.consumer_protocol_assignment.v2.data import (
    ConsumerProtocolAssignment as AssignmentV2,
)
from kio.schema.consumer_protocol_assignment.v3 import data as cpa
from kio.schema.consumer_protocol_subscription.v0.data import (
    ConsumerProtocolSubscription as SubscriptionV0,
)
from kio.schema.consumer_protocol_subscription.v1.data import (
    ConsumerProtocolSubscription as SubscriptionV1,
)
from kio.schema.consumer_protocol_subscription.v2.data import (
    ConsumerProtocolSubscription as SubscriptionV2,
)
from kio.schema.consumer_protocol_subscription.v3.data import (
    ConsumerProtocolSubscription as SubscriptionV3,
)
from kio.schema.types import TopicName
from kio.static.primitive import i32

from broker.coordinator.group import consumer_records as crec
from broker.coordinator.group.classic import (
    CONSUMER_PROTOCOL_TYPE,
    ClassicGroup,
    GroupState,
    Member,
)
from broker.coordinator.group.consumer_group import (
    ConsumerGroup,
    ConsumerMember,
    TopicsView,
    metadata_hash,
)
from broker.coordinator.group.consumer_shard import current_record, member_record
from broker.coordinator.group.reconcile import Assignment, MemberAssignment, MemberState
from broker.coordinator.record_framing import encode_prefixed
from broker.coordinator.runtime import Record
from protocol import lenient

_SUBSCRIPTIONS: tuple[type, ...] = (SubscriptionV0, SubscriptionV1, SubscriptionV2, SubscriptionV3)
_ASSIGNMENTS: tuple[type, ...] = (
    AssignmentV0,
    AssignmentV1,
    AssignmentV2,
    cpa.ConsumerProtocolAssignment,
)


@dataclass(frozen=True, slots=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    owned: dict[str, frozenset[int]]
    rack_id: str | None


def _version(data: bytes) -> int | None:
    if len(data) < 2:
        return None
    (version,) = struct.unpack_from(">h", data)
    return version if version >= 0 else None


def decode_subscription(data: bytes) -> Subscription | None:
    """A classic member's ConsumerProtocolSubscription, None when it does not parse (a newer
    version is read as the newest we know: the format only grows)."""
    version = _version(data)
    if version is None:
        return None
    try:
        sub, _ = lenient.decode(_SUBSCRIPTIONS[min(version, 3)], data, 2)
    except Exception:
        return None
    owned: dict[str, frozenset[int]] = {}
    for tp in getattr(sub, "owned_partitions", ()):
        owned[str(tp.topic)] = owned.get(str(tp.topic), frozenset()) | {
            int(p) for p in tp.partitions
        }
    return Subscription(
        version, tuple(str(t) for t in sub.topics), owned, getattr(sub, "rack_id", None)
    )


def decode_assignment(
    data: bytes, refuse_user_data: bool = False
) -> dict[str, frozenset[int]] | None:
    """The partitions in a ConsumerProtocolAssignment by topic name ({} for no bytes); None
    when it does not parse, or carries user data and `refuse_user_data` (a custom assignor's
    data an upgrade would lose: Kafka refuses it)."""
    if not data:
        return {}
    version = _version(data)
    if version is None:
        return None
    try:
        a, _ = lenient.decode(_ASSIGNMENTS[min(version, 3)], data, 2)
    except Exception:
        return None
    if refuse_user_data and a.user_data:
        return None
    out: dict[str, frozenset[int]] = {}
    for tp in a.assigned_partitions:
        out[str(tp.topic)] = out.get(str(tp.topic), frozenset()) | {int(p) for p in tp.partitions}
    return out


def encode_assignment(assigned: Assignment, topics: TopicsView, metadata: bytes) -> bytes:
    """Assigned partitions as the ConsumerProtocolAssignment a classic consumer expects, in
    the version of its subscription (0-3 share one layout)."""
    names = {topic_id: name for name, (topic_id, _) in topics.items()}
    value = cpa.ConsumerProtocolAssignment(
        assigned_partitions=tuple(
            cpa.TopicPartition(
                topic=TopicName(names[t]), partitions=tuple(i32(p) for p in sorted(ps))
            )
            for t, ps in sorted(assigned.items(), key=lambda kv: names.get(kv[0], ""))
            if t in names and ps
        )
    )
    return encode_prefixed(min(_version(metadata) or 0, 3), value)


def to_ids(named: dict[str, frozenset[int]], topics: TopicsView) -> Assignment:
    # a topic deleted meanwhile has no id any more: its partitions are gone
    return {topics[n][0]: ps for n, ps in named.items() if n in topics and ps}


# -- upgrade: classic -> consumer -----------------------------------------------------------


def upgrade_refusal(group: ClassicGroup, enabled: bool, max_size: int) -> str | None:
    """Why Kafka's validateOnlineUpgrade refuses the group, None if it does not: the policy,
    a group not using the consumer protocol, or one larger than a consumer group may be."""
    if not enabled:
        return "the online upgrade is disabled (group.consumer.migration.policy)"
    if group.is_in(GroupState.DEAD) or group.protocol_type != CONSUMER_PROTOCOL_TYPE:
        return "the group does not use the consumer embedded protocol"
    if len(group.members) > max_size:
        return "the group is larger than group.consumer.max.size"
    return None


def from_classic(group: ClassicGroup, topics: TopicsView, now_ms: int) -> ConsumerGroup | None:
    """The consumer group a classic group becomes: every member keeps its current assignment
    (its target too) at the generation, as a stable classic member. None when a member's
    subscription or assignment does not parse, or the assignment has user data (Kafka then
    refuses the upgrade)."""
    gen = group.generation
    cg = ConsumerGroup(group.group_id, epoch=gen, assignment_epoch=gen, state_timestamp=now_ms)
    for m in group.members.values():
        meta = m.metadata(group.protocol_name) if group.protocol_name else b""
        if not meta and m.protocols:
            meta = m.protocols[0][1]
        sub = decode_subscription(meta)
        named = decode_assignment(m.assignment, refuse_user_data=True)
        if sub is None or named is None:
            return None
        assigned = to_ids(named, topics)
        cg.members[m.member_id] = ConsumerMember(
            m.member_id,
            instance_id=m.group_instance_id,
            rack_id=sub.rack_id,
            client_id=m.client_id,
            client_host=m.client_host,
            topic_names=tuple(sorted(set(sub.topics))),
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            classic=crec.ClassicMeta(m.session_timeout_ms, tuple(m.protocols)),
        )
        cg.targets[m.member_id] = assigned
        cg.set_current(m.member_id, MemberAssignment(gen, gen, MemberState.STABLE, assigned))
    cg.metadata_hash = metadata_hash(cg.subscribed_names(topics), topics) if cg.members else 0
    return cg


def consumer_group_records(cg: ConsumerGroup) -> list[Record]:
    """All records of a converted group, in Kafka's order: subscriptions, group epoch,
    targets, target epoch, current assignments."""
    gid = cg.group_id
    records = [member_record(gid, m) for m in cg.members.values()]
    records.append(
        (crec.group_metadata_key(gid), crec.group_metadata_value(cg.epoch, cg.metadata_hash))
    )
    records += [
        (crec.target_member_key(gid, mid), crec.target_member_value(cg.targets.get(mid, {})))
        for mid in cg.members
    ]
    records.append((crec.target_metadata_key(gid), crec.target_metadata_value(cg.assignment_epoch)))
    records += [current_record(gid, mid, m.current) for mid, m in cg.members.items()]
    return records


# -- downgrade: consumer -> classic ---------------------------------------------------------


def consumer_tombstones(cg: ConsumerGroup) -> list[Record]:
    gid = cg.group_id
    records: list[Record] = []
    for mid in cg.members:
        records += [
            (crec.current_member_key(gid, mid), None),
            (crec.target_member_key(gid, mid), None),
            (crec.member_metadata_key(gid, mid), None),
        ]
    records += [(crec.target_metadata_key(gid), None), (crec.group_metadata_key(gid), None)]
    return records


def to_classic(
    cg: ConsumerGroup, leaving: set[str], topics: TopicsView, now_ms: int
) -> ClassicGroup:
    """The classic group the remaining (classic) members form: stable at the group epoch,
    each member holding its target assignment, the protocol chosen by vote."""
    group = ClassicGroup(cg.group_id, now_ms)
    group.generation = cg.epoch
    for mid, m in cg.members.items():
        if mid in leaving or m.classic is None:
            continue
        member = Member(
            member_id=mid,
            group_instance_id=m.instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            session_timeout_ms=m.classic.session_timeout_ms,
            protocols=list(m.classic.protocols),
        )
        group.add(member, CONSUMER_PROTOCOL_TYPE)
    group.protocol_name = group.select_protocol()
    for member in group.members.values():
        member.assignment = encode_assignment(
            cg.targets.get(member.member_id, {}), topics, member.metadata(group.protocol_name)
        )
    group.transition(GroupState.STABLE, now_ms)
    return group
