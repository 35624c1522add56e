"""`__consumer_offsets` record framing.

key   = int16 record type + key struct (version 0): 0/1 offset commit, 2 group metadata
value = int16 value version + value struct, or None (tombstone)

We write what Kafka 4.1 writes: key type 1, OffsetCommitValue v4 (v1 when the commit has an
explicit expiry) and GroupMetadataValue v3. Other record types (KIP-848 groups, share
groups...) are not ours and decode to `None` so a log written by Kafka still loads.
"""

import uuid
from dataclasses import dataclass

from kio.static.primitive import i32, i64

from protocol.generated.group_metadata_key.v0.data import GroupMetadataKey
from protocol.generated.group_metadata_value.v0 import data as gmv0
from protocol.generated.group_metadata_value.v1 import data as gmv1
from protocol.generated.group_metadata_value.v2 import data as gmv2
from protocol.generated.group_metadata_value.v3 import data as gmv3
from protocol.generated.group_metadata_value.v4 import data as gmv4
from protocol.generated.offset_commit_key.v0.data import OffsetCommitKey
from protocol.generated.offset_commit_value.v0 import data as ocv0
from protocol.generated.offset_commit_value.v1 import data as ocv1
from protocol.generated.offset_commit_value.v2 import data as ocv2
from protocol.generated.offset_commit_value.v3 import data as ocv3
from protocol.generated.offset_commit_value.v4 import data as ocv4

from ..record_framing import I16, RecordFormatError, decode_prefixed, encode_prefixed

LEGACY_OFFSET_COMMIT = 0
OFFSET_COMMIT = 1
GROUP_METADATA = 2

_OFFSET_VALUES: dict[int, type] = {
    0: ocv0.OffsetCommitValue,
    1: ocv1.OffsetCommitValue,
    2: ocv2.OffsetCommitValue,
    3: ocv3.OffsetCommitValue,
    4: ocv4.OffsetCommitValue,
}
_GROUP_VALUES: dict[int, type] = {
    0: gmv0.GroupMetadataValue,
    1: gmv1.GroupMetadataValue,
    2: gmv2.GroupMetadataValue,
    3: gmv3.GroupMetadataValue,
    4: gmv4.GroupMetadataValue,
}


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int | None = None
    topic_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class MemberValue:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberValue, ...]


@dataclass(frozen=True, slots=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupKey:
    group: str


def offset_key(group: str, topic: str, partition: int) -> bytes:
    return encode_prefixed(
        OFFSET_COMMIT, OffsetCommitKey(group=group, topic=topic, partition=i32(partition))
    )


def offset_value(v: OffsetValue) -> bytes:
    if v.expire_timestamp is not None:
        return encode_prefixed(
            1,
            ocv1.OffsetCommitValue(
                offset=i64(v.offset),
                metadata=v.metadata,
                commit_timestamp=i64(v.commit_timestamp),
                expire_timestamp=i64(v.expire_timestamp),
            ),
        )
    return encode_prefixed(
        4,
        ocv4.OffsetCommitValue(
            offset=i64(v.offset),
            leader_epoch=i32(v.leader_epoch),
            metadata=v.metadata,
            commit_timestamp=i64(v.commit_timestamp),
            topic_id=v.topic_id,
        ),
    )


def group_key(group: str) -> bytes:
    return encode_prefixed(GROUP_METADATA, GroupMetadataKey(group=group))


def group_value(v: GroupValue) -> bytes:
    members = tuple(
        gmv3.MemberMetadata(
            member_id=m.member_id,
            group_instance_id=m.group_instance_id,
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout=i32(m.rebalance_timeout_ms),
            session_timeout=i32(m.session_timeout_ms),
            subscription=m.subscription,
            assignment=m.assignment,
        )
        for m in v.members
    )
    return encode_prefixed(
        3,
        gmv3.GroupMetadataValue(
            protocol_type=v.protocol_type,
            generation=i32(v.generation),
            protocol=v.protocol,
            leader=v.leader,
            current_state_timestamp=i64(v.current_state_timestamp),
            members=members,
        ),
    )


def decode_key(key: bytes) -> OffsetKey | GroupKey | None:
    """The key, or None for a record type this coordinator does not own."""
    if len(key) < 2:
        raise RecordFormatError("record key shorter than its type")
    (record_type,) = I16.unpack_from(key)
    if record_type in (LEGACY_OFFSET_COMMIT, OFFSET_COMMIT):
        k = decode_prefixed(OffsetCommitKey, key)
        return OffsetKey(k.group, k.topic, k.partition)
    if record_type == GROUP_METADATA:
        return GroupKey(decode_prefixed(GroupMetadataKey, key).group)
    return None


def _version(value: bytes, known: dict[int, type]) -> type:
    if len(value) < 2:
        raise RecordFormatError("record value shorter than its version")
    (version,) = I16.unpack_from(value)
    try:
        return known[version]
    except KeyError:
        raise RecordFormatError(f"unknown value version {version}") from None


def decode_offset_value(value: bytes) -> OffsetValue:
    v = decode_prefixed(_version(value, _OFFSET_VALUES), value)
    expire = getattr(v, "expire_timestamp", -1)
    return OffsetValue(
        offset=i64(v.offset),
        leader_epoch=getattr(v, "leader_epoch", -1),
        metadata=v.metadata,
        commit_timestamp=i64(v.commit_timestamp),
        expire_timestamp=None if expire == -1 else expire,
        topic_id=getattr(v, "topic_id", None),
    )


def decode_group_value(value: bytes) -> GroupValue:
    v = decode_prefixed(_version(value, _GROUP_VALUES), value)
    members = tuple(
        MemberValue(
            member_id=m.member_id,
            group_instance_id=getattr(m, "group_instance_id", None),
            client_id=m.client_id,
            client_host=m.client_host,
            rebalance_timeout_ms=getattr(m, "rebalance_timeout", -1),
            session_timeout_ms=m.session_timeout,
            subscription=m.subscription,
            assignment=m.assignment,
        )
        for m in v.members
    )
    return GroupValue(
        protocol_type=v.protocol_type,
        generation=i32(v.generation),
        protocol=v.protocol,
        leader=v.leader,
        current_state_timestamp=getattr(v, "current_state_timestamp", -1),
        members=members,
    )
