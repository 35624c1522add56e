"""
Generated from ``schemas/OffsetCommitValue.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i64


@dataclass(frozen=True, slots=True, kw_only=True)
class OffsetCommitValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(2)
    __flexible__: ClassVar[bool] = False
    offset: i64 = field(metadata={"kafka_type": "int64"})
    """Committed position: the next offset the group will consume."""
    metadata: str = field(metadata={"kafka_type": "string"})
    """Opaque client metadata stored with the offset."""
    commit_timestamp: i64 = field(metadata={"kafka_type": "int64"})
    """When the coordinator accepted the commit (ms since epoch)."""
