"""
Generated from ``schemas/PartitionRecord.json`` by ``python -m protocol.codegen``; do not edit.
"""


import uuid

from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.schema.types import BrokerId
from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i8


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionRecord:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    partition_id: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """Partition index."""
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """UUID of the owning topic."""
    replicas: tuple[BrokerId, ...] = field(metadata={"kafka_type": "int32"}, default=())
    """Replica broker ids, preferred leader first."""
    isr: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    """In-sync replica broker ids."""
    removing_replicas: tuple[BrokerId, ...] = field(metadata={"kafka_type": "int32"}, default=())
    """Replicas leaving the partition during a reassignment."""
    adding_replicas: tuple[BrokerId, ...] = field(metadata={"kafka_type": "int32"}, default=())
    """Replicas joining the partition during a reassignment."""
    leader: BrokerId = field(metadata={"kafka_type": "int32"}, default=BrokerId(-1))
    """Leader broker id, or -1 when there is none."""
    leader_recovery_state: i8 = field(metadata={"kafka_type": "int8", "tag": 0}, default=i8(0))
    """0 normally; 1 while a leader chosen by unclean election is recovering."""
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """Leader epoch."""
    partition_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """Epoch bumped on every change to this partition."""
