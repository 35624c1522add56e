"""
Generated from ``schemas/DescribeConfigsRequest.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.schema.request_header.v2.header import RequestHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i8


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsResource:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(32)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    resource_type: i8 = field(metadata={"kafka_type": "int8"})
    """Config resource type (2 topic, 4 broker, 8 broker logger, 16 client metrics, 32 group, 64 mirror)."""
    resource_name: str = field(metadata={"kafka_type": "string"})
    """Resource name."""
    configuration_keys: tuple[str, ...] | None = field(metadata={"kafka_type": "string"}, default=())
    """Keys to return, or null for all keys."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(5)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(32)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    resources: tuple[DescribeConfigsResource, ...]
    """Resources whose configuration is wanted."""
    include_synonyms: bool = field(metadata={"kafka_type": "bool"}, default=False)
    """Whether to return every synonym of each key."""
    include_documentation: bool = field(metadata={"kafka_type": "bool"}, default=False)
    """Whether to return the documentation of each key."""
