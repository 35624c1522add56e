"""
Generated from ``schemas/ShareGroupStatePartitionMetadataKey.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupStatePartitionMetadataKey:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    group_id: str = field(metadata={"kafka_type": "string"})
    """Group id."""
