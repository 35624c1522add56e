"""Immutable metadata image built from committed metadata-log records.

The controller writes records; every broker (including the one in the same process) applies the
committed ones here and reacts to the returned `Delta`. Nothing mutates an image in place: readers
(API handlers) can keep using the image they grabbed while a newer one is published.
"""

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Final

from ..security.acls import Acl
from ..security.scram import Credential as ScramCredential
from .client_quotas import Entity as QuotaEntity
from .client_quotas import entity_key

# Config resource types as in DescribeConfigs / ConfigRecord.
TOPIC_RESOURCE: Final = 2
BROKER_RESOURCE: Final = 4
BROKER_LOGGER_RESOURCE: Final = 8
MIRROR_RESOURCE: Final = 64

METADATA_TOPIC: Final = "__cluster_metadata"
# Kafka's fixed id for the metadata topic (Uuid.METADATA_TOPIC_ID = Uuid(0, 1)).
METADATA_TOPIC_ID: Final = uuid.UUID(int=1)

_EMPTY: Final[Mapping[Any, Any]] = MappingProxyType({})

# (resource type, resource name, key, stored value) -> the value, or None when this node cannot
# decode it (config_secrets.ConfigSecrets.open: secrets at rest)
ConfigOpener = Callable[[int, str, str, str], str | None]


@dataclass(frozen=True, slots=True)
class PartitionImage:
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    # An ongoing reassignment (PartitionRecord's AddingReplicas/RemovingReplicas): ``replicas``
    # is then the target followed by the replicas leaving; both empty otherwise.
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()

    @property
    def reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)


@dataclass(frozen=True, slots=True)
class TopicImage:
    name: str
    topic_id: uuid.UUID
    partitions: Mapping[int, PartitionImage]

    @property
    def is_internal(self) -> bool:
        return self.name.startswith("__")


@dataclass(frozen=True, slots=True)
class EndpointImage:
    listener: str
    host: str
    port: int
    security_protocol: int


@dataclass(frozen=True, slots=True)
class BrokerImage:
    broker_id: int
    epoch: int
    endpoints: tuple[EndpointImage, ...]
    rack: str | None
    fenced: bool
    incarnation_id: uuid.UUID | None = None
    # moving its leadership away before it stops (BrokerRegistrationChangeRecord); cannot lead
    in_controlled_shutdown: bool = False
    # offset of its RegisterBrokerRecord: the broker is unfenced once it has caught up to it
    registered_offset: int = -1
    # (feature, min, max) levels it supports (RegisterBrokerRecord): UpdateFeatures checks them
    features: tuple[tuple[str, int, int], ...] = ()

    def endpoint(self, listener: str) -> EndpointImage | None:
        for e in self.endpoints:
            if e.listener == listener:
                return e
        return None


@dataclass(frozen=True, slots=True)
class MetadataImage:
    offset: int = -1  # metadata log offset of the last applied record
    topics: Mapping[str, TopicImage] = field(default_factory=lambda: _EMPTY)
    topic_names: Mapping[uuid.UUID, str] = field(default_factory=lambda: _EMPTY)
    # (resource type, resource name) -> {key: value}; only explicitly set keys
    configs: Mapping[tuple[int, str], Mapping[str, str]] = field(default_factory=lambda: _EMPTY)
    brokers: Mapping[int, BrokerImage] = field(default_factory=lambda: _EMPTY)
    features: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    next_producer_id: int = 0
    # ACL id -> ACL; the same object until an ACL record changes it (the authorizer's cache key)
    acls: Mapping[uuid.UUID, Acl] = field(default_factory=lambda: _EMPTY)
    # (user name, SCRAM mechanism type 1/2) -> credential (UserScramCredentialRecord)
    scram: Mapping[tuple[str, int], ScramCredential] = field(default_factory=lambda: _EMPTY)
    # client quota entity -> {quota key: value} (ClientQuotaRecord); the same object until a
    # quota record changes it (the quota managers' cache key)
    client_quotas: Mapping[QuotaEntity, Mapping[str, float]] = field(default_factory=lambda: _EMPTY)
    # Stored values this node cannot decode (secrets at rest without the right secret): absent
    # from ``configs``, kept so a delete still reaches them (and any snapshot must carry them).
    unreadable_configs: Mapping[tuple[int, str], Mapping[str, str]] = field(
        default_factory=lambda: _EMPTY
    )
    # The stored form of values ``configs`` holds decoded (secrets at rest): what a snapshot of
    # the image writes, so that it never holds a decoded secret.
    encoded_configs: Mapping[tuple[int, str], Mapping[str, str]] = field(
        default_factory=lambda: _EMPTY
    )

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        name = self.topic_names.get(topic_id)
        return None if name is None else self.topics.get(name)

    def config(self, resource_type: int, name: str) -> Mapping[str, str]:
        return self.configs.get((resource_type, name), _EMPTY)

    def stored_config(self, resource_type: int, name: str) -> Mapping[str, str]:
        """Every key the log holds for a resource: ``config``'s values plus, for keys this node
        cannot decode, their stored value."""
        unreadable = self.unreadable_configs.get((resource_type, name))
        if not unreadable:
            return self.config(resource_type, name)
        return MappingProxyType({**self.config(resource_type, name), **unreadable})


@dataclass(slots=True)
class Delta:
    """What changed between two images; the broker acts on it."""

    created_topics: list[str] = field(default_factory=list)
    deleted_topics: list[TopicImage] = field(default_factory=list)
    changed_partitions: list[tuple[str, int]] = field(default_factory=list)
    changed_configs: list[tuple[int, str]] = field(default_factory=list)
    brokers_changed: bool = False
    acls_changed: bool = False

    def is_empty(self) -> bool:
        return not (
            self.created_topics
            or self.deleted_topics
            or self.changed_partitions
            or self.changed_configs
            or self.brokers_changed
            or self.acls_changed
        )


def merge_partition_change(old: PartitionImage, r: Any) -> PartitionImage:
    """``old`` with a PartitionChangeRecord applied (Kafka's PartitionRegistration.merge): the
    fields the record leaves null keep their values, and the partition epoch moves on."""
    leader = r.leader if r.leader != -2 else old.leader  # -2: no change
    # Any leader given (even the same one) starts a new leader epoch; that is how a controller
    # bumps an epoch (KIP-1279 BumpLeaderEpochs, a reassignment dropping replicas).
    epoch = old.leader_epoch + 1 if r.leader != -2 else old.leader_epoch
    return PartitionImage(
        r.partition_id,
        tuple(r.replicas) if r.replicas is not None else old.replicas,
        tuple(r.isr) if r.isr is not None else old.isr,
        leader,
        epoch,
        old.partition_epoch + 1,
        tuple(r.adding_replicas) if r.adding_replicas is not None else old.adding_replicas,
        tuple(r.removing_replicas) if r.removing_replicas is not None else old.removing_replicas,
    )


class ImageBuilder:
    """Applies records to an image; `build()` freezes the result."""

    def __init__(self, base: MetadataImage, open_config: ConfigOpener | None = None) -> None:
        self._base = base
        self._open = open_config
        self.topics = dict(base.topics)
        self.topic_names = dict(base.topic_names)
        self.configs = {k: dict(v) for k, v in base.configs.items()}
        self.brokers = dict(base.brokers)
        self.features = dict(base.features)
        self.next_producer_id = base.next_producer_id
        self.offset = base.offset
        self._record_offset = base.offset  # of the record being applied
        self.delta = Delta()
        self._acls: dict[uuid.UUID, Acl] | None = None  # copied on the first ACL record
        self._scram: dict[tuple[str, int], ScramCredential] | None = None  # likewise
        self._quotas: dict[QuotaEntity, dict[str, float]] | None = None  # likewise
        self.unreadable = {k: dict(v) for k, v in base.unreadable_configs.items()}
        self.encoded = {k: dict(v) for k, v in base.encoded_configs.items()}
        # topic -> (partitions dict this builder made, the proxy its TopicImage holds)
        self._own_parts: dict[str, tuple[dict[int, PartitionImage], Any]] = {}

    def apply(self, record: Any, offset: int) -> None:
        handler = getattr(self, "_on_" + type(record).__name__, None)
        if handler is not None:
            self._record_offset = offset
            handler(record)
        self.offset = offset

    def _on_TopicRecord(self, r: Any) -> None:
        old = self.topics.get(r.name)
        if old is not None and old.topic_id != r.topic_id:
            # a second TopicRecord for a name (a log written before issue 27's fix): the name
            # is the new topic's, and the old id no longer names anything
            self.topic_names.pop(old.topic_id, None)
        self.topics[r.name] = TopicImage(r.name, r.topic_id, MappingProxyType({}))
        self.topic_names[r.topic_id] = r.name
        self.delta.created_topics.append(r.name)

    def _set_partition(self, topic_id: uuid.UUID, p: PartitionImage) -> None:
        name = self.topic_names.get(topic_id)
        if name is None:
            return  # a record for a topic removed in the same batch: ignore, as Kafka does
        t = self.topics[name]
        mine = self._own_parts.get(name)
        if mine is not None and t.partitions is mine[1]:
            mine[0][p.partition] = p  # this builder's copy: seen through the topic's proxy
        else:
            # Copied once per topic and build, not per record: a batch changing every
            # partition of a 2,000-partition topic (a failover's epoch bumps) was quadratic.
            parts = dict(t.partitions)
            parts[p.partition] = p
            proxy = MappingProxyType(parts)
            self._own_parts[name] = (parts, proxy)
            self.topics[name] = replace(t, partitions=proxy)
        self.delta.changed_partitions.append((name, p.partition))

    def _on_PartitionRecord(self, r: Any) -> None:
        self._set_partition(
            r.topic_id,
            PartitionImage(
                r.partition_id,
                tuple(r.replicas),
                tuple(r.isr),
                r.leader,
                r.leader_epoch,
                r.partition_epoch,
                tuple(r.adding_replicas),
                tuple(r.removing_replicas),
            ),
        )

    def _on_PartitionChangeRecord(self, r: Any) -> None:
        t = self.topic_by_id(r.topic_id)
        if t is None or r.partition_id not in t.partitions:
            return
        self._set_partition(r.topic_id, merge_partition_change(t.partitions[r.partition_id], r))

    def topic_by_id(self, topic_id: uuid.UUID) -> TopicImage | None:
        name = self.topic_names.get(topic_id)
        return None if name is None else self.topics.get(name)

    def _on_RemoveTopicRecord(self, r: Any) -> None:
        name = self.topic_names.pop(r.topic_id, None)
        if name is None:
            return
        t = self.topics.pop(name)
        self.configs.pop((TOPIC_RESOURCE, name), None)
        self.unreadable.pop((TOPIC_RESOURCE, name), None)
        self.encoded.pop((TOPIC_RESOURCE, name), None)
        self.delta.deleted_topics.append(t)

    def _on_ConfigRecord(self, r: Any) -> None:
        key = (int(r.resource_type), r.resource_name)
        value = r.value
        if value is not None and self._open is not None:
            value = self._open(key[0], key[1], r.name, value)
            if value is None:  # kept aside, as stored, for a delete or a node with the secret
                self.unreadable.setdefault(key, {})[r.name] = r.value
        if value is None or r.value is None:
            _pop(self.configs, key, r.name)
        else:
            self.configs.setdefault(key, {})[r.name] = value
        if value is not None or r.value is None:
            _pop(self.unreadable, key, r.name)
        if value is not None and value != r.value:
            self.encoded.setdefault(key, {})[r.name] = r.value
        else:
            _pop(self.encoded, key, r.name)
        self.delta.changed_configs.append(key)

    def _on_RegisterBrokerRecord(self, r: Any) -> None:
        self.brokers[r.broker_id] = BrokerImage(
            r.broker_id,
            r.broker_epoch,
            tuple(
                EndpointImage(e.name, e.host, int(e.port), int(e.security_protocol))
                for e in r.end_points
            ),
            r.rack,
            bool(r.fenced),
            r.incarnation_id,
            bool(getattr(r, "in_controlled_shutdown", False)),  # v1+
            self._record_offset,
            tuple(
                (f.name, int(f.min_supported_version), int(f.max_supported_version))
                for f in r.features
            ),
        )
        self.delta.brokers_changed = True

    def _on_BrokerRegistrationChangeRecord(self, r: Any) -> None:
        b = self.brokers.get(r.broker_id)
        if b is None or b.epoch != r.broker_epoch:
            return  # about a registration that is gone: Kafka refuses to replay it
        fenced = {1: True, -1: False}.get(int(r.fenced), b.fenced)  # 0: unchanged
        in_shutdown = b.in_controlled_shutdown or getattr(r, "in_controlled_shutdown", 0) == 1
        if (fenced, in_shutdown) != (b.fenced, b.in_controlled_shutdown):
            self.brokers[r.broker_id] = replace(
                b, fenced=fenced, in_controlled_shutdown=in_shutdown
            )
            self.delta.brokers_changed = True

    def _on_UnfenceBrokerRecord(self, r: Any) -> None:
        b = self.brokers.get(r.id)
        if b is not None:
            self.brokers[r.id] = replace(b, fenced=False)
            self.delta.brokers_changed = True

    def _on_FenceBrokerRecord(self, r: Any) -> None:
        b = self.brokers.get(r.id)
        if b is not None:
            self.brokers[r.id] = replace(b, fenced=True)
            self.delta.brokers_changed = True

    def _on_UnregisterBrokerRecord(self, r: Any) -> None:
        if self.brokers.pop(r.broker_id, None) is not None:
            self.delta.brokers_changed = True

    def _on_FeatureLevelRecord(self, r: Any) -> None:
        if int(r.feature_level) == 0:  # level 0: not finalized (Kafka removes it)
            self.features.pop(r.name, None)
        else:
            self.features[r.name] = int(r.feature_level)

    def _on_ProducerIdsRecord(self, r: Any) -> None:
        self.next_producer_id = max(self.next_producer_id, int(r.next_producer_id))

    def _acls_to_change(self) -> dict[uuid.UUID, Acl]:
        if self._acls is None:
            self._acls = dict(self._base.acls)
        self.delta.acls_changed = True
        return self._acls

    def _on_AccessControlEntryRecord(self, r: Any) -> None:
        self._acls_to_change()[r.id] = Acl(
            int(r.resource_type),
            r.resource_name,
            int(r.pattern_type),
            r.principal,
            r.host,
            int(r.operation),
            int(r.permission_type),
        )

    def _on_RemoveAccessControlEntryRecord(self, r: Any) -> None:
        self._acls_to_change().pop(r.id, None)

    def _scram_to_change(self) -> dict[tuple[str, int], ScramCredential]:
        if self._scram is None:
            self._scram = dict(self._base.scram)
        return self._scram

    def _on_UserScramCredentialRecord(self, r: Any) -> None:
        self._scram_to_change()[(r.name, int(r.mechanism))] = ScramCredential(
            bytes(r.salt), bytes(r.stored_key), bytes(r.server_key), int(r.iterations)
        )

    def _on_RemoveUserScramCredentialRecord(self, r: Any) -> None:
        self._scram_to_change().pop((r.name, int(r.mechanism)), None)

    def _on_ClientQuotaRecord(self, r: Any) -> None:
        if self._quotas is None:
            self._quotas = {k: dict(v) for k, v in self._base.client_quotas.items()}
        entity = entity_key((e.entity_type, e.entity_name) for e in r.entity)
        if r.remove:
            values = self._quotas.get(entity)
            if values is not None:
                values.pop(r.key, None)
                if not values:
                    del self._quotas[entity]
        else:
            self._quotas.setdefault(entity, {})[r.key] = float(r.value)

    def build(self) -> MetadataImage:
        return MetadataImage(
            offset=self.offset,
            topics=MappingProxyType(self.topics),
            topic_names=MappingProxyType(self.topic_names),
            configs=MappingProxyType({k: MappingProxyType(v) for k, v in self.configs.items()}),
            brokers=MappingProxyType(self.brokers),
            features=MappingProxyType(self.features),
            next_producer_id=self.next_producer_id,
            acls=self._base.acls if self._acls is None else MappingProxyType(self._acls),
            scram=self._base.scram if self._scram is None else MappingProxyType(self._scram),
            client_quotas=self._base.client_quotas
            if self._quotas is None
            else MappingProxyType({k: MappingProxyType(v) for k, v in self._quotas.items()}),
            unreadable_configs=_frozen(self.unreadable),
            encoded_configs=_frozen(self.encoded),
        )


def _frozen(configs: dict[tuple[int, str], dict[str, str]]) -> Mapping[Any, Mapping[str, str]]:
    if not configs:
        return _EMPTY
    return MappingProxyType({k: MappingProxyType(v) for k, v in configs.items()})


def _pop(configs: dict[tuple[int, str], dict[str, str]], key: tuple[int, str], name: str) -> None:
    entry = configs.get(key)
    if entry is not None:
        entry.pop(name, None)
        if not entry:
            del configs[key]


def apply_records(
    image: MetadataImage,
    records: Iterable[tuple[int, Any]],
    open_config: ConfigOpener | None = None,
) -> tuple[MetadataImage, Delta]:
    """Apply ``(offset, record)`` pairs; returns the new image and what changed.
    ``open_config`` decodes config values stored encoded (secrets at rest)."""
    b = ImageBuilder(image, open_config)
    for offset, record in records:
        b.apply(record, offset)
    return b.build(), b.delta
