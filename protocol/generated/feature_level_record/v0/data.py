"""
Generated from ``schemas/FeatureLevelRecord.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16


@dataclass(frozen=True, slots=True, kw_only=True)
class FeatureLevelRecord:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    name: str = field(metadata={"kafka_type": "string"})
    """Feature name."""
    feature_level: i16 = field(metadata={"kafka_type": "int16"})
    """Finalized level; 0 means the feature is off."""
