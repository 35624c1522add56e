"""
Generated from ``schemas/BumpLeaderEpochsRequest.json`` by ``python -m protocol.codegen``; do not edit.
"""


import uuid

from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.schema.request_header.v2.header import RequestHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i32


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderEpochState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(105)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    """Partition index."""
    min_leader_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """Leader epoch the partition must reach at least."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(105)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """Topic UUID."""
    partitions: tuple[LeaderEpochState, ...]
    """Partitions to bump."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BumpLeaderEpochsRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(105)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topics: tuple[TopicState, ...]
    """Topics to bump."""
