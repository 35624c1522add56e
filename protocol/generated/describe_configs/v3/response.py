"""
Generated from ``schemas/DescribeConfigsResponse.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.schema.response_header.v0.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i32Timedelta
from kio.static.primitive import i8


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsSynonym:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(32)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    name: str = field(metadata={"kafka_type": "string"})
    """Synonym key."""
    value: str | None = field(metadata={"kafka_type": "string"})
    """Synonym value, or null."""
    source: i8 = field(metadata={"kafka_type": "int8"})
    """Source of the synonym."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsResourceResult:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(32)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    name: str = field(metadata={"kafka_type": "string"})
    """Configuration key."""
    value: str | None = field(metadata={"kafka_type": "string"})
    """Configuration value, or null (also null for sensitive entries)."""
    read_only: bool = field(metadata={"kafka_type": "bool"})
    """Whether the entry cannot be changed."""
    config_source: i8 = field(metadata={"kafka_type": "int8"}, default=i8(-1))
    """Where the value comes from (dynamic topic, dynamic broker, static broker, default, ...)."""
    is_sensitive: bool = field(metadata={"kafka_type": "bool"})
    """Whether the value is secret."""
    synonyms: tuple[DescribeConfigsSynonym, ...]
    """Other sources defining this key, highest precedence first."""
    config_type: i8 = field(metadata={"kafka_type": "int8"}, default=i8(0))
    """Data type code of the value (boolean, string, int, short, long, double, list, class, password)."""
    documentation: str | None = field(metadata={"kafka_type": "string"})
    """Documentation of the key, or null."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsResult:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(32)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    """Error for this resource, or 0."""
    error_message: str | None = field(metadata={"kafka_type": "string"})
    """Error detail, or null."""
    resource_type: i8 = field(metadata={"kafka_type": "int8"})
    """Config resource type."""
    resource_name: str = field(metadata={"kafka_type": "string"})
    """Resource name."""
    configs: tuple[DescribeConfigsResourceResult, ...]
    """Configuration entries of the resource."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeConfigsResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(3)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(32)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    """Time in milliseconds the request was held back by a quota, or 0 if no quota applied."""
    results: tuple[DescribeConfigsResult, ...]
    """One result per requested resource."""
