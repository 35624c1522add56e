"""`__consumer_offsets` records of KIP-848 consumer groups (record types 3, 5, 6, 7, 8).

Layouts and versions as Kafka 4.1 writes them: every key is version 0 after its int16 record
type, every value is version 0 (flexible). The member value's tagged ClassicMemberMetadata
(tag 0, a classic member inside a consumer group) is framed here by hand: Kafka writes a
tagged nullable struct with a presence byte the generated codec does not know. Kafka 4.1 keeps the subscribed topics' metadata as a
hash in ConsumerGroupMetadataValue (KIP-1101) and no longer writes ConsumerGroupPartitionMetadata
(type 4), so neither do we; a type-4 record in a log written by older Kafka is skipped on load.
"""

import datetime
import struct
import uuid
from dataclasses import dataclass, field

from kio.static.primitive import i8, i32, i32Timedelta, i64

from protocol.encoders.primitives import uvarint
from protocol.errors import CorruptRecordError
from protocol.generated.consumer_group_current_member_assignment_key.v0.data import (
    ConsumerGroupCurrentMemberAssignmentKey as CurrentKey,
)
from protocol.generated.consumer_group_current_member_assignment_value.v0 import data as cur
from protocol.generated.consumer_group_member_metadata_key.v0.data import (
    ConsumerGroupMemberMetadataKey as MemberKey,
)
from protocol.generated.consumer_group_member_metadata_value.v0 import data as mem
from protocol.generated.consumer_group_metadata_key.v0.data import (
    ConsumerGroupMetadataKey as MetaKey,
)
from protocol.generated.consumer_group_metadata_value.v0 import data as meta
from protocol.generated.consumer_group_target_assignment_member_key.v0.data import (
    ConsumerGroupTargetAssignmentMemberKey as TargetKey,
)
from protocol.generated.consumer_group_target_assignment_member_value.v0 import data as tgt
from protocol.generated.consumer_group_target_assignment_metadata_key.v0.data import (
    ConsumerGroupTargetAssignmentMetadataKey as TargetMetaKey,
)
from protocol.generated.consumer_group_target_assignment_metadata_value.v0 import data as tmeta
from protocol.records.varint import decode_uvarint

from ..record_framing import I16, RecordFormatError, decode_prefixed, encode_prefixed

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_METADATA = 6
TARGET_MEMBER = 7
CURRENT_MEMBER = 8

# topic id -> partitions; the unit every assignment record carries
Assignment = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True, slots=True)
class GroupKey:
    record_type: int
    group: str


@dataclass(frozen=True, slots=True)
class MemberRecordKey:
    record_type: int
    group: str
    member_id: str


@dataclass(frozen=True, slots=True)
class ClassicMeta:
    """What a member using the classic protocol inside a consumer group joined with."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # (name, metadata), in the JoinGroup's order


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    topic_names: tuple[str, ...]
    topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicMeta | None = None


@dataclass(frozen=True, slots=True)
class CurrentAssignment:
    member_epoch: int
    previous_member_epoch: int
    state: int
    assigned: Assignment = field(default_factory=dict)
    pending_revocation: Assignment = field(default_factory=dict)


def decode_key(key: bytes) -> GroupKey | MemberRecordKey | None:
    """The key of a consumer group record, or None for another record type."""
    if len(key) < 2:
        raise RecordFormatError("record key shorter than its type")
    (t,) = I16.unpack_from(key)
    if t in (GROUP_METADATA, TARGET_METADATA):
        k = decode_prefixed(MetaKey if t == GROUP_METADATA else TargetMetaKey, key)
        return GroupKey(t, k.group_id)
    if t in (MEMBER_METADATA, TARGET_MEMBER, CURRENT_MEMBER):
        cls = {MEMBER_METADATA: MemberKey, TARGET_MEMBER: TargetKey, CURRENT_MEMBER: CurrentKey}[t]
        mk = decode_prefixed(cls, key)
        return MemberRecordKey(t, mk.group_id, mk.member_id)
    if t == PARTITION_METADATA:
        return GroupKey(t, "")  # obsolete since Kafka 4.1; the caller ignores it
    return None


def _value_v0(value: bytes, cls: type) -> object:
    if len(value) < 2:
        raise RecordFormatError("record value shorter than its version")
    (version,) = I16.unpack_from(value)
    if version != 0:
        raise RecordFormatError(f"{cls.__name__}: unknown value version {version}")
    return decode_prefixed(cls, value)


# -- keys ---------------------------------------------------------------------------------------


def group_metadata_key(group: str) -> bytes:
    return encode_prefixed(GROUP_METADATA, MetaKey(group_id=group))


def target_metadata_key(group: str) -> bytes:
    return encode_prefixed(TARGET_METADATA, TargetMetaKey(group_id=group))


def member_metadata_key(group: str, member_id: str) -> bytes:
    return encode_prefixed(MEMBER_METADATA, MemberKey(group_id=group, member_id=member_id))


def target_member_key(group: str, member_id: str) -> bytes:
    return encode_prefixed(TARGET_MEMBER, TargetKey(group_id=group, member_id=member_id))


def current_member_key(group: str, member_id: str) -> bytes:
    return encode_prefixed(CURRENT_MEMBER, CurrentKey(group_id=group, member_id=member_id))


# -- values ---------------------------------------------------------------------------------------


def group_metadata_value(epoch: int, metadata_hash: int) -> bytes:
    return encode_prefixed(
        0, meta.ConsumerGroupMetadataValue(epoch=i32(epoch), metadata_hash=i64(metadata_hash))
    )


def decode_group_metadata(value: bytes) -> tuple[int, int]:
    v = _value_v0(value, meta.ConsumerGroupMetadataValue)
    assert isinstance(v, meta.ConsumerGroupMetadataValue)
    return int(v.epoch), int(v.metadata_hash)


def target_metadata_value(assignment_epoch: int) -> bytes:
    return encode_prefixed(
        0, tmeta.ConsumerGroupTargetAssignmentMetadataValue(assignment_epoch=i32(assignment_epoch))
    )


def decode_target_metadata(value: bytes) -> int:
    v = _value_v0(value, tmeta.ConsumerGroupTargetAssignmentMetadataValue)
    assert isinstance(v, tmeta.ConsumerGroupTargetAssignmentMetadataValue)
    return int(v.assignment_epoch)


def member_metadata_value(m: MemberMetadata) -> bytes:
    body = encode_prefixed(
        0,
        mem.ConsumerGroupMemberMetadataValue(
            instance_id=m.instance_id,
            rack_id=m.rack_id,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=tuple(m.topic_names),
            subscribed_topic_regex=m.topic_regex,
            rebalance_timeout=i32Timedelta.parse(
                datetime.timedelta(milliseconds=m.rebalance_timeout_ms)
            ),
            server_assignor=m.server_assignor,
        ),
    )
    if m.classic is None:
        return body
    # the codec wrote "no tagged fields" last: replace it with tag 0
    tagged = b"\x01" + _classic_struct(m.classic)
    return body[:-1] + uvarint(1) + uvarint(0) + uvarint(len(tagged)) + tagged


def _compact(b: bytes) -> bytes:
    return uvarint(len(b) + 1) + b


def _classic_struct(c: ClassicMeta) -> bytes:
    out = bytearray(struct.pack(">i", c.session_timeout_ms))
    out += uvarint(len(c.protocols) + 1)
    for name, metadata in c.protocols:
        out += _compact(name.encode()) + _compact(metadata) + b"\x00"
    out += b"\x00"
    return bytes(out)


def _read_compact(buf: bytes, pos: int, end: int) -> tuple[bytes, int]:
    n, pos = decode_uvarint(buf, pos, end)
    if n == 0 or pos + n - 1 > end:
        raise RecordFormatError("ClassicMemberMetadata: bad compact field")
    return buf[pos : pos + n - 1], pos + n - 1


def _skip_tags(buf: bytes, pos: int, end: int) -> int:
    count, pos = decode_uvarint(buf, pos, end)
    for _ in range(count):
        _, pos = decode_uvarint(buf, pos, end)
        size, pos = decode_uvarint(buf, pos, end)
        pos += size
    return pos


def _decode_classic(buf: bytes, pos: int, end: int) -> ClassicMeta | None:
    present, pos = decode_uvarint(buf, pos, end)
    if not present:
        return None
    if pos + 4 > end:
        raise RecordFormatError("ClassicMemberMetadata: truncated")
    (session,) = struct.unpack_from(">i", buf, pos)
    n, pos = decode_uvarint(buf, pos + 4, end)
    protocols: list[tuple[str, bytes]] = []
    for _ in range(max(n - 1, 0)):
        name, pos = _read_compact(buf, pos, end)
        metadata, pos = _read_compact(buf, pos, end)
        pos = _skip_tags(buf, pos, end)
        protocols.append((name.decode(), metadata))
    return ClassicMeta(session, tuple(protocols))


def _classic_tag(value: bytes, untagged_end: int) -> ClassicMeta | None:
    try:
        count, pos = decode_uvarint(value, untagged_end, len(value))
        for _ in range(count):
            tag, pos = decode_uvarint(value, pos, len(value))
            size, pos = decode_uvarint(value, pos, len(value))
            if tag == 0:
                return _decode_classic(value, pos, min(pos + size, len(value)))
            pos += size
    except (CorruptRecordError, UnicodeDecodeError, struct.error) as exc:
        raise RecordFormatError(f"ClassicMemberMetadata: {exc}") from None
    return None


def decode_member_metadata(value: bytes) -> MemberMetadata:
    v = _value_v0(value, mem.ConsumerGroupMemberMetadataValue)
    assert isinstance(v, mem.ConsumerGroupMemberMetadataValue)
    # the codec skipped tag 0; the untagged part re-encodes to the same bytes, which says
    # where the tagged fields start
    untagged_end = len(encode_prefixed(0, v)) - 1
    return MemberMetadata(
        instance_id=v.instance_id,
        rack_id=v.rack_id,
        client_id=v.client_id,
        client_host=v.client_host,
        topic_names=tuple(v.subscribed_topic_names),
        topic_regex=v.subscribed_topic_regex,
        rebalance_timeout_ms=int(v.rebalance_timeout.total_seconds() * 1000),
        server_assignor=v.server_assignor,
        classic=_classic_tag(value, untagged_end),
    )


def _sorted(a: Assignment) -> list[tuple[uuid.UUID, tuple[i32, ...]]]:
    return [(t, tuple(i32(p) for p in sorted(ps))) for t, ps in sorted(a.items()) if ps]


def _assignment(parts: tuple[object, ...]) -> Assignment:
    out: Assignment = {}
    for tp in parts:
        topic_id = getattr(tp, "topic_id", None)
        if topic_id is not None:
            out[topic_id] = frozenset(int(p) for p in getattr(tp, "partitions", ()))
    return out


def target_member_value(a: Assignment) -> bytes:
    parts = tuple(tgt.TopicPartition(topic_id=t, partitions=ps) for t, ps in _sorted(a))
    return encode_prefixed(0, tgt.ConsumerGroupTargetAssignmentMemberValue(topic_partitions=parts))


def decode_target_member(value: bytes) -> Assignment:
    v = _value_v0(value, tgt.ConsumerGroupTargetAssignmentMemberValue)
    assert isinstance(v, tgt.ConsumerGroupTargetAssignmentMemberValue)
    return _assignment(v.topic_partitions)


def current_member_value(c: CurrentAssignment) -> bytes:
    def parts(a: Assignment) -> tuple[cur.TopicPartitions, ...]:
        return tuple(cur.TopicPartitions(topic_id=t, partitions=ps) for t, ps in _sorted(a))

    return encode_prefixed(
        0,
        cur.ConsumerGroupCurrentMemberAssignmentValue(
            member_epoch=i32(c.member_epoch),
            previous_member_epoch=i32(c.previous_member_epoch),
            state=i8(c.state),
            assigned_partitions=parts(c.assigned),
            partitions_pending_revocation=parts(c.pending_revocation),
        ),
    )


def decode_current_member(value: bytes) -> CurrentAssignment:
    v = _value_v0(value, cur.ConsumerGroupCurrentMemberAssignmentValue)
    assert isinstance(v, cur.ConsumerGroupCurrentMemberAssignmentValue)
    return CurrentAssignment(
        member_epoch=int(v.member_epoch),
        previous_member_epoch=int(v.previous_member_epoch),
        state=int(v.state),
        assigned=_assignment(v.assigned_partitions),
        pending_revocation=_assignment(v.partitions_pending_revocation),
    )
