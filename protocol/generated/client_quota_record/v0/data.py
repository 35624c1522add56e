"""
Generated from ``schemas/ClientQuotaRecord.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import f64
from kio.static.primitive import i16


@dataclass(frozen=True, slots=True, kw_only=True)
class EntityData:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    entity_type: str = field(metadata={"kafka_type": "string"})
    """Entity type."""
    entity_name: str | None = field(metadata={"kafka_type": "string"})
    """Entity name, or null for the default entity."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientQuotaRecord:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    entity: tuple[EntityData, ...]
    """Parts of the quota entity (user, client-id, ip)."""
    key: str = field(metadata={"kafka_type": "string"})
    """Quota key."""
    value: f64 = field(metadata={"kafka_type": "float64"})
    """Quota value (ignored when Remove is true)."""
    remove: bool = field(metadata={"kafka_type": "bool"})
    """Whether the quota key is removed instead of set."""
