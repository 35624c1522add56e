"""
Generated from ``schemas/FetchRequest.json`` by ``python -m protocol.codegen``; do not edit.
"""


import uuid

from dataclasses import dataclass
from dataclasses import field
from typing import ClassVar

from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.types import BrokerId
from kio.static.constants import EntityType
from kio.static.primitive import i16
from kio.static.primitive import i32
from kio.static.primitive import i32Timedelta
from kio.static.primitive import i64
from kio.static.primitive import i8


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchPartition:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(14)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(1)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    partition: i32 = field(metadata={"kafka_type": "int32"})
    """Partition index."""
    current_leader_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """Leader epoch the fetcher believes is current, used to fence stale leaders or fetchers; -1 skips the check."""
    fetch_offset: i64 = field(metadata={"kafka_type": "int64"})
    """Offset to start reading from."""
    last_fetched_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """Epoch of the last record the fetcher already holds, or -1; lets the leader detect log divergence."""
    log_start_offset: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    """Log start offset of a fetching follower; -1 when sent by a consumer."""
    partition_max_bytes: i32 = field(metadata={"kafka_type": "int32"})
    """Soft upper bound on the bytes returned for this partition."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchTopic:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(14)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(1)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """Topic UUID (v13 and newer)."""
    partitions: tuple[FetchPartition, ...]
    """Partitions of this topic to read from."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ForgottenTopic:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(14)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(1)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    topic_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid"})
    """Topic UUID (v13 and newer)."""
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())
    """Indexes of the partitions to drop."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchRequest:
    __type__: ClassVar = EntityType.request
    __version__: ClassVar[i16] = i16(14)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(1)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    cluster_id: str | None = field(metadata={"kafka_type": "string", "tag": 0}, default=None)
    """Cluster id the sender expects to reach, if it knows it; lets a KRaft voter refuse fetches meant for another cluster."""
    replica_id: BrokerId = field(metadata={"kafka_type": "int32"}, default=BrokerId(-1))
    """Broker id of a fetching follower, or -1 for a consumer (moved into ReplicaState from v15)."""
    max_wait: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    """Longest time in milliseconds the broker may park the request while waiting for MinBytes."""
    min_bytes: i32 = field(metadata={"kafka_type": "int32"})
    """Smallest amount of data the broker should collect before it answers."""
    max_bytes: i32 = field(metadata={"kafka_type": "int32"}, default=i32(2147483647))
    """Soft upper bound on the response size in bytes (a first batch larger than this is still returned)."""
    isolation_level: i8 = field(metadata={"kafka_type": "int8"}, default=i8(0))
    """0 = READ_UNCOMMITTED (read up to the high watermark); 1 = READ_COMMITTED (read up to the last stable offset and receive the aborted-transaction list)."""
    session_id: i32 = field(metadata={"kafka_type": "int32"}, default=i32(0))
    """Incremental fetch session id; 0 when no session is used."""
    session_epoch: i32 = field(metadata={"kafka_type": "int32"}, default=i32(-1))
    """Sequence number of this request in its fetch session: 0 opens a new session, -1 means no session."""
    topics: tuple[FetchTopic, ...]
    """Topics to read from."""
    forgotten_topics_data: tuple[ForgottenTopic, ...]
    """Partitions to drop from an incremental fetch session."""
    rack_id: str = field(metadata={"kafka_type": "string"}, default='')
    """Rack of the fetching consumer, used to pick a nearby read replica."""
