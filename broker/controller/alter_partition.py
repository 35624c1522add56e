"""AlterPartition (56) on the active controller: a partition leader changes its ISR (Kafka's
ReplicationControlManager.alterPartition, without eligible leader replicas).

The leader's broker epoch must be its current registration's, else the whole request is refused
(STALE_BROKER_EPOCH). Each partition is then checked in Kafka's order:

- unknown topic id: UNKNOWN_TOPIC_ID (every partition of it); unknown partition:
  UNKNOWN_TOPIC_OR_PARTITION;
- a leader or partition epoch *newer* than the controller's: NOT_CONTROLLER (this controller is
  probably behind, the leader looks for another one);
- an older leader epoch: FENCED_LEADER_EPOCH; a sender that is not the leader: INVALID_REQUEST;
  an older partition epoch: INVALID_UPDATE_VERSION (another change got in first);
- an ISR with duplicates or replicas outside the assignment, or without the leader, and a
  leader recovery state other than RECOVERED (the image tracks no unclean recovery, so every
  partition is RECOVERED, and RECOVERED -> RECOVERING is refused as Kafka does): INVALID_REQUEST;
- a new ISR member that is not registered, fenced, in controlled shutdown, or whose broker epoch
  (when not -1) is not its registration's: INELIGIBLE_REPLICA. That last check is what keeps a
  restarted broker, whose log may have lost what its previous incarnation had, out of the ISR
  until it has caught up again under its new epoch.

A valid change commits one PartitionChangeRecord that sets only the ISR (as given, in the
leader's order); the image bumps the partition epoch, and the leader epoch stays (metadata.version
3.6+ bumps it on leader changes only). The leader is always a valid member of its own new ISR
here, so no election happens. A partition named twice in one request is checked the second time
against the first change (Kafka checks both against the committed state). Each accepted
partition is answered with its state after the commit; an ISR equal to the current one commits
nothing and is answered with the current state.

A partition being reassigned goes through ``reassignment.build_change``: an ISR that now holds
every target replica completes the reassignment in the same record (the removing replicas leave
the replicas and the ISR, and the leader epoch moves on). If that removed the sender itself, the
partition is answered NEW_LEADER_ELECTED (the change is committed; the sender learns its new
state from metadata), as Kafka does for v2+.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from kio.schema.errors import ErrorCode

from protocol.metadata_records import latest_type

from ..metadata.image import MetadataImage, PartitionImage, merge_partition_change
from .cluster_control import ControllerCore
from .reassignment import build_change

log = logging.getLogger(__name__)

PartitionChangeRecord = latest_type("PartitionChangeRecord")

RECOVERED: Final = 0
RECOVERING: Final = 1
UNCHECKED_EPOCH: Final = -1  # a NewIsrWithEpochs broker epoch the controller does not check


@dataclass(frozen=True, slots=True)
class PartitionAlter:
    """One partition of the request: the leader's view and the ISR it proposes."""

    partition: int
    leader_epoch: int
    # (broker id, broker epoch the leader saw in its Fetch; -1: unchecked). A v2 request's
    # NewIsr gives -1 for every member.
    new_isr: tuple[tuple[int, int], ...]
    partition_epoch: int
    leader_recovery_state: int = RECOVERED


@dataclass(frozen=True, slots=True)
class TopicAlter:
    topic_id: uuid.UUID | None
    partitions: tuple[PartitionAlter, ...]


@dataclass(frozen=True, slots=True)
class PartitionResult:
    """NONE with the partition's state after the commit, or an error (``state`` None)."""

    partition: int
    error: ErrorCode
    state: PartitionImage | None = None


@dataclass(frozen=True, slots=True)
class TopicResult:
    topic_id: uuid.UUID | None
    partitions: tuple[PartitionResult, ...]


@dataclass(frozen=True, slots=True)
class AlterPartitionResult:
    error: ErrorCode  # top level: NONE, or STALE_BROKER_EPOCH (then no topics)
    topics: tuple[TopicResult, ...] = ()


@dataclass(frozen=True, slots=True)
class Plan:
    """What a request does to an image: the answer (accepted partitions with their planned
    state) and the records to commit."""

    result: AlterPartitionResult
    records: tuple[Any, ...]


def plan(
    img: MetadataImage, broker_id: int, broker_epoch: int, topics: Sequence[TopicAlter]
) -> Plan:
    """Check an AlterPartition request against ``img`` (pure; see the module doc)."""
    b = img.brokers.get(broker_id)
    if b is None or b.epoch != broker_epoch:
        log.info(
            "AlterPartition from broker %d refused: broker epoch %d, registered %s",
            broker_id,
            broker_epoch,
            "none" if b is None else b.epoch,
        )
        return Plan(AlterPartitionResult(ErrorCode.stale_broker_epoch), ())
    planned: dict[tuple[uuid.UUID, int], PartitionImage] = {}
    records: list[Any] = []
    answers: list[TopicResult] = []
    for topic in topics:
        t = None if topic.topic_id is None else img.topic_by_id(topic.topic_id)
        if t is not None and t.topic_id != topic.topic_id:
            t = None  # the id's name now belongs to another topic: that id is unknown
        if t is None:
            answers.append(
                TopicResult(
                    topic.topic_id,
                    tuple(
                        PartitionResult(p.partition, ErrorCode.unknown_topic_id)
                        for p in topic.partitions
                    ),
                )
            )
            continue
        results: list[PartitionResult] = []
        for req in topic.partitions:
            key = (t.topic_id, req.partition)
            current = planned.get(key) or t.partitions.get(req.partition)
            error = validate(img, broker_id, current, req)
            if error != ErrorCode.none:
                log.info(
                    "AlterPartition from broker %d for %s-%d refused: %s",
                    broker_id,
                    t.name,
                    req.partition,
                    error.name,
                )
                results.append(PartitionResult(req.partition, error))
                continue
            assert current is not None
            isr = tuple(r for r, _epoch in req.new_isr)
            record = None
            if current.reassigning:
                # the ISR change may complete the reassignment (drop the removing replicas)
                record = build_change(img, t, current, isr=isr)
            elif isr != current.isr:
                record = PartitionChangeRecord(
                    partition_id=req.partition, topic_id=t.topic_id, isr=isr
                )
            if record is not None:
                records.append(record)
                current = planned[key] = merge_partition_change(current, record)
                log.info(
                    "broker %d changed the ISR of %s-%d to %s (partition epoch %d)",
                    broker_id,
                    t.name,
                    req.partition,
                    list(current.isr),
                    current.partition_epoch,
                )
                if record.replicas is not None:
                    log.info(
                        "the ISR change completed the reassignment of %s-%d: replicas %s",
                        t.name,
                        req.partition,
                        list(current.replicas),
                    )
                if current.leader != broker_id:
                    # the completion removed the sender: Kafka's answer (v2+) for a change
                    # applied with a new leader
                    results.append(PartitionResult(req.partition, ErrorCode.new_leader_elected))
                    continue
            results.append(PartitionResult(req.partition, ErrorCode.none, current))
        answers.append(TopicResult(topic.topic_id, tuple(results)))
    return Plan(AlterPartitionResult(ErrorCode.none, tuple(answers)), tuple(records))


def validate(
    img: MetadataImage, broker_id: int, current: PartitionImage | None, req: PartitionAlter
) -> ErrorCode:
    """The error for one partition of the request, NONE if the change may be made."""
    if current is None:
        return ErrorCode.unknown_topic_or_partition
    if req.leader_epoch > current.leader_epoch or req.partition_epoch > current.partition_epoch:
        return ErrorCode.not_controller
    if req.leader_epoch < current.leader_epoch:
        return ErrorCode.fenced_leader_epoch
    if broker_id != current.leader:
        return ErrorCode.invalid_request
    if req.partition_epoch < current.partition_epoch:
        return ErrorCode.invalid_update_version
    isr = [r for r, _epoch in req.new_isr]
    if len(set(isr)) != len(isr) or not set(isr) <= set(current.replicas):
        return ErrorCode.invalid_request
    if current.leader not in isr:
        return ErrorCode.invalid_request
    if req.leader_recovery_state != RECOVERED:
        # RECOVERING with more than one member, RECOVERED -> RECOVERING (every partition is
        # RECOVERED here), or no state Kafka knows
        return ErrorCode.invalid_request
    if any(_ineligible(img, r, epoch) for r, epoch in req.new_isr):
        return ErrorCode.ineligible_replica
    return ErrorCode.none


def _ineligible(img: MetadataImage, broker_id: int, broker_epoch: int) -> str | None:
    b = img.brokers.get(broker_id)
    if b is None:
        return "not registered"
    if b.in_controlled_shutdown:
        return "shutting down"
    if b.fenced:
        return "fenced"
    if broker_epoch != UNCHECKED_EPOCH and broker_epoch != b.epoch:
        return f"broker epoch {broker_epoch}, registered {b.epoch}"
    return None


class AlterPartitionControl:
    """Serves AlterPartition under the controller's lock and commits its records."""

    def __init__(self, core: ControllerCore) -> None:
        self._core = core

    async def alter_partition(
        self, broker_id: int, broker_epoch: int, topics: Sequence[TopicAlter]
    ) -> AlterPartitionResult:
        async with self._core.lock:
            p = plan(self._core.current_image(), broker_id, broker_epoch, topics)
            if p.records:
                await self._core.commit(p.records)
            # the planned states are the committed ones: the image applies a record just so
            return p.result
