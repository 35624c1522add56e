"""
Generated from ``schemas/TopicRecord.json`` by ``python -m protocol.codegen``; do not edit.
"""


import uuid

from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.schema.types import TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i16


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicRecord:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    name: TopicName = field(metadata={"kafka_type": "string"})
    """Topic name."""
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """Topic UUID."""
