"""The controller's request handling: validate against the current image, emit records, commit.

Requests are serialized (one lock), so validation sees every earlier change. Records of one request
are committed as one batch: a topic and all its partitions appear together or not at all.
"""

import asyncio
import logging
import random
import sys
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from kio.schema.errors import ErrorCode

from protocol.errors import MirrorErrorCode
from protocol.metadata_records import latest_type

from ..config import group_configs
from ..config.group_configs import GROUP_RESOURCE, GroupConfigDefaults, GroupConfigError
from ..metadata.image import BROKER_RESOURCE, MIRROR_RESOURCE, TOPIC_RESOURCE, MetadataImage
from ..metadata.mirror_states import MIRROR_NAME_CONFIG
from . import mirror_config
from .fd_budget import BudgetCheck, ReplicaBudget
from .topics import assign_replicas, topic_name_error

log = logging.getLogger(__name__)

TopicRecord = latest_type("TopicRecord")
PartitionRecord = latest_type("PartitionRecord")
ConfigRecord = latest_type("ConfigRecord")
RemoveTopicRecord = latest_type("RemoveTopicRecord")
ProducerIdsRecord = latest_type("ProducerIdsRecord")
RegisterBrokerRecord = latest_type("RegisterBrokerRecord")
UnfenceBrokerRecord = latest_type("UnfenceBrokerRecord")
FeatureLevelRecord = latest_type("FeatureLevelRecord")

PRODUCER_ID_BLOCK: Final = 1000
# Each partition is a directory with open files: a forged CreateTopics/CreatePartitions asking for
# millions would stall the node (Kafka has no cap; we choose one and say so in the error).
MAX_PARTITIONS_PER_TOPIC: Final = 10_000
# mirror.name is internal (KIP-1279): only the mirror RPCs set or clear it.
_MIRROR_NAME_ONLY: Final = "mirror.name can only be set through the mirror APIs (kafka-mirrors.sh)"
# Incremental config operations (IncrementalAlterConfigs).
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


class ConfigValidationError(Exception):
    pass


class ConfigSealer(Protocol):
    def seal(self, resource_type: int, name: str, key: str, value: str) -> str:
        """The value a ConfigRecord stores for ``key=value``; may raise ConfigValidationError."""
        ...

    def is_stale(self, resource_type: int, name: str, key: str) -> bool:
        """Is the stored value not encoded as it would be now (plain text, or the old secret)?
        Then the next AlterConfigs of its resource rewrites it, even with the same value."""
        ...


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


@dataclass(slots=True)
class ConfigChange:
    resource_type: int
    resource_name: str
    # (key, op, value); for AlterConfigs (legacy) the whole set replaces the old one
    ops: list[tuple[str, int, str | None]]
    replace_all: bool = False


@dataclass(slots=True)
class ResourceResult:
    resource_type: int
    resource_name: str
    error: ErrorCode | MirrorErrorCode = ErrorCode.none
    message: str | None = None


@dataclass(slots=True)
class Validators:
    """Config knowledge the controller needs, supplied by the composition root."""

    # (key, value) -> normalized value; raises ConfigValidationError naming the problem
    topic_config: Callable[[str, str], str]
    # (key, value) -> normalized value for a dynamically alterable broker key
    broker_config: Callable[[str, str], str]
    # list-type topic keys (APPEND/SUBTRACT work on them)
    list_keys: frozenset[str] = frozenset()
    default_partitions: int = 1
    default_replication_factor: int = 1
    # secrets at rest (config_secrets.ConfigSecrets); None: values stored as given
    secrets: "ConfigSealer | None" = None
    # the partition replicas one node's open-file limit allows (fd_budget); None: no bound
    replica_budget: ReplicaBudget | None = None
    # the broker's group config defaults and bounds (GROUP resources); None: Kafka's defaults
    group_defaults: GroupConfigDefaults | None = None


class ControllerLock:
    """The controller's one lock, taken only once the image holds every record the quorum's log
    had when this node became leader (``ready``): a new active controller must not check a
    request against an image that lacks what the previous one committed (Kafka's controller
    replays the log up to its LeaderChange before it serves writes)."""

    def __init__(self, ready: Callable[[], Awaitable[None]] | None) -> None:
        self._ready = ready
        self._lock = asyncio.Lock()

    async def __aenter__(self) -> None:
        if self._ready is not None:
            await self._ready()
        await self._lock.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self._lock.release()


class Controller:
    def __init__(
        self,
        quorum: Any,
        image: Callable[[], MetadataImage],
        validators: Validators,
        node_id: int,
        ready: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._quorum = quorum
        self._image = image
        self._v = validators
        self._node_id = node_id
        self._lock = ControllerLock(ready)

    async def _commit(self, records: Sequence[Any]) -> int:
        """Commit ``records``; the offset of the last one (of the last committed record when
        there are none)."""
        return int(await self._quorum.append(records)) if records else self._image().offset

    # -- for sibling controllers (mirrors.py) that share this lock, image and quorum ----------

    @property
    def lock(self) -> ControllerLock:
        return self._lock

    def current_image(self) -> MetadataImage:
        return self._image()

    async def commit(self, records: Sequence[Any]) -> int:
        return await self._commit(records)

    def seal(self, resource_type: int, name: str, key: str, value: str) -> str:
        """The value a ConfigRecord stores for ``key=value`` (encoded when it is a secret)."""
        secrets = self._v.secrets
        return value if secrets is None else secrets.seal(resource_type, name, key, value)

    def _unchanged(
        self, resource_type: int, name: str, key: str, old: str | None, new: str
    ) -> bool:
        secrets = self._v.secrets
        return old == new and (secrets is None or not secrets.is_stale(resource_type, name, key))

    def topic_records(self, img: MetadataImage, spec: TopicSpec) -> tuple[TopicResult, list[Any]]:
        """Validate one topic creation against ``img``; its records (call under ``lock``)."""
        return self._check_topic(img, spec)

    def validate_topic_config(self, key: str, value: str) -> str:
        return self._v.topic_config(key, value)

    # -- brokers -------------------------------------------------------------------------

    async def register_broker(
        self,
        endpoints: Sequence[tuple[str, str, int, int]],
        rack: str | None,
        features: Mapping[str, int],
    ) -> None:
        """Register (or re-register) this node and unfence it; set finalized features once."""
        async with self._lock:
            img = self._image()
            epoch = img.offset + 1
            ep_cls = sys.modules[RegisterBrokerRecord.__module__].BrokerEndpoint
            rec = RegisterBrokerRecord(
                broker_id=self._node_id,
                incarnation_id=uuid.uuid4(),
                broker_epoch=epoch,
                end_points=tuple(
                    ep_cls(name=n, host=h, port=p, security_protocol=sp)
                    for n, h, p, sp in endpoints
                ),
                features=(),
                rack=rack,
                fenced=True,
            )
            records: list[Any] = [rec, UnfenceBrokerRecord(id=self._node_id, epoch=epoch)]
            for name, level in features.items():
                if img.features.get(name) != level:
                    records.append(FeatureLevelRecord(name=name, feature_level=level))
            await self._commit(records)

    async def finalize_features(self, features: Mapping[str, int]) -> None:
        """Record the finalized feature levels (metadata.version) the log does not hold yet:
        what a newly active controller of a freshly formatted cluster writes first."""
        async with self._lock:
            img = self._image()
            records = [
                FeatureLevelRecord(name=name, feature_level=level)
                for name, level in features.items()
                if img.features.get(name) != level
            ]
            await self._commit(records)

    # -- topics --------------------------------------------------------------------------

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

    # -- configs -------------------------------------------------------------------------

    def _validate(self, resource_type: int, key: str, value: str) -> str:
        if resource_type == TOPIC_RESOURCE:
            return self._v.topic_config(key, value)
        if resource_type == MIRROR_RESOURCE:
            why = mirror_config.config_error(key, value)
            if why:
                raise ConfigValidationError(why)
            return value
        if resource_type == GROUP_RESOURCE:
            try:
                return group_configs.check_value(key, value)
            except GroupConfigError as e:
                raise ConfigValidationError(str(e)) from None
        return self._v.broker_config(key, value)

    def _check_group(self, wanted: dict[str, str]) -> None:
        defaults = self._v.group_defaults or GroupConfigDefaults.kafka()
        try:
            group_configs.check_group(wanted, defaults)
        except GroupConfigError as e:
            raise ConfigValidationError(str(e)) from None

    def _list_keys(self, resource_type: int) -> frozenset[str]:
        if resource_type == MIRROR_RESOURCE:
            return mirror_config.LIST_KEYS
        return self._v.list_keys

    async def alter_configs(
        self, changes: Sequence[ConfigChange], validate_only: bool
    ) -> list[ResourceResult]:
        async with self._lock:
            img = self._image()
            results: list[ResourceResult] = []
            records: list[Any] = []
            for ch in changes:
                res = ResourceResult(ch.resource_type, ch.resource_name)
                results.append(res)
                if ch.resource_type == TOPIC_RESOURCE:
                    if ch.resource_name not in img.topics:
                        res.error = ErrorCode.unknown_topic_or_partition
                        res.message = f"Topic {ch.resource_name} does not exist"
                        continue
                    if any(key == MIRROR_NAME_CONFIG for key, _op, _v in ch.ops):
                        res.error, res.message = ErrorCode.invalid_config, _MIRROR_NAME_ONLY
                        continue
                elif ch.resource_type == MIRROR_RESOURCE:
                    if not img.config(MIRROR_RESOURCE, ch.resource_name):
                        res.error = MirrorErrorCode.UNKNOWN_MIRROR
                        res.message = f"Mirror {ch.resource_name} does not exist"
                        continue
                    internal = [k for k, _op, _v in ch.ops if mirror_config.is_internal(k)]
                    if internal:
                        res.error = ErrorCode.invalid_config
                        res.message = f"Mirror config {internal[0]} is internal to the broker"
                        continue
                elif ch.resource_type == GROUP_RESOURCE:
                    if not ch.resource_name:
                        res.error = ErrorCode.invalid_request
                        res.message = "Group name must not be empty"
                        continue
                elif ch.resource_type == BROKER_RESOURCE:
                    if ch.resource_name not in ("", str(self._node_id)) and not (
                        ch.resource_name.isdigit() and int(ch.resource_name) in img.brokers
                    ):
                        res.error = ErrorCode.invalid_request
                        res.message = f"Unknown broker {ch.resource_name}"
                        continue
                else:
                    res.error = ErrorCode.invalid_request
                    res.message = f"Unsupported resource type {ch.resource_type}"
                    continue
                # with the values this node cannot decode (secrets at rest), so a delete or a
                # replacing AlterConfigs reaches them too
                current = dict(img.stored_config(ch.resource_type, ch.resource_name))
                wanted = {} if ch.replace_all else dict(current)
                if MIRROR_NAME_CONFIG in current and ch.resource_type == TOPIC_RESOURCE:
                    wanted[MIRROR_NAME_CONFIG] = current[
                        MIRROR_NAME_CONFIG
                    ]  # AlterConfigs keeps it
                if ch.resource_type == MIRROR_RESOURCE:  # and the mirror's bookkeeping
                    wanted.update(
                        (k, v) for k, v in current.items() if mirror_config.is_internal(k)
                    )
                try:
                    for key, op, value in ch.ops:
                        if op == SET:
                            if value is None:
                                raise ConfigValidationError(f"Null value not supported for : {key}")
                            wanted[key] = self._validate(ch.resource_type, key, value)
                        elif op == DELETE:
                            wanted.pop(key, None)
                        elif op in (APPEND, SUBTRACT):
                            if key not in self._list_keys(ch.resource_type):
                                raise ConfigValidationError(
                                    f"Config value append is not allowed for config key: {key}"
                                )
                            items = [x for x in (wanted.get(key) or "").split(",") if x]
                            for x in (value or "").split(","):
                                if op == APPEND and x and x not in items:
                                    items.append(x)
                                elif op == SUBTRACT and x in items:
                                    items.remove(x)
                            if items:
                                wanted[key] = self._validate(ch.resource_type, key, ",".join(items))
                            else:
                                wanted.pop(key, None)
                        else:
                            raise ConfigValidationError(f"Unknown config operation {op}")
                    if ch.resource_type == MIRROR_RESOURCE:
                        why = mirror_config.missing_required(wanted)
                        if why:
                            raise ConfigValidationError(why)
                    if ch.resource_type == GROUP_RESOURCE:
                        self._check_group(wanted)
                    changed = {
                        key: self.seal(ch.resource_type, ch.resource_name, key, value)
                        for key, value in wanted.items()
                        if not self._unchanged(
                            ch.resource_type, ch.resource_name, key, current.get(key), value
                        )
                    }
                except ConfigValidationError as e:
                    res.error, res.message = ErrorCode.invalid_config, str(e)
                    continue
                for key in current.keys() - wanted.keys():
                    records.append(
                        ConfigRecord(
                            resource_type=ch.resource_type,
                            resource_name=ch.resource_name,
                            name=key,
                            value=None,
                        )
                    )
                for key, value in changed.items():
                    records.append(
                        ConfigRecord(
                            resource_type=ch.resource_type,
                            resource_name=ch.resource_name,
                            name=key,
                            value=value,
                        )
                    )
            if not validate_only:
                await self._commit(records)
            return results

    # -- producer ids --------------------------------------------------------------------

    async def allocate_producer_ids(
        self, broker_epoch: int, broker_id: int | None = None
    ) -> tuple[int, int]:
        """A block (first id, size) of producer ids for a broker (this node by default)."""
        async with self._lock:
            start = self._image().next_producer_id
            await self._commit(
                [
                    ProducerIdsRecord(
                        broker_id=self._node_id if broker_id is None else broker_id,
                        broker_epoch=broker_epoch,
                        next_producer_id=start + PRODUCER_ID_BLOCK,
                    )
                ]
            )
            return start, PRODUCER_ID_BLOCK


def _racks(img: MetadataImage) -> dict[int, str | None]:
    return {b.broker_id: b.rack for b in img.brokers.values()}
