"""
Generated from ``schemas/AccessControlEntryRecord.json`` by ``python -m protocol.codegen``; do not edit.
"""


import uuid

from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i8


@dataclass(frozen=True, slots=True, kw_only=True)
class AccessControlEntryRecord:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """Unique id of the ACL."""
    resource_type: i8 = field(metadata={"kafka_type": "int8"})
    """Resource type code."""
    resource_name: str = field(metadata={"kafka_type": "string"})
    """Resource name or pattern."""
    pattern_type: i8 = field(metadata={"kafka_type": "int8"})
    """Pattern type code (literal, prefixed, ...)."""
    principal: str = field(metadata={"kafka_type": "string"})
    """Principal, e.g. User:alice."""
    host: str = field(metadata={"kafka_type": "string"})
    """Host the ACL applies to."""
    operation: i8 = field(metadata={"kafka_type": "int8"})
    """ACL operation code."""
    permission_type: i8 = field(metadata={"kafka_type": "int8"})
    """Allow or deny code."""
