"""
Generated from ``schemas/RemoveUserScramCredentialRecord.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i8


@dataclass(frozen=True, slots=True, kw_only=True)
class RemoveUserScramCredentialRecord:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    name: str = field(metadata={"kafka_type": "string"})
    """User name."""
    mechanism: i8 = field(metadata={"kafka_type": "int8"})
    """SCRAM mechanism: 1 = SCRAM-SHA-256, 2 = SCRAM-SHA-512."""
