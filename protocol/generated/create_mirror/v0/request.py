"""
Generated from ``schemas/CreateMirrorRequest.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.schema.request_header.v2.header import RequestHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16


@dataclass(frozen=True, slots=True, kw_only=True)
class MirrorConfig:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(94)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    name: str = field(metadata={"kafka_type": "string"})
    """Configuration key."""
    value: str | None = field(metadata={"kafka_type": "string"})
    """Configuration value."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateMirrorRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(94)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    mirror_name: str = field(metadata={"kafka_type": "string"})
    """Name of the new mirror; must not be in use and must not end in .removed or .paused."""
    config: tuple[MirrorConfig, ...]
    """Configuration of the mirror (bootstrap.servers, security settings, ...)."""
