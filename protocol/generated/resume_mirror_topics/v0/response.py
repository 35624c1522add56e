"""
Generated from ``schemas/ResumeMirrorTopicsResponse.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.schema.response_header.v1.header import ResponseHeader
from kio.schema.types import TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i32Timedelta


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicResult:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(103)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    name: TopicName = field(metadata={"kafka_type": "string"})
    """Topic name."""
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    """Error for this topic, or 0."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumeMirrorTopicsResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(103)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    """Time in milliseconds the request was held back by a quota, or 0 if no quota applied."""
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    """Error for the whole request, or 0."""
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """Detail for ErrorCode, or null."""
    mirror_name: str = field(metadata={"kafka_type": "string"})
    """Name of the cluster mirror."""
    topics: tuple[TopicResult, ...]
    """Result per requested topic."""
