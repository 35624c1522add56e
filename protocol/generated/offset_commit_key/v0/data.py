"""
Generated from ``schemas/OffsetCommitKey.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i32


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitKey:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    group: str = field(metadata={"kafka_type": "string"})
    """Group id that owns the offset."""
    topic: str = field(metadata={"kafka_type": "string"})
    """Topic name."""
    partition: i32 = field(metadata={"kafka_type": "int32"})
    """Partition index."""
