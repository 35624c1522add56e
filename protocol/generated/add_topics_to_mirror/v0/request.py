"""
Generated from ``schemas/AddTopicsToMirrorRequest.json`` by ``python -m protocol.codegen``; do not edit.
"""


import uuid

from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.types import TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i16


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicData:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(95)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """Topic UUID."""
    topic_name: TopicName = field(metadata={"kafka_type": "string"})
    """Topic name."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AddTopicsToMirrorRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(95)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    mirror_name: str = field(metadata={"kafka_type": "string"})
    """Name of the cluster mirror."""
    topics: tuple[TopicData, ...]
    """Topics to attach."""
