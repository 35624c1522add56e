"""
Generated from ``schemas/ShareGroupMetadataValue.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i64


@dataclass(frozen=True, slots=True, kw_only=True)
class ShareGroupMetadataValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    epoch: i32 = field(metadata={"kafka_type": "int32"})
    """Group epoch."""
    metadata_hash: i64 = field(metadata={"kafka_type": "int64", "tag": 0}, default=i64(0))
    """Hash of the subscribed topics' metadata."""
