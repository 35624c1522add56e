"""`__consumer_offsets` records of KIP-932 share groups (record types 10, 11, 14; 15 is in
`share_state_partitions`).

Kafka's share group records, as far as we write them: ShareGroupMemberMetadata (10: rack,
client, subscription), ShareGroupMetadata (11: group epoch, with the metadata hash tagged as
in the consumer group's record) and ShareGroupCurrentMemberAssignment (14: member epoch and
assignment). Keys are version 0 after their int16 record type, values version 0 (flexible).
The target assignment (Kafka's types 12 and 13) is not written: it is the `simple` rule over the
members and topics, computed again on load. A tombstone removes a member or the group.
"""

import uuid
from dataclasses import dataclass

from kio.static.primitive import i8, i32, i64

from protocol.generated.share_group_current_member_assignment_key.v0.data import (
    ShareGroupCurrentMemberAssignmentKey as CurrentKey,
)
from protocol.generated.share_group_current_member_assignment_value.v0 import data as cur
from protocol.generated.share_group_member_metadata_key.v0.data import (
    ShareGroupMemberMetadataKey as MemberKey,
)
from protocol.generated.share_group_member_metadata_value.v0 import data as mem
from protocol.generated.share_group_metadata_key.v0.data import ShareGroupMetadataKey as MetaKey
from protocol.generated.share_group_metadata_value.v0 import data as meta

from ..record_framing import I16, RecordFormatError, decode_prefixed, encode_prefixed
from . import share_state_partitions as ssp

MEMBER_METADATA = 10
GROUP_METADATA = 11
CURRENT_MEMBER = 14
STATE_PARTITIONS = ssp.STATE_PARTITIONS

Assignment = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class ShareRecordKey:
    record_type: int
    group: str
    member_id: str = ""


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    rack_id: str | None
    client_id: str
    client_host: str
    topic_names: tuple[str, ...]


def decode_key(key: bytes) -> ShareRecordKey | None:
    """The key of a share group record, or None for another record type."""
    if len(key) < 2:
        raise RecordFormatError("record key shorter than its type")
    (t,) = I16.unpack_from(key)
    if t == GROUP_METADATA:
        return ShareRecordKey(t, decode_prefixed(MetaKey, key).group_id)
    if t in (MEMBER_METADATA, CURRENT_MEMBER):
        k = decode_prefixed(MemberKey if t == MEMBER_METADATA else CurrentKey, key)
        return ShareRecordKey(t, k.group_id, k.member_id)
    if t == STATE_PARTITIONS:
        return ShareRecordKey(t, ssp.decode_group(key))
    return None


def _value_v0(value: bytes, cls: type) -> object:
    if len(value) < 2 or I16.unpack_from(value)[0] != 0:
        raise RecordFormatError(f"{cls.__name__}: unknown value version")
    return decode_prefixed(cls, value)


def group_metadata_key(group: str) -> bytes:
    return encode_prefixed(GROUP_METADATA, MetaKey(group_id=group))


def member_metadata_key(group: str, member_id: str) -> bytes:
    return encode_prefixed(MEMBER_METADATA, MemberKey(group_id=group, member_id=member_id))


def current_member_key(group: str, member_id: str) -> bytes:
    return encode_prefixed(CURRENT_MEMBER, CurrentKey(group_id=group, member_id=member_id))


def group_metadata_value(epoch: int) -> bytes:
    return encode_prefixed(0, meta.ShareGroupMetadataValue(epoch=i32(epoch), metadata_hash=i64(0)))


def decode_group_metadata(value: bytes) -> int:
    v = _value_v0(value, meta.ShareGroupMetadataValue)
    assert isinstance(v, meta.ShareGroupMetadataValue)
    return int(v.epoch)


def member_metadata_value(m: MemberMetadata) -> bytes:
    return encode_prefixed(
        0,
        mem.ShareGroupMemberMetadataValue(
            rack_id=m.rack_id,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=tuple(m.topic_names),
        ),
    )


def decode_member_metadata(value: bytes) -> MemberMetadata:
    v = _value_v0(value, mem.ShareGroupMemberMetadataValue)
    assert isinstance(v, mem.ShareGroupMemberMetadataValue)
    return MemberMetadata(
        v.rack_id, v.client_id, v.client_host, tuple(str(n) for n in v.subscribed_topic_names)
    )


def current_member_value(epoch: int, assigned: Assignment) -> bytes:
    return encode_prefixed(
        0,
        cur.ShareGroupCurrentMemberAssignmentValue(
            member_epoch=i32(epoch),
            previous_member_epoch=i32(epoch),
            state=i8(0),
            assigned_partitions=tuple(
                cur.TopicPartitions(topic_id=t, partitions=tuple(i32(p) for p in sorted(ps)))
                for t, ps in sorted(assigned.items())
            ),
        ),
    )


def decode_current_member(value: bytes) -> tuple[int, Assignment]:
    v = _value_v0(value, cur.ShareGroupCurrentMemberAssignmentValue)
    assert isinstance(v, cur.ShareGroupCurrentMemberAssignmentValue)
    assigned = {
        tp.topic_id: frozenset(int(p) for p in tp.partitions)
        for tp in v.assigned_partitions
        if tp.topic_id is not None
    }
    return int(v.member_epoch), assigned
