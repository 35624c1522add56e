"""A KIP-848 consumer group as the coordinator keeps it in memory (sans-IO).

The group epoch counts changes of membership, subscriptions or subscribed topic metadata; the
target assignment is computed at a group epoch (the assignment epoch); each member converges to
its target through `reconcile`. `owners` records, per partition, which member holds it
(assigned or still revoking), the check that keeps a partition on one member at a time.
"""

import hashlib
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from broker.coordinator.group.assignors import MemberSpec
from broker.coordinator.group.consumer_records import ClassicMeta
from broker.coordinator.group.reconcile import Assignment, MemberAssignment, MemberState

# topic name -> (topic id, partition count), from the cluster's metadata image
TopicsView = Mapping[str, tuple[uuid.UUID, int]]

EMPTY, ASSIGNING, RECONCILING, STABLE = "Empty", "Assigning", "Reconciling", "Stable"

# Constructs Python's `re` accepts but RE2 (Kafka's RE2/J) rejects: backreferences,
# lookaround, atomic groups, possessive quantifiers, conditionals.
_NOT_RE2 = re.compile(r"\\[1-9]|\\g<|\(\?P=|\(\?<?[=!]|\(\?>|(?<!\\)[*+?}]\+|\(\?\(")


class InvalidRegex(ValueError):
    pass


def compile_regex(pattern: str) -> "re.Pattern[str]":
    """The subscription regex, or InvalidRegex for one RE2 would not accept."""
    if _NOT_RE2.search(pattern):
        raise InvalidRegex(f"{pattern!r} uses a construct RE2 does not support")
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise InvalidRegex(f"{pattern!r}: {exc}") from None


_RESOLVED: dict[tuple[str, int], frozenset[str]] = {}
_RESOLVED_MAX = 256


def resolve_regex(pattern: str, topics: TopicsView) -> frozenset[str]:
    """The topics a subscription regex matches (full match; internal topics never). Cached per
    metadata image when the view says which one it is (`version`): every member of a regex group
    heartbeats, and matching every topic name each time would cost O(members x topics)."""
    version = getattr(topics, "version", None)
    key = (pattern, version) if isinstance(version, int) else None
    if key is not None and key in _RESOLVED:
        return _RESOLVED[key]
    try:
        rx = compile_regex(pattern)
    except InvalidRegex:
        return frozenset()
    found = frozenset(t for t in topics if not t.startswith("__") and rx.fullmatch(t))
    if key is not None:
        if len(_RESOLVED) >= _RESOLVED_MAX:
            _RESOLVED.clear()  # images move on; old entries are dead weight
        _RESOLVED[key] = found
    return found


@dataclass(slots=True)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    topic_names: tuple[str, ...] = ()
    topic_regex: str | None = None
    rebalance_timeout_ms: int = 300_000
    server_assignor: str | None = None
    # set for a member that uses the classic protocol (JoinGroup/SyncGroup) in this group
    classic: ClassicMeta | None = None
    current: MemberAssignment = field(
        default_factory=lambda: MemberAssignment(0, 0, MemberState.STABLE)
    )

    def subscribed_names(self, topics: TopicsView) -> set[str]:
        names = {t for t in self.topic_names if t in topics}
        if self.topic_regex is not None:
            names |= resolve_regex(self.topic_regex, topics)
        return names


@dataclass(slots=True)
class ConsumerGroup:
    group_id: str
    epoch: int = 0
    metadata_hash: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    targets: dict[str, Assignment] = field(default_factory=dict)
    owners: dict[tuple[uuid.UUID, int], str] = field(default_factory=dict)
    state_timestamp: int = -1

    def state(self) -> str:
        if not self.members:
            return EMPTY
        if self.epoch != self.assignment_epoch:
            return ASSIGNING
        for m in self.members.values():
            if m.current.epoch != self.assignment_epoch or m.current.state != MemberState.STABLE:
                return RECONCILING
        return STABLE

    def set_current(self, member_id: str, current: MemberAssignment) -> None:
        """Record the member's new assignment and move partition ownership with it."""
        member = self.members[member_id]
        self._release(member_id, member.current)
        member.current = current
        for a in (current.assigned, current.pending_revocation):
            for t, ps in a.items():
                for p in ps:
                    self.owners[(t, p)] = member_id

    def _release(self, member_id: str, current: MemberAssignment) -> None:
        for a in (current.assigned, current.pending_revocation):
            for t, ps in a.items():
                for p in ps:
                    if self.owners.get((t, p)) == member_id:
                        del self.owners[(t, p)]

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            self._release(member_id, member.current)
        self.targets.pop(member_id, None)

    def held_by_other(self, member_id: str) -> "HeldByOther":
        return HeldByOther(self.owners, member_id)

    def subscribed_names(self, topics: TopicsView) -> set[str]:
        names: set[str] = set()
        for m in self.members.values():
            names |= m.subscribed_names(topics)
        return names

    def specs(self, topics: TopicsView) -> dict[str, MemberSpec]:
        return {
            mid: MemberSpec(
                frozenset(topics[n][0] for n in m.subscribed_names(topics)),
                self.targets.get(mid, {}),
            )
            for mid, m in self.members.items()
        }


@dataclass(frozen=True, slots=True)
class HeldByOther:
    owners: Mapping[tuple[uuid.UUID, int], str]
    member_id: str

    def __call__(self, topic: uuid.UUID, partition: int) -> bool:
        owner = self.owners.get((topic, partition))
        return owner is not None and owner != self.member_id


def metadata_hash(names: Iterable[str], topics: TopicsView) -> int:
    """A hash of the subscribed topics' ids and partition counts (a change means rebalance)."""
    h = hashlib.blake2b(digest_size=8)
    for name in sorted(names):
        topic_id, count = topics[name]
        h.update(f"{name}\0{topic_id}\0{count}\n".encode())
    value = int.from_bytes(h.digest(), "big", signed=True)
    return value or 1  # 0 is Kafka's "no hash"


def can_downgrade(cg: ConsumerGroup, leaving: set[str], enabled: bool, max_size: int) -> bool:
    """Kafka's validateOnlineDowngrade: once `leaving` are gone, only classic members remain
    (at least one), the policy allows it and a classic group may be that large."""
    rest = [m for mid, m in cg.members.items() if mid not in leaving]
    return bool(rest) and all(m.classic for m in rest) and enabled and len(rest) <= max_size
