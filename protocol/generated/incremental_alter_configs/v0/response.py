"""
Generated from ``schemas/IncrementalAlterConfigsResponse.json`` by ``python -m protocol.codegen``; do not edit.
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
class AlterConfigsResourceResponse:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(44)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    """Error for this resource, or 0."""
    error_message: str | None = field(metadata={"kafka_type": "string"})
    """Error detail, or null."""
    resource_type: i8 = field(metadata={"kafka_type": "int8"})
    """Config resource type."""
    resource_name: str = field(metadata={"kafka_type": "string"})
    """Resource name."""


@dataclass(frozen=True, slots=True, kw_only=True)
class IncrementalAlterConfigsResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = False
    __api_key__: ClassVar[i16] = i16(44)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    """Time in milliseconds the request was held back by a quota, or 0 if no quota applied."""
    responses: tuple[AlterConfigsResourceResponse, ...]
    """One result per resource."""
