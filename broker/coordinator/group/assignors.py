"""Server-side partition assignors of KIP-848 consumer groups: `uniform` and `range`.

Sans-IO and deterministic: the same members, subscriptions and previous target always give the
same result, so the coordinator only has to persist what changed. Both work on topic ids.

- `uniform` (Kafka's default): every subscribed partition assigned, counts as even as the
  subscriptions allow, and sticky: a member keeps what it had unless balance needs it moved.
- `range`: per topic, the topic's subscribers sorted by member id get contiguous ranges, the
  first `partitions % members` one more (co-partitioned topics land on the same members).
"""

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

Assignment = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class MemberSpec:
    subscribed: frozenset[uuid.UUID]  # topic ids the member's subscription resolves to
    current: Mapping[uuid.UUID, frozenset[int]]  # its previous target assignment


class Assignor(Protocol):
    name: str

    def assign(
        self, members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]
    ) -> dict[str, Assignment]: ...


def _freeze(owned: Mapping[str, set[tuple[uuid.UUID, int]]]) -> dict[str, Assignment]:
    out: dict[str, Assignment] = {}
    for member_id, tps in owned.items():
        by_topic: dict[uuid.UUID, set[int]] = {}
        for topic, p in tps:
            by_topic.setdefault(topic, set()).add(p)
        out[member_id] = {t: frozenset(ps) for t, ps in by_topic.items()}
    return out


class UniformAssignor:
    name = "uniform"

    def assign(
        self, members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]
    ) -> dict[str, Assignment]:
        ids = sorted(members)
        owned: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in ids}
        taken: set[tuple[uuid.UUID, int]] = set()
        # 1. stickiness: keep every previous partition that is still valid and subscribed
        for m in ids:
            spec = members[m]
            for topic, ps in spec.current.items():
                if topic not in spec.subscribed:
                    continue
                for p in ps:
                    tp = (topic, p)
                    if p < partitions.get(topic, 0) and tp not in taken:
                        owned[m].add(tp)
                        taken.add(tp)
        subscribers = {
            t: [m for m in ids if t in members[m].subscribed] for t in sorted(partitions)
        }
        # 2. every free partition to its least loaded subscriber
        for topic, subs in subscribers.items():
            if not subs:
                continue
            for p in range(partitions[topic]):
                if (topic, p) not in taken:
                    target = min(subs, key=lambda m: (len(owned[m]), m))
                    owned[target].add((topic, p))
                    taken.add((topic, p))
        # 3. balance: move from the most loaded member while a subscriber has two fewer
        for _ in range(sum(partitions.values()) * max(len(ids), 1)):
            if not self._move_one(ids, owned, subscribers):
                break
        return _freeze(owned)

    @staticmethod
    def _move_one(
        ids: list[str],
        owned: dict[str, set[tuple[uuid.UUID, int]]],
        subscribers: Mapping[uuid.UUID, list[str]],
    ) -> bool:
        for giver in sorted(ids, key=lambda m: (-len(owned[m]), m)):
            for tp in sorted(owned[giver], reverse=True):
                takers = [m for m in subscribers[tp[0]] if len(owned[m]) < len(owned[giver]) - 1]
                if takers:
                    taker = min(takers, key=lambda m: (len(owned[m]), m))
                    owned[giver].discard(tp)
                    owned[taker].add(tp)
                    return True
        return False


class RangeAssignor:
    name = "range"

    def assign(
        self, members: Mapping[str, MemberSpec], partitions: Mapping[uuid.UUID, int]
    ) -> dict[str, Assignment]:
        ids = sorted(members)
        owned: dict[str, set[tuple[uuid.UUID, int]]] = {m: set() for m in ids}
        for topic in sorted(partitions):
            subs = [m for m in ids if topic in members[m].subscribed]
            if not subs:
                continue
            count = partitions[topic]
            base, extra = divmod(count, len(subs))
            start = 0
            for i, m in enumerate(subs):
                n = base + (1 if i < extra else 0)
                owned[m].update((topic, p) for p in range(start, start + n))
                start += n
        return _freeze(owned)


ASSIGNORS: dict[str, Assignor] = {"uniform": UniformAssignor(), "range": RangeAssignor()}
