"""
Generated from ``schemas/GroupMetadataValue.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i32


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberMetadata:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    member_id: str = field(metadata={"kafka_type": "string"})
    """Member id given by the coordinator."""
    client_id: str = field(metadata={"kafka_type": "string"})
    """Client id the member joined with."""
    client_host: str = field(metadata={"kafka_type": "string"})
    """Host the member joined from."""
    rebalance_timeout: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """Rebalance timeout of the member (ms)."""
    session_timeout: i32 = field(metadata={"kafka_type": "int32"})
    """Session timeout of the member (ms)."""
    subscription: bytes = field(metadata={"kafka_type": "bytes"})
    """Member's metadata for the selected protocol."""
    assignment: bytes = field(metadata={"kafka_type": "bytes"})
    """Assignment the leader gave this member."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupMetadataValue:
    __type__: ClassVar = EntityType.data
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = False
    protocol_type: str = field(metadata={"kafka_type": "string"})
    """Protocol type chosen by the members ("consumer" for consumers), empty when the group has none."""
    generation: i32 = field(metadata={"kafka_type": "int32"})
    """Generation id of the group."""
    protocol: str | None = field(metadata={"kafka_type": "string"})
    """Selected protocol (assignor) name, null for an empty group."""
    leader: str | None = field(metadata={"kafka_type": "string"})
    """Member id of the leader, null for an empty group."""
    members: tuple[MemberMetadata, ...]
    """Members of this generation."""
