"""
Generated from ``schemas/DeleteMirrorResponse.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i32Timedelta


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteMirrorResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(104)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    """Time in milliseconds the request was held back by a quota, or 0 if no quota applied."""
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    """Error for the whole request, or 0."""
    error_message: str | None = field(metadata={"kafka_type": "string"})
    """Detail for ErrorCode, or null."""
