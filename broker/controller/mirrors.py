"""Controller operations of KIP-1279 mirrors: validate against the image, emit records, commit.

A mirror is its ConfigRecords of resource type 64 (``bootstrap.servers`` is required, so a mirror
has at least one). A topic is in a mirror through its internal topic config ``mirror.name``:
``<m>`` (mirroring), ``<m>.paused`` or ``<m>.removed`` (failing over; the mirror manager clears
the config once every partition is STOPPED). Every operation runs under the topic controller's
lock, so validation sees every earlier change, and commits its records as one batch.
"""

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kio.schema.errors import ErrorCode

from protocol.errors import MirrorErrorCode
from protocol.metadata_records import latest_type

from ..metadata.image import MIRROR_RESOURCE, TOPIC_RESOURCE, MetadataImage
from ..metadata.mirror_names import SOURCE_CLUSTER_IDS_CONFIG
from ..metadata.mirror_states import (
    MIRROR_NAME_CONFIG,
    MIRROR_STATE_TOPIC,
    PAUSED_SUFFIX,
    REMOVED_SUFFIX,
)
from . import mirror_config, mirror_patterns
from .controller import ConfigRecord, ConfigValidationError, Controller, TopicSpec

PartitionRecord = latest_type("PartitionRecord")
PartitionChangeRecord = latest_type("PartitionChangeRecord")

Code = ErrorCode | MirrorErrorCode
NO_LEADER_CHANGE: Final = -2
_STATE_TOPIC_CONFIGS: Final = {
    "cleanup.policy": "compact",
    "compression.type": "producer",
    "segment.bytes": "104857600",
}


@dataclass(slots=True)
class MirrorTopicResult:
    name: str
    error: Code = ErrorCode.none
    message: str | None = None


@dataclass(slots=True)
class MirrorTopicsOutcome:
    """A per-topic operation's answer: a top-level error, or one result per topic."""

    error: Code = ErrorCode.none
    message: str | None = None
    topics: list[MirrorTopicResult] = field(default_factory=list)


@dataclass(slots=True)
class BumpResult:
    topic_id: uuid.UUID
    topic: str  # "" for an unknown topic id
    partition: int
    error: Code = ErrorCode.none
    leader_epoch: int = -1  # the leader epoch once the bump is committed


def split_mirror_name(value: str) -> tuple[str, str]:
    """``mirror.name`` value -> (mirror, suffix); suffix is "", ".paused" or ".removed"."""
    for suffix in (REMOVED_SUFFIX, PAUSED_SUFFIX):
        if value.endswith(suffix):
            return value[: -len(suffix)], suffix
    return value, ""


def mirror_names(img: MetadataImage) -> list[str]:
    return sorted(name for rtype, name in img.configs if rtype == MIRROR_RESOURCE)


def mirror_topics(img: MetadataImage, mirror: str) -> dict[str, str]:
    """Topics in ``mirror`` (whatever their suffix) -> their ``mirror.name`` value."""
    out: dict[str, str] = {}
    for (rtype, name), cfg in img.configs.items():
        value = cfg.get(MIRROR_NAME_CONFIG) if rtype == TOPIC_RESOURCE else None
        if value and split_mirror_name(value)[0] == mirror and name in img.topics:
            out[name] = value
    return dict(sorted(out.items()))


def _unique(names: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(names))


class MirrorController:
    """Mirror operations sharing the topic controller's lock, image and quorum."""

    def __init__(
        self,
        controller: Controller,
        *,
        state_topic_partitions: int = 50,
        state_topic_replication_factor: int = 3,
    ) -> None:
        self._c = controller
        self._state_partitions = state_topic_partitions
        self._state_rf = state_topic_replication_factor

    # -- mirrors ---------------------------------------------------------------------------

    async def create_mirror(
        self, name: str, configs: Mapping[str, str | None], validate_only: bool = False
    ) -> tuple[Code, str | None]:
        why = mirror_config.mirror_name_error(name)
        if why:
            return MirrorErrorCode.INVALID_MIRROR_NAME, why
        for key, value in configs.items():
            why = mirror_config.config_error(key, value)
            if why:
                return ErrorCode.invalid_config, why
        clean = {k: v.strip() for k, v in configs.items() if v is not None}
        why = mirror_config.missing_required(clean)
        if why:
            return ErrorCode.invalid_config, why
        async with self._c.lock:
            img = self._c.current_image()
            if img.config(MIRROR_RESOURCE, name):
                return MirrorErrorCode.MIRROR_ALREADY_EXISTS, f"Mirror {name} already exists."
            try:  # secrets are encoded at rest (config_secrets)
                sealed = {k: self._c.seal(MIRROR_RESOURCE, name, k, v) for k, v in clean.items()}
            except ConfigValidationError as e:
                return ErrorCode.invalid_config, str(e)
            records: list[Any] = [
                ConfigRecord(
                    resource_type=MIRROR_RESOURCE, resource_name=name, name=key, value=value
                )
                for key, value in sorted(sealed.items())
            ]
            state_records, state_error = self._state_topic_records(img)
            if state_error:
                return ErrorCode.invalid_replication_factor, state_error
            records.extend(state_records)
            if not validate_only:
                await self._c.commit(records)
        return ErrorCode.none, None

    def _state_topic_records(self, img: MetadataImage) -> tuple[list[Any], str | None]:
        """The KIP creates ``__mirror_state`` with the first mirror. When it cannot be created
        (e.g. mirror.topic.replication.factor above the broker count) the mirror could never
        make progress, so CreateMirror fails saying why instead."""
        if MIRROR_STATE_TOPIC in img.topics:
            return [], None
        spec = TopicSpec(
            MIRROR_STATE_TOPIC,
            self._state_partitions,
            self._state_rf,
            configs=dict(_STATE_TOPIC_CONFIGS),
        )
        res, records = self._c.topic_records(img, spec)
        if res.error != ErrorCode.none:
            return [], (
                f"The mirror state topic {MIRROR_STATE_TOPIC} cannot be created: {res.message} "
                "(see mirror.topic.replication.factor and mirror.topic.num.partitions)"
            )
        return records, None

    async def delete_mirror(self, name: str) -> tuple[Code, str | None]:
        async with self._c.lock:
            img = self._c.current_image()
            configs = img.config(MIRROR_RESOURCE, name)
            if not configs:
                return MirrorErrorCode.UNKNOWN_MIRROR, f"Mirror {name} does not exist."
            topics = mirror_topics(img, name)
            if topics:
                shown = ", ".join(list(topics)[:10]) + (", ..." if len(topics) > 10 else "")
                return (
                    MirrorErrorCode.MIRROR_NOT_EMPTY,
                    f"Mirror {name} still has {len(topics)} topic(s) that are not stopped: {shown}",
                )
            await self._c.commit(
                [
                    ConfigRecord(
                        resource_type=MIRROR_RESOURCE, resource_name=name, name=key, value=None
                    )
                    # with the values this node cannot decode: they go with the mirror
                    for key in sorted(img.stored_config(MIRROR_RESOURCE, name))
                ]
            )
        return ErrorCode.none, None

    # -- topics ----------------------------------------------------------------------------

    def sanitize_topic_configs(self, mirror: str, configs: Mapping[str, str]) -> dict[str, str]:
        """Source topic configs this cluster can take: excluded, unknown or invalid keys dropped."""
        excluded = mirror_config.excluded_topic_keys(
            self._c.current_image().config(MIRROR_RESOURCE, mirror)
        )
        out: dict[str, str] = {}
        for key, value in configs.items():
            if key in excluded or value is None:
                continue
            try:
                out[key] = self._c.validate_topic_config(key, value)
            except ConfigValidationError:
                continue  # e.g. a key an older source knows and Kafka 4 dropped
        return out

    async def add_topics(
        self,
        mirror: str,
        names: Sequence[str],
        new_topics: Mapping[str, TopicSpec] | None = None,
        *,
        patterns: Sequence[str] = (),
        create_only: bool = False,
        origins: Mapping[str, str] | None = None,
    ) -> MirrorTopicsOutcome:
        """Put topics in ``mirror``. Names missing locally are created from ``new_topics`` (the
        source's topic id, partition count and configs) in the same batch as their
        ``mirror.name``, so no local write can slip in between. ``patterns`` are kept with the
        mirror (`mirror_patterns`) in the same batch. ``create_only`` (pattern discovery) only
        creates topics: a name that exists here or was removed from the mirror is refused.
        ``origins`` (topic -> cluster id chain) is stored as each new topic's
        ``mirror.source.cluster.ids`` (`mirror_names`: loop prevention)."""
        origins = origins or {}
        new_topics = new_topics or {}
        async with self._c.lock:
            img = self._c.current_image()
            mcfg = img.config(MIRROR_RESOURCE, mirror)
            if not mcfg:
                return _unknown_mirror(mirror)
            removed = mirror_patterns.removed_topics(mcfg) if create_only else set()
            out = MirrorTopicsOutcome()
            records: list[Any] = []
            new_ids: set[uuid.UUID] = set()
            for name in _unique(names):
                res = MirrorTopicResult(name)
                out.topics.append(res)
                if create_only and (name in img.topics or name in removed):
                    res.error = ErrorCode.topic_already_exists
                    res.message = (
                        f"Topic {name} exists here; only new topics are added by pattern."
                        if name in img.topics
                        else f"Topic {name} was removed from mirror {mirror}; add it by name."
                    )
                    continue
                if name in img.topics:
                    value = img.config(TOPIC_RESOURCE, name).get(MIRROR_NAME_CONFIG)
                    base, suffix = split_mirror_name(value) if value else ("", "")
                    # The same mirror's ".removed" topic is added back: the KIP's "restarting
                    # a stopped mirror" sets mirror.name again. On a destination of several
                    # nodes the suffix stays after failover (only the active controller clears
                    # it), so refusing it left a failed-over or FAILED partition no way back.
                    # A partition still STOPPING finishes that first (STOPPED, then PREPARING).
                    if value and not (base == mirror and suffix == REMOVED_SUFFIX):
                        res.error = MirrorErrorCode.TOPIC_ALREADY_IN_MIRROR
                        res.message = f"Topic {name} is already in mirror {base}."
                        continue
                    if img.topics[name].is_internal:
                        res.error = ErrorCode.invalid_topic_exception
                        res.message = f"Internal topic {name} cannot be mirrored."
                        continue
                elif name in new_topics:
                    spec = new_topics[name]
                    topic_res, topic_records = self._c.topic_records(img, spec)
                    if topic_res.error == ErrorCode.none and spec.topic_id in new_ids:
                        topic_res.error = ErrorCode.topic_already_exists
                        topic_res.message = f"Topic id {spec.topic_id} is already in use."
                    if topic_res.error != ErrorCode.none:
                        res.error, res.message = topic_res.error, topic_res.message
                        continue
                    if spec.topic_id is not None:
                        new_ids.add(spec.topic_id)
                    records.extend(topic_records)
                    if origins.get(name):
                        records.append(
                            ConfigRecord(
                                resource_type=TOPIC_RESOURCE,
                                resource_name=name,
                                name=SOURCE_CLUSTER_IDS_CONFIG,
                                value=origins[name],
                            )
                        )
                else:
                    res.error = ErrorCode.unknown_topic_or_partition
                    res.message = f"Topic {name} does not exist."
                    continue
                records.append(_mirror_name_record(name, mirror))
            records += mirror_patterns.selection_records(
                mirror,
                mcfg,
                add_patterns=patterns,
                added=[r.name for r in out.topics if r.error == ErrorCode.none],
            )
            await self._c.commit(records)
            return out

    async def remove_topics(
        self, mirror: str, names: Sequence[str], patterns: Sequence[str] = ()
    ) -> MirrorTopicsOutcome:
        """Failover: ``<m>``/``<m>.paused`` -> ``<m>.removed``. The topics are remembered as
        removed (no pattern adds them back); ``patterns`` stop being kept with the mirror."""

        def step(value: str) -> tuple[str | None, Code, str | None]:
            if value == mirror + REMOVED_SUFFIX:
                return None, MirrorErrorCode.MIRROR_TOPIC_BEING_REMOVED, "is already being removed"
            return mirror + REMOVED_SUFFIX, ErrorCode.none, None

        def remember(mcfg: Mapping[str, str], done: list[str]) -> list[Any]:
            return mirror_patterns.selection_records(
                mirror, mcfg, drop_patterns=patterns, removed=done
            )

        return await self._change(mirror, names, step, remember)

    async def pause_topics(self, mirror: str, names: Sequence[str]) -> MirrorTopicsOutcome:
        def step(value: str) -> tuple[str | None, Code, str | None]:
            if value == mirror + PAUSED_SUFFIX:
                return None, MirrorErrorCode.MIRROR_TOPIC_ALREADY_PAUSED, "is already paused"
            if value == mirror + REMOVED_SUFFIX:
                return None, MirrorErrorCode.MIRROR_TOPIC_BEING_REMOVED, "is being removed"
            return mirror + PAUSED_SUFFIX, ErrorCode.none, None

        return await self._change(mirror, names, step)

    async def resume_topics(self, mirror: str, names: Sequence[str]) -> MirrorTopicsOutcome:
        def step(value: str) -> tuple[str | None, Code, str | None]:
            if value == mirror:
                return None, MirrorErrorCode.MIRROR_TOPIC_NOT_PAUSED, "is not paused"
            if value == mirror + REMOVED_SUFFIX:
                return None, MirrorErrorCode.MIRROR_TOPIC_BEING_REMOVED, "is being removed"
            return mirror, ErrorCode.none, None

        return await self._change(mirror, names, step)

    async def _change(
        self,
        mirror: str,
        names: Sequence[str],
        step: Any,
        then: Callable[[Mapping[str, str], list[str]], list[Any]] | None = None,
    ) -> MirrorTopicsOutcome:
        async with self._c.lock:
            img = self._c.current_image()
            mcfg = img.config(MIRROR_RESOURCE, mirror)
            if not mcfg:
                return _unknown_mirror(mirror)
            out = MirrorTopicsOutcome()
            records: list[Any] = []
            for name in _unique(names):
                res = MirrorTopicResult(name)
                out.topics.append(res)
                if name not in img.topics:
                    res.error = ErrorCode.unknown_topic_or_partition
                    res.message = f"Topic {name} does not exist."
                    continue
                value = img.config(TOPIC_RESOURCE, name).get(MIRROR_NAME_CONFIG)
                if not value or split_mirror_name(value)[0] != mirror:
                    res.error = MirrorErrorCode.TOPIC_NOT_IN_MIRROR
                    res.message = f"Topic {name} is not in mirror {mirror}."
                    continue
                new, code, why = step(value)
                if code != ErrorCode.none:
                    res.error, res.message = code, f"Topic {name} {why}."
                    continue
                records.append(_mirror_name_record(name, new))
            if then is not None:
                records += then(mcfg, [r.name for r in out.topics if r.error == ErrorCode.none])
            await self._c.commit(records)
            return out

    async def record_source_cluster_id(self, mirror: str, cluster_id: str) -> None:
        """Remember the source's cluster id once; a mirror keeps the first one it saw."""
        async with self._c.lock:
            mcfg = self._c.current_image().config(MIRROR_RESOURCE, mirror)
            if mcfg and not mcfg.get(mirror_config.SOURCE_CLUSTER_ID_KEY):
                await self._c.commit(
                    [
                        ConfigRecord(
                            resource_type=MIRROR_RESOURCE,
                            resource_name=mirror,
                            name=mirror_config.SOURCE_CLUSTER_ID_KEY,
                            value=cluster_id,
                        )
                    ]
                )

    async def clear_mirror_name(self, topic: str) -> None:
        """Once every partition of a removed topic is STOPPED: the topic leaves its mirror."""
        async with self._c.lock:
            value = self._c.current_image().config(TOPIC_RESOURCE, topic).get(MIRROR_NAME_CONFIG)
            if value and value.endswith(REMOVED_SUFFIX):
                await self._c.commit([_mirror_name_record(topic, None)])

    # -- leader epochs ----------------------------------------------------------------------

    async def bump_leader_epochs(
        self, requests: Iterable[tuple[uuid.UUID, int, int]]
    ) -> list[BumpResult]:
        """For each (topic id, partition, min leader epoch): make the leader epoch exceed the
        minimum (the prototype's reading of BumpLeaderEpochs). A partition already above it is
        left alone, so a retried request bumps nothing twice. One step is a
        PartitionChangeRecord naming the same leader (a new epoch, as in Kafka); a longer jump
        re-registers the partition with a PartitionRecord carrying the epoch."""
        wanted: dict[tuple[uuid.UUID, int], int] = {}
        for topic_id, partition, min_epoch in requests:
            key = (topic_id, partition)
            wanted[key] = max(wanted.get(key, min_epoch), min_epoch)
        async with self._c.lock:
            img = self._c.current_image()
            results: list[BumpResult] = []
            records: list[Any] = []
            for (topic_id, partition), min_epoch in wanted.items():
                topic = img.topic_by_id(topic_id)
                res = BumpResult(topic_id, topic.name if topic else "", partition)
                results.append(res)
                if topic is None:
                    res.error = ErrorCode.unknown_topic_id
                    continue
                p = topic.partitions.get(partition)
                if p is None:
                    res.error = ErrorCode.unknown_topic_or_partition
                    continue
                res.leader_epoch = p.leader_epoch
                if p.leader_epoch > min_epoch:
                    continue
                res.leader_epoch = min_epoch + 1
                if min_epoch == p.leader_epoch:
                    records.append(
                        PartitionChangeRecord(
                            partition_id=partition, topic_id=topic_id, leader=p.leader
                        )
                    )
                else:
                    records.append(
                        PartitionRecord(
                            partition_id=partition,
                            topic_id=topic_id,
                            replicas=p.replicas,
                            isr=p.isr,
                            leader=p.leader,
                            leader_epoch=min_epoch + 1,
                            partition_epoch=p.partition_epoch + 1,
                        )
                    )
            await self._c.commit(records)
            return results

    async def bump_leader_epoch(self, topic: str, partition: int, at_least: int) -> None:
        """Make ``topic``-``partition``'s leader epoch at least ``at_least`` (mirror manager)."""
        t = self._c.current_image().topics.get(topic)
        if t is None:
            raise KeyError(f"unknown topic {topic}")
        (res,) = await self.bump_leader_epochs([(t.topic_id, partition, at_least - 1)])
        if res.error != ErrorCode.none:
            raise KeyError(f"cannot bump the leader epoch of {topic}-{partition}: {res.error!r}")


def _mirror_name_record(topic: str, value: str | None) -> Any:
    return ConfigRecord(
        resource_type=TOPIC_RESOURCE, resource_name=topic, name=MIRROR_NAME_CONFIG, value=value
    )


def _unknown_mirror(mirror: str) -> MirrorTopicsOutcome:
    return MirrorTopicsOutcome(MirrorErrorCode.UNKNOWN_MIRROR, f"Mirror {mirror} does not exist.")
