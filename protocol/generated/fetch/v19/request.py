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
class ReplicaState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(19)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(1)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    replica_id: BrokerId = field(metadata={"kafka_type": "int32"}, default=BrokerId(-1))
    """Replica id of the fetching follower, or -1 for a consumer."""
    replica_epoch: i64 = field(metadata={"kafka_type": "int64"}, default=i64(-1))
    """Broker epoch of the fetching follower, or -1 when not known."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchPartition:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(19)
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
    replica_directory_id: uuid.UUID | None = field(metadata={"kafka_type": "uuid", "tag": 0}, default=None)
    """Log directory id of the fetching follower replica."""
    high_watermark: i64 = field(metadata={"kafka_type": "int64", "tag": 1}, default=i64(9223372036854775807))
    """High watermark known to the fetching replica: -1 when unknown, 9223372036854775807 when the replica does not track it."""
    mirror_leader_epoch: i32 = field(metadata={"kafka_type": "int32", "tag": 2}, default=i32(-1))
    """Mirror leader epoch the fetching replica knows for this partition, or -1 (KIP-1279; used by replication inside the destination cluster)."""
    mirror_committed_offset: i64 = field(metadata={"kafka_type": "int64", "tag": 1279}, default=i64(-1))
    """kmirror extension (synchronous mirroring): the fetching mirror's destination high watermark for this partition, or -1; read by a kmirror source when MirrorSyncId is set, skipped by any other broker."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchTopic:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(19)
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
    __version__: ClassVar[i16] = i16(19)
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
    __version__: ClassVar[i16] = i16(19)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(1)
    __header_schema__: ClassVar[type[RequestHeader]] = RequestHeader
    cluster_id: str | None = field(metadata={"kafka_type": "string", "tag": 0}, default=None)
    """Cluster id the sender expects to reach, if it knows it; lets a KRaft voter refuse fetches meant for another cluster."""
    replica_state: ReplicaState = field(metadata={"tag": 1}, default=ReplicaState())
    """Identity of the fetching follower replica (v15+)."""
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
    mirror_sync_id: str | None = field(metadata={"kafka_type": "string", "tag": 1279}, default=None)
    """kmirror extension (synchronous mirroring): identity of the fetching kmirror mirror, <destination cluster id>/<mirror name>, or null; with it each partition's MirrorCommittedOffset reports what the destination committed."""
