"""
Generated from ``schemas/WriteMirrorStatesRequest.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.types import TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i8


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionData:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(101)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    """Partition index."""
    last_mirror_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """Last mirrored leader epoch (LME), or -1 when there is none."""
    state: i8 = field(metadata={"kafka_type": "int8"})
    """New mirror partition state code."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicData:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(101)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    name: TopicName = field(metadata={"kafka_type": "string"})
    """Topic name."""
    partitions: tuple[PartitionData, ...]
    """New partition states."""


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteMirrorStatesRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(101)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    mirror_name: str = field(metadata={"kafka_type": "string"})
    """Name of the cluster mirror."""
    topics: tuple[TopicData, ...]
    """Topics whose partition states change."""
    removed_topics: tuple[str, ...] = field(metadata={"kafka_type": "string"}, default=())
    """Topics detached from the mirror whose state is to be removed."""
