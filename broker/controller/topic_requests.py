"""CreateTopics, DeleteTopics and CreatePartitions: validated against the image, placed on
live brokers (rack-aware), bounded by the replica budget, committed as one batch."""

import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kio.schema.errors import ErrorCode

from ..metadata.image import TOPIC_RESOURCE, MetadataImage
from ..metadata.internal_topics import is_internal_topic
from ..metadata.mirror_names import SOURCE_CLUSTER_IDS_CONFIG
from ..metadata.mirror_states import MIRROR_NAME_CONFIG
from .controller_base import ControllerBase
from .fd_budget import BudgetCheck
from .record_types import ConfigRecord, PartitionRecord, RemoveTopicRecord, TopicRecord
from .topics import assign_replicas, topic_name_error
from .validators import _MIRROR_NAME_ONLY, _ORIGIN_ONLY, ConfigValidationError

# Each partition is a directory with open files: a forged CreateTopics/CreatePartitions asking for
# millions would stall the node (Kafka has no cap; we choose one and say so in the error).
MAX_PARTITIONS_PER_TOPIC: Final = 10_000


@dataclass(slots=True)
class TopicSpec:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: dict[int, list[int]] | None = None
    configs: dict[str, str | None] = field(default_factory=dict)
    topic_id: uuid.UUID | None = None  # set by mirroring (CreateTopics v8 MirrorInfo)


@dataclass(slots=True)
class TopicResult:
    name: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1


class TopicRequestsMixin(ControllerBase):
    """Topic and partition creation/deletion for Controller (and mirrors via ``topic_records``)."""

    def topic_records(self, img: MetadataImage, spec: TopicSpec) -> tuple[TopicResult, list[Any]]:
        """Validate one topic creation against ``img``; its records (call under ``lock``)."""
        return self._check_topic(img, spec)

    def _live_brokers(self, img: MetadataImage) -> list[int]:
        live = [
            b.broker_id
            for b in img.brokers.values()
            if not b.fenced and not b.in_controlled_shutdown
        ]
        return live or [self._node_id]

    def _check_topic(self, img: MetadataImage, spec: TopicSpec) -> tuple[TopicResult, list[Any]]:
        res = TopicResult(spec.name)
        err = topic_name_error(spec.name)
        if err:
            res.error, res.message = ErrorCode.invalid_topic_exception, err
            return res, []
        if spec.name in img.topics:
            res.error, res.message = (
                ErrorCode.topic_already_exists,
                f"Topic '{spec.name}' already exists.",
            )
            return res, []
        brokers = self._live_brokers(img)
        if spec.assignments:
            if spec.num_partitions != -1 or spec.replication_factor != -1:
                res.error = ErrorCode.invalid_request
                res.message = "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time."
                return res, []
            if len(spec.assignments) > MAX_PARTITIONS_PER_TOPIC:
                res.error = ErrorCode.invalid_partitions
                res.message = f"Number of partitions {len(spec.assignments)} exceeds this broker's limit of {MAX_PARTITIONS_PER_TOPIC} per topic."
                return res, []
            parts = sorted(spec.assignments)
            if parts != list(range(len(parts))):
                res.error, res.message = (
                    ErrorCode.invalid_replica_assignment,
                    "Partitions must be numbered from 0 without gaps.",
                )
                return res, []
            assignment = spec.assignments
            rf = len(assignment[0])
            for p, reps in assignment.items():
                if len(set(reps)) != len(reps) or len(reps) != rf or not reps:
                    res.error = ErrorCode.invalid_replica_assignment
                    res.message = f"Invalid replica assignment for partition {p}: {reps}"
                    return res, []
                unknown = [b for b in reps if b not in img.brokers and b != self._node_id]
                if unknown:
                    res.error = ErrorCode.invalid_replica_assignment
                    res.message = f"Unknown broker(s) {unknown} in the assignment of partition {p}"
                    return res, []
        else:
            n = spec.num_partitions if spec.num_partitions != -1 else self._v.default_partitions
            rf = (
                spec.replication_factor
                if spec.replication_factor != -1
                else self._v.default_replication_factor
            )
            if n <= 0:
                res.error, res.message = (
                    ErrorCode.invalid_partitions,
                    "Number of partitions must be larger than 0.",
                )
                return res, []
            if n > MAX_PARTITIONS_PER_TOPIC:
                res.error = ErrorCode.invalid_partitions
                res.message = f"Number of partitions {n} exceeds this broker's limit of {MAX_PARTITIONS_PER_TOPIC} per topic."
                return res, []
            if rf <= 0:
                res.error, res.message = (
                    ErrorCode.invalid_replication_factor,
                    "Replication factor must be larger than 0.",
                )
                return res, []
            if rf > len(brokers):
                res.error = ErrorCode.invalid_replication_factor
                res.message = f"Unable to replicate the partition {rf} time(s): The target replication factor of {rf} cannot be reached because only {len(brokers)} broker(s) are registered."
                return res, []
            assignment = assign_replicas(
                brokers, range(n), rf, random.randrange(len(brokers)), _racks(img)
            )
        configs: dict[str, str] = {}
        for key, value in spec.configs.items():
            if key == MIRROR_NAME_CONFIG:
                res.error, res.message = ErrorCode.invalid_config, _MIRROR_NAME_ONLY
                return res, []
            if key == SOURCE_CLUSTER_IDS_CONFIG:
                res.error, res.message = ErrorCode.invalid_config, _ORIGIN_ONLY
                return res, []
            if value is None:
                res.error, res.message = (
                    ErrorCode.invalid_config,
                    f"Null value not supported for topic configs: {key}",
                )
                return res, []
            try:
                configs[key] = self._v.topic_config(key, value)
            except ConfigValidationError as e:
                res.error, res.message = ErrorCode.invalid_config, str(e)
                return res, []
        topic_id = spec.topic_id or uuid.uuid4()
        if topic_id in img.topic_names:
            res.error, res.message = (
                ErrorCode.topic_already_exists,
                f"Topic id {topic_id} is already in use.",
            )
            return res, []
        records: list[Any] = [TopicRecord(name=spec.name, topic_id=topic_id)]
        for key, value in configs.items():
            records.append(
                ConfigRecord(
                    resource_type=TOPIC_RESOURCE, resource_name=spec.name, name=key, value=value
                )
            )
        for p in sorted(assignment):
            placed_reps = tuple(assignment[p])
            records.append(
                PartitionRecord(
                    partition_id=p,
                    topic_id=topic_id,
                    replicas=placed_reps,
                    isr=placed_reps,
                    leader=placed_reps[0],
                    leader_epoch=0,
                    partition_epoch=0,
                )
            )
        res.topic_id = topic_id
        res.num_partitions = len(assignment)
        res.replication_factor = rf
        return res, records

    async def create_topics(
        self, specs: Sequence[TopicSpec], validate_only: bool
    ) -> list[TopicResult]:
        async with self._lock:
            img = self._image()
            results: list[TopicResult] = []
            records: list[Any] = []
            seen: dict[str, int] = {}
            budget = BudgetCheck(self._v.replica_budget, img)
            for spec in specs:
                seen[spec.name] = seen.get(spec.name, 0) + 1
            for spec in specs:
                if seen[spec.name] > 1:
                    results.append(
                        TopicResult(
                            spec.name,
                            ErrorCode.invalid_request,
                            f"Create topics request from client contains a duplicate topic: {spec.name}",
                        )
                    )
                    continue
                res, recs = self._check_topic(img, spec)
                refused = budget.admit(recs) if res.error == ErrorCode.none else None
                if refused is not None:
                    res = TopicResult(spec.name, *refused)
                    recs = []
                results.append(res)
                records.extend(recs)
            if not validate_only:
                await self._commit(records)
            return results

    async def delete_topics(self, names: Sequence[str]) -> list[TopicResult]:
        async with self._lock:
            img = self._image()
            results: list[TopicResult] = []
            records: list[Any] = []
            for name in names:
                t = img.topics.get(name)
                if t is None:
                    results.append(
                        TopicResult(
                            name,
                            ErrorCode.unknown_topic_or_partition,
                            "This server does not host this topic-partition.",
                        )
                    )
                    continue
                if is_internal_topic(name):
                    # Kafka's brokers refuse creating their internal metadata topic the same way
                    results.append(
                        TopicResult(
                            name,
                            ErrorCode.invalid_request,
                            f"Deletion of internal topic {name} is prohibited: the node's "
                            "coordinators keep their state in it.",
                        )
                    )
                    continue
                results.append(TopicResult(name, topic_id=t.topic_id))
                records.append(RemoveTopicRecord(topic_id=t.topic_id))
            await self._commit(records)
            return results

    async def create_partitions(
        self, requests: Sequence[tuple[str, int, list[list[int]] | None]], validate_only: bool
    ) -> list[TopicResult]:
        async with self._lock:
            img = self._image()
            results: list[TopicResult] = []
            records: list[Any] = []
            budget = BudgetCheck(self._v.replica_budget, img)
            for name, count, assignments in requests:
                t = img.topics.get(name)
                res = TopicResult(name)
                results.append(res)
                if t is None:
                    res.error, res.message = (
                        ErrorCode.unknown_topic_or_partition,
                        f"The topic '{name}' does not exist.",
                    )
                    continue
                current = len(t.partitions)
                if count < current:
                    res.error = ErrorCode.invalid_partitions
                    res.message = f"The topic {name} currently has {current} partition(s); {count} would not be an increase."
                    continue
                if count == current:
                    res.error = ErrorCode.invalid_partitions
                    res.message = f"Topic already has {current} partition(s)."
                    continue
                if count > MAX_PARTITIONS_PER_TOPIC:
                    res.error = ErrorCode.invalid_partitions
                    res.message = f"Number of partitions {count} exceeds this broker's limit of {MAX_PARTITIONS_PER_TOPIC} per topic."
                    continue
                rf = len(t.partitions[0].replicas) if t.partitions else 1
                brokers = self._live_brokers(img)
                new = range(current, count)
                if assignments is not None:
                    if len(assignments) != len(new):
                        res.error = ErrorCode.invalid_replica_assignment
                        res.message = f"Increasing the number of partitions by {len(new)} but {len(assignments)} assignments provided."
                        continue
                    placed = {p: list(a) for p, a in zip(new, assignments, strict=True)}
                    bad = next(
                        (m for a in assignments if (m := _manual_error(a, img, rf)) is not None),
                        None,
                    )
                    if bad is not None:
                        res.error, res.message = ErrorCode.invalid_replica_assignment, bad
                        continue
                elif not brokers:
                    res.error = ErrorCode.invalid_replication_factor
                    res.message = "Unable to replicate the partition: no broker is registered."
                    continue
                else:
                    placed = assign_replicas(
                        brokers, new, rf, random.randrange(len(brokers)), _racks(img)
                    )
                added = [
                    PartitionRecord(
                        partition_id=p,
                        topic_id=t.topic_id,
                        replicas=tuple(placed[p]),
                        isr=tuple(placed[p]),
                        leader=placed[p][0],
                        leader_epoch=0,
                        partition_epoch=0,
                    )
                    for p in new
                ]
                refused = budget.admit(added)
                if refused is not None:
                    res.error, res.message = refused
                    continue
                records.extend(added)
            if not validate_only:
                await self._commit(records)
            return results


def _manual_error(replicas: Sequence[int], img: MetadataImage, rf: int) -> str | None:
    """What is wrong with one manual assignment of a new partition (Kafka's checks), if any."""
    if not replicas:
        return "The manual partition assignment includes an empty replica list."
    seen: set[int] = set()
    for b in replicas:
        if b in seen:
            return f"The manual partition assignment includes the broker {b} more than once."
        seen.add(b)
        if b not in img.brokers:
            return (
                f"The manual partition assignment includes broker {b}, but no such broker "
                "is registered."
            )
    if len(replicas) != rf:
        return (
            f"The manual partition assignment includes a partition with {len(replicas)} "
            f"replica(s), but this is not consistent with previous partitions, which have "
            f"{rf} replica(s)."
        )
    return None


def _racks(img: MetadataImage) -> dict[int, str | None]:
    return {b.broker_id: b.rack for b in img.brokers.values()}
