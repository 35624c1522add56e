"""
Generated from ``schemas/ConfigRecord.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i8


@dataclass(frozen=True, slots=True, kw_only=True)
class ConfigRecord:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    resource_type: i8 = field(metadata={"kafka_type": "int8"})
    """Config resource type (2 topic, 4 broker, 8 broker logger, 16 client metrics, 32 group, 64 mirror)."""
    resource_name: str = field(metadata={"kafka_type": "string"})
    """Resource name (empty for the cluster-wide broker default)."""
    name: str = field(metadata={"kafka_type": "string"})
    """Configuration key."""
    value: str | None = field(metadata={"kafka_type": "string"})
    """New value, or null to delete the key."""
