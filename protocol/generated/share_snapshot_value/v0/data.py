"""
Generated from ``schemas/ShareSnapshotValue.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i64
from kio.static.primitive import i8


@dataclass(frozen=True, slots=True, kw_only=True)
class StateBatch:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    first_offset: i64 = field(metadata={"kafka_type": "int64"})
    """The first offset of this state batch."""
    last_offset: i64 = field(metadata={"kafka_type": "int64"})
    """The last offset of this state batch."""
    delivery_state: i8 = field(metadata={"kafka_type": "int8"})
    """The delivery state - 0:Available,2:Acked,4:Archived."""
    delivery_count: i16 = field(metadata={"kafka_type": "int16"})
    """The delivery count."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareSnapshotValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    snapshot_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The snapshot epoch."""
    state_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The state epoch of this share-partition."""
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"})
    """The leader epoch of the share-partition."""
    start_offset: i64 = field(metadata={"kafka_type": "int64"})
    """The share-partition start offset."""
    create_timestamp: i64 = field(metadata={"kafka_type": "int64"})
    """When the state was first written (ms)."""
    write_timestamp: i64 = field(metadata={"kafka_type": "int64"})
    """When this snapshot was written (ms)."""
    state_batches: tuple[StateBatch, ...]
    """The state batches."""
