"""
Generated from ``schemas/MirrorPartitionStateValue.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i8


@dataclass(frozen=True, slots=True, kw_only=True)
class MirrorPartitionStateValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    state: i8 = field(metadata={"kafka_type": "int8"})
    """Mirror partition state code."""
