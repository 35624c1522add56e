"""What ``kafka-consumer-groups.sh`` knows of groups, in Kafka's admin client's terms: group
states and error codes as Kafka names and prints them, a group's description (classic or
KIP-848) and its members, and the decoding of a classic member's assignment.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from broker.cli.admin import CommandError

# Kafka's GroupState names (the admin client parses the brokers' state strings into them)
GROUP_STATES: Final = (
    "PreparingRebalance",
    "CompletingRebalance",
    "Stable",
    "Dead",
    "Empty",
    "Assigning",
    "Reconciling",
    "NotReady",
)
_STATE_BY_UPPER: Final = {s.upper(): s for s in GROUP_STATES}


def group_state(text: str) -> str:
    """Kafka's GroupState.parse then toString: any case in, Kafka's name out (else Unknown)."""
    return _STATE_BY_UPPER.get(text.upper(), "Unknown")


# Kafka's Errors: the exception class and default message of the codes this tool reports
ERRORS: Final[dict[int, tuple[str, str]]] = {
    -1: (
        "UnknownServerException",
        "The server experienced an unexpected error when processing the request.",
    ),
    3: ("UnknownTopicOrPartitionException", "This server does not host this topic-partition."),
    5: (
        "LeaderNotAvailableException",
        "There is no leader for this topic-partition as we are in the middle of a leadership "
        "election.",
    ),
    7: ("TimeoutException", "The request timed out."),
    12: ("OffsetMetadataTooLarge", "The metadata field of the offset request was too large."),
    14: (
        "CoordinatorLoadInProgressException",
        "The coordinator is loading and hence can't process requests.",
    ),
    15: ("CoordinatorNotAvailableException", "The coordinator is not available."),
    16: ("NotCoordinatorException", "This is not the correct coordinator."),
    22: ("IllegalGenerationException", "Specified group generation id is not valid."),
    24: ("InvalidGroupIdException", "The configured groupId is invalid."),
    25: ("UnknownMemberIdException", "The coordinator is not aware of this member."),
    27: ("RebalanceInProgressException", "The group is rebalancing, so a rejoin is needed."),
    29: ("TopicAuthorizationException", "Topic authorization failed."),
    30: ("GroupAuthorizationException", "Group authorization failed."),
    35: ("UnsupportedVersionException", "The version of API is not supported."),
    68: ("GroupNotEmptyException", "The group is not empty."),
    69: ("GroupIdNotFoundException", "The group id does not exist."),
    86: (
        "GroupSubscribedToTopicException",
        "Deleting offsets of a topic is forbidden while the consumer group is actively "
        "subscribed to it.",
    ),
    113: (
        "StaleMemberEpochException",
        "The member epoch is stale. The member must retry after receiving its updated member "
        "epoch via the ConsumerGroupHeartbeat API.",
    ),
}


def error_message(error: int, message: str | None = None) -> str:
    """Kafka's message for an error code (the broker's own text when it sent one)."""
    if message:
        return message
    return ERRORS.get(error, ("", f"Unexpected error code {error}."))[1]


def exception_text(error: int, message: str | None = None) -> str:
    """How Java prints the exception Kafka's admin raises for ``error``: class and message."""
    name = ERRORS.get(error, ("ApiException", ""))[0]
    return f"org.apache.kafka.common.errors.{name}: {error_message(error, message)}"


class GroupError(CommandError):
    """The broker answered a group request with an error code."""

    def __init__(self, error: int, message: str | None = None) -> None:
        super().__init__(exception_text(error, message))
        self.error = error


TP = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Coordinator:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Listing:
    group_id: str
    protocol_type: str
    state: str  # "" from brokers before ListGroups v4
    type: str  # "" from brokers before ListGroups v5


@dataclass(slots=True)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: list[TP]
    target: list[TP] | None = None  # KIP-848 groups only
    member_epoch: int | None = None
    upgraded: bool | None = None  # KIP-848: a consumer-protocol member (False: classic member)


@dataclass(slots=True)
class Description:
    group_id: str
    type: str  # "Consumer" (KIP-848), "Classic" or "Share"
    state: str  # Kafka's GroupState names: Stable, Empty, Dead, PreparingRebalance...
    assignor: str
    coordinator: Coordinator
    members: list[Member] = field(default_factory=list)
    group_epoch: int | None = None
    target_assignment_epoch: int | None = None


def decode_assignment(data: bytes) -> list[TP]:
    """The partitions of a classic consumer's assignment (ConsumerProtocol's Assignment: version,
    then [topic, [partition]]; user data after it is ignored)."""
    if len(data) < 2:
        return []
    out: list[TP] = []
    try:
        pos = 2
        (n_topics,) = struct.unpack_from(">i", data, pos)
        pos += 4
        for _ in range(max(n_topics, 0)):
            (n,) = struct.unpack_from(">h", data, pos)
            topic = data[pos + 2 : pos + 2 + n].decode()
            pos += 2 + n
            (n_parts,) = struct.unpack_from(">i", data, pos)
            pos += 4
            for p in struct.unpack_from(f">{max(n_parts, 0)}i", data, pos):
                out.append((topic, p))
            pos += 4 * max(n_parts, 0)
    except (struct.error, UnicodeDecodeError):
        raise CommandError("cannot decode a member's assignment") from None
    return out


def _tps(topics: Iterable[Any]) -> list[TP]:
    return [(str(t.topic_name), int(p)) for t in topics for p in t.partitions]


def share_description(g: Any, c: Coordinator) -> Description:
    """A ShareGroupDescribe group: members with their assignment and epoch (no target)."""
    members = [
        Member(
            str(m.member_id),
            None,
            str(m.client_id),
            str(m.client_host),
            _tps(m.assignment.topic_partitions),
            member_epoch=int(m.member_epoch),
        )
        for m in g.members
    ]
    return Description(
        str(g.group_id),
        "Share",
        group_state(str(g.group_state)),
        str(g.assignor_name),
        c,
        members,
        int(g.group_epoch),
        int(g.assignment_epoch),
    )


def consumer_description(g: Any, c: Coordinator) -> Description:
    members = []
    for m in g.members:
        member_type = int(getattr(m, "member_type", -1))
        members.append(
            Member(
                str(m.member_id),
                None if m.instance_id is None else str(m.instance_id),
                str(m.client_id),
                str(m.client_host),
                _tps(m.assignment.topic_partitions),
                _tps(m.target_assignment.topic_partitions),
                int(m.member_epoch),
                None if member_type == -1 else member_type == 1,
            )
        )
    return Description(
        str(g.group_id),
        "Consumer",
        group_state(str(g.group_state)),
        str(g.assignor_name),
        c,
        members,
        int(g.group_epoch),
        int(g.assignment_epoch),
    )
