"""
Generated from ``schemas/UserScramCredentialRecord.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i8


@dataclass(frozen=True, slots=True, kw_only=True)
class UserScramCredentialRecord:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    name: str = field(metadata={"kafka_type": "string"})
    """User name."""
    mechanism: i8 = field(metadata={"kafka_type": "int8"})
    """SCRAM mechanism: 1 = SCRAM-SHA-256, 2 = SCRAM-SHA-512."""
    salt: bytes = field(metadata={"kafka_type": "bytes"})
    """Salt the client chose."""
    stored_key: bytes = field(metadata={"kafka_type": "bytes"})
    """H(ClientKey): what the server checks the client proof against."""
    server_key: bytes = field(metadata={"kafka_type": "bytes"})
    """Key the server signs its final message with."""
    iterations: i32 = field(metadata={"kafka_type": "int32"})
    """PBKDF2 iteration count."""
