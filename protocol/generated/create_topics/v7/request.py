"""
Generated from ``schemas/CreateTopicsRequest.json`` by ``python -m protocol.codegen``; do not edit.
"""


import datetime

from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.types import BrokerId
from kio.schema.types import TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableReplicaAssignment:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(7)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(19)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    """Partition index."""
    broker_ids: tuple[BrokerId, ...] = field(metadata={"kafka_type": "int32"}, default=())
    """Brokers holding the replicas of this partition, preferred leader first."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableTopicConfig:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(7)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(19)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    name: str = field(metadata={"kafka_type": "string"})
    """Configuration key."""
    value: str | None = field(metadata={"kafka_type": "string"})
    """Configuration value, or null."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableTopic:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(7)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(19)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    name: TopicName = field(metadata={"kafka_type": "string"})
    """Topic name."""
    num_partitions: i32 = field(metadata={"kafka_type": "int32"})
    """Number of partitions, or -1 for the broker default or when Assignments is given."""
    replication_factor: i16 = field(metadata={"kafka_type": "int16"})
    """Replicas per partition, or -1 for the broker default or when Assignments is given."""
    assignments: tuple[CreatableReplicaAssignment, ...]
    """Explicit replica placement per partition; empty for automatic placement."""
    configs: tuple[CreatableTopicConfig, ...]
    """Topic configuration overrides."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopicsRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(7)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(19)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topics: tuple[CreatableTopic, ...]
    """Topics to create."""
    timeout: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"}, default=i32Timedelta.parse(datetime.timedelta(milliseconds=60000)))
    """How long in milliseconds to wait for the topics to be created."""
    validate_only: bool = field(metadata={"kafka_type": "bool"}, default=False)
    """When true, only validate the request; nothing is created."""
