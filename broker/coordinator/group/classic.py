"""In-memory model of a classic group and its members (no I/O, no timers)."""

import asyncio
import enum
import struct
from collections import Counter
from dataclasses import dataclass, field

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
from kio.schema.errors import ErrorCode

from protocol import lenient

CONSUMER_PROTOCOL_TYPE = "consumer"
_SUBSCRIPTIONS: tuple[type, ...] = (SubscriptionV0, SubscriptionV1, SubscriptionV2, SubscriptionV3)


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str = ""
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    skip_assignment: bool = False
    # (member id, group instance id, metadata); only the leader gets them
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)


@dataclass(slots=True)
class SyncResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


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
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    join_future: "asyncio.Future[JoinResult] | None" = None
    sync_future: "asyncio.Future[SyncResult] | None" = None
    is_new: bool = False

    def metadata(self, protocol: str | None) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        return b""

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None and not self.join_future.done()

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_future is not None and not self.sync_future.done()

    def complete_join(self, result: JoinResult) -> None:
        fut, self.join_future = self.join_future, None
        if fut is not None and not fut.done():
            fut.set_result(result)

    def complete_sync(self, result: SyncResult) -> None:
        fut, self.sync_future = self.sync_future, None
        if fut is not None and not fut.done():
            fut.set_result(result)


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """Topics in a ConsumerProtocolSubscription, None if it does not parse.
    A version above the newest we know is read as the newest (the format only grows)."""
    if len(metadata) < 2:
        return None
    (version,) = struct.unpack_from(">h", metadata)
    if version < 0:
        return None
    try:
        # client bytes: the bounds-checked reader (kio's native one aborts on forged counts)
        sub, _ = lenient.decode(_SUBSCRIPTIONS[min(version, len(_SUBSCRIPTIONS) - 1)], metadata, 2)
    except Exception:
        return None
    return set(sub.topics)


class ClassicGroup:
    def __init__(self, group_id: str, now_ms: int) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.state_timestamp = now_ms
        self.generation = 0
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group instance id -> member id
        self.pending_join: set[str] = set()  # ids handed out with MEMBER_ID_REQUIRED
        self.pending_sync: set[str] = set()
        self.new_member_added = False
        self.initial_delay_pending = False

    # -- state ---------------------------------------------------------------------------

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    def transition(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp = now_ms

    @property
    def is_empty(self) -> bool:
        return not self.members

    # -- membership ------------------------------------------------------------------------

    def add(self, member: Member, protocol_type: str) -> None:
        if not self.members:
            self.protocol_type = protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        self.pending_join.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        instance = member.group_instance_id if member is not None else None
        if instance is not None and self.static_members.get(instance) == member_id:
            del self.static_members[instance]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        self.pending_join.discard(member_id)
        self.pending_sync.discard(member_id)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        member = self.members.pop(old_id)
        member.member_id = new_id
        # an old id's pending responses must not leak to the new one
        if member.join_future is not None:
            member.complete_join(JoinResult(ErrorCode.fenced_instance_id, member_id=old_id))
        if member.sync_future is not None:
            member.complete_sync(SyncResult(ErrorCode.fenced_instance_id))
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)
        return member

    def all_joined(self) -> bool:
        return not self.pending_join and all(m.awaiting_join for m in self.members.values())

    def elect_joined_leader(self) -> bool:
        """Keep a leader that rejoined, else pick a member that did; False if none did."""
        leader = self.members.get(self.leader_id) if self.leader_id is not None else None
        if leader is not None and leader.awaiting_join:
            return True
        for member in self.members.values():
            if member.awaiting_join:
                self.leader_id = member.member_id
                return True
        return False

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # -- protocols -------------------------------------------------------------------------

    def candidate_protocols(self) -> list[str]:
        """Protocols every member supports, in the leader's (or first member's) order."""
        if not self.members:
            return []
        first = self.members.get(self.leader_id or "") or next(iter(self.members.values()))
        common = set(first.protocol_names())
        for member in self.members.values():
            common &= set(member.protocol_names())
        return [p for p in first.protocol_names() if p in common]

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if not self.members:
            return bool(protocol_type) and bool(names)
        if protocol_type != self.protocol_type:
            return False
        common = set(self.candidate_protocols())
        return any(n in common for n in names)

    def select_protocol(self) -> str | None:
        """Each member votes for its most preferred common protocol; ties go to the
        protocol the leader prefers."""
        candidates = self.candidate_protocols()
        if not candidates:
            return None
        votes: Counter[str] = Counter()
        for member in self.members.values():
            votes[next(p for p in member.protocol_names() if p in candidates)] += 1
        best = max(votes.values())
        return next(p for p in candidates if votes[p] == best)

    def init_next_generation(self, now_ms: int) -> None:
        self.generation += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition(GroupState.EMPTY, now_ms)
        self.pending_sync.clear()

    def subscribed_topics(self) -> set[str] | None:
        """Union of the members' consumer subscriptions; None when unknown (not a consumer
        group, no protocol yet, or metadata that does not parse)."""
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE:
            return None
        if not self.members:
            return set()
        if self.protocol_name is None:
            return None
        topics: set[str] = set()
        for member in self.members.values():
            sub = subscribed_topics(member.metadata(self.protocol_name))
            if sub is None:
                return None
            topics |= sub
        return topics

    def is_subscribed_to(self, topic: str) -> bool:
        topics = self.subscribed_topics()
        return topics is not None and topic in topics

    def leader_members(self) -> list[tuple[str, str | None, bytes]]:
        return [
            (m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        ]
