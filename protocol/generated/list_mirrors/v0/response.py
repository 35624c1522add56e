"""
Generated from ``schemas/ListMirrorsResponse.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta


@dataclass(frozen=True, slots=True, kw_only=True)
class ListedMirror:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(98)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    mirror_name: str = field(metadata={"kafka_type": "string"})
    """Name of the cluster mirror."""
    source_bootstrap: str = field(metadata={"kafka_type": "string"})
    """bootstrap.servers of the source cluster."""
    source_cluster_id: str = field(metadata={"kafka_type": "string"}, default='')
    """Cluster id of the source, or empty until it is known."""
    topic_count: i32 = field(metadata={"kafka_type": "int32"}, default=i32(0))
    """Number of topics attached to the mirror (0 for an empty mirror)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ListMirrorsResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(98)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    """Time in milliseconds the request was held back by a quota, or 0 if no quota applied."""
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    """Error for the whole request, or 0."""
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """Detail for ErrorCode, or null."""
    mirrors: tuple[ListedMirror, ...]
    """One entry per mirror the caller may describe."""
