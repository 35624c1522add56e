"""
Generated from ``schemas/DescribeMirrorsResponse.json`` by ``python -m protocol.codegen``; do not edit.
"""


import datetime

from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta
from kio.static.primitive import i64
from kio.static.primitive import i64Timedelta


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionDetail:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(99)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    """Partition index."""
    source_offset: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    """High watermark of the source leader, or -1 while unknown."""
    destination_offset: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    """Log end offset on this (destination) cluster, or -1 while unknown."""
    lag: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    """What the mirror can still copy: SourceLastStableOffset (SourceOffset while that is unknown) minus DestinationOffset, or -1 while unknown. A READ_COMMITTED mirror copies up to the source's last stable offset, so records behind a transaction open on the source are not lag."""
    state: str = field(metadata={"kafka_type": "string"})
    """Mirror partition state name (PREPARING, MIRRORING, PAUSED, STOPPED, FAILED, ...)."""
    last_mirror_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """Last mirrored leader epoch (LME), or -1 when there is none."""
    state_reason: str | None = field(metadata={"kafka_type": "string", "tag": 0}, default=None)
    """kmirror extension: why the partition is FAILED, or what the last truncation by the mirror removed and why, or the last error fetching from the source; null when there is nothing to say."""
    source_offset_age: i64Timedelta = field(metadata={"kafka_type": "timedelta_i64", "tag": 1}, default=i64Timedelta.parse(datetime.timedelta(milliseconds=-1)))
    """kmirror extension: how long ago (ms) SourceOffset was learnt from the source, or -1 when it is unknown."""
    source_last_stable_offset: i64 = field(metadata={"kafka_type": "int64", "tag": 2}, default=i64(-1))
    """kmirror extension: last stable offset of the source leader, or -1 while unknown; SourceOffset minus it are records held behind transactions open on the source."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicPartitions:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(99)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topic_name: str = field(metadata={"kafka_type": "string"})
    """Topic name."""
    partitions: tuple[PartitionDetail, ...]
    """Partitions of the topic."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribedMirror:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(99)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    """Error for this mirror, or 0."""
    mirror_name: str = field(metadata={"kafka_type": "string"})
    """Name of the cluster mirror."""
    topics: tuple[TopicPartitions, ...]
    """Topics attached to the mirror."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeMirrorsResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(99)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    """Time in milliseconds the request was held back by a quota, or 0 if no quota applied."""
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    """Error for the whole request, or 0."""
    error_message: str | None = field(metadata={"kafka_type": "string"}, default=None)
    """Detail for ErrorCode, or null."""
    mirrors: tuple[DescribedMirror, ...]
    """One entry per described mirror."""
