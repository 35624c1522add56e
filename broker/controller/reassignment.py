"""Partition reassignment on the active controller: AlterPartitionReassignments (45) and
ListPartitionReassignments (46), with the rules of Kafka 4's ReplicationControlManager and
PartitionChangeBuilder (without eligible leader replicas or log directories).

A reassignment moves a partition from its current replicas to a target list in two records:

1. The start: the replica list becomes the target followed by the current replicas the target
   leaves out (``removing``, sorted), and ``adding`` names the target replicas that are new
   (sorted). The new replicas create their logs and follow the leader; the ISR is unchanged.
2. The completion, once the ISR without the removing replicas is not empty and holds every
   replica of the target: the removing replicas leave the replica list and the ISR, adding and
   removing are cleared. It is written by whichever change makes it true: usually the leader's
   AlterPartition that adds the last new replica to the ISR (``alter_partition.plan`` calls
   ``build_change``), or the start itself when the ISR already qualifies (a reordering, or a
   shrink to replicas in sync, completes at once).

Any change here elects as Kafka's ONLINE election: the leader stays while it is in the target
ISR and active, else the first such replica in target order leads, else nobody. A replica list
that loses a member bumps the leader epoch (the record names the leader, even the same one), so
the removed followers stop being fetched from as of a known epoch.

Requests, as Kafka answers them per partition (an error leaves the others going ahead; all
accepted changes commit together):

- an unknown topic or partition: UNKNOWN_TOPIC_OR_PARTITION;
- a target that is empty, names a broker that is not registered, or names one twice:
  INVALID_REPLICA_ASSIGNMENT (checked in broker id order, as Kafka does);
- ``allow_replication_factor_change`` false (v1, KIP-860) and a target whose length differs from
  the replica count the partition is headed for: INVALID_REPLICATION_FACTOR;
- a reassignment of a partition that is already being reassigned replaces it, computed against
  the current replica list (which holds both the old and the new replicas). As in Kafka, when the
  new target leaves nothing to add or remove, the ongoing ``adding``/``removing`` are kept;
- a cancellation (null replicas) of a partition that is not being reassigned:
  NO_REASSIGNMENT_IN_PROGRESS. Otherwise the partition goes back to its replica list without
  ``adding`` and its ISR without them. If that ISR would be empty, the first original replica
  becomes the ISR, an unclean choice: refused (INVALID_REPLICA_ASSIGNMENT) unless the topic allows
  unclean leader election.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kio.schema.errors import ErrorCode

from protocol.metadata_records import latest_type

from ..metadata.image import METADATA_TOPIC, MetadataImage, PartitionImage, TopicImage
from .cluster_control import ControllerCore
from .partition_change import CLEAN_ONLY, NO_CHANGE, NO_LEADER, UncleanElection, is_active

log = logging.getLogger(__name__)

PartitionChangeRecord = latest_type("PartitionChangeRecord")

NO_REASSIGNMENT_MESSAGE: Final = "No partition reassignment is in progress."


class ReassignmentError(Exception):
    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


@dataclass(frozen=True, slots=True)
class PartitionAnswer:
    partition: int
    error: ErrorCode
    message: str | None = None


@dataclass(frozen=True, slots=True)
class Ongoing:
    """One partition being reassigned, as ListPartitionReassignments lists it."""

    partition: int
    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


# (topic, {partition: target replicas, or None to cancel}) in the order asked
Request = Sequence[tuple[str, Sequence[tuple[int, Sequence[int] | None]]]]


# --- the state a change heads for (Kafka's PartitionChangeBuilder, reduced) -------------------


def completed(
    replicas: Sequence[int],
    isr: Sequence[int],
    adding: Sequence[int],
    removing: Sequence[int],
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The (replicas, ISR) that complete a reassignment given the ISR it would have, None when
    there is no reassignment or it cannot complete yet."""
    if not adding and not removing:
        return None
    new_isr = tuple(r for r in isr if r not in removing)
    new_replicas = tuple(r for r in replicas if r not in removing)
    if not new_isr or not new_replicas:
        return None
    if not set(new_replicas) <= set(new_isr):
        return None
    return new_replicas, new_isr


def build_change(
    img: MetadataImage,
    t: TopicImage,
    p: PartitionImage,
    *,
    replicas: Sequence[int] | None = None,
    isr: Sequence[int] | None = None,
    adding: Sequence[int] | None = None,
    removing: Sequence[int] | None = None,
    unclean: bool = False,
) -> Any | None:
    """The PartitionChangeRecord taking ``p`` to the given targets (None: as it is), completing
    a reassignment when the target ISR allows and electing a leader as described in the module
    doc; None when nothing would change. ``unclean``: the topic allows unclean elections."""
    t_replicas = tuple(p.replicas if replicas is None else replicas)
    t_isr = tuple(p.isr if isr is None else isr)
    t_adding = tuple(p.adding_replicas if adding is None else adding)
    t_removing = tuple(p.removing_replicas if removing is None else removing)
    done = completed(t_replicas, t_isr, t_adding, t_removing)
    if done is not None:
        t_replicas, t_isr = done
        t_adding = t_removing = ()

    def valid(r: int) -> bool:
        return r in t_isr and is_active(img, r)

    record_isr: tuple[int, ...] | None = None
    if valid(p.leader):
        leader = p.leader
    else:
        leader = next((r for r in t_replicas if valid(r)), NO_LEADER)
        if leader == NO_LEADER and unclean:
            leader = next((r for r in t_replicas if is_active(img, r)), NO_LEADER)
            if leader != NO_LEADER:
                log.warning(
                    "unclean election: %d leads %s-%d with no in-sync replica to lead it",
                    leader,
                    t.name,
                    p.partition,
                )
                record_isr = (leader,)
    record_leader = leader if leader != p.leader else NO_CHANGE
    if record_leader == NO_CHANGE and not set(p.replicas) <= set(t_replicas):
        record_leader = p.leader  # a replica leaves: a new leader epoch
    if record_isr is None and t_isr and t_isr != p.isr:
        record_isr = t_isr
    record = PartitionChangeRecord(
        partition_id=p.partition,
        topic_id=t.topic_id,
        leader=record_leader,
        isr=record_isr,
        replicas=t_replicas if t_replicas != p.replicas else None,
        adding_replicas=t_adding if t_adding != p.adding_replicas else None,
        removing_replicas=t_removing if t_removing != p.removing_replicas else None,
    )
    if (
        record_leader == NO_CHANGE
        and record.isr is None
        and record.replicas is None
        and record.adding_replicas is None
        and record.removing_replicas is None
    ):
        return None
    return record


# --- the requests ---------------------------------------------------------------------------


def validate_target(img: MetadataImage, target: Sequence[int]) -> None:
    """Kafka's validateManualPartitionAssignment."""
    if not target:
        raise ReassignmentError(
            ErrorCode.invalid_replica_assignment,
            "The manual partition assignment includes an empty replica list.",
        )
    previous = None
    for broker in sorted(target):
        if broker not in img.brokers:
            raise ReassignmentError(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes broker {broker}, but no such "
                "broker is registered.",
            )
        if broker == previous:
            raise ReassignmentError(
                ErrorCode.invalid_replica_assignment,
                f"The manual partition assignment includes the broker {broker} more than once.",
            )
        previous = broker


def heading_for(p: PartitionImage) -> tuple[int, ...]:
    """The replicas the partition will have once its reassignment (if any) completes."""
    return tuple(r for r in p.replicas if r not in p.removing_replicas)


def start(
    img: MetadataImage,
    t: TopicImage,
    p: PartitionImage,
    target: Sequence[int],
    allow_rf_change: bool = True,
) -> Any | None:
    """The record starting (or replacing) a reassignment of ``p`` to ``target``."""
    validate_target(img, target)
    if not allow_rf_change:
        current = len(heading_for(p))
        if current != len(target):
            raise ReassignmentError(
                ErrorCode.invalid_replication_factor,
                f"The replication factor is changed from {current} to {len(target)}",
            )
    removing = tuple(sorted(set(p.replicas) - set(target)))
    adding = tuple(sorted(set(target) - set(p.replicas)))
    replicas = (*target, *removing)
    return build_change(
        img,
        t,
        p,
        replicas=replicas if replicas != p.replicas else None,
        # as Kafka's builder: an empty list keeps what the partition has
        adding=adding or None,
        removing=removing or None,
    )


def cancel(img: MetadataImage, t: TopicImage, p: PartitionImage, unclean: bool) -> Any | None:
    """The record reverting ``p``'s reassignment (Kafka's PartitionReassignmentRevert)."""
    if not p.reassigning:
        raise ReassignmentError(ErrorCode.no_reassignment_in_progress, NO_REASSIGNMENT_MESSAGE)
    original = tuple(r for r in p.replicas if r not in p.adding_replicas)
    isr = tuple(r for r in p.isr if r not in p.adding_replicas)
    if not isr:
        if not original:
            raise ReassignmentError(
                ErrorCode.invalid_replica_assignment,
                "Invalid replica assignment: addingReplicas contains all replicas.",
            )
        if not unclean:
            raise ReassignmentError(
                ErrorCode.invalid_replica_assignment,
                f"Unable to revert partition assignment for {t.name}:{p.partition} because "
                "it would require an unclean leader election.",
            )
        isr = (original[0],)
    return build_change(
        img, t, p, replicas=original, isr=isr, adding=(), removing=(), unclean=unclean
    )


def _find(img: MetadataImage, topic: str, partition: int) -> tuple[TopicImage, PartitionImage]:
    t = img.topics.get(topic)
    if t is None or topic == METADATA_TOPIC:
        raise ReassignmentError(
            ErrorCode.unknown_topic_or_partition, f"Unable to find a topic named {topic}."
        )
    p = t.partitions.get(partition)
    if p is None:
        raise ReassignmentError(
            ErrorCode.unknown_topic_or_partition,
            f"Unable to find partition {topic}:{partition}.",
        )
    return t, p


def plan_alter(
    img: MetadataImage,
    request: Request,
    allow_rf_change: bool = True,
    unclean_allowed: Callable[[str], bool] = lambda _t: False,
) -> tuple[list[tuple[str, list[PartitionAnswer]]], list[Any]]:
    """The answers and the records of an AlterPartitionReassignments request (pure). Every
    partition is checked against ``img``, as Kafka checks each against the committed state."""
    answers: list[tuple[str, list[PartitionAnswer]]] = []
    records: list[Any] = []
    for topic, partitions in request:
        out = []
        for pid, target in partitions:
            try:
                t, p = _find(img, topic, pid)
                if target is None:
                    record = cancel(img, t, p, unclean_allowed(topic))
                else:
                    record = start(img, t, p, target, allow_rf_change)
            except ReassignmentError as e:
                log.info(
                    "reassignment of %s-%d refused: %s: %s", topic, pid, e.error.name, e.message
                )
                out.append(PartitionAnswer(pid, e.error, e.message))
                continue
            if record is not None:
                records.append(record)
            out.append(PartitionAnswer(pid, ErrorCode.none))
        answers.append((topic, out))
    return answers, records


def ongoing(
    img: MetadataImage, topics: Sequence[tuple[str, Sequence[int]]] | None
) -> list[tuple[str, list[Ongoing]]]:
    """ListPartitionReassignments: the reassigning partitions among those asked for (None:
    all); topics and partitions that are unknown or not reassigning are left out."""
    if topics is None:
        asked: Sequence[tuple[str, Sequence[int]]] = [
            (name, sorted(img.topics[name].partitions))
            for name in sorted(img.topics)
            if name != METADATA_TOPIC
        ]
    else:
        asked = topics
    out = []
    for name, pids in asked:
        t = img.topics.get(name)
        if t is None or name == METADATA_TOPIC:
            continue
        found = []
        for pid in pids:
            p = t.partitions.get(pid)
            if p is not None and p.reassigning:
                found.append(Ongoing(pid, p.replicas, p.adding_replicas, p.removing_replicas))
        if found:
            out.append((name, found))
    return out


class Reassignments:
    """The two RPCs under the controller's lock."""

    def __init__(self, core: ControllerCore, unclean: UncleanElection = CLEAN_ONLY) -> None:
        self._core = core
        self._unclean = unclean

    async def alter(
        self, request: Request, allow_rf_change: bool = True
    ) -> list[tuple[str, list[PartitionAnswer]]]:
        async with self._core.lock:
            img = self._core.current_image()
            answers, records = plan_alter(
                img, request, allow_rf_change, lambda topic: self._unclean.enabled(img, topic)
            )
            if records:
                await self._core.commit(records)
            accepted = sum(a.error == ErrorCode.none for _t, out in answers for a in out)
            total = sum(len(out) for _t, out in answers)
            log.info("altered %d of %d partition reassignments", accepted, total)
            return answers

    def list(
        self, topics: Sequence[tuple[str, Sequence[int]]] | None
    ) -> list[tuple[str, list[Ongoing]]]:
        return ongoing(self._core.current_image(), topics)
