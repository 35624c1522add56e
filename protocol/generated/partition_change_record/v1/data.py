"""
Generated from ``schemas/PartitionChangeRecord.json`` by ``python -m protocol.codegen``; do not edit.
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
class PartitionChangeRecord:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    partition_id: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """Partition index."""
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """UUID of the owning topic."""
    isr: tuple[BrokerId, ...] | None = field(metadata={"kafka_type": "int32", "tag": 0}, default=None)
    """New in-sync replicas, or null when unchanged."""
    leader: BrokerId = field(metadata={"kafka_type": "int32", "tag": 1}, default=BrokerId(-2))
    """New leader; -1 for no leader, -2 when unchanged."""
    replicas: tuple[BrokerId, ...] | None = field(metadata={"kafka_type": "int32", "tag": 2}, default=None)
    """New replicas, or null when unchanged."""
    removing_replicas: tuple[BrokerId, ...] | None = field(metadata={"kafka_type": "int32", "tag": 3}, default=None)
    """New removing replicas, or null when unchanged."""
    adding_replicas: tuple[BrokerId, ...] | None = field(metadata={"kafka_type": "int32", "tag": 4}, default=None)
    """New adding replicas, or null when unchanged."""
    leader_recovery_state: i8 = field(metadata={"kafka_type": "int8", "tag": 5}, default=i8(-1))
    """-1 when unchanged; 0 recovered or elected from the ISR; 1 elected uncleanly and still recovering."""
    directories: tuple[uuid.UUID, ...] | None = field(metadata={"kafka_type": "uuid", "tag": 8}, default=None)
    """New log directory per replica, or null when unchanged."""
