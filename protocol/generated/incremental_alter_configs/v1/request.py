"""
Generated from ``schemas/IncrementalAlterConfigsRequest.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.schema.request_header.v2.header import RequestHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i8


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterableConfig:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(44)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    name: str = field(metadata={"kafka_type": "string"})
    """Configuration key."""
    config_operation: i8 = field(metadata={"kafka_type": "int8"})
    """Operation: 0 set, 1 delete, 2 append, 3 subtract."""
    value: str | None = field(metadata={"kafka_type": "string"})
    """Value for the operation, or null."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterConfigsResource:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(44)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    resource_type: i8 = field(metadata={"kafka_type": "int8"})
    """Config resource type (64 = mirror from v2)."""
    resource_name: str = field(metadata={"kafka_type": "string"})
    """Resource name."""
    configs: tuple[AlterableConfig, ...]
    """Changes to apply."""


@dataclass(frozen=True, slots=True, kw_only=True)
class IncrementalAlterConfigsRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(1)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(44)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    resources: tuple[AlterConfigsResource, ...]
    """Resources to change."""
    validate_only: bool = field(metadata={"kafka_type": "bool"})
    """When true, only validate the changes; nothing is applied."""
