"""
Generated from ``schemas/ConsumerGroupCurrentMemberAssignmentValue.json`` by ``python -m protocol.codegen``; do not edit.
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
    """Topic id."""
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    """Partition indexes."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupCurrentMemberAssignmentValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """Epoch the member must heartbeat with."""
    previous_member_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """Epoch before the last bump (a member that missed the bump may still use it)."""
    state: i8 = field(metadata={"kafka_type": "int8"})
    """0 stable, 1 unrevoked partitions, 2 unreleased partitions, 3 unknown."""
    assigned_partitions: tuple[TopicPartitions, ...]
    """Partitions the member owns."""
    partitions_pending_revocation: tuple[TopicPartitions, ...]
    """Partitions the member must revoke."""
