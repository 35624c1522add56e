"""
Generated from ``schemas/CreateTopicsResponse.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.schema.response_header.v1.header import ResponseHeader
from kio.schema.types import TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta
from kio.static.primitive import i8


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableTopicConfigs:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(6)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(19)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    name: str = field(metadata={"kafka_type": "string"})
    """Configuration key."""
    value: str | None = field(metadata={"kafka_type": "string"})
    """Configuration value, or null."""
    read_only: bool = field(metadata={"kafka_type": "bool"})
    """Whether the entry cannot be changed."""
    config_source: i8 = field(metadata={"kafka_type": "int8"}, default=i8(-1))
    """Where the value comes from (same codes as DescribeConfigs)."""
    is_sensitive: bool = field(metadata={"kafka_type": "bool"})
    """Whether the value is secret (its Value is then null)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatableTopicResult:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(6)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(19)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    name: TopicName = field(metadata={"kafka_type": "string"})
    """Topic name."""
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    """Error for this topic, or 0."""
    error_message: str | None = field(metadata={"kafka_type": "string"})
    """Error detail, or null."""
    topic_config_error_code: i16 = field(metadata={"kafka_type": "int16", "tag": 0}, default=i16(0))
    """Error met while reading back the topic configuration when Configs is omitted."""
    num_partitions: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """Partition count of the topic, or -1."""
    replication_factor: i16 = field(metadata={"kafka_type": "int16"}, default=i16(-1))
    """Replication factor of the topic, or -1."""
    configs: tuple[CreatableTopicConfigs, ...] | None
    """Effective configuration of the topic, or null when not returned."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopicsResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(6)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(19)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    """Time in milliseconds the request was held back by a quota, or 0 if no quota applied."""
    topics: tuple[CreatableTopicResult, ...]
    """Result per requested topic."""
