"""A consumer group member's reconciliation towards its target assignment (KIP-848).

Sans-IO. The rule that keeps a partition on at most one consumer: a member is given a
partition of its target only once no other member holds it (as assigned or pending revocation),
and it first has to give up what its target no longer has. Revoking keeps the member's epoch;
reaching the target epoch is the member's epoch bump.

States as Kafka's MemberState numbers them in ConsumerGroupCurrentMemberAssignmentValue.
"""

import enum
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

Assignment = dict[uuid.UUID, frozenset[int]]


class MemberState(enum.IntEnum):
    STABLE = 0
    UNREVOKED_PARTITIONS = 1  # waiting for the member to revoke partitions
    UNRELEASED_PARTITIONS = 2  # waiting for other members to release partitions
    UNKNOWN = 127


@dataclass(frozen=True, slots=True)
class MemberAssignment:
    epoch: int
    previous_epoch: int
    state: MemberState
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)


def count(a: Mapping[uuid.UUID, frozenset[int]]) -> int:
    return sum(len(ps) for ps in a.values())


def is_subset(
    small: Mapping[uuid.UUID, frozenset[int]], big: Mapping[uuid.UUID, frozenset[int]]
) -> bool:
    return all(ps <= big.get(t, frozenset()) for t, ps in small.items())


def _owns_any(owned: Mapping[uuid.UUID, frozenset[int]] | None, revoke: Assignment) -> bool:
    # Without the owned partitions in the request, assume the member still holds them.
    if owned is None:
        return True
    return any(ps & owned.get(t, frozenset()) for t, ps in revoke.items())


def _clean(a: Mapping[uuid.UUID, set[int] | frozenset[int]]) -> Assignment:
    return {t: frozenset(ps) for t, ps in a.items() if ps}


def reconcile(
    member: MemberAssignment,
    target_epoch: int,
    target: Mapping[uuid.UUID, frozenset[int]],
    owned: Mapping[uuid.UUID, frozenset[int]] | None,
    held_by_other: Callable[[uuid.UUID, int], bool],
) -> MemberAssignment:
    """The member's next state, given its target and the partitions it reports owning
    (None when the heartbeat did not carry them)."""
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, member.pending_revocation):
            return member  # still revoking
    elif member.state is MemberState.STABLE and member.epoch == target_epoch:
        return member
    return _next(member, target_epoch, target, owned, held_by_other)


def _next(
    member: MemberAssignment,
    target_epoch: int,
    target: Mapping[uuid.UUID, frozenset[int]],
    owned: Mapping[uuid.UUID, frozenset[int]] | None,
    held_by_other: Callable[[uuid.UUID, int], bool],
) -> MemberAssignment:
    keep: dict[uuid.UUID, set[int]] = {}
    revoke: dict[uuid.UUID, set[int]] = {}
    gain: dict[uuid.UUID, set[int]] = {}
    unreleased = False
    for topic in set(member.assigned) | set(target):
        current = member.assigned.get(topic, frozenset())
        wanted = target.get(topic, frozenset())
        keep[topic] = set(current & wanted)
        revoke[topic] = set(current - wanted)
        for p in sorted(wanted - current):
            if held_by_other(topic, p):
                unreleased = True
            else:
                gain.setdefault(topic, set()).add(p)
    revoking = _clean(revoke)
    if revoking and _owns_any(owned, revoking):
        # first give up what the target dropped; the epoch stays until that is done
        return MemberAssignment(
            member.epoch,
            member.previous_epoch,
            MemberState.UNREVOKED_PARTITIONS,
            _clean(keep),
            revoking,
        )
    for topic, ps in gain.items():
        keep.setdefault(topic, set()).update(ps)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    previous = member.epoch if target_epoch != member.epoch else member.previous_epoch
    return MemberAssignment(target_epoch, previous, state, _clean(keep), {})
