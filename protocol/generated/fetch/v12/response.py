"""
Generated from ``schemas/FetchResponse.json`` by ``python -m protocol.codegen``; do not edit.
"""


from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.schema.response_header.v1.header import ResponseHeader
from kio.schema.types import BrokerId
from kio.schema.types import ProducerId
from kio.schema.types import TopicName
from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta
from kio.static.primitive import i64


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochEndOffset:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(12)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(1)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """Epoch of the divergence point."""
    end_offset: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    """End offset of that epoch on the leader."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderIdAndEpoch:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(12)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(1)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    leader_id: BrokerId = field(metadata={"kafka_type": "int32"}, default=BrokerId(-1))
    """Broker id of the current leader, or -1 when unknown."""
    leader_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """Current leader epoch, or -1 when unknown."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SnapshotId:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(12)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(1)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    end_offset: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    """End offset of the snapshot."""
    epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """Epoch of the snapshot."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AbortedTransaction:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(12)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(1)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    producer_id: ProducerId = field(metadata={"kafka_type": "int64"})
    """Producer id of the aborted transaction."""
    first_offset: i64 = field(metadata={"kafka_type": "int64"})
    """First offset written by the aborted transaction."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionData:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(12)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(1)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    partition_index: i32 = field(metadata={"kafka_type": "int32"})
    """Partition index."""
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    """Partition-level error, or 0."""
    high_watermark: i64 = field(metadata={"kafka_type": "int64"})
    """Current high watermark of the partition."""
    last_stable_offset: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    """Offset below which every transaction is decided (committed or aborted), or -1 when unknown."""
    log_start_offset: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    """Current log start offset of the partition, or -1."""
    diverging_epoch: EpochEndOffset = field(metadata={"tag": 0}, default=EpochEndOffset())
    """Present when the fetcher's log diverges from the leader's (judged from LastFetchedEpoch and FetchOffset): the epoch and end offset to truncate to."""
    current_leader: LeaderIdAndEpoch = field(metadata={"tag": 1}, default=LeaderIdAndEpoch())
    """Leader to contact instead, sent with NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH."""
    snapshot_id: SnapshotId = field(metadata={"tag": 2}, default=SnapshotId())
    """KRaft only: the snapshot to load because FetchOffset lies before the log start offset."""
    aborted_transactions: tuple[AbortedTransaction, ...] | None
    """Aborted transactions overlapping the returned data (READ_COMMITTED fetches), or null."""
    preferred_read_replica: BrokerId = field(metadata={"kafka_type": "int32"}, default=BrokerId(-1))
    """Replica the consumer should read from next, or -1 to stay on the leader."""
    records: bytes | None = field(metadata={"kafka_type": "records"})
    """Record batches as raw bytes, or null."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchableTopicResponse:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(12)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(1)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topic: TopicName = field(metadata={"kafka_type": "string"})
    """Topic name (v12 and older)."""
    partitions: tuple[PartitionData, ...]
    """Results per partition."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(12)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(1)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    """Time in milliseconds the request was held back by a quota, or 0 if no quota applied."""
    error_code: i16 = field(metadata={"kafka_type": "int16"})
    """Error affecting the whole request (for example a fetch session error), or 0."""
    session_id: i32 = field(metadata={"kafka_type": "int32"}, default=i32(0))
    """Id of the fetch session, or 0 when this response belongs to no session."""
    responses: tuple[FetchableTopicResponse, ...]
    """Results per topic."""
