"""
Generated from ``schemas/GroupMetadataValue.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i64


@dataclass(frozen=True, slots=True, kw_only=True)
class MemberMetadata:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(4)
    __flexible__: ClassVar[bool] = True
    member_id: str = field(metadata={"kafka_type": "string"})
    """Member id given by the coordinator."""
    group_instance_id: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """Static instance id (group.instance.id), null for a dynamic member."""
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
    __version__: ClassVar[i16] = i16(4)
    __flexible__: ClassVar[bool] = True
    protocol_type: str = field(metadata={"kafka_type": "string"})
    """Protocol type chosen by the members ("consumer" for consumers), empty when the group has none."""
    generation: i32 = field(metadata={"kafka_type": "int32"})
    """Generation id of the group."""
    protocol: str | None = field(metadata={"kafka_type": "string"})
    """Selected protocol (assignor) name, null for an empty group."""
    leader: str | None = field(metadata={"kafka_type": "string"})
    """Member id of the leader, null for an empty group."""
    current_state_timestamp: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    """When the group last changed state (ms since epoch), -1 if unknown."""
    members: tuple[MemberMetadata, ...]
    """Members of this generation."""
