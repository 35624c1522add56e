"""
Generated from ``schemas/ShareGroupCurrentMemberAssignmentValue.json`` by ``python -m protocol.codegen``; do not edit.
"""


import uuid

from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i8


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitions:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """The topic id."""
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    """The partition ids."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupCurrentMemberAssignmentValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The member epoch."""
    previous_member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The previous member epoch."""
    state: i8 = field(metadata={"kafka_type": "int8"})
    """The member state (0: stable)."""
    assigned_partitions: tuple[TopicPartitions, ...]
    """The assigned partitions."""
