"""
Generated from ``schemas/DeleteMirrorRequest.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.schema.request_header.v2.header import RequestHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteMirrorRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(104)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    mirror_name: str = field(metadata={"kafka_type": "string"})
    """Mirror to delete."""
