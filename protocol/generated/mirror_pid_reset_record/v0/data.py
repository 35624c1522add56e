"""
Generated from ``schemas/MirrorPidResetRecord.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16


@dataclass(frozen=True, slots=True, kw_only=True)
class MirrorPidResetRecord:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    version: i16 = field(metadata={"kafka_type": "int16"})
    """Version of this record body."""
    source_cluster_id: str = field(metadata={"kafka_type": "string"})
    """Cluster id of the source the data was mirrored from."""
