"""Leader elections asked for by an admin (ElectLeaders, kafka-leader-election.sh) and the
active controller's periodic preferred elections (``auto.leader.rebalance.enable``).

The rules are Kafka 4.1's (ReplicationControlManager.electLeader with PartitionChangeBuilder),
without eligible leader replicas:

- PREFERRED: nothing to do when the first replica of the assignment already leads
  (ELECTION_NOT_NEEDED). It leads when it is in the ISR and active (registered, unfenced, not in
  controlled shutdown). Otherwise the current leader stays if it still may lead, which changes
  nothing (PREFERRED_LEADER_NOT_AVAILABLE); a partition without a valid leader gets the next
  replica in assignment order that is in the ISR and active.
- UNCLEAN: nothing to do when the partition has a leader (ELECTION_NOT_NEEDED). Otherwise an
  in-sync active replica leads if there is one; else the first active replica of the assignment,
  whose log becomes the truth: the ISR shrinks to it. No active replica at all:
  ELIGIBLE_LEADERS_NOT_AVAILABLE.
- A topic or partition the image does not know: UNKNOWN_TOPIC_OR_PARTITION.

Each election is one PartitionChangeRecord (a new leader starts a new leader epoch when the image
applies it). Kafka also marks an unclean leader's partition RECOVERING (leader_recovery_state);
the image keeps no recovery state, so the record does not carry it.

Asking for every partition (no topic list) leaves out of the answer the partitions that needed no
election, as Kafka does. The periodic balance tries a preferred election for every partition not
led by its preferred replica, at most ``max_elections`` records per commit (Kafka's
maxElectionsPerImbalance); ``leader.imbalance.per.broker.percentage`` was ZooKeeper's and is gone
from Kafka 4.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kio.schema.errors import ErrorCode

from ..metadata.image import METADATA_TOPIC, MetadataImage, PartitionImage, TopicImage
from .cluster_control import ControllerCore
from .partition_change import NO_LEADER, PartitionChangeRecord, is_active, warn_unclean_mirror

log = logging.getLogger(__name__)

MAX_ELECTIONS_PER_BALANCE: Final = 1000  # Kafka's MAX_ELECTIONS_PER_IMBALANCE


class ElectionType(enum.IntEnum):
    """ElectLeaders' ElectionType byte."""

    PREFERRED = 0
    UNCLEAN = 1


@dataclass(frozen=True, slots=True)
class PartitionElection:
    """The answer for one partition: NONE (a record was written), or why not."""

    partition: int
    error: ErrorCode
    message: str | None = None


# (topic, the partitions' answers), in the order asked (or topic name order for every partition)
TopicElections = tuple[str, list[PartitionElection]]


class UnknownElectionType(ValueError):
    """An ElectionType byte other than PREFERRED (0) or UNCLEAN (1): INVALID_REQUEST."""


def election_type(value: int) -> ElectionType:
    try:
        return ElectionType(value)
    except ValueError:
        raise UnknownElectionType(f"Unknown election type {value}") from None


def has_preferred_leader(p: PartitionImage) -> bool:
    return bool(p.replicas) and p.leader == p.replicas[0]


def elect(
    img: MetadataImage, topic: str, partition: int, kind: ElectionType
) -> tuple[PartitionElection, Any | None]:
    """One partition's election against ``img``: the answer and the record to commit (None
    when the answer is an error)."""
    t = img.topics.get(topic)
    if t is None or topic == METADATA_TOPIC:
        return _answer(partition, ErrorCode.unknown_topic_or_partition, f"No such topic as {topic}")
    p = t.partitions.get(partition)
    if p is None:
        return _answer(
            partition,
            ErrorCode.unknown_topic_or_partition,
            f"No such partition as {topic}-{partition}",
        )
    if kind is ElectionType.PREFERRED:
        if has_preferred_leader(p):
            return _answer(partition, ErrorCode.election_not_needed)
        leader = _preferred_choice(img, p)
        if leader == p.leader:  # nobody better, or the current leader stays
            return _answer(partition, ErrorCode.preferred_leader_not_available)
        return PartitionElection(partition, ErrorCode.none), _record(t, p, leader, None)
    if p.leader != NO_LEADER:
        return _answer(partition, ErrorCode.election_not_needed)
    clean = next((r for r in p.replicas if _in_sync_and_active(img, p, r)), NO_LEADER)
    if clean != NO_LEADER:
        return PartitionElection(partition, ErrorCode.none), _record(t, p, clean, None)
    unclean = next((r for r in p.replicas if is_active(img, r)), NO_LEADER)
    if unclean == NO_LEADER:
        return _answer(partition, ErrorCode.eligible_leaders_not_available)
    log.warning(
        "unclean leader election for %s-%d: broker %d leads with ISR [%d] (ISR was %s)",
        topic,
        partition,
        unclean,
        unclean,
        list(p.isr),
    )
    warn_unclean_mirror(img, topic, partition, unclean)
    return PartitionElection(partition, ErrorCode.none), _record(t, p, unclean, (unclean,))


def _in_sync_and_active(img: MetadataImage, p: PartitionImage, r: int) -> bool:
    return r in p.isr and is_active(img, r)


def _preferred_choice(img: MetadataImage, p: PartitionImage) -> int:
    """Kafka's preferred election: the preferred replica, else the current leader while it is
    valid, else the next valid replica in assignment order (NO_LEADER: none)."""
    for r in (p.replicas[0], p.leader, *p.replicas[1:]):
        if r != NO_LEADER and _in_sync_and_active(img, p, r):
            return r
    return NO_LEADER


def _answer(
    partition: int, error: ErrorCode, message: str | None = None
) -> tuple[PartitionElection, None]:
    return PartitionElection(partition, error, message), None


def _record(t: TopicImage, p: PartitionImage, leader: int, isr: tuple[int, ...] | None) -> Any:
    return PartitionChangeRecord(
        partition_id=p.partition, topic_id=t.topic_id, leader=leader, isr=isr
    )


class LeaderElections:
    """ElectLeaders and the periodic preferred elections, on the active controller."""

    def __init__(
        self, core: ControllerCore, max_elections: int = MAX_ELECTIONS_PER_BALANCE
    ) -> None:
        self._core = core
        self._max = max_elections

    async def elect_leaders(
        self, kind: ElectionType, partitions: Sequence[tuple[str, Sequence[int]]] | None
    ) -> list[TopicElections]:
        """ElectLeaders: ``partitions`` as (topic, partition ids), or None for every partition
        (then the partitions that needed no election are left out of the answer)."""
        async with self._core.lock:
            img = self._core.current_image()
            records: list[Any] = []
            out: list[TopicElections] = []
            every = partitions is None
            asked = _every_partition(img) if partitions is None else partitions
            for topic, ids in asked:
                answers = []
                for pid in ids:
                    answer, record = elect(img, topic, pid, kind)
                    if record is not None:
                        records.append(record)
                    if not (every and answer.error == ErrorCode.election_not_needed):
                        answers.append(answer)
                out.append((topic, answers))
            if records:
                await self._core.commit(records)
                log.info("%s election moved the leader of %d partitions", kind.name, len(records))
            return out

    def imbalanced(self) -> bool:
        """Some partition is not led by its preferred replica."""
        img = self._core.current_image()
        return any(not has_preferred_leader(p) for _t, p in _partitions(img))

    async def balance(self) -> tuple[int, bool]:
        """One round of preferred elections for the partitions not led by their preferred
        replica: (elections committed, whether the cap cut the round short)."""
        async with self._core.lock:
            img = self._core.current_image()
            records: list[Any] = []
            for t, p in _partitions(img):
                if len(records) >= self._max:
                    break
                if has_preferred_leader(p):
                    continue
                _, record = elect(img, t.name, p.partition, ElectionType.PREFERRED)
                if record is not None:
                    records.append(record)
            if records:
                await self._core.commit(records)
                log.info(
                    "leader balance: %d partitions back to their preferred leader", len(records)
                )
            return len(records), len(records) >= self._max


def _partitions(img: MetadataImage) -> Iterable[tuple[TopicImage, PartitionImage]]:
    for name in sorted(img.topics):
        if name == METADATA_TOPIC:
            continue
        t = img.topics[name]
        for pid in sorted(t.partitions):
            yield t, t.partitions[pid]


def _every_partition(img: MetadataImage) -> list[tuple[str, list[int]]]:
    return [
        (name, sorted(img.topics[name].partitions))
        for name in sorted(img.topics)
        if name != METADATA_TOPIC
    ]


class LeaderBalance:
    """``auto.leader.rebalance.enable``: on the active controller, every
    ``leader.imbalance.check.interval.seconds`` a round of preferred elections when some
    partition is not led by its preferred replica; a round cut short by the cap is followed by
    the next one at once (Kafka's QuorumController reschedules it immediately)."""

    def __init__(self, elections: LeaderElections, interval_ms: int) -> None:
        self._elections = elections
        self._interval_ms = interval_ms
        self._next_ms: int | None = None

    def became_active(self, now_ms: int) -> None:
        """The first round comes one interval after this node became the active controller."""
        self._next_ms = now_ms + self._interval_ms

    async def tick(self, now_ms: int) -> None:
        if self._next_ms is None:
            self._next_ms = now_ms + self._interval_ms
        if now_ms < self._next_ms:
            return
        more = False
        if self._elections.imbalanced():
            _count, more = await self._elections.balance()
        self._next_ms = now_ms + (0 if more else self._interval_ms)
