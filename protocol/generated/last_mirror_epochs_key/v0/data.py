"""
Generated from ``schemas/LastMirrorEpochsKey.json`` by ``python -m protocol.codegen``; do not edit.
"""


import uuid

from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i32


@dataclass(frozen=True, slots=True, kw_only=True)
class LastMirrorEpochsKey:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    mirror_name: str = field(metadata={"kafka_type": "string"})
    """Name of the cluster mirror."""
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """Topic UUID."""
    partition: i32 = field(metadata={"kafka_type": "int32"})
    """Partition index."""
