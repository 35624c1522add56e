"""What ConsumerGroupDescribe reports of a KIP-848 consumer group (sans-IO)."""

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from kio.schema.consumer_protocol_assignment.v3 import data as cpa
from kio.schema.consumer_protocol_subscription.v3 import data as cps
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i32

from broker.coordinator.group.consumer_group import ConsumerGroup, ConsumerMember, TopicsView
from broker.coordinator.record_framing import encode_prefixed

# (topic id, topic name, partitions)
NamedPartitions = list[tuple[uuid.UUID, str, list[int]]]


@dataclass(slots=True)
class DescribedConsumer:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    topic_names: list[str]
    topic_regex: str | None
    assignment: NamedPartitions
    target: NamedPartitions
    classic: bool = False  # a member using the classic protocol (MemberType 0 in v1)


@dataclass(slots=True)
class DescribedConsumerGroup:
    group_id: str
    error: ErrorCode
    message: str | None = None
    state: str = ""
    epoch: int = 0
    assignment_epoch: int = 0
    assignor: str = ""
    members: list[DescribedConsumer] = field(default_factory=list)


def _named(
    a: Mapping[uuid.UUID, frozenset[int]], names: Mapping[uuid.UUID, str]
) -> NamedPartitions:
    # a topic deleted since the assignment has no name any more: left out, as Kafka does
    return [(t, names[t], sorted(ps)) for t, ps in sorted(a.items()) if t in names and ps]


def describe(group: ConsumerGroup, topics: TopicsView, assignor: str) -> DescribedConsumerGroup:
    names = {topic_id: name for name, (topic_id, _) in topics.items()}
    members = [
        DescribedConsumer(
            member_id=m.member_id,
            instance_id=m.instance_id,
            rack_id=m.rack_id,
            member_epoch=m.current.epoch,
            client_id=m.client_id,
            client_host=m.client_host,
            topic_names=sorted(m.topic_names),
            topic_regex=m.topic_regex,
            assignment=_named(m.current.assigned, names),
            target=_named(group.targets.get(m.member_id, {}), names),
            classic=m.classic is not None,
        )
        for m in group.members.values()
    ]
    return DescribedConsumerGroup(
        group.group_id,
        ErrorCode.none,
        None,
        group.state(),
        group.epoch,
        group.assignment_epoch,
        assignor,
        members,
    )


def classic_bytes(m: ConsumerMember, topics: TopicsView) -> tuple[bytes, bytes]:
    """A member as DescribeGroups shows it, as Kafka does: its subscription and current
    assignment in the classic consumer protocol's encoding (version 3)."""
    names = {topic_id: name for name, (topic_id, _) in topics.items()}
    subscription = cps.ConsumerProtocolSubscription(
        topics=tuple(sorted(m.subscribed_names(topics))),
        owned_partitions=(),
        rack_id=m.rack_id,
    )
    assignment = cpa.ConsumerProtocolAssignment(
        assigned_partitions=tuple(
            cpa.TopicPartition(topic=TopicName(name), partitions=tuple(i32(p) for p in ps))
            for _, name, ps in _named(m.current.assigned, names)
        )
    )
    return encode_prefixed(3, subscription), encode_prefixed(3, assignment)
