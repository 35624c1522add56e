"""
Generated from ``schemas/ShareGroupStatePartitionMetadataValue.json`` by ``python -m protocol.codegen``; do not edit.
"""


import uuid

from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i64


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitionsInfo:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """The topic id."""
    topic_name: str = field(metadata={"kafka_type": "string"})
    """The topic name."""
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    """The partition ids."""
    create_timestamp: i64 = field(metadata={"kafka_type": "int64"})
    """When the topic entered this set (ms)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicInfo:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """The topic id."""
    topic_name: str = field(metadata={"kafka_type": "string"})
    """The topic name."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupStatePartitionMetadataValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    initializing_topics: tuple[TopicPartitionsInfo, ...]
    """Partitions whose state is being initialized."""
    initialized_topics: tuple[TopicPartitionsInfo, ...]
    """Partitions with initialized state."""
    deleting_topics: tuple[TopicInfo, ...]
    """Topics whose state is being deleted."""
